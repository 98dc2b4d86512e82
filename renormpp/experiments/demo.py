"""The built-in demo sweep (``renormpp demo``): theory and sampling over N1 on a synthetic linear teacher.

A reduced Fig. 1a and Fig. 2: P=200 Gaussian inputs in N0=50 dimensions with D=3 outputs from a linear
teacher, erf networks at T=0.01 for four widths from N1=50 (alpha = P/N1 = 4) to N1=400 (alpha = 0.5), each
sampled with the recommended sampler, Metropolis-adjusted kinetic Langevin on w with the readout v integrated
out exactly (two chains of 1000 draws; the observables are their expectations given w). 2-3.5 minutes on the 2-core
machines we use (2.3 on an AMD EPYC whose reference workload, tests/reference_workload.py, takes 2.8 s); the run
records its wall time in :data:`TIMING`. ``renormpp demo --print-config`` prints it as TOML, a starting point
for your own sweeps. ``renormpp demo --size smoke`` runs :data:`SMOKE`, the same sweep at two widths and a tenth of
the draws: a check that an installation works (under a minute), not a result.

At this small size the finite networks' generalization loss sits below the proportional-limit theory, by
about 10% at N1=50 and 2.4% at N1=400 (NUTS and kinetic Langevin, with and without Gibbs steps on v, agree
on it): corrections beyond the proportional limit, which shrink as P grows at fixed alpha (about 5% at
alpha=2 for P=200, 2.6% for P=500; studies/theory_beyond.py). The exact theory is still far closer than the
infinite-width limit at every N1.
"""
import json
import time
from pathlib import Path

CONFIG = {
    "data": {"name": "synthetic", "P": 200, "P_test": 500, "N0": 50, "D": 3, "teacher": "linear", "seed": 0},
    "model": {"N1": [50, 100, 200, 400], "T": 0.01, "lambda0": 1.0, "lambda1": 1.0, "activation": "erf"},
    "sampler": {"kind": "kinetic", "inner_steps": 10, "num_warmup": 200, "num_samples": 1000, "num_chains": 2},
    "run": {"out": "renormpp-demo", "seeds": [0]},
}

SMOKE = {**CONFIG, "model": {**CONFIG["model"], "N1": [50, 400]},
         "sampler": {**CONFIG["sampler"], "num_warmup": 50, "num_samples": 100},
         "run": {**CONFIG["run"], "out": "renormpp-demo-smoke"}}
SIZES = {"full": CONFIG, "smoke": SMOKE}

#: the demo's own record of its wall time, in its output folder (tests/test_demo.py holds it to the README's promise)
TIMING = "timing.json"


def run(size: str = "full", *, out=None, **options) -> Path:
    """Run (or resume) the demo of ``size`` (:data:`SIZES`) with :func:`renormpp.experiments.run` and record its wall
    time in :data:`TIMING`: the seconds from start to report, the points sampled in this run (a resumed demo reads
    the others back) and the machine."""
    from . import run as run_sweep
    from .stages import versions

    cfg = SIZES[size]
    folder = Path(out or cfg["run"]["out"])
    before = {p.parent.name for p in folder.glob("points/*/result.json")}
    t0 = time.perf_counter()
    outdir = run_sweep(cfg, out=out, **options)
    wall = time.perf_counter() - t0
    sampled = sorted(p.parent.name for p in outdir.glob("points/*/result.json") if p.parent.name not in before)
    record = dict(size=size, wall_seconds=round(wall, 1), points_sampled=sampled, resumed=bool(before),
                  machine=versions())
    (outdir / TIMING).write_text(json.dumps(record, indent=1) + "\n")
    return outdir
