"""The notebooks in notebooks/: each runs without error at the quick size, and is stored without outputs.

Every notebook is executed top to bottom with nbclient in a fresh "python3" kernel (this interpreter), with
``RENORMPP_NOTEBOOK_SIZE=quick`` and notebooks/ as the working directory, as a user would run it. A short
check cell, appended only to the executed copy, asserts that the notebook computed what it claims. The
committed files must have no outputs and no execution counts, so that diffs show code and text only.
"""
from __future__ import annotations

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
CELL_TIMEOUT = 600  # seconds per cell; a quick-size notebook takes well under a minute in all
#: the real data sets a notebook needs; without them (rp.datasets.locate) its test skips with the loader's message
NEEDS = {"03_readout_overlaps.ipynb": ("mnist",), "05_bayes_vs_adam.ipynb": ("mnist", "cifar10")}

# run in the notebook's kernel after its last cell: light checks that it did what it says
CHECKS = {
    "08_convolutional.ipynb": """
assert SIZE == "quick"
assert all([ds.attrs["N1"] for ds in sw.pooled] == cfg["widths"] for sw in sweeps.values())
assert len(table) == 2 * len(cfg["widths"]) * 4   # eps_g and the three overlaps, per width and network
assert len(locs) == len(cfg["widths"])
assert all(loc.attrs["rel_exact"] < 0.8 * loc.attrs["rel_infinite_width"] for loc in locs)  # most local structure
""",
    "01_theory_quickstart.ipynb": """
assert SIZE == "quick"
assert fit.converged and fit.grad_norm < 1e-6
assert np.all(np.isfinite(eps["exact"])) and np.isnan(eps["one_loop"]).any()   # one-loop breaks at large alpha
assert abs(eps["exact"][-1] - eps_inf) < 0.1 * abs(eps["exact"][0] - eps_inf)  # exact -> infinite width
assert Q1.shape == (D, D) and np.all(Q1[iu] < 0.05)
""",
    "02_langevin_vs_theory.ipynb": """
assert SIZE == "quick"
assert [ds.attrs["N1"] for ds in results] == list(cfg["N1_list"])
assert all(0.3 < run["acc"] < 0.95 for run in runs.values())
mc = np.array([float(ds.mc_mean.sel(quantity="eps_g")) for ds in results])
exact = np.array([float(ds.prediction.sel(quantity="eps_g", theory="exact")) for ds in results])
assert np.all(np.isfinite(mc)) and np.all(np.abs(mc / exact - 1) < 0.5)
""",
    "03_readout_overlaps.ipynb": """
assert SIZE == "quick"
D = data.Y.shape[1]
assert sorted(results) == sorted(cfg["N1_list"])
assert all(ds.sizes["quantity"] == 1 + D * (D + 1) // 2 for ds in results.values())
ov = results[N1_alpha1]
off = [q for q in ov.quantity.values[1:] if int(ov.a.sel(quantity=q)) != int(ov.b.sel(quantity=q))]
assert all(float(ov.mc_mean.sel(quantity=q)) < 0 for q in off)   # anti-correlated readouts at alpha = 1
""",
    "04_monte_carlo_diagnostics.ipynb": """
assert SIZE == "quick"
assert eps.shape == (cfg["chains"], cfg["draws"]) and np.all(np.isfinite(eps))
assert len(rows) == 6 and all(est.error > 0 and est.tau_int >= 1 for _, est, _ in rows)
assert all(est.error > naive for _, est, naive in rows)   # autocorrelation makes the naive error too small
""",
    "05_bayes_vs_adam.ipynb": """
assert SIZE == "quick"
assert set(results) == {"MNIST", "CIFAR-10 gray"} and all(list(r) == list(cfg["P_list"]) for r in results.values())
for name, byP in results.items():
    for P, r in byP.items():
        gp, D = r["gp"], datasets[name, P].Y.shape[1]
        assert sorted(r["adam"]) == list(cfg["N1_list"]) and gp.test_accuracy > 1.5 / D   # chance is 1 / D
        for a in r["adam"].values():
            assert len(a.runs) == cfg["n_init"] and a.std["test_mse"] > 0
            assert 0.7 < a.mean["test_mse"] / gp.test_mse < 1.4   # Fig. 3: Adam is comparable to the best GP
        assert theory_curves[name][P].shape == (len(N1_fine), 4) and np.all(np.isfinite(theory_curves[name][P]))
gp_train, gp_test = rows["best GP"]
assert gp_test[2] > 5 * np.delete(gp_test, 2).max()   # y3's pole sample dominates the test MSE
assert FEATURES or (loaded.X.shape == d.X.shape and np.allclose(loaded.X.mean(axis=0), 0))
""",
    "06_deep_networks.ipynb": """
assert SIZE == "quick"
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
assert SIZE == "quick"
from renormpp.experiments.validity import THEORIES
assert len(eps) == 2 * 2 * 2 * len(THEORIES)   # 2 activations x 2 ratios x 2 alphas, every theory
assert eps[(eps.activation == "relu") & eps.theory.isin(["corrected", "adaptive"])].prediction.isna().all()
assert np.isfinite(eps[eps.theory.isin(["exact", "infinite_width"])].prediction).all() and np.isfinite(eps.mc_mean).all()
assert set(summary.theory) <= set(THEORIES) and {"exact", "infinite_width"} <= set(summary.theory)
assert (OUT / "validity.md").exists()
""",
}


def unstripped_cells(nb) -> list[int]:
    """Indices of code cells that carry outputs or an execution count."""
    return [i for i, cell in enumerate(nb.cells)
            if cell.cell_type == "code" and (cell.get("outputs") or cell.get("execution_count") is not None)]


def test_the_notebooks_are_there():
    assert EXPECTED <= {p.name for p in NOTEBOOKS}, f"missing notebooks in {NOTEBOOK_DIR}"
    assert set(CHECKS) <= {p.name for p in NOTEBOOKS}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    dirty = unstripped_cells(nb)
    assert not dirty, (f"{path.name}: code cells {dirty} have outputs or execution counts; clear them before "
                       f"committing (e.g. jupyter nbconvert --clear-output --inplace {path.name})")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_at_quick_size(path, monkeypatch, tmp_path):
    absent = [why for why in map(missing, NEEDS.get(path.name, ())) if why]
    if absent:
        pytest.skip(f"{path.name} needs real data: " + " ".join(absent))
    monkeypatch.setenv("RENORMPP_NOTEBOOK_SIZE", "quick")
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
