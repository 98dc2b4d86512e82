"""The docstrings of renormpp/ as a user reads them: they say what holds now (no issue numbers, "sitting", "before the
fix" or dated history), and the public API's docstrings are numpydoc, so that the API pages (docs/api.md,
``docstring_style: numpy`` in mkdocs.yml) show a parameter table naming every parameter of the signature."""
from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: History in text shown to users: issue numbers, sessions, fixes, dates, before/after timings.
HISTORY = re.compile(r"[Ii]ssues? ?#?\d+|\bsittings?\b|before the fix\b|\b20\d\d-\d\d-\d\d\b|was [\d.]+ ?x before")

#: The public API whose docstrings have numpydoc sections: functions, classes (their constructor's parameters) and
#: the public methods of the theory's fits.
PUBLIC = """
renormpp.theory.solve
renormpp.theory.TheoryFit.refit renormpp.theory.TheoryFit.predict renormpp.theory.TheoryFit.test_kernel
renormpp.theory.TheoryFit.action_and_gradient
renormpp.theory.Prediction
renormpp.theory.prediction.FitShape.generalization_error renormpp.theory.prediction.FitShape.posterior_predictive
renormpp.theory.methods.get_method renormpp.theory.methods.applies renormpp.theory.methods.check_applies
renormpp.theory.methods.fit_or_reason renormpp.theory.methods.refit_or_none renormpp.theory.methods.why_not
renormpp.models.one_hidden_layer renormpp.models.mlp renormpp.models.cnn
renormpp.infer.KineticLangevin renormpp.infer.Langevin renormpp.infer.Observed renormpp.infer.Chains
renormpp.infer.paper_step_size renormpp.infer.AdaptiveWarmup
renormpp.observables.default renormpp.observables.evaluate
renormpp.readout.gibbs_fn renormpp.readout.rao_blackwell
renormpp.diagnostics.gamma_method renormpp.diagnostics.blocking renormpp.diagnostics.ess_error
renormpp.diagnostics.to_datatree renormpp.diagnostics.kernel.measure renormpp.diagnostics.kernel.diagnose
renormpp.diagnostics.states renormpp.diagnostics.error_of_mean renormpp.diagnostics.thermalization_cut
renormpp.diagnostics.drift renormpp.diagnostics.chain_spread renormpp.diagnostics.rhat renormpp.diagnostics.converged
renormpp.diagnostics.relaxation renormpp.diagnostics.scalar_series renormpp.diagnostics.equilibrium_z
renormpp.diagnostics.sampler_health renormpp.diagnostics.acceptance_fell renormpp.diagnostics.describe_sampler
renormpp.diagnostics.extrapolate
renormpp.infer.Chains.init renormpp.infer.Chains.run renormpp.infer.AdaptiveWarmup.of
renormpp.infer.AdaptiveWarmup.running renormpp.infer.AdaptiveWarmup.update
renormpp.network.forward renormpp.network.hidden renormpp.network.conv_hidden renormpp.network.get_activation
renormpp.kernels.nngp_diag renormpp.kernels.nngp_mean
renormpp.observables.eps_g renormpp.observables.overlap renormpp.observables.local_overlap
renormpp.observables.combine renormpp.observables.hidden_sums
renormpp.readout.log_marginal_of renormpp.readout.conditional renormpp.readout.draw_readout
renormpp.readout.sample_readout
renormpp.theory.conv.solve
renormpp.infer.ReplicaExchange renormpp.infer.geometric_ladder renormpp.infer.tempered
renormpp.datasets.fetch renormpp.datasets.locate renormpp.datasets.data_dir renormpp.datasets.projected_mnist
renormpp.datasets.low_dimensional
renormpp.theory.adaptive_kernel.solve renormpp.theory.hidden.with_kernel renormpp.theory.hidden.predicted_kernel
renormpp.theory.hidden.spectrum_ratios renormpp.architectures.get_architecture renormpp.infer.starts.positions
renormpp.baselines.train_adam renormpp.baselines.search_adam renormpp.baselines.adam_baseline
renormpp.baselines.best_gp renormpp.baselines.split renormpp.baselines.scores
renormpp.experiments.runner.run renormpp.experiments.runner.run_point renormpp.experiments.paper.make
renormpp.experiments.paper.figure renormpp.experiments.paper.configs renormpp.experiments.validity.run
renormpp.experiments.validity.table renormpp.experiments.validity.configs renormpp.experiments.config.load
renormpp.experiments.config.resolve
renormpp.kernels.nngp
renormpp.datasets.synthetic renormpp.datasets.mnist renormpp.datasets.cifar10
renormpp.plots.architectures_vs_N1 renormpp.plots.autocorr renormpp.plots.discrepancy_vs_N1 renormpp.plots.ess
renormpp.plots.generalization_vs_N1 renormpp.plots.kernel_vs_N1 renormpp.plots.local_overlaps
renormpp.plots.log_axis renormpp.plots.mc_analysis renormpp.plots.overlap_heatmaps renormpp.plots.overlaps_vs_N1
renormpp.plots.save renormpp.plots.scaling renormpp.plots.theory_lines renormpp.plots.trace
renormpp.plots.validity_map
""".split()


def _resolve(qualname: str):
    """The object of a dotted name, importing submodules on the way (``renormpp.datasets.synthetic`` is the
    function the package exports, not its module)."""
    parts = qualname.split(".")
    obj = importlib.import_module(parts[0])
    for i, name in enumerate(parts[1:], start=1):
        if not hasattr(obj, name):
            importlib.import_module(".".join(parts[:i + 1]))
        obj = getattr(obj, name)
    return obj


def _parameters(obj) -> list[str]:
    """The names a caller passes: the signature's parameters without self/cls, *args and **kwargs."""
    skip = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return [p.name for p in inspect.signature(obj).parameters.values()
            if p.kind not in skip and p.name not in ("self", "cls")]


def _sections(doc: str) -> dict[str, str]:
    """numpydoc sections of a cleaned docstring: a title line underlined by dashes, up to the next such title."""
    lines = doc.splitlines()
    heads = [i for i in range(len(lines) - 1)
             if lines[i].strip() and not lines[i].startswith(" ")
             and re.fullmatch(r"-{3,}", lines[i + 1]) and len(lines[i + 1]) == len(lines[i].strip())]
    return {lines[h].strip(): "\n".join(lines[h + 2:(heads[k + 1] if k + 1 < len(heads) else len(lines))])
            for k, h in enumerate(heads)}


def _documented(section: str) -> list[str]:
    """The names of a Parameters section: the unindented ``name : type`` (or ``a, b : type``) lines."""
    names = []
    for line in section.splitlines():
        m = re.fullmatch(r"(\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)*)(?:\s*:.*)?", line.rstrip())
        if m and line[:1] not in (" ", ""):
            names += [n.strip().lstrip("*") for n in m[1].split(",")]
    return names


def _docstring(obj) -> str:
    doc = inspect.getdoc(obj)
    assert doc, f"{obj!r} has no docstring"
    return doc


# ---- (a) what holds now ------------------------------------------------------------------------------------------
def test_the_package_text_has_no_issue_numbers_sittings_fixes_or_dates():
    found = []
    for path in sorted((ROOT / "renormpp").rglob("*.py")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for m in HISTORY.finditer(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {m[0]!r} in {line.strip()[:100]!r}")
    assert not found, "history in renormpp/ (it belongs in CHANGELOG.md or docs/log/):\n" + "\n".join(found)


@pytest.mark.parametrize("text", ["(benchmarks/README.md, issue 17)", "since Issue #44 the kernel", "issues 32 and 33",
                                  "at the last sitting", "before the fix it was", "rerun 2026-11-28",
                                  "was 2.7x before"])
def test_the_history_pattern_finds_each_kind(text):
    assert HISTORY.search(text)


@pytest.mark.parametrize("text", ["tissue", "issues of stability", "the fixed point", "sit in state B", "x = 2.7",
                                  "ends before the fixed one would"])
def test_the_history_pattern_leaves_plain_text(text):
    assert not HISTORY.search(text)


def test_no_docstring_holds_a_control_character_from_an_unescaped_backslash():
    """A docstring that is not raw turns ``\\tau`` into a tab and ``\\rm`` into a carriage return: the API pages
    then show broken mathematics. Such docstrings must be raw (``r\"\"\"...``)."""
    found = []
    for path in sorted((ROOT / "renormpp").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False) or ""
                bad = sorted({repr(c) for c in doc if c in "\t\r\b\a\f\v"})
                if bad:
                    found.append(f"{path.relative_to(ROOT)}: {getattr(node, 'name', '<module>')} holds {bad}")
    assert not found, "\n".join(found)


# ---- (b) numpydoc sections of the public API ----------------------------------------------------------------------
def test_the_numpydoc_parser_of_these_tests_reads_a_parameters_section():
    def f(a, b, *args, c=1, **kwargs):
        """One line.

        Parameters
        ----------
        a, b : float
            The inputs.
        c : int, optional
            A count.

        Returns
        -------
        float
        """
    sections = _sections(_docstring(f))
    assert set(sections) == {"Parameters", "Returns"}
    assert _documented(sections["Parameters"]) == ["a", "b", "c"] == _parameters(f)
    assert _documented("a : float\nmissing the name on its line\n    b : int") == ["a"]


@pytest.mark.parametrize("qualname", PUBLIC)
def test_the_public_api_documents_every_parameter_in_a_numpydoc_section(qualname):
    obj = _resolve(qualname)
    params = _parameters(obj)
    sections = _sections(_docstring(obj))
    if params:
        assert "Parameters" in sections, f"{qualname}: no numpydoc 'Parameters\\n----------' section"
        documented = _documented(sections["Parameters"])
        missing = [p for p in params if p not in documented]
        extra = [p for p in documented if p not in inspect.signature(obj).parameters]
        assert not missing, f"{qualname}: parameters {missing} of the signature are not documented"
        assert not extra, f"{qualname}: documents {extra}, which are not in the signature"
    if not inspect.isclass(obj) and inspect.signature(obj).return_annotation not in (None, "None"):
        assert "Returns" in sections or "Yields" in sections, f"{qualname}: no numpydoc 'Returns' section"


@pytest.mark.parametrize("qualname", PUBLIC)
def test_the_api_pages_parser_reads_each_public_docstring_without_warnings(qualname, caplog):
    """The parser of the API pages (griffe, under ``mkdocs build --strict``) finds the sections and warns of none."""
    griffe = pytest.importorskip("griffe")
    obj = _resolve(qualname)
    parent = None
    if not inspect.isclass(obj):
        params = griffe.Parameters(*(griffe.Parameter(p.name, kind=griffe.ParameterKind(p.kind.description))
                                     for p in inspect.signature(obj).parameters.values()))
        parent = griffe.Function(obj.__name__, parameters=params)
    docstring = griffe.Docstring(_docstring(obj), parent=parent)
    with caplog.at_level("WARNING"):
        parsed = docstring.parse("numpy", warn_unknown_params=True)
    kinds = {s.kind.value for s in parsed}
    assert "parameters" in kinds or not _parameters(obj), f"{qualname}: griffe finds no parameters section"
    assert not [r for r in caplog.records if r.levelname == "WARNING"], \
        f"{qualname}: griffe warns: {[r.getMessage() for r in caplog.records]}"
