"""``renormpp validity-map``: the verdict rule against hand-worked cases, the statement and counts on a table whose
answer is known, the command's configs, errors and resumption, and the smoke-size map end to end with every
prediction in its table reproduced by an independent solve."""
from __future__ import annotations

import tomllib

import numpy as np
import pandas as pd
import pytest

import renormpp as rp
from renormpp.cli import main
from renormpp.experiments import validity
from renormpp.experiments.config import resolve
from renormpp.experiments.report import load_sweep


@pytest.mark.parametrize("delta, sigma, reliable, tol, expected", [
    (0.004, 0.002, True, 0.01, "holds"),       # |Delta| <= 1%, error bar <= 0.5%
    (0.004, 0.006, True, 0.01, "undecided"),   # the error bar is too wide to say "within 1%"
    (-0.03, 0.005, True, 0.01, "fails"),       # 3% - 2 x 0.5% > 1%
    (-0.03, 0.005, True, 0.05, "holds"),
    (0.018, 0.005, True, 0.01, "undecided"),   # 1.8% - 1% < 1%: not resolved either way
    (0.20, 0.01, False, 0.05, "undecided"),    # an error bar that does not hold decides nothing
    (np.nan, 0.01, True, 0.05, "undecided"),   # no prediction
])
def test_judge_follows_the_stated_rule(delta, sigma, reliable, tol, expected):
    assert validity.judge(delta, sigma, reliable, tol) == expected


def _row(alpha, ratio, theory, delta, sigma=0.001, family="synthetic", group="linear teacher, erf network"):
    pred = 1.0
    return dict(series=f"s{ratio}", family=family, group=group, teacher="linear", activation="erf", N0=10, P=10,
                N1=int(10 / alpha), alpha=alpha, ratio=ratio, quantity="eps_g", theory=theory,
                mc_mean=pred * (1 + delta), mc_error=sigma, reliable=True, prediction=pred, delta=delta,
                z=delta / sigma, **{f"within_{round(100 * t)}%": validity.judge(delta, sigma, True, t)
                                   for t in validity.TOLERANCES})


def test_counts_and_statement_on_a_known_table():
    t = pd.DataFrame([_row(1, 1, "exact", 0.002), _row(2, 1, "exact", 0.03), _row(2, 0.1, "exact", -0.2),
                      _row(1, 1, "infinite_width", 0.1), _row(2, 1, "infinite_width", 0.1),
                      _row(2, 0.1, "infinite_width", 0.1)])
    counts = validity.holds_table(t).set_index("theory")
    assert counts.loc["exact", ["n", "within 1%", "within 5%", "fails at 5%"]].tolist() == [3, 1, 2, 1]
    assert counts.loc["infinite_width", ["within 1%", "within 5%", "fails at 5%"]].tolist() == [0, 0, 3]
    lines = validity.statement(t)
    assert lines[0] == ("* **exact**, linear teacher, erf network (3 points): within 1% at α = 1: N0/P = 1; within 5% "
                        "at α = 1: N0/P = 1; α = 2: N0/P = 1; fails by more than 5% at α = 2: N0/P = 0.1.")
    assert "within 1% at no point" in lines[1]


def test_the_full_map_is_the_grid_and_the_real_data_it_promises(tmp_path):
    cfgs = validity.configs("full", tmp_path)
    synthetic = [c for c in cfgs.values() if c["data"]["name"] == "synthetic"]
    assert len(synthetic) == 2 * 2 * 4 and all(c["model"]["N1"] == [50, 100, 200, 400] for c in synthetic)
    assert {c["data"]["N0"] for c in synthetic} == {20, 50, 200, 800}
    real = {k: c for k, c in cfgs.items() if c["data"]["name"] != "synthetic"}
    assert {(c["data"]["name"], c["data"].get("N0"), c["data"]["P"]) for c in real.values()} == {
        ("mnist", None, 200), ("mnist", None, 1000), ("projected_mnist", 144, 1000), ("projected_mnist", 784, 1000)}
    for c in cfgs.values():
        resolve(c)  # every config is valid
        assert c["run"]["target_error"]["eps_g"] <= 0.005 and c["run"]["max_seconds"] > 0


def test_print_config_round_trips_and_bad_input_is_refused(tmp_path, capsys):
    assert main(["validity-map", "--size", "quick", "--out", str(tmp_path), "--print-config"]) == 0
    docs = capsys.readouterr().out.split("# ---- series ")[1:]
    cfgs = validity.configs("quick", tmp_path)
    assert [d.split(":")[0] for d in docs] == list(cfgs)
    for d, c in zip(docs, cfgs.values()):
        assert tomllib.loads(d.split("\n", 1)[1])["model"]["N1"] == c["model"]["N1"]
    assert main(["validity-map", "--size", "quick", "--out", str(tmp_path), "--series", "nope"]) == 2
    assert "no series nope at size quick; its series are linear_erf_N0=0.25P" in capsys.readouterr().err
    assert main(["validity-map", "--size", "smoke", "--out", str(tmp_path / "empty"), "--report-only"]) == 1
    assert "nothing to write" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["validity-map", "--size", "huge"])


def test_the_smoke_map_end_to_end_reproduced_independently(tmp_path, capsys):
    out = tmp_path / "map"
    assert main(["validity-map", "--size", "smoke", "--out", str(out), "--no-progress"]) == 0
    assert "# The validity map (smoke size)" in capsys.readouterr().out
    for f in ("validity.md", "validity.csv", "map_linear_erf.png", "adaptive_kernel.json", "shared_field.json"):
        assert (out / f).stat().st_size > 0, f
    t = pd.read_csv(out / "validity.csv")
    assert len(t) == 3 * len(validity.COMPARED)  # eps_g and the two diagonal overlaps, every theory
    cfg = validity.configs("smoke", out)["linear_erf_N0=1P"]
    sweep = load_sweep(cfg["run"]["out"])
    data, N1 = sweep.data, cfg["model"]["N1"][0]
    exact = rp.theory.solve(data.X, data.Y, N1=N1, T=0.01)
    adaptive = rp.theory.adaptive_kernel.solve(data.X, data.Y, N1, 0.01, **validity.BEYOND_OPTIONS["adaptive_kernel"])
    shared = rp.theory.shared_field.solve(data.X, data.Y, N1=N1, T=0.01, maxiter=validity.GRIDS["smoke"].maxiter,
                                          proposal=validity.SHARED_FIELD_PROPOSAL,
                                          neurons=validity.GRIDS["smoke"].neurons)
    eps = t[t.quantity == "eps_g"].set_index("theory")
    np.testing.assert_allclose(eps.loc["exact", "prediction"], exact.generalization_error(data.X_test, data.Y_test),
                               rtol=1e-8)
    assert adaptive.converged
    np.testing.assert_allclose(eps.loc["adaptive_kernel", "prediction"],
                               adaptive.generalization_error(data.X_test, data.Y_test), rtol=1e-8)
    ov = t[t.quantity == "overlap[1,1]"].set_index("theory")
    np.testing.assert_allclose(ov.loc["exact", "prediction"], exact.readout_overlap[1, 1], rtol=1e-8)
    np.testing.assert_allclose(ov.loc["adaptive_kernel", "prediction"], adaptive.readout_overlap[1, 1], rtol=1e-8)
    # the linear teacher at alpha = 2: with neurons moved to (F1) and averaged moments the shared field converges
    # there (the earlier rounds of reweighted populations did not), in the map as alone
    assert shared.converged, shared.reason
    np.testing.assert_allclose(eps.loc["shared_field", "prediction"],
                               shared.generalization_error(data.X_test, data.Y_test), rtol=1e-8)
    mc = float(sweep.pooled[0].mc_mean.sel(quantity="eps_g"))
    np.testing.assert_allclose(eps.mc_mean, mc)
    np.testing.assert_allclose(eps.delta, (mc - eps.prediction) / eps.prediction.abs())
    assert eps.loc["exact", "kernel_r1"] > 0 and eps.loc["exact", "N0"] == data.X.shape[1]
    # a second run samples nothing: the point is resumed as finished
    result = next((out / "runs" / "linear_erf_N0=1P" / "points").glob("*/result.json"))
    before = result.stat().st_mtime_ns
    validity.run("smoke", out, progress=False)
    assert result.stat().st_mtime_ns == before


def test_the_shared_field_rows_are_the_series_solved_widest_first_with_continuation(tmp_path, monkeypatch):
    """A series' shared-field rows (validity._solve_beyond) are the solves at its widths, widest first, each from the
    last converged one, recomputed here by hand, with the neurons moved to (F1) (SHARED_FIELD_PROPOSAL) and the map
    size's neurons and iterations; a kept row of another method or of other iterations is solved again; a ReLU
    network gets the reason and no number."""
    from dataclasses import replace
    from types import SimpleNamespace

    rng = np.random.default_rng(0)
    X, X0 = rng.normal(size=(16, 5)), rng.normal(size=(25, 5))
    W = rng.normal(size=(5, 2))
    data = SimpleNamespace(X=X, Y=np.tanh(X @ W), X_test=X0, Y_test=np.tanh(X0 @ W))
    model = {"N1": [16, 32], "T": 0.05, "lambda0": 1.0, "lambda1": 1.0, "activation": "erf"}
    grid = replace(validity.GRIDS["smoke"], neurons=4000, maxiter=60)
    rows = validity._solve_beyond("shared_field", data, model, model["N1"], grid)
    kw = dict(T=0.05, maxiter=60, neurons=4000, proposal=validity.SHARED_FIELD_PROPOSAL)
    wide = rp.theory.shared_field.solve(X, data.Y, N1=32, **kw)
    narrow = rp.theory.shared_field.solve(X, data.Y, N1=16, init=wide, **kw)
    for N1, fit in ((32, wide), (16, narrow)):
        assert fit.converged and rows[N1]["converged"]
        assert rows[N1]["eps_g"] == pytest.approx(fit.generalization_error(X0, data.Y_test), rel=1e-10)
        np.testing.assert_allclose(rows[N1]["overlap"], np.diag(fit.readout_overlap), rtol=1e-10)
    assert all(row["proposal"] == validity.SHARED_FIELD_METHOD and row["maxiter"] == 60 for row in rows.values())
    # a kept row of another method (rows without one: the fitted proposal's; "mcmc": the earlier rounds) is solved again
    kept = {"eps_g": 789.0, "converged": True, "reason": "", "proposal": validity.SHARED_FIELD_METHOD, "maxiter": 60}
    cache = {"s/N1=16": {"eps_g": 123.0, "converged": True, "reason": ""},
             "s/N1=32": {"eps_g": 456.0, "converged": True, "reason": "", "proposal": "mcmc"}, "s/N1=8": kept}
    path = tmp_path / "shared_field.json"
    solve, saved = rp.theory.shared_field.solve, []

    def solve_and_look(*args, **kwargs):  # the map's solves save their progress where an interrupted map finds it
        fit = solve(*args, **kwargs)
        saved.append(kwargs["checkpoint"].relative_to(tmp_path).as_posix() if kwargs["checkpoint"].exists() else None)
        return fit

    monkeypatch.setattr(rp.theory.shared_field.solver, "solve", solve_and_look)  # what continued() calls
    row = validity._beyond("shared_field", data, model, 16, cache, "s", path, grid)
    monkeypatch.setattr(rp.theory.shared_field.solver, "solve", solve)
    assert saved == ["shared_field_checkpoints/s/N1=32.npz", "shared_field_checkpoints/s/N1=16.npz"]
    assert not (tmp_path / "shared_field_checkpoints" / "s").exists()  # removed once the rows are kept
    assert row["eps_g"] == pytest.approx(rows[16]["eps_g"], rel=1e-10) and cache["s/N1=32"] == rows[32]
    assert validity._beyond("shared_field", data, model, 32, {"s/N1=32": cache["s/N1=32"]}, "s", path, grid,
                            compute=False) == rows[32]
    assert validity._beyond("shared_field", data, model, 8, cache, "s", path, grid)["eps_g"] == 789.0  # kept
    # the same method with other iterations (a row without them: the solve's default then, 80) is not kept (not
    # solved here: compute=False says so)
    for other in (dict(kept, maxiter=160), {k: v for k, v in kept.items() if k != "maxiter"}):
        row = validity._beyond("shared_field", data, model, 16, {"s/N1=16": other}, "s", path, grid, compute=False)
        assert "eps_g" not in row and "not computed yet" in row["reason"], row
    assert validity._beyond("shared_field", data, model, 16, {"s/N1=16": {k: v for k, v in kept.items()
                                                                          if k != "maxiter"}}, "s", path,
                            replace(grid, maxiter=80), compute=False)["eps_g"] == 789.0  # the old default: kept
    relu = validity._solve_beyond("shared_field", data, dict(model, activation="relu"), [16], grid)
    assert "eps_g" not in relu[16] and "needs an odd activation; got 'relu'" in relu[16]["reason"]


def test_the_plots_draw_every_cell_and_series():
    t = pd.DataFrame([_row(a, r, th, d) for a, r, d in [(1, 1, 0.002), (2, 1, 0.03), (1, 0.1, -0.2), (2, 0.1, -0.3)]
                      for th in ("exact", "infinite_width")])
    fig = rp.plots.validity_map(t, theories=("exact", "infinite_width"), title="t")
    texts = [x.get_text() for x in fig.axes[0].texts]
    assert sorted(texts) == sorted(["+0.2%\n✓✓", "+3.0%\n✓", "-20.0%\n✗", "-30.0%\n✗"])
    real = t.assign(family="real", series=np.where(t.ratio == 1, "a", "b"))
    fig = rp.plots.discrepancy_vs_N1(real, theories=("exact",))
    assert len(fig.axes[0].get_legend().get_texts()) == 2
    real.loc[real.index[0], "reliable"] = False  # an error bar that does not hold: drawn hollow, and said so
    fig = rp.plots.discrepancy_vs_N1(real, theories=("exact",))
    faces = [line.get_markerfacecolor() for line in fig.axes[0].lines if len(line.get_xdata()) == 1]
    assert "none" in faces and any(f != "none" for f in faces)
    assert any("hollow" in x.get_text() for x in fig.axes[0].get_legend().get_texts())
