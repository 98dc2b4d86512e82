"""Nothing silently wrong (issue 14): every way a number could be wrong without a word, and the word it now gets."""
import copy
import json
import subprocess
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import pandas as pd
import pytest
from numpyro.infer import MCMC

import renormpp as rp
from renormpp import diagnostics as dg
from renormpp import experiments as ex

matplotlib.use("Agg")

TINY = {
    "data": {"name": "synthetic", "P": 30, "P_test": 20, "N0": 6, "D": 2},
    "model": {"N1": [8], "T": 0.05},
    "sampler": {"kind": "mala", "step_size": 2e-3, "inner_steps": 5, "num_warmup": 20, "num_samples": 120,
                "num_chains": 2},
    "run": {"seeds": [0], "progress": False, "chunk_seconds": 0.5},
}


def tiny(out, **sampler):
    cfg = copy.deepcopy(TINY)
    cfg["run"]["out"] = str(out)
    cfg["sampler"] = {**cfg["sampler"], **sampler}
    return cfg


# ---- set-up ---------------------------------------------------------------------------------------------------------
def test_no_notebook_or_test_reads_a_path_of_this_workspace():
    """Notebooks and tests find real data through rp.datasets' rules, never through ../shared (a user's clone has
    none); tests/realdata.py is the one place that knows the workspace's folder, to set $RENORMPP_DATA."""
    root = Path(__file__).resolve().parents[1]
    offenders = [p.name for p in [*root.glob("notebooks/*.ipynb"), *root.glob("tests/*.py")]
                 if p.name not in ("realdata.py", "test_trust.py") and "shared" in p.read_text()
                 and ("shared/data" in p.read_text() or '"shared"' in p.read_text())]
    assert not offenders, offenders


def test_missing_data_is_named_with_the_files_and_the_folders(tmp_path, monkeypatch):
    import realdata

    monkeypatch.setenv("RENORMPP_DATA", str(tmp_path))
    why = realdata.missing("mnist")
    assert why and "train-images-idx3-ubyte" in why and str(tmp_path) in why
    with pytest.raises(FileNotFoundError, match="data_batch_1.*" + str(tmp_path)):
        rp.datasets.locate("cifar10")


# ---- silent wrong results -------------------------------------------------------------------------------------------
def test_a_constant_series_gets_no_error_bar():
    """A frozen chain used to be reliable=True with error 0."""
    for estimate in (dg.gamma_method, dg.ess_error, dg.blocking):
        with pytest.warns(dg.FrozenChainWarning, match=r"chain\(s\) \[0, 1\] of 2 did not move"):
            e = estimate(np.full((2, 200), 0.3))
        assert not e.reliable and np.isnan(e.error) and e.mean == pytest.approx(0.3)
    moving = np.random.default_rng(0).standard_normal((2, 2000))
    moving[1] = 1.0  # one of two chains frozen: the pooled error does not hold either
    with pytest.warns(dg.FrozenChainWarning, match=r"chain\(s\) \[1\] of 2"):
        assert not dg.gamma_method(moving).reliable


def test_a_frozen_mala_chain_fails_its_health_check_and_its_point():
    """MALA at a fixed step far too large: acceptance 0, no divergence, the chain frozen. It used to be reported
    with error bars; now compare() warns, gives no verdict, and a sweep marks the point failed."""
    d = rp.datasets.synthetic(P=30, P_test=20, N0=6, D=2)
    kernel = rp.infer.Langevin(rp.models.one_hidden_layer, step_size=1.0, adjust=True, inner_steps=5,
                               observables=rp.observables.default(d.X_test, d.Y_test))
    mcmc = MCMC(kernel, num_warmup=0, num_samples=60, num_chains=2, chain_method="vectorized", progress_bar=False)
    mcmc.run(jax.random.PRNGKey(0), d.X, d.Y, N1=8, T=0.05, extra_fields=("accept_prob", "diverging"))
    fit = rp.theory.solve(d.X, d.Y, N1=8, T=0.05)
    with pytest.warns(dg.SamplerWarning, match=r"accepted 0.000.*below 0.1"):
        ds = dg.compare(mcmc, fit, d.X_test, d.Y_test)
    assert not ds.attrs["sampler_ok"] and not bool(ds.reliable.any())
    assert set(ds.verdict.sel(theory="exact").values) == {"no verdict: the sampler failed"}
    assert "SAMPLER FAILED" in ds.attrs["summary"] and "MALA, step_size=1" in ds.attrs["summary"]


def test_an_acceptance_that_falls_after_the_warmup_is_named_and_a_steady_one_is_not():
    """Fig. 1a at alpha = 10 with a 200-draw warmup: the acceptance at the warmup's step fell from 0.53 (first tenth
    of 11 000 draws) to 0.12 (last quarter; benchmarks/README.md). Draws of accept_prob that fall so warn
    (StaleStepWarning, with the numbers and the remedy) and leave the point healthy; 200 seeds of steady acceptance
    (mean 0.8) never warn, nor does a fall of 0.21, nor fewer than 200 draws."""
    rng = np.random.default_rng(0)
    n = 4000
    falling = np.clip(np.linspace(0.8, 0.1, n) + 0.1 * rng.standard_normal((2, n)), 0, 1)
    with pytest.warns(dg.StaleStepWarning, match=r"fell from 0.7\d \(first tenth.*to 0.1\d \(last quarter\).*"
                                                 r"sampler.num_warmup"):
        health = dg.sampler_health({"accept_prob": falling})
    assert health.ok
    steady = [dg.acceptance_fell(np.clip(0.8 + 0.15 * r.standard_normal((2, 400)), 0, 1))
              for r in map(np.random.default_rng, range(200))]
    assert steady == [None] * 200
    assert dg.acceptance_fell(np.linspace(0.9, 0.65, n)[None]) is None  # 0.89 and 0.68: below MAX_ACCEPT_FALL
    assert dg.acceptance_fell(falling[:, :150]) is None


def test_a_failed_point_is_marked_and_not_compared_in_the_report(tmp_path):
    """ULA at a step where every draw diverges, and a frozen MALA: both points 'failed' in result.json, summary.csv
    and the report, which shows the acceptance and does not compare them; their figures say the chain did not move."""
    import pandas as pd

    cfg = tiny(tmp_path / "sweep", kind="mala", adapt_step_size=False, step_size=1.0)
    cfg["run"]["seeds"] = [0, 1]  # two points of one shape: one compilation serves both
    with pytest.warns(dg.SamplerWarning):
        out = ex.run(cfg)
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary.status) == ["failed", "failed"] and "accept_prob" in summary
    assert (summary.accept_prob < 0.1).all()
    report = (out / "report.md").read_text()
    assert "2 point(s) failed and are not compared" in report and "No point finished with a working sampler" in report
    result = json.loads((out / "points" / "N1=8_seed=0" / "result.json").read_text())
    assert result["status"] == "failed" and "accepted" in result["problems"]
    assert "the sampler failed" in (out / "points" / "N1=8_seed=0" / "comparison.md").read_text()

    ula = tiny(tmp_path / "ula", kind="ula", step_size=10.0)
    with pytest.warns(rp.infer.DivergenceWarning):
        res = json.loads((ex.run(ula) / "points" / "N1=8_seed=0" / "result.json").read_text())
    assert res["status"] == "failed" and res["divergences"] == 2 * 120 and "diverged in 100%" in res["problems"]


def test_the_report_gives_a_verdict_per_quantity(tmp_path):
    out = ex.run(tiny(tmp_path, num_samples=1500))
    report = (out / "report.md").read_text()
    assert "| N1 | alpha = P/N1 | MC eps_g ± sigma | exact Δ | exact z |" in report
    # one sentence per theory that applies, saying what pooled.csv's verdict says (whichever it is on these draws)
    pooled = pd.read_csv(out / "pooled.csv")
    eps = pooled[pooled.quantity == "eps_g"].set_index("theory")
    pct = lambda x, sign="+": f"{x:{sign}.1%}" if abs(x) >= 0.01 else f"{x:{sign}.2%}"  # noqa: E731
    sentences = {line.split("**")[1]: line for line in report.splitlines() if line.startswith("* **")}
    for theory, row in eps.iterrows():
        if row.verdict == "does not apply":
            assert theory not in sentences
            continue
        said = sentences[theory]
        if row.verdict.startswith("agrees"):
            assert f"agrees within {pct(abs(row.delta), '')} at every width (largest |z| {abs(row.z):.1f})" in said
        elif row.verdict.startswith("deviates"):
            assert f"deviates by {pct(row.delta)} at N1 = 8 (z = {row.z:+.1f})" in said, (said, row.verdict)
        else:
            assert row.verdict.startswith("no verdict: ")
            assert f"no verdict at N1 = 8 ({row.verdict.split(': ', 1)[1]})" in said
    assert "exact" in sentences
    assert "sampler: MALA, step_size=" in report  # the sampler and its step, beside every width
    md = (out / "points" / "N1=8_seed=0" / "comparison.md").read_text()  # the verdict per quantity, per point
    assert "| quantity | MC | exact | verdict |" in md and (("agrees (z = " in md) or ("deviates by " in md))


def test_observables_check_their_test_set():
    d = rp.datasets.synthetic(P=10, P_test=5, N0=3, D=2)
    bad = d.X_test.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="X_test contains 1 NaN or inf"):
        rp.observables.default(bad, d.Y_test)
    with pytest.raises(ValueError, match="X_test contains 1 NaN or inf"):
        rp.readout.rao_blackwell(d.X, d.Y, bad, d.Y_test, T=0.1, lambda1=1.0)
    params = {"w": jnp.ones((4, 3)), "v": jnp.ones((2, 4))}
    with pytest.raises(ValueError, match="X_test has 5 features per row but the network's first layer takes N0 = 3"):
        rp.observables.default(np.ones((5, 5)), d.Y_test)(params)
    with pytest.raises(ValueError, match="Y_test has D = 3 outputs but the network's readout v has 2"):
        rp.observables.default(d.X_test, np.ones((5, 3)))(params)


def test_ula_at_a_step_too_large_for_its_bias_is_flagged():
    """ULA's bias cannot be seen from its own chain: a warning at a step above the documented bound, and the
    sampler and step in compare's summary."""
    d = rp.datasets.synthetic(P=100, P_test=50, N0=20, D=2)
    kw = dict(N1=50, T=0.01)

    def run(h):
        kernel = rp.infer.Langevin(rp.models.one_hidden_layer, step_size=h, inner_steps=5,
                                   observables=rp.observables.default(d.X_test, d.Y_test))
        mcmc = MCMC(kernel, num_warmup=0, num_samples=60, progress_bar=False)
        mcmc.run(jax.random.PRNGKey(0), d.X, d.Y, **kw)
        return kernel, mcmc

    with warnings.catch_warnings():
        warnings.simplefilter("error", rp.infer.ULABiasWarning)
        kernel, _ = run(1e-6)  # far below the bound: no warning
    bound = rp.infer.ULA_BIAS_BOUND / kernel.curvature
    with pytest.warns(rp.infer.ULABiasWarning, match=r"ULA with step_size=.* is biased.*h\*curvature = 1"):
        _, mcmc = run(10 * bound)
    # the curvature is that of U: checked against the Hessian's largest eigenvalue by finite differences
    fit = rp.theory.solve(d.X, d.Y, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = dg.compare(mcmc, fit, d.X_test, d.Y_test)
    assert f"ULA, step_size={10 * bound:.3g}" in ds.attrs["summary"] and "h*curvature = 1" in ds.attrs["summary"]


def test_max_curvature_is_the_largest_hessian_eigenvalue():
    A = np.array([[3.0, 1.0, 0.0], [1.0, 2.0, 0.5], [0.0, 0.5, 7.0]])
    with jax.enable_x64(True):
        U = lambda x: 0.5 * x @ jnp.asarray(A) @ x + 0.1 * jnp.sum(x**4)  # noqa: E731
        x0 = jnp.array([0.3, -0.2, 0.1])
        H = jax.hessian(U)(x0)
        got = float(rp.mcmc.base.max_curvature(U, x0, jax.random.PRNGKey(0), num_iters=200))
    assert got == pytest.approx(float(np.linalg.eigvalsh(np.asarray(H))[-1]), rel=1e-6)


# ---- figures that mislead -------------------------------------------------------------------------------------------
def test_mc_analysis_shows_every_chain_and_the_reports_estimate():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 400)) + np.array([[0.0], [0.1]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.ShortRunWarning)
        est = dg.gamma_method(x)
        fig = rp.plots.mc_analysis(x)
    assert f"{est.mean:.5g} ± {est.error:.2g} (gamma, 2 chain(s) pooled" in fig._suptitle.get_text()
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "chain 0" in labels and "chain 1" in labels
    frozen = rp.plots.mc_analysis(np.full((2, 100), 0.25))  # used to crash: "Too many bins for data range"
    assert any("did not move" in t.get_text() for ax in frozen.axes for t in ax.texts)


def test_theory_curves_explain_where_the_one_loop_ends_and_axes_read_plainly():
    d = rp.datasets.synthetic(P=60, P_test=40, N0=8, D=2)
    fit = rp.theory.solve(d.X, d.Y, N1=40, T=0.01)
    mc = {"eps_g": np.random.default_rng(0).normal(0.1, 0.01, (2, 300)),
          "overlap": np.random.default_rng(1).normal(0.5, 0.05, (2, 300, 2, 2))}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = [dg.compare(mc, fit.refit(N1=N1), d.X_test, d.Y_test) for N1 in (5, 40, 400)]
        fig = rp.plots.generalization_vs_N1(results, fit, d.X_test, d.Y_test)
    ax = fig.axes[0]
    notes = [a.get_title().get_text() for a in ax.artists if isinstance(a, matplotlib.legend.Legend)]
    assert any("one-loop $Q$ not positive" in t for t in notes)  # alpha = 12 breaks it (tests/test_plots.py: placed)
    fig.canvas.draw()
    ticks = [t.get_text() for t in ax.get_xticklabels() + ax.get_xticklabels(minor=True)]
    assert not any("times" in t or "^" in t for t in ticks), ticks


def test_trace_plots_name_the_chains_and_the_variable():
    dt = dg.to_datatree({"eps_g": np.random.default_rng(0).standard_normal((2, 50))})
    fig = rp.plots.trace(dt, var_names=["eps_g"])
    ax = next(a for a in fig.axes if a.get_legend() is not None)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["chain 0", "chain 1"]
    assert ax.get_ylabel() == "eps_g"


# ---- clear errors ---------------------------------------------------------------------------------------------------
def test_an_output_folder_that_cannot_be_written_is_refused_before_any_work(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(ex.ConfigError, match=r"cannot write to the output folder .*a_file/out .*choose a writable "
                                             r"run.out"):
        ex.run(tiny(blocker / "out"))


def test_a_second_run_on_one_folder_is_refused_with_the_holders_pid(tmp_path):
    import os

    from renormpp.experiments.store import FolderLock

    out = tmp_path / "busy"
    out.mkdir()
    with FolderLock(out):
        with pytest.raises(ex.FolderInUse, match=rf"in use by another renormpp run \(pid {os.getpid()}\)"):
            ex.run(tiny(out))
    assert (ex.run(tiny(out)) / "report.md").exists()  # free again


def test_a_corrupt_checkpoint_fails_its_point_with_the_file_and_no_false_report_claim(tmp_path):
    out = tmp_path / "sweep"
    point = out / "points" / "N1=8_seed=0"
    point.mkdir(parents=True)
    (point / "checkpoint.npz").write_bytes(b"PK\x03\x04 truncated")
    (out / "failed.json").mkdir()  # and failed.json cannot be written: that must not mask the point's error
    with pytest.raises(ex.SweepError) as err:
        ex.run(tiny(out))
    text = str(err.value)
    assert "checkpoint.npz cannot be read" in text and "Delete it" in text
    assert "no point finished" in text and "the rest are in the report" not in text
    assert "failed.json could not be written" in text


def test_solve_refuses_degenerate_and_complex_input():
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((10, 3)), rng.standard_normal((10, 2))
    for args, match in [((X, Y[:, :0]), "Y has no columns"), ((X[:, :0], Y), "X has no columns"),
                        ((X + 1j, Y), "X is complex")]:
        with pytest.raises(ValueError, match=match):
            rp.theory.solve(*args, N1=5)
    with pytest.raises(ValueError, match="gtol must be a positive finite number"):
        rp.theory.solve(X, Y, N1=5, gtol=-1.0)
    assert rp.theory.solve(X.tolist(), Y.tolist(), N1=5).converged  # lists are fine


def test_sampling_input_errors_are_clear():
    d = rp.datasets.synthetic(P=10, P_test=5, N0=3, D=2)
    mcmc = MCMC(rp.infer.Langevin(rp.models.one_hidden_layer, step_size=1e-4), num_warmup=0, num_samples=3,
                progress_bar=False)
    mcmc.run(jax.random.PRNGKey(0), d.X.tolist(), d.Y.tolist(), N1=4)  # Python lists, as solve takes them
    assert mcmc.get_samples()["w"].shape == (3, 4, 3)
    X = d.X.copy()
    X[2, 1] = np.inf
    with pytest.raises(ValueError, match="X contains 1 NaN or inf entries"):
        MCMC(rp.infer.Langevin(rp.models.one_hidden_layer, step_size=1e-4), num_warmup=0, num_samples=3,
             progress_bar=False).run(jax.random.PRNGKey(0), X, d.Y, N1=4)
    with pytest.raises(ValueError, match="step_size must be a positive number .* got the string '1e-3'"):
        rp.infer.Langevin(rp.models.one_hidden_layer, step_size="1e-3")


def test_the_command_line_has_a_version_and_readable_help():
    run = lambda *a: subprocess.run([sys.executable, "-m", "renormpp.cli", *a], capture_output=True, text=True)  # noqa: E731
    out = run("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"renormpp {rp.__version__}"
    text = run("--help").stdout + run("run", "--help").stdout
    assert "``" not in text and "exit status:" in text and "143" in text and "130" in text


# ---- speed under load -----------------------------------------------------------------------------------------------
def test_blas_threads_are_limited_while_a_block_runs():
    """The Gibbs step's Cholesky runs in LAPACK; its thread pool is limited to run.blas_threads while sampling
    (benchmarks/load.py measures what that buys beside a competing job)."""
    from threadpoolctl import threadpool_info

    seen = []

    def potential(x):
        jax.debug.callback(lambda: seen.append([i["num_threads"] for i in threadpool_info()
                                                if i["user_api"] == "blas"]))
        return 0.5 * jnp.sum(x**2)

    chains = rp.infer.Chains(rp.infer.Langevin(potential_fn=potential, step_size=0.1, warn_divergences=False),
                             blas_threads=1)
    state = chains.init(jax.random.PRNGKey(0), 0, init_params=jnp.zeros((1, 2)))
    jax.effects_barrier()
    seen.clear()  # the potential at the initial point is evaluated outside the limit
    chains.run(state, 2)
    jax.effects_barrier()
    assert seen and all(n == 1 for threads in seen for n in threads), seen
