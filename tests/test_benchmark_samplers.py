"""benchmarks/samplers.py runs as its docstring says (the second tier: a smoke run of the default sampler)."""
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def test_the_sampler_benchmark_runs_its_smoke_size():
    """``--quick`` with the default sampler: the benchmark reaches its report line and the exact theory's ε_g beside it
    (it called a module it had not imported until 2026-12-07, and no test ran it)."""
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "samplers.py"), "--quick", "--only",
                          "kinetic on w, v integrated out"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "kinetic on w, v integrated out" in out.stdout and "theory eps_g" in out.stdout, out.stdout[-2000:]


def test_a_warmup_draw_costs_the_gradient_evaluations_of_a_sampling_draw(monkeypatch):
    """benchmarks/warmup_cost.py counts every gradient of the potential the compiled chains evaluate. On a tiny problem
    with the default sampler (kinetic Langevin, v integrated out, the adaptive warmup): a sampling draw makes exactly
    ``inner_steps`` gradient evaluations per chain (the counter misses none and adds none), and a warmup draw, the
    chains' start and the adaptation charged to it, at most 1.2 times as many (the target of the sampler benchmark;
    a step-size search or a curvature estimate per draw would break it)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import samplers
    import warmup_cost

    from renormpp.experiments import stages

    monkeypatch.setitem(samplers.PROBLEMS, 99, dict(P=40, N0=6, N1=8, D=2, teacher="linear"))
    sampler = samplers.candidates(0)["kinetic on w, v integrated out"]
    cfg = samplers.config(99, sampler)
    p = warmup_cost.profile(cfg, stages.load_data(cfg.data), draws=20)
    c = p["chains"]
    assert warmup_cost.per_draw(p["sampling"], c) == sampler["inner_steps"]
    assert p["warmup"]["draws"] < sampler["num_warmup"], p["log"]  # the adaptive warmup ended early
    warm = (p["start"]["gradients"] + p["warmup"]["gradients"]) / (p["warmup"]["draws"] * c)
    assert warm <= 1.2 * warmup_cost.per_draw(p["sampling"], c), (warm, p)


def test_the_blackjax_anchors_see_the_default_samplers_target_where_v_is_integrated(monkeypatch):
    """The BlackJAX anchors "…, v integrated out" sample w from the default sampler's target. Their flat log-density
    differs between two draws of w by what the dense Gaussian evidence says: log N(Y; 0, T 1 + ΦΦᵀ/(λ1 N1)) per
    output plus the prior of w, in numpy float64 (an independent computation, not the model's Woodbury form), and
    their flat vector holds w alone."""
    from scipy.special import erf
    from scipy.stats import multivariate_normal

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import samplers

    from renormpp.experiments import stages

    monkeypatch.setitem(samplers.PROBLEMS, 99, dict(P=30, N0=5, N1=7, D=2, teacher="linear"))
    cfg = samplers.config(99, {"kind": "nuts", "v_sampling": "integrated"})
    data = stages.load_data(cfg.data)
    logdensity, unravel, positions, record = samplers._flat_model(cfg, data)
    assert positions.shape == (2, 7 * 5) and set(unravel(positions[0])) == {"w"}
    X, Y, T = np.asarray(data.X, np.float64), np.asarray(data.Y, np.float64), cfg.model.T

    def dense(x):
        w = np.asarray(unravel(x)["w"], np.float64)
        phi = erf(X @ w.T / np.sqrt(5))
        C = T * np.eye(len(X)) + phi @ phi.T / (cfg.model.lambda1 * 7)
        evidence = sum(multivariate_normal(np.zeros(len(X)), C).logpdf(Y[:, d]) for d in range(Y.shape[1]))
        return evidence - 0.5 * cfg.model.lambda0 * np.sum(w ** 2)

    got = float(logdensity(positions[0]) - logdensity(positions[1]))
    want = dense(np.asarray(positions[0])) - dense(np.asarray(positions[1]))
    assert abs(got - want) <= 1e-3 * max(1.0, abs(want)), (got, want)
    obs = record(positions[0])
    assert set(obs) == {"eps_g", "overlap"} and obs["overlap"].shape == (2, 2)
