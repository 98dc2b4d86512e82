"""The package's layers (docs/architecture.md): no import circle, and each module imports only the layers below it.

The imports are read from the source with ``ast`` (at module level and inside functions alike), so a lazy import
inside a function counts as much as one at the top."""
import ast
import importlib
import inspect
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "renormpp"

#: what each part may import from renormpp (docs/architecture.md, "Layers"); a part is a module or a sub-package
ALLOWED = {
    "_checks": set(), "_compat": set(), "mcmc": set(), "precision": set(), "progress": set(),
    "patches": {"_checks"},
    "network": {"patches"},
    "datasets": {"_checks"},
    "mcstats": {"mcmc", "network"},
    "kernels": {"_checks", "network"},
    "readout": {"_checks", "network", "precision"},
    "observables": {"_checks", "network"},
    "models": {"_checks", "network", "patches", "readout"},
    "theory": {"_checks", "kernels", "mcmc", "mcstats", "network", "patches", "progress"},
    "infer": {"_checks", "mcmc", "mcstats", "precision"},
    "diagnostics": {"mcstats", "models", "observables", "theory"},
    "plots": {"diagnostics", "theory"},
    "architectures": {"_checks", "kernels", "models", "network", "patches", "theory"},
    "baselines": {"_checks", "datasets", "network", "theory"},
    "experiments": {"architectures", "baselines", "datasets", "diagnostics", "infer", "models", "network", "observables",
                    "plots", "progress", "readout", "theory"},
    "cli": {"datasets", "experiments"},
    "spec": {"_checks", "architectures", "diagnostics", "infer", "network", "observables", "readout"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Modules of renormpp that ``path`` imports (``from .x import y`` counts as renormpp.x, or renormpp.x.y where
    y is a module)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "renormpp":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                is_module = (ROOT.parent / sub.replace(".", "/")).with_suffix(".py").exists() or \
                    (ROOT.parent / sub.replace(".", "/")).is_dir()
                found.add(sub if is_module else target)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "renormpp"}
    return found - {name}


GRAPH = {module_name(p): imports(p) for p in ROOT.rglob("*.py")}

#: modules of other packages that a part may not import: a theory receives its sampler (renormpp.mcmc.sampling's
#: signature) and runs no NumPyro inference of its own
FORBIDDEN = {"theory": ("numpyro.infer",)}


def foreign_imports(path: Path) -> set[str]:
    """Modules outside renormpp that ``path`` imports, at module level or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return {m for m in found if m.split(".")[0] != "renormpp"}


def part(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def test_no_import_circle():
    """Depth-first search for a cycle among the package's modules (a package's __init__ counts as a module)."""
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for d in sorted(GRAPH.get(m, ())):
            if d.startswith(m + "."):  # a package importing its own submodules is not a circle
                continue
            if state.get(d) == "open":
                raise AssertionError("import circle: " + " -> ".join(stack[stack.index(d):] + [d]))
            if d not in state:
                visit(d)
        stack.pop()
        state[m] = "done"

    for m in sorted(GRAPH):
        if m not in state:
            visit(m)


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if part(m)))
def test_each_module_imports_only_the_layers_below(module):
    own = part(module)
    assert own in ALLOWED, f"{module}: add its part {own!r} to the layers of docs/architecture.md and ALLOWED"
    outside = {part(d) for d in GRAPH[module] if part(d) != own} - ALLOWED[own]
    assert not outside, f"{module} imports {sorted(outside)}, which the layer {own!r} may not (docs/architecture.md)"


@pytest.mark.parametrize("own", sorted(FORBIDDEN))
def test_a_theory_runs_no_sampler_of_its_own(own, tmp_path):
    """``theory/`` imports neither ``renormpp.infer`` (the layers above) nor ``numpyro.infer``: a theory that samples
    receives a sampler. The check can fail: an ``import numpyro.infer`` inside a function is caught."""
    def offending(path):
        return sorted(m for m in foreign_imports(path) if any(m == f or m.startswith(f + ".") for f in FORBIDDEN[own]))

    found = {str(p.relative_to(ROOT)): offending(p) for p in sorted((ROOT / own).rglob("*.py"))}
    assert not {p: m for p, m in found.items() if m}
    assert "infer" not in ALLOWED[own]
    planted = tmp_path / "planted.py"
    planted.write_text("def f():\n    from numpyro.infer import NUTS\n")
    assert offending(planted) == ["numpyro.infer"]


def layer_circle(allowed: dict) -> list:
    """A circle among the parts of ``allowed`` (part -> the parts it may import), as a list ending where it began;
    [] where the parts form a stack (every arrow points down)."""
    state, stack = {}, []

    def visit(p):
        state[p] = "open"
        stack.append(p)
        for d in sorted(allowed.get(p, ())):
            if state.get(d) == "open":
                return stack[stack.index(d):] + [d]
            if d not in state and (found := visit(d)):
                return found
        stack.pop()
        state[p] = "done"
        return []

    for p in sorted(allowed):
        if p not in state and (found := visit(p)):
            return found
    return []


def test_the_layers_form_a_stack():
    """The table itself has no circle (e.g. infer may use the statistics of ``mcstats``, which never reach up to
    ``infer``, ``theory`` or ``models``), so that every allowed arrow points down; and every part it names exists."""
    assert not layer_circle(ALLOWED), "the layers form a circle: " + " -> ".join(layer_circle(ALLOWED))
    named = set(ALLOWED).union(*ALLOWED.values())
    assert named <= {part(m) for m in GRAPH if part(m)}, named - {part(m) for m in GRAPH}
    assert set(layer_circle({**ALLOWED, "mcmc": {"infer"}})) == {"infer", "mcmc"}  # the check can fail


def test_the_checker_sees_a_circle_and_a_layer_violation(tmp_path, monkeypatch):
    """The checks above can fail: a fake graph with models <-> readout is caught, and so is network importing theory."""
    monkeypatch.setitem(GRAPH, "renormpp.readout", GRAPH["renormpp.readout"] | {"renormpp.models"})
    with pytest.raises(AssertionError, match="import circle: renormpp.models -> renormpp.readout -> renormpp.models"):
        test_no_import_circle()
    monkeypatch.setitem(GRAPH, "renormpp.network", {"renormpp.theory"})
    with pytest.raises(AssertionError, match="renormpp.network imports \\['theory'\\]"):
        test_each_module_imports_only_the_layers_below("renormpp.network")


#: Modules of more than one idea that issue 44 (item 3) split into packages of one idea a module, with every name
#: they had: the public ones, and the private ones that other code imports (benchmarks/cnn.py: _PatchData, _fit)
SPLIT = {
    "renormpp.plots": ["HOLLOW", "POINTS", "architectures_vs_N1", "autocorr", "baselines_vs_N1", "discrepancy_vs_N1",
                       "ess", "generalization_vs_N1", "kernel_vs_N1", "local_overlaps", "log_axis", "mc_analysis",
                       "overlap_heatmaps", "overlaps_vs_N1", "save", "scaling", "theory_lines", "trace", "validity_map"],
    "renormpp.theory.conv": ["CHUNK_MEMORY", "CONV_METHODS", "ConvFit", "KERNEL_MEMORY", "PatchKernels",
                             "check_method", "solve", "_PatchData", "_fit"],
}
#: the most lines a module of a split package may have (the old plots.py had 627, theory/conv.py 637)
MAX_LINES = 300


@pytest.mark.parametrize("package", sorted(SPLIT))
def test_split_modules_are_packages_of_short_modules_that_keep_every_name(package):
    """Each split module is a package of at least three modules, each under MAX_LINES lines with a docstring that says
    what it holds, and every name of the old module is still importable from the package (the public ones listed in
    its ``__all__``, which the API page renders)."""
    folder = ROOT.parent / package.replace(".", "/")
    assert folder.is_dir(), f"{package} is not a package"
    modules = sorted(folder.glob("*.py"))
    assert len(modules) >= 4, [m.name for m in modules]  # __init__ and three ideas at least
    for path in modules:
        source = path.read_text()
        assert len(source.splitlines()) <= MAX_LINES, f"{path.name}: {len(source.splitlines())} lines"
        assert ast.get_docstring(ast.parse(source)), f"{path.name} does not say what it holds"
    mod = importlib.import_module(package)
    assert [n for n in SPLIT[package] if not hasattr(mod, n)] == []
    assert sorted(mod.__all__) == sorted(n for n in SPLIT[package] if not n.startswith("_"))


def test_a_reader_finds_each_figure_by_its_name_in_the_plots_index():
    """The plots package's docstring is the index: every figure is named in the entry of the module that holds it."""
    import renormpp.plots as plots

    entries = plots.__doc__.split("\n* ")[1:]
    for name in plots.__all__:
        fn = getattr(plots, name)
        if not inspect.isfunction(fn):
            continue
        module = fn.__module__.rpartition(".")[2]
        entry = next((e for e in entries if f":func:`{name}`" in e), None)
        assert entry is not None, f"{name} is not in the index of renormpp.plots"
        assert entry.startswith((f":mod:`.{module}`", f"``{module}``")), f"{name} is listed away from {module}"


def test_the_core_kernel_knows_no_tempering_and_wrapped_states_read_through_one_way():
    """The core Adapter runs chains with their own model keywords (``chain_kwargs``) and knows nothing of a replica
    ladder; every wrapper's state reads its inner state's fields through one mixin, not a ``__getattr__`` of its own."""
    import re

    from renormpp.infer import ObservedState, ReplicaState, SwapState, adapter
    from renormpp.infer.wrapper import ReadsThrough

    tree = ast.parse(inspect.getsource(adapter))
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} | \
        {n.arg for n in ast.walk(tree) if isinstance(n, (ast.arg, ast.keyword)) and n.arg} | \
        {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    tempering = {w for w in names if re.search(r"temper|beta|replica|ladder", w.lower())}
    assert not tempering, f"renormpp/infer/adapter.py's code knows tempering ({sorted(tempering)}): that belongs to " \
        "renormpp/infer/tempering.py"
    for S in (ObservedState, SwapState, ReplicaState):
        assert issubclass(S, ReadsThrough) and "__getattr__" not in vars(S), S
