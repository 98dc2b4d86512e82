"""``renormpp paper FIGURE``: the figure commands refuse unknown names and sizes, their configs round-trip through
``--print-config``, and every figure runs end to end (at the smoke size, in the slow tests) with outputs that parse
and theory values that an independent solve reproduces."""
from __future__ import annotations

import tomllib
import warnings

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
import pytest
from realdata import missing

import renormpp as rp
from renormpp.cli import main
from renormpp.experiments import paper
from renormpp.experiments.config import resolve
from renormpp.experiments.report import load_sweep

SYNTHETIC = ("fig1a", "sm-mc", "fig4")
REAL = tuple(f for f in paper.NAMES if f not in SYNTHETIC)


@pytest.mark.parametrize("argv, message", [
    (["paper", "fig5"], "unknown figure 'fig5'; choose one of fig1a, fig1b, fig1c, fig1d, fig2, sm-overlaps, sm-mc, "
                        "cnn, fig3, fig4"),
    (["paper", "fig1a", "--size", "huge"], "unknown size 'huge'; choose one of quick, full, smoke"),
    (["paper", "fig1b", "--print-config", "--series", "nope"], "its series are mnist-D2, mnist-D3"),
])
def test_unknown_figures_sizes_and_series_are_refused_with_the_list(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("size", paper.SIZES)
@pytest.mark.parametrize("name", paper.NAMES)
def test_every_figure_config_round_trips_through_print_config(name, size, tmp_path, capsys):
    cfgs = paper.configs(name, size, tmp_path)
    assert main(["paper", name, "--size", size, "--out", str(tmp_path), "--print-config"]) == 0
    whole = capsys.readouterr().out
    for series, cfg in cfgs.items():
        assert main(["paper", name, "--size", size, "--out", str(tmp_path), "--print-config", "--series", series]) == 0
        printed = capsys.readouterr().out
        assert printed in whole
        if name in ("fig3", "fig4"):  # a baselines config, not a sweep
            assert tomllib.loads(printed) == cfg and cfg["out"] == str(tmp_path / "runs" / series)
            continue
        back = resolve(tomllib.loads(printed))
        assert back.dumps() == resolve(cfg).dumps() == printed
        assert back.run.out == str(tmp_path / "runs" / series)
        m = back.model
        assert (m.T, m.lambda0, m.lambda1, m.activation) == (0.01, 1.0, 1.0, "erf")  # the paper's
        assert getattr(m, "depth", None) == 1 or (m.architecture, name) == ("conv", "cnn")
        if size == "full":
            assert back.data.P == back.data.P_test == 1000 and back.run.target_error is not None
            kinds = back.starts()  # two kinds of start, each a chain (issue 34)
            assert len(set(kinds)) == 2 and set(kinds) == set(paper.FULL_STARTS)
        if size == "quick":  # stops on accuracy or on a number of draws, never on wall time (issue 30, item 4)
            assert back.run.max_seconds is None and back.run.target_error is not None
            assert back.sampler.num_samples == paper.QUICK_DRAWS


def test_max_seconds_caps_every_width_of_a_figure(tmp_path, capsys):
    """--max-seconds puts run.max_seconds into every series of the figure (what a full-size run on 2 cores needs)."""
    argv = ["paper", "sm-overlaps", "--size", "full", "--out", str(tmp_path), "--print-config"]
    assert main(argv + ["--max-seconds", "600"]) == 0
    docs = capsys.readouterr().out.split("# ---- series ")[1:]
    assert len(docs) == len(paper.FIGURES["sm-overlaps"].series) >= 2
    assert all(tomllib.loads(d.split("\n", 1)[1])["run"]["max_seconds"] == 600.0 for d in docs)
    assert main(argv) == 0 and "max_seconds =" not in capsys.readouterr().out


def test_quick_widths_keep_the_loads_of_the_full_grid():
    full = {1000 / n for n in paper.N1_FULL}
    for fig in paper.FIGURES.values():
        for s in fig.series:
            loads = {paper._P["quick"] / n for n in s.widths("quick")}
            assert loads <= (full if s.alphas is None else set(s.alphas)) and len(loads) == (3 if s.alphas is None
                                                                                            else len(s.alphas))


def _check_files(folder):
    pngs = sorted(folder.glob("*.png"))
    assert pngs and all(mpimg.imread(p).ndim == 3 for p in pngs)
    for png in pngs:
        pdf = (png.parent / f"{png.stem}.pdf").read_bytes()
        assert pdf.startswith(b"%PDF") and b"%%EOF" in pdf[-32:]
    return pd.read_csv(folder / "data.csv")


def _check_baselines(name, out):
    """Fig. 3 / 4: every (P, N1) is in data.csv, and the best GP's test MSE is that of an independent solve at its
    hyperparameters."""
    table = _check_files(out / name)
    for series, cfg in paper.configs(name, "smoke", out).items():
        rows = table[table.series == series]
        for P in cfg["P"]:
            adam = rows[(rows.model == "adam") & (rows.P == P)]
            assert sorted(adam.N1) == cfg["baselines"]["N1"] and (adam.std_test_mse > 0).all()
            gp = rows[(rows.model == "best_gp") & (rows.P == P)].iloc[0]
            d = paper.baseline_figures._load(cfg, P)
            fit = rp.theory.solve(d.X, d.Y, N1=P, T=gp.mean_T, lambda0=gp.mean_lambda0, lambda1=gp.mean_lambda1,
                                  activation="relu", method="infinite_width")
            mse, _ = rp.baselines.scores(d.Y_test, fit.predict(d.X_test).mean)
            assert gp.mean_test_mse == pytest.approx(mse, rel=1e-6)
    assert "| N1 | Adam test MSE |" in (out / name / "summary.md").read_text()


def _check_outputs(name, out):
    """The files of one figure parse, their theory values are those of an independent solve, and the summary has a
    row per sampled width."""
    if name in ("fig3", "fig4"):
        return _check_baselines(name, out)
    folder = out / name
    table = _check_files(folder)
    assert set(table.theory) == set(rp.theory.METHODS) and np.isfinite(table.mc_mean).all()
    summary = (folder / "summary.md").read_text()
    for series, cfg in paper.configs(name, "smoke", out).items():
        sweep = load_sweep(out / "runs" / series)
        rows = table[(table.series == series) & (table.quantity == "eps_g") & (table.theory == "exact")]
        assert sorted(rows.N1) == sorted(cfg["model"]["N1"])
        d = sweep.data
        m = cfg["model"]
        conv = ({"conv": dict(image_shape=(m["image_shape"],) * 2, patch=m["patch"])}
                if m.get("architecture") == "conv" else {})
        for N1, pred in zip(rows.N1, rows.prediction):
            fit = rp.theory.solve(d.X, d.Y, N1=int(N1), T=0.01, lambda0=1.0, lambda1=1.0, activation="erf", **conv)
            assert pred == pytest.approx(fit.generalization_error(d.X_test, d.Y_test), rel=1e-6)
            assert f"### N1 = {N1:g} " in summary
        for rhat in rows.rhat:  # each width's R-hat of eps_g is in the summary's table (the two chains agree or not)
            assert f"| {rhat:.3f}" in summary
    _check_summary_deltas(folder)
    if (folder / "theory.csv").exists():
        curves = pd.read_csv(folder / "theory.csv")
        exact = curves[curves.theory == "exact"]
        drawn = {"exact", "infinite_width"} if name == "cnn" else set(rp.theory.METHODS)  # the CNN: derived methods
        assert set(curves.theory) == drawn and np.isfinite(exact.eps_g).all()


def summary_deltas(text: str) -> list[dict]:
    """Every Delta of a figure's ``summary.md``: one dict per table cell (series, N1, quantity, theory, the
    prediction and Delta in percent as written), from the tables under "## series: ..." and "### N1 = ..."."""
    cells, series, N1, theories = [], None, None, []
    for line in text.splitlines():
        if line.startswith("## "):
            series = line[3:].split(":")[0]
        elif line.startswith("### N1 = "):
            N1 = float(line.split()[3])
        elif line.startswith("| quantity |"):
            theories = [c.split(":")[0].strip() for c in line.strip("|").split("|")[4:]]
        elif line.startswith("| ") and theories and not line.startswith("|---"):
            parts = [c.strip() for c in line.strip().strip("|").split("|")]
            for theory, cell in zip(theories, parts[4:]):
                if cell != "–":
                    pred, delta, _ = cell.split(", ")
                    cells.append(dict(series=series, N1=N1, quantity=parts[0], theory=theory, prediction=float(pred),
                                      delta=float(delta.rstrip("%"))))
    return cells


def _check_summary_deltas(folder):
    """Each Delta in ``summary.md`` is (MC - theory)/|theory| recomputed from ``data.csv`` (to the 0.1% it is written
    with: the sign of a negative theory value included), as is data.csv's own ``delta``; returns the cells."""
    table = pd.read_csv(folder / "data.csv")
    recomputed = (table.mc_mean - table.prediction) / table.prediction.abs()
    np.testing.assert_allclose(table.delta[np.isfinite(recomputed)], recomputed[np.isfinite(recomputed)], rtol=1e-9)
    cells = summary_deltas((folder / "summary.md").read_text())
    assert cells, "no Delta found in summary.md"
    for c in cells:
        row = table[(table.series == c["series"]) & (table.N1 == c["N1"]) & (table.quantity == c["quantity"])
                    & (table.theory == c["theory"])]
        assert len(row) == 1, c
        r = row.iloc[0]
        assert c["prediction"] == pytest.approx(r.prediction, rel=1e-3, abs=1e-4), c
        delta = 100 * (r.mc_mean - r.prediction) / abs(r.prediction)
        assert abs(c["delta"] - delta) <= 0.05 + 1e-9 * abs(delta), (c, delta)
    return cells


def test_a_summary_s_delta_is_signed_over_the_absolute_theory(tmp_path):
    """A figure's summary.md gives each Delta as compare's (MC - theory)/|theory|, the one that data.csv holds: where the
    theory is negative (the anti-correlated readouts of an erf teacher) a sampled mean above it is a positive Delta.
    The sweep is made of made-up draws around the theory (no sampling), drawn as the supplement's overlap figure."""
    from renormpp.experiments.report import Sweep

    data = rp.datasets.synthetic(P=30, P_test=50, N0=10, D=2, teacher="erf_1hl", seed=0)
    fit = rp.theory.solve(data.X, data.Y, N1=20, T=0.01)
    rng = np.random.default_rng(0)
    pooled = []
    for N1 in (20, 40):
        th = fit.refit("exact", N1=N1)
        noise = 0.02 * rng.normal(size=(2, 400, 2, 2))
        draws = {"eps_g": th.generalization_error(data.X_test, data.Y_test) + 0.01 * rng.normal(size=(2, 400)),
                 "overlap": th.readout_overlap + 0.03 + (noise + noise.swapaxes(-1, -2)) / 2}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # made-up draws: ShortRunWarning and the like
            pooled.append(rp.diagnostics.compare(draws, fit.refit("infinite_width", N1=N1), data.X_test, data.Y_test))
    series = paper.Series("erf-D2")
    figure = paper.Figure("made-up draws around the theory", (("a", "overlaps", series),))
    folder = paper.draw("test", figure, {series.name: Sweep(None, data, fit, [], pooled)}, tmp_path / "test",
                        size="smoke", seconds=0.0)
    cells = _check_summary_deltas(folder)
    negative = [c for c in cells if c["prediction"] < 0 and c["theory"] == "exact"]
    assert negative and all(c["delta"] > 0 for c in negative)  # sampled 0.03 above a negative theory: Delta > 0


def _make_all(names, out):
    for name in names:
        paper.make(name, "smoke", out, progress=False)
        _check_outputs(name, out)


@pytest.mark.slow
def test_synthetic_figures_end_to_end_and_resumed(tmp_path):
    _make_all(SYNTHETIC, tmp_path)
    nc = sorted((tmp_path / "runs").glob("*/points/*/observables.nc"))
    stamps = [p.stat().st_mtime_ns for p in nc]
    assert main(["paper", "fig1a", "--size", "smoke", "--out", str(tmp_path), "--no-progress",
                 "--max-seconds", "100"]) == 0  # a cap is a key a resumed run may change
    assert [p.stat().st_mtime_ns for p in nc] == stamps  # resumed: read back, not resampled
    assert {p.stem for p in (tmp_path / "sm-mc").glob("*.png")} == {"sm-mc_eps_g", "sm-mc_overlap"}


@pytest.mark.slow
def test_real_data_figures_end_to_end(tmp_path):
    why = missing("mnist") or missing("cifar10")
    if why:
        pytest.skip(why)
    _make_all(REAL, tmp_path)
    # the supplement's overlap figure reads the sweeps of Fig. 1b and 1c: one folder each, sampled once
    assert {p.name for p in (tmp_path / "runs").iterdir()} == {s.name for f in REAL if f in paper.FIGURES
                                                               for s in paper.FIGURES[f].series} | {"fig3-a", "fig3-b"}
    assert {p.stem for p in (tmp_path / "sm-overlaps").glob("*.png")} == {
        "sm-overlaps_a_alpha1", "sm-overlaps_a_alpha0.1", "sm-overlaps_b", "sm-overlaps_c"}
    # the CNN figure: both architectures on each data set, the local overlaps of the MNIST CNN per width
    assert {p.stem for p in (tmp_path / "cnn").glob("*.png")} == {"cnn", "cnn_local_C40"}
    assert set(pd.read_csv(tmp_path / "cnn" / "theory.csv").series) == {"D=1", "D=2"}
    assert "* C = 40: exact: misses" in (tmp_path / "cnn" / "summary.md").read_text()


def test_all_prints_every_figure_s_configs(tmp_path, capsys):
    assert main(["paper", "all", "--print-config", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    expected = [(name, series) for name in paper.ALL for series in paper.configs(name, "quick", tmp_path)]
    assert "cnn" not in paper.ALL and set(paper.ALL) | {"cnn"} == set(paper.NAMES)
    assert out.count("# ---- series ") == len(expected)
    for name, series in expected:
        assert f"# ---- series {series}:" in out
