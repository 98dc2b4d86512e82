"""The experiment runner: outputs, resumption after SIGTERM, executors, config errors, the CLI."""
import copy
import io
import json
import os
import signal
import subprocess
import sys
import time
import tomllib
import warnings

import arviz as az
import matplotlib.image as mpimg
import numpy as np
import xarray as xr
import pandas as pd
import pytest

import renormpp as rp
from renormpp import experiments as ex
from renormpp.cli import main
from renormpp.experiments import config, demo
from stat_bounds import assert_z_within

TINY = {
    "data": {"name": "synthetic", "P": 30, "P_test": 20, "N0": 6, "D": 2},
    "model": {"N1": [8, 32], "T": 0.05},
    "sampler": {"kind": "mala", "step_size": 2e-3, "inner_steps": 5, "num_warmup": 20, "num_samples": 120,
                "num_chains": 2},
    "run": {"seeds": [0], "progress": False, "chunk_seconds": 0.5},
}


def tiny(out, **changes):
    cfg = copy.deepcopy(TINY)
    cfg["run"]["out"] = str(out)
    for key, value in changes.items():
        table, name = key.split("__")
        cfg[table][name] = value
    return cfg


def posterior(folder):
    dt = az.from_netcdf(folder / "observables.nc")
    return {k: np.asarray(dt["posterior"][k].values) for k in ("eps_g", "overlap")}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    return ex.run(tiny(out))


def test_every_output_exists_and_parses(sweep):
    assert tomllib.loads((sweep / "config.toml").read_text())["model"]["N1"] == [8, 32]
    data = rp.datasets.synthetic(P=30, P_test=20, N0=6, D=2)
    for N1 in (8, 32):
        folder = sweep / "points" / f"N1={N1}_seed=0"
        cfg = tomllib.loads((folder / "config.toml").read_text())
        assert cfg["model"]["N1"] == N1 and cfg["run"]["seed"] == 0
        assert json.loads((folder / "versions.json").read_text())["numpyro"]
        theory = json.loads((folder / "theory.json").read_text())
        fit = rp.theory.solve(data.X, data.Y, N1=N1, T=0.05, lambda0=1.0, lambda1=1.0, activation="erf")
        np.testing.assert_allclose(theory["exact"]["Q"], fit.Q, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(theory["exact"]["eps_g"], fit.generalization_error(data.X_test, data.Y_test),
                                   rtol=1e-8)
        assert theory["infinite_width"]["applies"] and theory["infinite_width"]["Q"] == [[1.0, 0.0], [0.0, 1.0]]
        dt = az.from_netcdf(folder / "observables.nc")
        assert dt["posterior"]["overlap"].dims == ("chain", "draw", "output", "output_")
        assert dt["posterior"]["eps_g"].shape == (2, 120)
        assert dt["sample_stats"]["accept_prob"].shape == (2, 120)
        comp = pd.read_csv(folder / "comparison.csv")
        compared = set(rp.theory.METHODS) | {"adaptive_kernel"}  # [theory] methods' default: every theory not sampled
        assert set(comp.theory) == compared and len(comp) == len(compared) * 4
        post = posterior(folder)
        mean_eps = comp[(comp.quantity == "eps_g")].mc_mean.iloc[0]
        assert 0 < mean_eps < 2 * post["eps_g"].mean()  # the mean after the thermalization cut
        assert "| eps_g |" in (folder / "comparison.md").read_text()
        for png in ("overlaps.png", "mc_analysis.png", "trace.png"):
            assert mpimg.imread(folder / png).ndim == 3
        result = json.loads((folder / "result.json").read_text())
        assert result["draws"] == 120 and result["chains"] == 2
        states = result["states"]  # rp.diagnostics.states of the point's quantities, after the cut
        # the weights are stored rounded to 4 decimals: their sum is 1 within half a unit of the 4th per weight
        assert states["count"] >= 1 and len(states["transitions"]) == 2
        assert sum(states["weights"]) == pytest.approx(1, abs=5e-5 * len(states["weights"]))
        assert ("## States" in (folder / "comparison.md").read_text()) == (states["count"] > 1)
        assert not (folder / "checkpoint.npz.tmp").exists() and not (folder / "checkpoint.npz").exists()
    summary = pd.read_csv(sweep / "summary.csv")
    assert list(summary.N1) == [8, 32] and (summary.states >= 1).all() and (summary.transitions >= 0).all()
    assert len(pd.read_csv(sweep / "pooled.csv")) == 2 * (len(rp.theory.METHODS) + 1) * 4
    for png in ("generalization_vs_N1.png", "overlaps_vs_N1.png", "overlaps.png"):
        assert mpimg.imread(sweep / png).ndim == 3
    assert "generalization_vs_N1.png" in (sweep / "report.md").read_text()


def test_each_point_measures_its_hidden_kernel_and_the_report_judges_it(sweep):
    """Issue 32: kernel.nc holds the streamed K_post (a PSD matrix near the prior kernel K at this size), kernel.json
    its diagnosis against the theory's K_post, and the point's comparison.md, the report and kernel_vs_N1.png say it."""
    data = rp.datasets.synthetic(P=30, P_test=20, N0=6, D=2)
    K = rp.kernels.nngp(data.X)
    moved = {}
    for N1 in (8, 32):
        folder = sweep / "points" / f"N1={N1}_seed=0"
        k = xr.load_dataset(folder / "kernel.nc")
        assert k.K_post.dims == ("train", "train_") and k.K_post_cross.shape == (30, 20)
        assert k.attrs["segments"] >= 3 and k.attrs["summands"] > 0
        assert np.linalg.eigvalsh(k.K_post.values)[0] > -1e-8
        assert 0 < np.diag(k.K_post.values).min() and np.diag(k.K_post.values).max() < 1  # erf features: |sigma| < 1
        moved[N1] = np.abs(k.K_post.values - K).max()
        diag = json.loads((folder / "kernel.json").read_text())
        assert len(diag["r"]) == 10 and np.all(np.isfinite(diag["r_err"])) and diag["verdict"]
        fit = rp.theory.solve(data.X, data.Y, N1=N1, T=0.05, method="exact")
        top = np.argsort(fit.spectrum.k)[::-1][:10]
        np.testing.assert_allclose(diag["r_theory"], rp.theory.hidden.spectrum_ratios(fit)[top], rtol=1e-6)
        assert "## Hidden kernel" in (folder / "comparison.md").read_text()
        assert json.loads((folder / "result.json").read_text())["kernel"]["verdict"] == diag["verdict"]
    assert moved[32] < moved[8]  # K_post tends to the prior kernel as N1 grows at fixed P
    text = (sweep / "report.md").read_text()
    assert "## The hidden kernel" in text and "kernel_vs_N1.png" in text
    assert mpimg.imread(sweep / "kernel_vs_N1.png").ndim == 3
    assert {"kernel_holds", "alignment_post", "eps_g_oracle"} <= set(pd.read_csv(sweep / "summary.csv").columns)


def test_the_report_opens_with_what_the_run_says(sweep):
    """The first report read as the theory failing and said nothing about why (issue 30, item 2): it opens with the
    eps_g figure and one table computed from the run (the signed gap to each theory and its z, against the pooled
    table), and gives one verdict per theory and what is known about such gaps."""
    text = (sweep / "report.md").read_text()
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| N1 | alpha = P/N1 | MC eps_g"))
    assert text.index("![generalization error") < text.index(lines[start]) < text.index("## Verdicts")
    assert not any(ln.startswith("|") for ln in lines[:start])  # the first table of the report
    head = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = {float(ln.split("|")[1]): [c.strip() for c in ln.strip("|").split("|")] for ln in lines[start + 2:start + 4]}
    pooled = pd.read_csv(sweep / "pooled.csv")
    eps = pooled[pooled.quantity == "eps_g"].set_index(["N1", "theory"])
    for N1 in (8, 32):
        for t in ("exact", "infinite_width"):
            row = eps.loc[(N1, t)]
            rel = (row.mc_mean - row.prediction) / abs(row.prediction)
            assert rows[N1][head.index(f"{t} Δ")] in (f"{rel:+.1%}", f"{rel:+.2%}"), (N1, t, rows[N1])
            assert rows[N1][head.index(f"{t} z")] == f"{row.z:+.1f}"
    verdict = next(ln for ln in lines if ln.startswith("* **exact** ("))
    agree = [eps.loc[(N1, "exact")].verdict.startswith("agrees") for N1 in (8, 32)]
    assert ("agrees within" in verdict) == all(agree) and ("What is known" in text) == (not all(agree))
    if not all(agree):
        assert "theory_beyond.py" in text and "07_validity_map" in text


def test_recorded_observables_are_those_of_the_network(sweep):
    """The draws are eps_g and v v^T/N1 of the sampled network: eps_g >= 0, overlaps symmetric and PSD."""
    post = posterior(sweep / "points" / "N1=8_seed=0")
    assert np.all(post["eps_g"] > 0)
    np.testing.assert_allclose(post["overlap"], np.swapaxes(post["overlap"], -1, -2), atol=1e-6)
    assert np.all(np.linalg.eigvalsh(post["overlap"].astype(np.float64)) > -1e-6)


@pytest.mark.parametrize("kind", ["kinetic", "mala"])
def test_exact_gibbs_steps_on_the_readout_from_a_config(tmp_path, kind):
    """v_sampling = 'gibbs' runs from a config for the Langevin kinds (the combined kernel's exactness is tested in
    tests/test_infer.py); kinetic with v frozen in its updates, the row mass on w and Neal's acceptance."""
    extra = dict(sampler__freeze_v=True, sampler__mass="rows", sampler__accept_shift=0.05) if kind == "kinetic" else {}
    res = ex.run(tiny(tmp_path, model__N1=[16], sampler__kind=kind, sampler__v_sampling="gibbs", **extra))
    folder = tmp_path / "points" / "N1=16_seed=0"
    written = tomllib.loads((folder / "config.toml").read_text())["sampler"]
    assert written["v_sampling"] == "gibbs" and all(written[k.split("__")[1]] == v for k, v in extra.items())
    if kind == "kinetic":
        described = json.loads((folder / "result.json").read_text())["sampler"]
        assert "dense on the rows of w" in described and "Neal's non-reversible acceptance (shift 0.05)" in described
    post = posterior(folder)
    assert post["eps_g"].shape == (2, 120) and np.all(np.isfinite(post["eps_g"])) and np.all(post["eps_g"] > 0)
    assert np.all(np.linalg.eigvalsh(post["overlap"].astype(np.float64)) > -1e-6)
    assert res is not None
    nuts = tiny(tmp_path / "nuts")
    nuts["sampler"] = {"kind": "nuts", "v_sampling": "gibbs"}
    with pytest.raises(ex.ConfigError, match="sampler.v_sampling = 'gibbs' works with kind = 'ula'"):
        ex.run(nuts)


def test_a_finished_point_is_not_recomputed(sweep):
    folder = sweep / "points" / "N1=8_seed=0"
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    t0 = time.perf_counter()
    ex.run(sweep)  # the output folder resumes the run
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before
    assert time.perf_counter() - t0 < 60


def test_extending_a_sweep_computes_only_the_new_points(sweep, tmp_path):
    import shutil

    out = tmp_path / "ext"
    shutil.copytree(sweep, out)
    before = (out / "points" / "N1=8_seed=0" / "result.json").stat().st_mtime_ns
    cfg = tiny(out, model__N1=[8, 32, 16])
    ex.run(cfg)
    assert (out / "points" / "N1=16_seed=0" / "result.json").exists()
    assert (out / "points" / "N1=8_seed=0" / "result.json").stat().st_mtime_ns == before
    with pytest.raises(ex.ConfigError, match="sampler.num_samples"):
        ex.run(tiny(out, sampler__num_samples=50))


def _checkpointed_draws(path):
    try:
        with np.load(path) as f:
            return int(f["n"])
    except (FileNotFoundError, EOFError, OSError, ValueError, KeyError):
        return 0


@pytest.mark.same_keys
def test_sigterm_then_resume_equals_an_uninterrupted_run(tmp_path):
    total = 1500
    # blocks of about 0.05 s: many blocks are left when the signal comes, however fast the machine
    changes = dict(model__N1=[16], sampler__num_samples=total, sampler__inner_steps=10, run__checkpoint_every=0.0,
                   run__chunk_seconds=0.05)
    path = tmp_path / "cfg.toml"
    path.write_text(ex.dumps(tiny(tmp_path / "killed", **changes)))
    folder = tmp_path / "killed" / "points" / "N1=16_seed=0"
    proc = subprocess.Popen([sys.executable, "-m", "renormpp.cli", "run", str(path), "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while _checkpointed_draws(folder / "checkpoint.npz") < 40 and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert "renormpp run" in err and "resume" in err.lower()
    assert "1 point(s) in progress saved their progress (N1=16_seed=0)" in err, err
    saved = _checkpointed_draws(folder / "checkpoint.npz")
    assert 40 <= saved < total and not (folder / "result.json").exists()

    # resumed here from the folder alone (what `renormpp run <folder>` calls; a new process was only its start-up)
    ex.run(tmp_path / "killed")
    assert (folder / "result.json").exists() and not (folder / "checkpoint.npz").exists()
    reference = ex.run(tiny(tmp_path / "straight", **changes))
    a = posterior(folder)
    b = posterior(reference / "points" / "N1=16_seed=0")
    assert a["eps_g"].shape == (2, total)
    np.testing.assert_array_equal(a["eps_g"], b["eps_g"])
    np.testing.assert_array_equal(a["overlap"], b["overlap"])
    # the streamed hidden kernel survives the interruption: the same thinned draws summed into the same cells as the
    # uninterrupted run's (each block sums in float32, so the rounding depends on where the blocks begin: rtol 1e-5;
    # one draw more or less moves the means by ~1e-3)
    ka, kb = (xr.load_dataset(f / "kernel.nc") for f in (folder, reference / "points" / "N1=16_seed=0"))
    assert ka.attrs["summands"] == kb.attrs["summands"] > 0 and ka.attrs["segments"] == kb.attrs["segments"]
    np.testing.assert_allclose(ka.K_post, kb.K_post, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(ka.first_layer, kb.first_layer, rtol=1e-5, atol=1e-7)


@pytest.mark.same_keys
@pytest.mark.parametrize("executor", ["process", "ray"])
def test_executors_give_the_same_results_as_in_process(sweep, tmp_path, executor):
    if executor == "ray":
        pytest.importorskip("ray", reason="the ray extra is part of the dev install")
    out = ex.run(tiny(tmp_path / executor), executor=executor, workers=2)
    for N1 in (8, 32):
        name = f"N1={N1}_seed=0"
        a, b = posterior(out / "points" / name), posterior(sweep / "points" / name)
        np.testing.assert_array_equal(a["eps_g"], b["eps_g"])
        np.testing.assert_array_equal(a["overlap"], b["overlap"])
        ta = json.loads((out / "points" / name / "theory.json").read_text())
        tb = json.loads((sweep / "points" / name / "theory.json").read_text())
        np.testing.assert_allclose(ta["exact"]["Q"], tb["exact"]["Q"], rtol=1e-10)


BAD = [
    (dict(model__N1=0), r"model.N1 = 0 is not allowed: expected an integer >= 1"),
    (dict(model__T=-1.0), r"model.T = -1.0 is not allowed: expected a finite number > 0"),
    (dict(model__activation="softplus"), r"model.activation = 'softplus'.*'erf', 'relu'"),
    (dict(model__width=3), r"unknown key model.width; allowed keys in \[model\]: N1, T, lambda0"),
    (dict(sampler__kind="hmc"), r"sampler.kind = 'hmc'.*'ula', 'mala', 'kinetic', 'tempered', 'nuts'"),
    (dict(sampler__max_tree_depth=5), r"sampler.max_tree_depth does not apply to sampler.kind = 'mala'"),
    (dict(data__name="imagenet"), r"data.name = 'imagenet'.*'synthetic', 'mnist'"),
    (dict(data__colour="red"), r"unknown key data.colour; allowed keys in \[data\]:.*teacher"),
    (dict(data__teacher="quadratic"), r"\[data\] name = 'synthetic': unknown teacher 'quadratic'"),
    (dict(run__executor="slurm"), r"run.executor = 'slurm'.*'inprocess', 'process', 'ray'"),
    (dict(run__seeds=[1, 1]), r"run.seeds.*repeated"),
    (dict(sampler__kind="kinetic", sampler__v_sampling="joint", sampler__freeze_v=True),
     r"freeze_v = true needs v_sampling = 'gibbs'"),
    (dict(sampler__kind="kinetic", sampler__mass="full"), r"sampler.mass = 'full'.*'diagonal', 'rows'"),
    (dict(sampler__kind="kinetic", sampler__accept_shift=2.5), r"sampler.accept_shift = 2.5.*>= 0 and < 2"),
    (dict(sampler__kind="kinetic", sampler__mass="rows", sampler__num_warmup=0),
     r"mass = 'rows' is learned in the warmup"),
]


@pytest.mark.parametrize("changes, message", BAD)
def test_a_bad_config_names_the_key_and_the_allowed_values(tmp_path, changes, message):
    with pytest.raises(ex.ConfigError, match=message):
        ex.run(tiny(tmp_path, **changes))
    assert not (tmp_path / "points").exists()


def test_missing_keys_and_tables(tmp_path):
    cfg = tiny(tmp_path)
    del cfg["model"]["N1"]
    with pytest.raises(ex.ConfigError, match="missing key model.N1"):
        ex.resolve(cfg)
    data = {"name": "synthetic"}
    with pytest.raises(ex.ConfigError, match="missing key run.out"):
        ex.resolve({"data": data, "model": {"N1": 10}, "sampler": {"step_size": 1e-3}})
    with pytest.raises(ex.ConfigError, match=r"unknown table\(s\) \['models'\]"):
        ex.resolve({"models": {}})
    with pytest.raises(ex.ConfigError, match="sampler.step_size is required for kind = 'mala'"):
        ex.resolve({"data": data, "model": {"N1": 10}, "sampler": {"kind": "mala", "num_warmup": 0}, "run": {"out": "x"}})
    with pytest.raises(ex.ConfigError, match="adapt_step_size = true needs warmup draws"):
        ex.resolve({"data": data, "model": {"N1": 10}, "sampler": {"adapt_step_size": True, "num_warmup": 0},
                    "run": {"out": "x"}})
    default = ex.resolve({"data": data, "model": {"N1": 10}, "run": {"out": "x"}}).sampler  # the recommended sampler
    assert default.kind == "kinetic" and default.num_warmup == 200 and default.adapt_step_size
    # kinetic Langevin on w's marginal, v integrated out (its observables are their expectations given w)
    assert default.v_sampling == "integrated" and default.rao_blackwell and not default.freeze_v
    ula = ex.resolve({"data": data, "model": {"N1": 10, "T": 0.02}, "sampler": {"kind": "ula"}, "run": {"out": "x"}})
    assert ula.sampler.step_size == pytest.approx(1e-3 * 0.02)  # the paper's epsilon = 1e-3


def test_the_theory_table_brings_the_theories_beyond_kernel_renormalization(tmp_path, monkeypatch):
    """[theory] methods: the adaptive kernel (by default) and the specialists (opted in, k from
    [theory.options.specialists]) are solved once per point, kept in theory.json (equal to rp.theory.solve's fit),
    compared in comparison.csv, result.json and the report's table (with the closest theory per width); a resumed
    point reads them back instead of solving again; a config that names an unknown theory, or the specialists
    without k, is refused with the key to set."""
    options = dict(k=1, iterations=1, num_warmup=40, num_samples=40, chains=2)
    cfg = tiny(tmp_path / "run", model__N1=[16])
    cfg["theory"] = {"methods": ["exact", "adaptive_kernel", "specialists"], "options": {"specialists": options}}
    out = ex.run(cfg)
    point = out / "points" / "N1=16_seed=0"
    kept = json.loads((point / "theory.json").read_text())["beyond"]
    data = rp.datasets.synthetic(P=30, P_test=20, N0=6, D=2)
    for name, opts in (("adaptive_kernel", {}), ("specialists", options)):
        fit = rp.theory.solve(data.X, data.Y, N1=16, T=0.05, method=name, **opts)
        assert kept[name]["applies"] and kept[name]["fit"]["converged"] == fit.converged
        if fit.converged:
            assert kept[name]["fit"]["eps_g"] == pytest.approx(fit.generalization_error(data.X_test, data.Y_test),
                                                               rel=1e-6)
        np.testing.assert_allclose(kept[name]["fit"]["Q"], fit.Q, rtol=1e-6)
    comp = pd.read_csv(point / "comparison.csv")
    assert {"adaptive_kernel", "specialists[k=1]"} <= set(comp.theory)
    result = json.loads((point / "result.json").read_text())
    assert {"exact", "adaptive_kernel", "specialists[k=1]"} <= set(result["eps_g_theory"])
    report = (out / "report.md").read_text()
    assert "| adaptive_kernel Δ | adaptive_kernel z |" in report and "| closest |" in report
    # resumed: the records are read back; a solve now would raise
    (point / "result.json").unlink()
    monkeypatch.setattr(rp.theory.specialists, "solve", lambda *a, **k: pytest.fail("solved again"))
    monkeypatch.setattr(rp.theory.adaptive_kernel, "solve", lambda *a, **k: pytest.fail("solved again"))
    ex.run(cfg)
    assert json.loads((point / "theory.json").read_text())["beyond"] == kept
    with pytest.raises(ex.ConfigError, match=r"theory.methods has \['nope'\]"):
        ex.resolve({**cfg, "theory": {"methods": ["nope"]}})
    with pytest.raises(ex.ConfigError, match=r"add \[theory.options.specialists\] with k = "):
        ex.resolve({**cfg, "theory": {"methods": ["specialists"]}})


def test_a_config_without_data_is_refused(tmp_path):
    """Without [data] it used to run synthetic P=1000 data silently."""
    with pytest.raises(ex.ConfigError, match=r"missing table \[data\]: name the data set, e.g. \[data\] name = "
                                             r"\"synthetic\""):
        ex.resolve({"model": {"N1": 10}, "run": {"out": "x"}})
    with pytest.raises(ex.ConfigError, match="missing key data.name"):
        ex.resolve({"data": {"P": 10}, "model": {"N1": 10}, "run": {"out": "x"}})


def test_cli_run_report_and_errors(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[data]\nname = 'synthetic'\n[model]\nN1 = [10]\nT = 'hot'\n")
    assert main(["run", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "model.T = 'hot' is not allowed" in capsys.readouterr().err
    broken = tmp_path / "broken.toml"
    broken.write_text("[model\nN1 = 3\n")
    assert main(["run", str(broken)]) == 2
    assert "not valid TOML" in capsys.readouterr().err
    assert main(["report", str(tmp_path)]) == 2

    good = tmp_path / "good.toml"
    good.write_text(ex.dumps(tiny(tmp_path / "cli", model__N1=[8])))
    assert main(["run", str(good), "--no-progress"]) == 0
    assert "# renormpp sweep" in capsys.readouterr().out
    (tmp_path / "cli" / "report.md").unlink()
    assert main(["report", str(tmp_path / "cli")]) == 0
    assert (tmp_path / "cli" / "report.md").exists()


def test_demo_config_is_a_valid_sweep(capsys):
    cfg = ex.resolve(demo.CONFIG)
    assert len(cfg.points()) >= 4 and cfg.sampler.kind in ("kinetic", "mala", "nuts", "ula")
    assert main(["demo", "--print-config"]) == 0
    printed = tomllib.loads(capsys.readouterr().out)
    assert ex.resolve(printed) == cfg


# ---- checkpoints: arrays in a versioned npz, no pickle ----------------------------------------------------------------
def _point(tmp_path, kind="kinetic"):
    sampler = {"kind": kind, "num_warmup": 10, "num_samples": 40, "num_chains": 2}
    if kind == "nuts":
        sampler["num_warmup"] = 5
    return ex.resolve(tiny(tmp_path, model__N1=[8]) | {"sampler": sampler}).points()[0]


@pytest.mark.parametrize("kind", ["kinetic", "nuts"])
def test_a_checkpoint_read_back_continues_with_identical_draws(tmp_path, kind):
    from renormpp.experiments import stages, store

    p = _point(tmp_path, kind)
    data = stages.load_data(p.data)
    chains, state = stages.start_chains(p, data)
    state, _, _ = chains.run(state, 15, length=20)  # one compiled block length (20) serves every run here
    ck = store.PointStore(tmp_path).checkpoint(template=state)
    ck.state, ck.warm, ck.n, ck.seconds = state, 10, 5, 1.5
    ck.add({"eps_g": np.ones((2, 5))}, {"diverging": np.zeros((2, 5), bool)})
    ck.add({"eps_g": np.full((2, 10), 2.0)}, {"step_size": np.full((2, 10), 0.1)}, warmup=True)
    ck.save()
    straight = chains.run(state, 20)[1]
    fresh_chains, template = stages.start_chains(p, data)
    back = store.PointStore(tmp_path).checkpoint(template=template)
    assert (back.warm, back.n, back.seconds) == (10, 5, 1.5)
    np.testing.assert_array_equal(back.joined()[0]["eps_g"], np.ones((2, 5)))
    np.testing.assert_array_equal(back.joined(warmup=True)[0]["eps_g"], np.full((2, 10), 2.0))  # what a warmup saw
    np.testing.assert_array_equal(back.joined(warmup=True)[1]["step_size"], np.full((2, 10), 0.1))
    resumed = fresh_chains.run(back.state, 20)[1]
    for name in ("eps_g", "overlap"):
        np.testing.assert_array_equal(resumed[name], straight[name])


def test_a_bad_checkpoint_is_refused_with_the_file_and_the_remedy(tmp_path):
    from renormpp.experiments import stages, store

    p = _point(tmp_path)
    data = stages.load_data(p.data)
    _, state = stages.start_chains(p, data)
    ck = store.PointStore(tmp_path).checkpoint(template=state)
    ck.save()
    path = tmp_path / "checkpoint.npz"
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])  # truncated, as by a full disk or a killed copy
    with pytest.raises(store.CheckpointError, match=r"checkpoint .*checkpoint.npz cannot be read.*truncated or "
                                                    r"corrupt. Delete it to restart"):
        store.PointStore(tmp_path).checkpoint(template=state)
    with np.load(io.BytesIO(good)) as f:
        arrays = {k: f[k] for k in f.files}
    np.savez(path, **(arrays | {"format_version": 99}))
    with pytest.raises(store.CheckpointError, match=r"checkpoint.npz has format version 99; this renormpp reads "
                                                    rf"version {store.CHECKPOINT_VERSION}"):
        store.PointStore(tmp_path).checkpoint(template=state)
    np.savez(path, **{k: v for k, v in arrays.items() if k != "state/3"})
    with pytest.raises(store.CheckpointError, match="holds the state of another sampler"):
        store.PointStore(tmp_path).checkpoint(template=state)
    path.unlink()
    (tmp_path / "checkpoint.pkl").write_bytes(b"\x80\x05old pickle")
    with pytest.raises(store.CheckpointError, match=r"checkpoint.pkl is a checkpoint of an earlier renormpp \(a pickle"):
        store.PointStore(tmp_path).checkpoint(template=state)


def test_a_stopped_sweep_says_which_points_saved_progress_and_which_had_not_started(tmp_path, monkeypatch):
    """It used to say '8 point(s) saved their progress' when only one had started."""
    from renormpp.experiments import executors, signals

    class Stopped:
        def map(self, fn, jobs):
            jobs = list(jobs)
            yield jobs[0], None, signals.Interrupted("stopped after 10 draws")
            for job in jobs[1:]:
                yield job, None, signals.NotStarted("not started")

    monkeypatch.setattr(executors, "get", lambda *a, **k: Stopped())
    with pytest.raises(ex.Interrupted, match=r"stopped: 1 point\(s\) in progress saved their progress \(N1=8_seed=0\); "
                                             r"2 had not started\. Resume with: renormpp run"):
        ex.run(tiny(tmp_path, model__N1=[8, 16, 32]))


def test_sampling_stops_on_accuracy_or_on_a_time_budget(tmp_path):
    """run.target_error: sampling stops at the first block where eps_g's relative error and every overlap's error
    are reached with tau resolved (checked against an independent error estimate of the stored draws);
    run.max_seconds stops it on time. Both are recorded in result.json and the summary."""
    import renormpp.experiments.stages as stages

    base = {"data": {"name": "synthetic", "P": 30, "P_test": 20, "N0": 6, "D": 2},
            "model": {"N1": [8], "T": 0.05},
            "sampler": {"kind": "kinetic", "num_warmup": 50, "num_samples": 20000},
            "run": {"progress": False, "chunk_seconds": 0.5}}
    target = {"eps_g": 0.02, "overlap": 0.05}
    out = rp.experiments.run({**base, "run": {**base["run"], "out": str(tmp_path / "a"), "target_error": target}})
    res = json.loads((out / "points" / "N1=8_seed=0" / "result.json").read_text())
    assert res["stopped"] == "target_error" and res["draws"] < 20000
    post = az.from_netcdf(out / "points" / "N1=8_seed=0" / "observables.nc")["posterior"]
    draws = {"eps_g": post["eps_g"].values, "overlap": post["overlap"].values}
    eps = rp.diagnostics.error_of_mean(draws["eps_g"])
    assert eps.reliable and eps.error <= 0.02 * abs(eps.mean)
    for a, b in ((0, 0), (0, 1), (1, 1)):
        e = rp.diagnostics.error_of_mean(draws["overlap"][..., a, b])
        assert e.reliable and e.error <= 0.05
    assert pd.read_csv(out / "summary.csv").stopped.tolist() == ["target_error"]
    # where it stops does not depend on the machine's speed: blocks of another length (chunk_seconds sizes them from
    # the measured time per draw) stop at the same draw, a point of the fixed check grid (issue 30, item 4)
    again = rp.experiments.run({**base, "run": {**base["run"], "out": str(tmp_path / "c"), "target_error": target,
                                                "chunk_seconds": 0.02}})
    assert json.loads((again / "points" / "N1=8_seed=0" / "result.json").read_text())["draws"] == res["draws"]
    grid = [stages.next_check(0)]
    while grid[-1] < res["draws"]:
        grid.append(stages.next_check(grid[-1]))
    assert res["draws"] == grid[-1] and grid[:4] == [10, 20, 30, 40] and grid[-1] - grid[-2] <= grid[-2] // 10 + 10  # ~10% apart, rounded up to tens
    # an early part of the same draws had not reached it: the check is of the errors, not of the number of draws
    cfg = rp.experiments.resolve({**base, "run": {**base["run"], "out": str(tmp_path / "a"), "target_error": target}})
    assert stages.accuracy(draws, cfg.run.target_error)[0]
    assert not stages.accuracy({k: v[:, :40] for k, v in draws.items()}, cfg.run.target_error)[0]
    # the same draws with the second chain's eps_g moved by 5 of its standard deviations: the errors and tau are as
    # small as before, but the chains disagree (their means differ by many error bars), so it is not reached
    held = dict(draws, eps_g=draws["eps_g"] + np.array([[0.0], [5 * draws["eps_g"].std()]]))
    assert not stages.accuracy(held, cfg.run.target_error)[0]
    # and one overlap entry that drifts stops it too, though only eps_g has a target: a trend that lasts to the end of
    # the run, which no thermalization cut removes (a transient that has died out before the end is the cut's to
    # remove, and then the rule rightly holds: 20 sd x (1 - t)^4 was cut at n/2 and left z = 3.0 < 3.5 on one run)
    moving = draws["overlap"].copy()
    n = moving.shape[1]
    moving[..., 0, 1] += 6 * draws["overlap"][..., 0, 1].std() * np.linspace(1, 0, n)
    only_eps = rp.experiments.config.TargetError(eps_g=0.02)
    assert stages.accuracy(draws, only_eps)[0]
    assert not stages.accuracy(dict(draws, overlap=moving), only_eps)[0]

    out = rp.experiments.run({**base, "run": {**base["run"], "out": str(tmp_path / "b"), "max_seconds": 1.0}})
    res = json.loads((out / "points" / "N1=8_seed=0" / "result.json").read_text())
    assert res["stopped"] == "max_seconds" and res["draws"] < 20000 and res["sampling_seconds"] >= 1.0
    # a budget spent in the warmup, blocks of one draw: the draws a comparison needs are still taken
    spent = {**base, "sampler": {**base["sampler"], "warmup": "fixed", "num_warmup": 30},
             "run": {**base["run"], "out": str(tmp_path / "d"), "max_seconds": 1e-3, "chunk_seconds": 1e-6}}
    res = json.loads((rp.experiments.run(spent) / "points" / "N1=8_seed=0" / "result.json").read_text())
    assert res["stopped"] == "max_seconds" and res["draws"] == stages.MIN_DRAWS


def test_an_adaptive_warmup_ends_early_and_a_fixed_one_does_not(tmp_path):
    """sampler.warmup = 'adaptive' (the default): a tiny network relaxes in a few draws, so the warmup ends well before
    num_warmup, recorded in result.json and the sampler's description; 'fixed' runs all num_warmup draws. Both give
    exact kernels after the warmup: their eps_g agree within the bound that two exact runs exceed with probability
    1e-4 (stat_bounds: |z| < 3.89, their combined error; it was 4 by hand). Seeds 0-5 on correct code: |z| at most
    1.56."""
    base = {"data": {"name": "synthetic", "P": 30, "P_test": 20, "N0": 6, "D": 2}, "model": {"N1": [8], "T": 0.05},
            "run": {"progress": False}}
    res = {}
    for warmup in ("adaptive", "fixed"):
        cfg = base | {"sampler": {"kind": "kinetic", "num_warmup": 200, "num_samples": 1500, "warmup": warmup},
                      "run": {**base["run"], "out": str(tmp_path / warmup)}}
        out = rp.experiments.run(cfg)
        res[warmup] = json.loads((out / "points" / "N1=8_seed=0" / "result.json").read_text())
    assert 20 < res["adaptive"]["warmup_draws"] < 120 and res["fixed"]["warmup_draws"] == 200
    assert f"adaptive warmup: {res['adaptive']['warmup_draws']} of at most 200 draws" in res["adaptive"]["sampler"]
    assert f"ends at draw {res['adaptive']['warmup_draws']}" in res["adaptive"]["warmup_log"][-1]
    a, f = res["adaptive"], res["fixed"]
    assert_z_within((a["eps_g"] - f["eps_g"]) / np.hypot(a["eps_g_error"], f["eps_g_error"]),
                    what=f"eps_g after an adaptive and a fixed warmup ({a['eps_g']:.4g}, {f['eps_g']:.4g})")


def test_a_finite_size_scaling_sweep_reports_the_extrapolation(tmp_path):
    """[scaling]: P and N1 grow together (alpha fixed, N0 too with grow_N0); extrapolation.csv holds, for every
    theory, the weighted straight-line fit of Delta against 1/N1 in scaling.csv (checked with numpy's polyfit), and
    report.md and scaling.png show it. Its first scale is the `sweep` fixture's N1 = 8 point (TINY), whose compiled
    programs the persistent compilation cache already holds."""
    cfg = tiny(tmp_path / "fss", model__N1=[8]) | {"scaling": {"scales": [1, 2, 3], "grow_N0": True}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = rp.experiments.run(cfg)
    table = pd.read_csv(out / "scaling.csv")
    assert sorted(table.N1.unique()) == [8, 16, 24]
    for folder in (out / "points").iterdir():
        point = tomllib.loads((folder / "config.toml").read_text())
        scale = point["model"]["N1"] // 8  # P = 30 and N0 = 6 at N1 = 8: alpha and N0 / N1 fixed
        assert point["data"]["P"] == 30 * scale and point["data"]["N0"] == 6 * scale
    fits = pd.read_csv(out / "extrapolation.csv")
    assert {"exact", "infinite_width"} <= set(fits.theory)
    sub = table[(table.quantity == "eps_g") & (table.theory == "exact")].sort_values("N1")
    slope, intercept = np.polyfit(1.0 / sub.N1, sub.delta_rel, 1, w=1.0 / sub.delta_rel_error)
    row = fits[(fits.quantity == "eps_g") & (fits.theory == "exact")].iloc[0]
    np.testing.assert_allclose([row.delta_inf, row.slope], [intercept, slope], rtol=1e-8, atol=1e-12)
    assert "## Extrapolation to 1/N1 = 0" in (out / "report.md").read_text()
    assert mpimg.imread(out / "scaling.png").ndim == 3


def test_progress_off_a_terminal_is_one_line_per_block_and_point(tmp_path, capsys):
    """Where stderr is a log file or a pipe, a tqdm bar's redraws became thousands of lines (issue 30, item 8): there
    progress is one plain line per block of draws and one per finished point."""
    from renormpp import progress

    out = ex.run(tiny(tmp_path, run__progress=True, model__N1=[8], run__chunk_seconds=5.0))
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = [ln for ln in err.splitlines() if "warmup+sampling" in ln or ln.startswith("points")]
    blocks = [ln for ln in lines if "warmup+sampling" in ln]
    assert blocks[-1].split(": ")[1].startswith("140/140 it (100%)")
    # the adaptive warmup decides every 10 draws (2 blocks here); after it the blocks grow toward chunk_seconds (5 s:
    # all 120 draws at once), where they used to stay at 10 draws (12 more blocks)
    assert 2 <= len(blocks) <= 5, blocks
    assert lines[-1].startswith("points: 1/1 point (100%)") and "N1=8_seed=0: eps_g" in lines[-1]
    assert (out / "report.md").exists()
    assert isinstance(progress.bar(total=3, desc="x"), progress.LineBar)  # pytest's captured stderr: no terminal


# ---- samplers: one record per kind ---------------------------------------------------------------------------------
def test_a_sampler_kind_is_one_record(tmp_path, monkeypatch):
    """A toy kind (ULA under another name, with a table of its own) registered here, no module edited: the config
    reads its table (its defaults, its keys; another kind's key refused with the toy's keys named), and a point runs
    through its builder and records its statistics; once it is gone the config refuses the kind again."""
    from typing import ClassVar, Literal

    from renormpp.experiments import samplers

    class ToyConfig(samplers.SamplerTable):
        kind: Literal["toy"]
        step_size: float = 1e-3
        inner_steps: int = 1
        default_num_warmup: ClassVar[int] = 0

    built = []

    def build(s, parts):
        built.append(s)
        return rp.infer.Langevin(parts.model, step_size=s.step_size, inner_steps=s.inner_steps,
                                 observables=parts.observables, warn_divergences=False)

    monkeypatch.setitem(samplers.SAMPLERS, "toy", samplers.SamplerKind("toy", ToyConfig, build, ("diverging",),
                                                                       "a toy ULA"))
    cfg = tiny(tmp_path, sampler__kind="toy", model__N1=8)
    del cfg["sampler"]["num_warmup"]
    point = ex.resolve(cfg).points()[0]
    assert type(point.sampler) is ToyConfig and point.sampler.num_warmup == 0 and point.sampler.inner_steps == 5
    with pytest.raises(ex.ConfigError, match="sampler.friction does not apply to sampler.kind = 'toy'; its own keys "
                                             "are step_size, inner_steps"):
        ex.resolve(tiny(tmp_path, sampler__kind="toy", sampler__friction=1.0))
    result = ex.run_point(point, tmp_path / "point", progress=False)
    assert len(built) == 1 and result["status"] == "ok" and result["draws"] == 120
    assert result["sampler"].startswith("ULA, step_size=0.002") and result["accept_prob"] is None
    stats = az.from_netcdf(tmp_path / "point" / "observables.nc")["sample_stats"]
    assert set(stats.data_vars) == {"diverging"}
    monkeypatch.undo()
    with pytest.raises(ex.ConfigError, match="sampler.kind = 'toy' is not allowed: choose one of 'ula', 'mala', "
                                             "'kinetic', 'tempered', 'nuts'"):
        ex.resolve(tiny(tmp_path, sampler__kind="toy"))


def test_an_old_config_key_reads_under_its_new_name(tmp_path):
    """sampler.adaptation (before issue 31) is sampler.pooling; giving both is refused."""
    assert ex.resolve(tiny(tmp_path, sampler__adaptation="per_chain")).sampler.pooling == "per_chain"
    assert ex.resolve(tiny(tmp_path)).sampler.pooling == "pooled"
    with pytest.raises(ex.ConfigError, match="sampler.adaptation is the earlier name of sampler.pooling"):
        ex.resolve(tiny(tmp_path, sampler__adaptation="per_chain", sampler__pooling="pooled"))


def test_the_sampling_blocks_end_on_the_check_grid_and_grow_to_chunk_seconds():
    """The block sizing of the sampling stage: probe blocks of 10 draws, then about chunk_seconds (at most the compiled
    length); at most 10 while an adaptive warmup decides; sampling blocks end on the check grid of stop on accuracy;
    a checkpoint at the warmup's end, at the last draw and after checkpoint_every seconds."""
    from types import SimpleNamespace

    from renormpp.experiments import stages

    ck = SimpleNamespace(warm=0, n=0, saved_at=time.monotonic())
    blocks = stages.Blocks.start(ck, 30, 500)
    assert (blocks.length, blocks.check, blocks.size) == (500, 10, 10)
    assert blocks.next(ck, target_error=None) == (10, True) and not blocks.done(ck)
    for expected in (10, 200):  # 0.01 s a draw, 2 s a block: the second resize leaves the probes
        blocks.resize(0.01, 2.0, adaptive_warming=False)
        assert blocks.size == expected
    blocks.resize(0.001, 2.0, adaptive_warming=False)
    assert blocks.size == 500  # no longer than the compiled length
    ck.warm = 25
    assert blocks.next(ck, target_error=None) == (5, True)  # the warmup's last draws
    blocks.resize(0.01, 2.0, adaptive_warming=True)
    assert blocks.size == 10
    ck.warm, blocks.size = 30, 200
    assert blocks.next(ck, target_error=None) == (200, False)
    assert blocks.next(ck, target_error=object()) == (10, False)  # to the check at 10 draws
    ck.n, blocks.check = 300, stages.next_check(290)
    assert blocks.next(ck, target_error=object()) == (blocks.check - 300, False)
    ck.n = 500
    assert blocks.done(ck)
    run = SimpleNamespace(checkpoint_every=300.0)
    assert stages._checkpoint_due(ck, run, end_of_warmup=False, total=500)  # the last draw
    assert not stages._checkpoint_due(ck, run, end_of_warmup=False, total=600)
    assert stages._checkpoint_due(ck, run, end_of_warmup=True, total=600)
    assert stages._checkpoint_due(ck, SimpleNamespace(checkpoint_every=0.0), end_of_warmup=False, total=600)


def test_compiled_programs_are_kept_between_runs(tmp_path):
    """run.compilation_cache: 'auto' keeps a point's compiled programs in the user's cache folder (XDG_CACHE_HOME), so
    that a rerun finds them; 'off' writes nothing; a JAX_COMPILATION_CACHE_DIR of the user's own is kept. Run as
    `renormpp run` in a fresh process, as a user runs it (this process's JAX already has the test session's cache)."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env |= {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}
    folder = tmp_path / "xdg" / "renormpp" / "jax"

    def run(name, setting, **extra):
        cfg = tiny(tmp_path / name, model__N1=[8]) | {"sampler": {**TINY["sampler"], "num_samples": 20}}
        cfg["run"] |= {"compilation_cache": setting, "kernel_diagnosis": False}
        path = tmp_path / f"{name}.toml"
        path.write_text(config.resolve(cfg).dumps())
        out = subprocess.run([sys.executable, "-m", "renormpp.cli", "run", str(path)], capture_output=True,
                             text=True, env=env | extra, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]

    run("off", "off")
    assert not folder.exists()
    run("auto", "auto")
    kept = sorted(p.name for p in folder.iterdir())
    assert any("block" in name for name in kept), kept  # the blocks of draws, compiled once for every rerun
    own = tmp_path / "own"
    run("own", "auto", JAX_COMPILATION_CACHE_DIR=str(own))
    assert any(own.iterdir()) and sorted(p.name for p in folder.iterdir()) == kept
