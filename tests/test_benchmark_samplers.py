"""benchmarks/samplers.py runs as its docstring says (the second tier: a smoke run of the default sampler)."""
import subprocess
import sys
from pathlib import Path

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
