"""The default sampler under load: ms per draw on problem 1 alone, beside a competing 2-thread numpy job, and two
points side by side (as ``renormpp run --executor process --workers 2``), with BLAS threads limited to 1 while
sampling (``run.blas_threads = 1``, the default) and not limited.

Run:  .venv/bin/python benchmarks/load.py            (about 6 min on 2 cores)
      .venv/bin/python benchmarks/load.py --quick    (smoke run at a small size)

Problem 1: P=500, N0=100, N1=250, D=3, linear teacher, erf, T=0.01; the default sampler of ``renormpp run``
(kinetic Langevin, Metropolis-adjusted, on w with v integrated out since issue 17; an exact Gibbs draw of v after
every draw before), 2 chains, 10 updates per draw. Each measurement, in a fresh process: 60 warmup draws, one untimed block of 20 (it compiles), then 3 timed
blocks of 20 draws; the median block gives ms per draw.
The competing job is a loop of 1000 x 1000 matrix products in numpy with OPENBLAS_NUM_THREADS=2. Target (issue 14):
slowdown beside the competing job <= 1.5x.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
COMPETITOR = """
import numpy as np, time
a = np.random.default_rng(0).standard_normal((1000, 1000))
end = time.time() + {seconds}
while time.time() < end:
    a = np.tanh(a @ a / 1000.0)
"""


def measure(blas_threads, quick):
    """ms per draw of the default sampler (median of 3 blocks), in this process."""
    import jax
    import numpy as np

    from renormpp.experiments import config, stages

    size = dict(P=100, N0=20, N1=50, D=2) if quick else dict(P=500, N0=100, N1=250, D=3)
    p = config.resolve({"data": {"name": "synthetic", "P": size["P"], "P_test": 500, "N0": size["N0"], "D": size["D"]},
                        "model": {"N1": size["N1"], "T": 0.01}, "sampler": {"kind": "kinetic", "num_warmup": 60},
                        "run": {"out": "-", "blas_threads": blas_threads}}).points()[0]
    data = stages.load_data(p.data)
    chains, state = stages.start_chains(p, data)
    state, _, _ = chains.run(state, 60)
    state, _, _ = chains.run(state, 20)  # compiles the timed block length
    times = []
    for _ in range(3):
        t = time.perf_counter()
        state, _, _ = chains.run(state, 20)
        jax.block_until_ready(state)
        times.append((time.perf_counter() - t) / 20 * 1e3)
    return statistics.median(times), np.round(times, 1).tolist()


def run_child(blas_threads, quick):
    """measure() in a fresh process; returns its result."""
    out = subprocess.run([sys.executable, __file__, "--child", str(blas_threads)] + (["--quick"] if quick else []),
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child is not None:
        print(json.dumps(measure(a.child, a.quick)))
        return
    sys.path.insert(0, HERE)
    from theory_speed import machine_info

    print(machine_info())
    rows = {}
    for label, blas in (("blas_threads=1 (default)", 1), ("not limited (blas_threads=0)", 0)):
        alone = run_child(blas, a.quick)
        comp = subprocess.Popen([sys.executable, "-c", COMPETITOR.format(seconds=600)],
                                env={**os.environ, "OPENBLAS_NUM_THREADS": "2"})
        try:
            time.sleep(2)
            loaded = run_child(blas, a.quick)
        finally:
            comp.kill()
            comp.wait()
        procs = [subprocess.Popen([sys.executable, __file__, "--child", str(blas)] + (["--quick"] if a.quick else []),
                                  stdout=subprocess.PIPE, text=True) for _ in range(2)]
        pair = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
        rows[label] = (alone, loaded, pair)
        print(f"{label}: alone {alone[0]:.1f} ms/draw {alone[1]}; beside a 2-thread numpy job {loaded[0]:.1f} "
              f"ms/draw {loaded[1]} -> {loaded[0] / alone[0]:.2f}x; two points side by side "
              f"{pair[0][0]:.1f} and {pair[1][0]:.1f} ms/draw -> {max(pair[0][0], pair[1][0]) / alone[0]:.2f}x",
              flush=True)
    print("\ntarget: slowdown beside the competing job <= 1.5x")
    print("load average at end (1/5/15 min): " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
