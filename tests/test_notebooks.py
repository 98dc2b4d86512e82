"""The notebooks in notebooks/: each runs without error at the smoke size, and is stored with its quick-size outputs.

Every notebook is executed top to bottom with nbclient in a fresh "python3" kernel (this interpreter), with
``RENORMPP_NOTEBOOK_SIZE=smoke`` and notebooks/ as the working directory, as a user would run it. The smoke size
(each notebook's parameter cell; notebook 07 takes it from ``rp.experiments.validity``) runs every cell in seconds
on the smallest data and runs that exercise them; its numbers mean nothing, and the quick size a reader runs stays
as it was (the docs build executes that one). A short check cell, appended only to the executed copy, asserts that
the notebook computed what it claims: what the smoke size cannot show statistically is checked against an
independent computation (a fresh solve of the theory, the recorded draws, the scores recomputed).

The committed files hold the outputs of one run at the quick size, top to bottom (a reader of the docs site sees the
figures): every code cell has its execution count, in order, every cell that draws a figure has its image, and no
cell has an error. Without running anything, the tests also check that the notebooks' text says what holds now (no
"issue N"), that no notebook tunes a step size of its own (the kernels adapt it in the warmup), and that notebook 04
imports arviz before renormpp, as the README says any order works. The stored tables of compare show the columns that
compare returns now, and no notebook keeps its own copy of a library figure or of the signed Delta.
"""
from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import nbclient  # the dev extra has nbclient, nbformat and ipykernel
import nbformat
import pytest
from realdata import missing

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
EXPECTED = {"01_theory_quickstart.ipynb", "02_langevin_vs_theory.ipynb", "03_readout_overlaps.ipynb",
            "04_monte_carlo_diagnostics.ipynb", "05_bayes_vs_adam.ipynb", "06_deep_networks.ipynb",
            "07_validity_map.ipynb", "08_convolutional.ipynb"}
CELL_TIMEOUT = 600  # seconds per cell; a smoke-size notebook takes well under a minute in all
#: the real data sets a notebook needs; without them (rp.datasets.locate) its test skips with the loader's message
NEEDS = {"03_readout_overlaps.ipynb": ("mnist",), "05_bayes_vs_adam.ipynb": ("mnist", "cifar10")}

# run in the notebook's kernel after its last cell: light checks that it did what it says
CHECKS = {
    "08_convolutional.ipynb": """
assert SIZE == "smoke"
assert all([ds.attrs["N1"] for ds in sw.pooled] == cfg["widths"] for sw in sweeps.values())
assert len(table) == 2 * len(cfg["widths"]) * 4   # eps_g and the three overlaps, per width and network
assert len(locs) == len(cfg["widths"])
n_p = (side // m) ** 2
for loc in locs:   # the local overlaps over patch pairs against a fresh solve of the local theory at that width
    assert loc.mc_mean.shape == (2, n_p, 2, n_p) and np.isfinite(loc.mc_mean).all() and (loc.mc_error > 0).all()
    fresh = rp.theory.solve(data.X, data.Y, N1=loc.attrs["N1"], T=0.01, conv=conv)
    np.testing.assert_allclose(loc.prediction.sel(theory="exact").values.reshape(2 * n_p, 2 * n_p),
                               fresh.local_overlap.reshape(2 * n_p, 2 * n_p), rtol=1e-6, atol=1e-9)
    assert np.isclose(loc.attrs["rel_infinite_width"], 1.0)   # the infinite width misses all the departure
    assert not np.allclose(fresh.local_overlap.reshape(2 * n_p, -1), np.eye(2 * n_p))   # finite width: local structure
""",
    "01_theory_quickstart.ipynb": """
assert SIZE == "smoke"
assert fit.converged and fit.grad_norm < 1e-6
assert np.all(np.isfinite(eps["exact"])) and np.isnan(eps["one_loop"]).any()   # one-loop breaks at large alpha
assert abs(eps["exact"][-1] - eps_inf) < 0.1 * abs(eps["exact"][0] - eps_inf)  # exact -> infinite width
assert Q1.shape == (D, D) and np.allclose(Q1, Q1.T) and np.linalg.eigvalsh(Q1).min() > 0
if data.name == "mnist":   # the classes compete: no two readouts align (synthetic outputs may correlate)
    assert np.all(Q1[iu] < 0.05)
""",
    "02_langevin_vs_theory.ipynb": """
assert SIZE == "smoke"
assert [ds.attrs["N1"] for ds in results] == list(cfg["N1_list"])
assert all(0.5 < run["acc"] < 0.97 for run in runs.values())   # the warmup adapted the step towards 0.8
assert all(not np.isclose(run["h"], 1e-4) for run in runs.values())   # ... away from spec.kernel()'s first guess
exact = np.array([tables[n].loc["eps_g", ("exact", "theory")] for n in cfg["N1_list"]])
# the theory column is the theory at each width (a fresh solve), the MC column the mean of that width's draws
fresh = [rp.theory.solve(data.X, data.Y, N1=n, T=T, lambda0=LAMBDA0, lambda1=LAMBDA1).generalization_error(
    data.X_test, data.Y_test) for n in cfg["N1_list"]]
np.testing.assert_allclose(exact, fresh, rtol=1e-6)
for N1, run in runs.items():
    row = tables[N1].loc["eps_g"]
    draws = np.asarray(run["mcmc"].get_samples(group_by_chain=True)["eps_g"], dtype=float)
    assert draws.shape == (cfg["chains"], cfg["draws"]) and np.all(np.isfinite(draws))
    cut = rp.diagnostics.thermalization_cut(draws)
    np.testing.assert_allclose(row[("sampled", "mean")], draws[:, cut:].mean(), rtol=1e-6)
    assert row[("sampled", "mcse")] > 0
    for th in THEORIES:   # the signed Delta of every theory that applies
        pred = row[(th, "theory")]
        if np.isfinite(pred):
            assert np.isclose(row[(th, "delta")], (row[("sampled", "mean")] - pred) / abs(pred), rtol=1e-6)
""",
    "03_readout_overlaps.ipynb": """
assert SIZE == "smoke"
D = data.Y.shape[1]
assert sorted(results) == sorted(cfg["N1_list"])
assert all(ds.sizes["quantity"] == 1 + D * (D + 1) // 2 for ds in results.values())
assert all(list(tables[n].index) == list(results[n].quantity.values) for n in results)   # the table is the Dataset's
ov = results[N1_alpha1]
off = [q for q in ov.quantity.values[1:] if int(ov.a.sel(quantity=q)) != int(ov.b.sel(quantity=q))]
# the theory column is Q*/lambda1 of a fresh solve, anti-correlated readouts at alpha = 1
Q = rp.theory.solve(data.X, data.Y, N1=N1_alpha1, T=T, lambda0=LAMBDA0, lambda1=LAMBDA1).readout_overlap
for q in ov.quantity.values[1:]:
    a, b = int(ov.a.sel(quantity=q)), int(ov.b.sel(quantity=q))
    assert np.isclose(float(ov.prediction.sel(quantity=q, theory="exact")), Q[a, b], rtol=1e-6)
assert all(float(ov.prediction.sel(quantity=q, theory="exact")) < 0 for q in off)
# the MC column of the last width is the mean of its recorded v v^T / N1 (mcmc is that width's run)
draws = np.asarray(mcmc.get_samples(group_by_chain=True)["overlap"], dtype=float)
last = results[cfg["N1_list"][-1]]
for q in last.quantity.values[1:]:
    s = draws[..., int(last.a.sel(quantity=q)), int(last.b.sel(quantity=q))]
    cut = rp.diagnostics.thermalization_cut(s)
    assert np.isclose(float(last.mc_mean.sel(quantity=q)), s[:, cut:].mean(), rtol=1e-6)
""",
    "04_monte_carlo_diagnostics.ipynb": """
assert SIZE == "smoke"
assert eps.shape == (cfg["chains"], cfg["draws"]) and np.all(np.isfinite(eps))
assert len(rows) == 6 and all(est.error > 0 and est.tau_int >= 1 for _, est, _ in rows)
assert not np.isclose(h, cfg["h0"])   # the warmup adapted the step away from its first guess
assert all(est.error > naive for _, est, naive in rows)   # autocorrelation makes the naive error too small
for name, est, naive in rows:   # each estimate is the mean of its series after its cut
    series = eps if name == "eps_g" else v11
    assert np.isclose(est.mean, series[:, est.cut:].mean(), rtol=1e-6)
""",
    "05_bayes_vs_adam.ipynb": """
assert SIZE == "smoke"
assert set(results) == {"MNIST", "CIFAR-10 gray"} and all(list(r) == list(cfg["P_list"]) for r in results.values())
for name, byP in results.items():
    for P, r in byP.items():
        gp, data = r["gp"], datasets[name, P]
        assert sorted(r["adam"]) == list(cfg["N1_list"])
        # the GP's test scores are those of its predictive mean, recomputed here
        gp_mean = gp.fit.predict(data.X_test).mean
        assert np.isclose(gp.test_mse, np.mean(np.sum((data.Y_test - gp_mean) ** 2, axis=1)))
        assert np.isclose(gp.test_accuracy, np.mean(gp_mean.argmax(1) == data.Y_test.argmax(1)))
        for a in r["adam"].values():
            assert len(a.runs) == cfg["n_init"] and a.std["test_mse"] > 0
            acc = a.values["test_accuracy"]
            assert np.all(np.isfinite(a.values["test_mse"])) and np.all((acc >= 0) & (acc <= 1))
        curve = theory_curves[name][P]
        assert list(curve.index) == list(N1_fine) and curve.shape == (len(N1_fine), 4)
        assert np.isfinite(curve.to_numpy()).all()
# the library's figure draws what it is given: Adam's means as points, the GP's score as a line, the theory dashed;
# the same from the results as renormpp paper fig3 saves them (mappings)
import matplotlib.pyplot as plt
P = cfg["P_list"][0]
r, curve = results["MNIST"][P], theory_curves["MNIST"][P]
saved = {P: {"gp": {k: getattr(r["gp"], k) for k in ("train_mse", "test_mse", "train_accuracy", "test_accuracy")},
             "adam": {n: {"mean": a.mean, "std": a.std} for n, a in r["adam"].items()}}}
N1s = sorted(r["adam"])
for fig, curves in ((rp.plots.baselines_vs_N1(results["MNIST"], theory_curves["MNIST"]), curve),
                    (rp.plots.baselines_vs_N1(saved), None)):
    assert len(fig.axes) == 4
    for ax, key in zip(fig.axes, ("train_mse", "test_mse", "train_accuracy", "test_accuracy")):
        np.testing.assert_allclose(np.asarray(ax.containers[0].lines[0].get_ydata(), dtype=float),
                                   [r["adam"][n].mean[key] for n in N1s])
        assert any(np.allclose(line.get_ydata(), getattr(r["gp"], key)) for line in ax.lines)
        drawn = [line for line in ax.lines if len(line.get_xdata()) == len(curve)
                 and np.allclose(line.get_ydata(), curve[key])]
        assert len(drawn) == (curves is not None) and all(line.get_linestyle() == "--" for line in drawn)
    plt.close(fig)
gp_train, gp_test = rows["best GP"]
assert gp_train.shape == gp_test.shape == (lowdim.Y.shape[1],)
assert np.isclose(gp_test.sum(), res["gp"].test_mse)   # the per-target MSEs add up to the GP's test MSE
for a in res["adam"].values():   # each run's test MSE is that of its network (kept: keep_params=True), recomputed
    assert all(np.isclose(run.test_mse, np.mean(np.sum((lowdim.Y_test - run.predict(lowdim.X_test)) ** 2, axis=1)),
                          rtol=1e-4) for run in a.runs)
assert FEATURES or (loaded.X.shape == d.X.shape and np.allclose(loaded.X.mean(axis=0), 0))
""",
    "06_deep_networks.ipynb": """
assert SIZE == "smoke"
eps = table[table.quantity == "eps_g"]
syn = eps[eps.data == "synthetic"]
assert sorted(syn.depth.unique()) == [1, 2, 3] and len(syn) == 3 * len(rp.theory.METHODS)
assert np.isfinite(syn[syn.theory.isin(["exact", "infinite_width"])].prediction).all()
assert syn[(syn.depth > 1) & (syn.theory == "corrected")].prediction.isna().all()
assert np.isfinite(eps.mc_mean).all() and (eps.mc_error > 0).all()
assert syn[syn.theory == "exact"].prediction.nunique() == 3   # the theory depends on the depth
assert HAVE_MNIST == (set(eps.data) == {"synthetic", "mnist"})
""",
    "07_validity_map.ipynb": """
assert SIZE == "smoke"
from renormpp.experiments.validity import COMPARED, GRIDS
g = GRIDS[SIZE]
assert len(eps) == len(g.activations) * len(g.ratios) * len(g.alphas) * len(g.teachers) * len(COMPARED)
assert eps[(eps.activation == "relu") & eps.theory.isin(["corrected", "adaptive_kernel", "shared_field"])].prediction.isna().all()
assert np.isfinite(eps[eps.theory.isin(["exact", "infinite_width"])].prediction).all() and np.isfinite(eps.mc_mean).all()
assert set(summary.theory) <= set(COMPARED) and {"exact", "infinite_width"} <= set(summary.theory)
assert (OUT / "validity.md").exists()
""",
}


#: a code cell that draws: it shows a figure, or calls a plotting function of renormpp or ArviZ
DRAWS = re.compile(r"plt\.show\(\)|rp\.plots\.(?!theory_lines|save|log_axis)\w+\(")
#: history in user-facing text: "issue 46", "issue #46", "sitting"
HISTORY = re.compile(r"\bissues?\s+#?\d+|\bsitting\b", re.IGNORECASE)


def draws(source: str) -> bool:
    """Whether a code cell always draws: a drawing call (:data:`DRAWS`) outside any ``if``/``else`` branch (a branch,
    such as notebook 05's Imagenette cell without its features, may not run)."""
    lines = source.splitlines()
    for k, line in enumerate(lines):
        if not DRAWS.search(line):
            continue
        indent, conditional = len(line) - len(line.lstrip()), False
        for above in reversed(lines[:k]):   # the headers of the blocks around the call
            depth = len(above) - len(above.lstrip())
            if above.strip() and depth < indent:
                conditional |= bool(re.match(r"(if|elif|else)\b", above.strip()))
                indent = depth
        if not conditional:
            return True
    return False


def code_cells(path) -> list:
    return [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def test_the_notebooks_are_there():
    assert EXPECTED <= {p.name for p in NOTEBOOKS}, f"missing notebooks in {NOTEBOOK_DIR}"
    assert set(CHECKS) <= {p.name for p in NOTEBOOKS}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_with_its_quick_size_outputs(path):
    """One run at the quick size, top to bottom, is stored: counts 1, 2, 3, ... in every code cell, the parameter cell
    printing the quick size, an image in every cell that draws, no error, no timing metadata, no widget state."""
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    cells = [c for c in nb.cells if c.cell_type == "code"]
    counts = [c.get("execution_count") for c in cells]
    assert counts == list(range(1, len(cells) + 1)), (
        f"{path.name}: execution counts {counts}; run the notebook top to bottom at the quick size and commit it with "
        f"its outputs (notebooks/README.md, 'Outputs')")
    parameters = next(c for c in cells if "RENORMPP_NOTEBOOK_SIZE" in c.source)
    printed = "".join(o.get("text", "") for o in parameters.outputs if o.output_type == "stream")
    assert re.match(r"(size )?'?quick'?\b", printed), f"{path.name}: stored outputs are not of the quick size: {printed!r}"
    for i, cell in enumerate(cells):
        types = [o.output_type for o in cell.outputs]
        assert "error" not in types, f"{path.name}: code cell {i + 1} stored an error"
        if draws(cell.source):
            images = [o for o in cell.outputs if "image/png" in o.get("data", {})]
            assert images, f"{path.name}: code cell {i + 1} draws but has no stored image"
        assert "execution" not in cell.metadata, f"{path.name}: code cell {i + 1} keeps timing metadata"
    assert "widgets" not in nb.metadata, f"{path.name}: widget state stored"
    # run on the real data it is about: no "NOTE: the MNIST files were not found ..." of the synthetic fallback
    notes = [o.get("text", "") for c in cells for o in c.outputs if "NOTE:" in o.get("text", "")]
    assert not notes, f"{path.name}: stored from a run without its data: {notes}"
    assert path.stat().st_size < 2_000_000, f"{path.name}: {path.stat().st_size} bytes of outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_text_says_what_holds_now(path):
    """No history in the notebooks' text and comments: no "issue N", no "sitting"."""
    cells = nbformat.read(path, as_version=4).cells
    found = [(i, m.group(0)) for i, c in enumerate(cells) for m in HISTORY.finditer(c.source)]
    assert not found, f"{path.name}: cells say {found}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_notebook_tunes_a_step_size_of_its_own(path):
    """The kernels adapt their step in MCMC's warmup (``adapt_step_size``, on by default in ``spec.kernel()``): no
    notebook defines a tuner, and every Metropolis-adjusted overdamped kernel it builds adapts its step."""
    source = "\n".join(c.source for c in code_cells(path))
    tuners = re.findall(r"def\s+(\w*tun\w*)\s*\(", source)
    assert not tuners, f"{path.name}: defines {tuners}; use the kernel's adaptation (adapt_step_size=True)"
    for call in re.findall(r"rp\.infer\.Langevin\((?:[^()]|\([^()]*\))*\)", source):
        if "adjust=True" in call:
            assert "adapt_step_size=True" in call, f"{path.name}: a MALA kernel with a step of its own: {call}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_files_a_notebook_names_are_there(path):
    """Scripts and pages a notebook points the reader to (``benchmarks/...``, ``studies/...``, ``docs/...``) exist."""
    root = NOTEBOOK_DIR.parent
    text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells)
    named = set(re.findall(r"(?<![\w/.])((?:benchmarks|studies|docs)/[\w./-]+\.(?:py|md|png))", text))
    missing = sorted(n for n in named if not (root / n).exists())
    assert not missing, f"{path.name} names files that are not there: {missing}"


def test_notebook_02_samples_with_the_spec_kernel():
    """Fig. 1(a) at the quick size is sampled with the recommended kernel of ``rp.Spec``, in a warmup that adapts it."""
    source = "\n".join(c.source for c in code_cells(NOTEBOOK_DIR / "02_langevin_vs_theory.ipynb"))
    assert "rp.Spec(" in source and "spec.kernel()" in source
    assert "num_warmup=0" not in source


def test_notebook_04_imports_arviz_in_any_order():
    """The README says arviz and renormpp import in any order; notebook 04 imports arviz first (its smoke run then
    checks that ``to_datatree`` and ``az.summary`` work that way) and no notebook text says otherwise."""
    source = "\n".join(c.source for c in code_cells(NOTEBOOK_DIR / "04_monte_carlo_diagnostics.ipynb"))
    lines = source.splitlines()
    first = {name: next(i for i, line in enumerate(lines) if re.match(rf"import {name}\b", line))
             for name in ("arviz", "renormpp")}
    assert first["arviz"] < first["renormpp"], "notebook 04 should import arviz before renormpp"
    texts = [c.source for p in NOTEBOOKS for c in nbformat.read(p, as_version=4).cells]
    texts.append((NOTEBOOK_DIR / "README.md").read_text())
    claims = [line for t in texts for line in t.splitlines() if re.search(r"arviz\W.*\bafter\b", line, re.I)]
    assert not claims, f"text says arviz must come after: {claims}"


def parameter_sizes(path) -> tuple[str, dict]:
    """A notebook's parameter cell (the code cell that reads RENORMPP_NOTEBOOK_SIZE) and its sizes: the SIZES dict it
    defines (run alone, without the environment), or, for notebook 07 which has none, rp.experiments.validity's."""
    nb = nbformat.read(path, as_version=4)
    cell = next(c.source for c in nb.cells if c.cell_type == "code" and "RENORMPP_NOTEBOOK_SIZE" in c.source)
    if "SIZES" not in cell:
        from renormpp.experiments import validity
        assert "validity.run(SIZE" in "".join(c.source for c in nb.cells), f"{path.name}: where are its sizes?"
        return cell, dict(validity.GRIDS)
    namespace = {}
    exec("import os\n" + cell[cell.index("SIZES = {"):cell.index("if SIZE not in SIZES")], namespace)
    return cell, namespace["SIZES"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_has_a_smoke_size_beside_quick_and_full(path):
    """Nothing executed: the parameter cell offers quick, full and smoke, says so where it reads the size, rejects
    an unknown size with the list of sizes, and its smoke size is not the quick size under another name."""
    cell, sizes = parameter_sizes(path)
    assert {"quick", "full", "smoke"} <= set(sizes), f"{path.name}: sizes {sorted(sizes)}"
    assert sizes["smoke"] != sizes["quick"], f"{path.name}: smoke is the quick size"
    assert '"smoke"' in cell.split("SIZES = {")[0], f"{path.name}: the comment on SIZE must name the smoke size"
    if "SIZES" in cell:
        assert 'raise ValueError(f"RENORMPP_NOTEBOOK_SIZE must be one of {list(SIZES)}' in cell


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_at_smoke_size(path, monkeypatch, tmp_path):
    absent = [why for why in map(missing, NEEDS.get(path.name, ())) if why]
    if absent:
        pytest.skip(f"{path.name} needs real data: " + " ".join(absent))
    monkeypatch.setenv("RENORMPP_NOTEBOOK_SIZE", "smoke")
    monkeypatch.setenv("RENORMPP_NOTEBOOK_RUNS", str(tmp_path))  # notebooks that run sweeps start afresh  # the kernel inherits this process's environment
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(path, as_version=4)
    if path.name in CHECKS:
        nb.cells.append(nbformat.v4.new_code_cell(CHECKS[path.name].strip()))
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK_DIR)}})
    client.execute()  # raises CellExecutionError, with the cell and its traceback, on the first failing cell
    errors = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs if o.output_type == "error"]
    assert not errors


# ---- the tables and figures of the notebooks are the library's -------------------------------------------------
class _Tables(HTMLParser):
    """The tables of an HTML output as pandas writes them: per table its header rows (the labels of a row, one per
    column: a label spanning several columns repeated), its body rows' values (``td``) and the number of index columns
    (the ``th`` of a body row)."""

    def __init__(self):
        super().__init__()
        self.tables, self._part, self._cell = [], None, None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append({"head": [], "body": [], "index": 0})
        elif tag in ("thead", "tbody"):
            self._part = tag
        elif tag == "tr" and self.tables:
            self.tables[-1]["head" if self._part == "thead" else "body"].append([])
            self._th = 0
        elif tag in ("th", "td") and self.tables:
            self._cell, self._span = "", int(dict(attrs).get("colspan") or 1)

    def handle_endtag(self, tag):
        if tag not in ("th", "td") or self._cell is None:
            return
        table, text = self.tables[-1], self._cell.strip()
        if self._part == "thead":
            table["head"][-1] += [text] * self._span
        elif tag == "th":
            self._th += 1
            table["index"] = max(table["index"], self._th)
        else:
            table["body"][-1].append(text)
        self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


def stored_tables(path):
    """``(source, columns, rows)`` of every HTML table in a notebook's stored outputs: the source of its cell, one
    tuple of labels per column (its header's levels from the top down, the index's columns and names left out) and
    the body's values by row."""
    for cell in code_cells(path):
        for out in cell.outputs:
            html = out.get("data", {}).get("text/html")
            if not html:
                continue
            parser = _Tables()
            parser.feed(html)
            for t in parser.tables:
                k = t["index"]
                head = [row[k:] for row in t["head"] if any(row[k:])]  # the row of the index's names has no label
                yield cell.source, list(zip(*head)), t["body"]


@pytest.fixture(scope="module")
def compare_now():
    """What compare returns now, from a call on a tiny problem (made-up draws, nothing sampled): ``leaves``, the
    columns of ``Spec.compare`` (the sampled ones and each theory's), the same with one theory or several; ``groups``,
    its column groups with several theories ("sampled" and the theory names); ``whole``, the columns it rounds to whole
    numbers; ``variables``, the variables of ``rp.diagnostics.compare``'s Dataset."""
    import warnings

    import numpy as np

    import renormpp as rp

    data = rp.datasets.synthetic(P=12, P_test=12, N0=4, D=2, teacher="linear", seed=0)
    spec = rp.Spec(data, N1=6, T=0.01)
    rng = np.random.default_rng(0)
    v = rng.normal(size=(2, 200, 6, 2))
    draws = {"eps_g": 0.3 + 0.01 * rng.normal(size=(2, 200)), "overlap": np.einsum("cdna,cdnb->cdab", v, v) / 6}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a short made-up run: ShortRunWarning, NotSettledWarning
        one = spec.compare(draws)
        several = spec.compare(draws, theories=list(rp.theory.METHODS))
    leaves = set(several.columns.get_level_values(-1))
    assert set(one.columns) == leaves and several.columns.nlevels == 2
    return dict(leaves=leaves, groups=set(several.columns.get_level_values(0)),
                whole={c for c in one.columns if np.allclose(one[c], np.round(one[c]))},
                variables=set(several.attrs["dataset"].data_vars))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_tables_show_the_columns_compare_returns_now(path, compare_now):
    """A stored table that shows compare's ``delta`` shows what compare returns now. In the layout of ``Spec.compare``
    (a ``sampled`` group, or a ``theory`` column beside ``delta``): exactly its columns, with the columns that the cell
    adds by name (``.assign(classes=...)``), under its groups, the columns it rounds in whole numbers; any other (a
    pivot of ``rp.diagnostics.compare``'s Dataset): its variables over the theories. A table stored before compare
    changed its columns (``settled``, ``ess`` unrounded) fails until the notebook is run again."""
    now = compare_now
    checked = 0
    for source, columns, rows in stored_tables(path):
        labels = {label for column in columns for label in column}
        if "delta" not in labels:
            continue  # not a table of compare's
        checked += 1
        own = set(re.findall(r"\.assign\((\w+)=", source)) | set(re.findall(r"\[[\"'](\w+)[\"']\]\s*=", source))
        leaves = {column[-1] for column in columns} - own
        groups = {label for column in columns for label in column[:-1]}
        if "sampled" in groups or "theory" in leaves:
            assert leaves == now["leaves"], (
                f"{path.name}: a stored table of Spec.compare shows {sorted(leaves)}; compare returns "
                f"{sorted(now['leaves'])} now: run the notebook again (notebooks/README.md, 'Outputs')")
            assert groups <= now["groups"], f"{path.name}: column groups {sorted(groups - now['groups'])}"
            for j, column in enumerate(columns):
                if column[-1] in now["whole"]:
                    shown = [row[j] for row in rows]
                    assert all(float(x).is_integer() for x in shown), (
                        f"{path.name}: compare rounds {column[-1]} to whole numbers; the stored table shows {shown}")
        else:
            unknown = labels - own - now["variables"] - (now["groups"] - {"sampled"})
            assert not unknown, f"{path.name}: a stored table of compare's Dataset shows {sorted(unknown)}"
    if path.name in ("02_langevin_vs_theory.ipynb", "03_readout_overlaps.ipynb", "06_deep_networks.ipynb"):
        assert checked, f"{path.name}: no stored table of compare's found"


#: a figure or a Delta that the library has: rp.plots.baselines_vs_N1, architectures_vs_N1, overlaps_vs_N1, and
#: compare's ``delta`` = (MC - theory)/|theory|
OWN_COPIES = re.compile(r"^\s*def\s+(?:plot_vs_N1|panel)\s*\(|\bsigned_delta\b"
                        r"|mc_mean\)?\s*-\s*[\w.]*prediction\)?\s*\)\s*/", re.MULTILINE)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_notebook_keeps_a_copy_of_a_library_plot_or_of_delta(path):
    """No notebook defines its own ``plot_vs_N1`` or ``panel`` (the results against N1 are drawn by ``rp.plots``) or
    computes a signed Delta by hand (``signed_delta``, ``(mc_mean - prediction) / ...``: it is compare's ``delta``)."""
    source = "\n".join(c.source for c in code_cells(path))
    copies = [m.group(0).strip() for m in OWN_COPIES.finditer(source)]
    assert not copies, f"{path.name}: {copies}; use rp.plots and compare's delta"
