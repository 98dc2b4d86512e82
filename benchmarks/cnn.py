"""Speed and memory of the convolutional network's theory (renormpp.theory.conv, issue 33).

Run:  .venv/bin/python benchmarks/cnn.py               (the target and the scaling, about 15 min on 2 busy cores)
      .venv/bin/python benchmarks/cnn.py --skip-large  (leave out n_p = 49, and P = 1000 at n_p = 49)
      .venv/bin/python benchmarks/cnn.py --quick       (smoke run at small sizes; target not judged)

The target (issue 33, item 3): on MNIST 0/1 (28 x 28, the supplement's preprocessing), m = 7 (n_p = 16), P = 500,
D = 2, the exact solve and eps_g on 1000 test points in at most 60 s and 4 GB. Every case runs in a fresh process
(its ru_maxrss is the peak memory of the whole job, data loading included) and times the parts of
rp.theory.solve(..., conv=...): the patch kernels (PatchKernels), the minimization (Newton-CG) and eps_g on the test
set; the target case is repeated and the median reported. erf, T = 0.01, lambda0 = lambda1 = 1.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = "/work/shared/data"
T, LAMBDA0, LAMBDA1, ACT, P_TEST = 0.01, 1.0, 1.0, "erf", 1000
TARGET_S, TARGET_GB = 60.0, 4.0


def case(P: int, patch: int, N1: float, kernel_memory: float, evaluate_only: bool, p_test: int) -> dict:
    """One case in this process: the parts of the solve, timed, and the peak memory."""
    import renormpp as rp
    from renormpp.patches import Patches
    from renormpp.theory import conv as cv

    d = rp.datasets.mnist(classes=(0, 1), P=P, P_test=p_test, root=ROOT)
    conv = Patches((28, 28), patch)
    y = np.ascontiguousarray(d.Y.T).ravel()
    t0 = time.perf_counter()
    kernels = cv.PatchKernels(d.X, conv, LAMBDA0, ACT, memory=kernel_memory)
    t1 = time.perf_counter()
    out = dict(P=P, patch=patch, n_p=conv.n_patches, N1=N1, D=d.Y.shape[1], held=kernels.cached,
               kernel_gb=kernels.nbytes / 1e9, kernels_s=t1 - t0)
    pb = cv._PatchData(kernels, y, N1, T, LAMBDA1)
    if evaluate_only:  # one evaluation of S and dS/dQ at Q = 1: two passes over the kernels
        pb.at(np.eye(pb.n))
        out.update(evaluation_s=time.perf_counter() - t1)
    else:
        fit = cv._fit(pb, d.X, LAMBDA0, ACT, "exact", 1e-8, 500)
        t2 = time.perf_counter()
        eps = fit.generalization_error(d.X_test, d.Y_test)
        t3 = time.perf_counter()
        out.update(solve_s=t2 - t1, eps_g_s=t3 - t2, total_s=t3 - t0, n_iter=fit.n_iter, grad_norm=fit.grad_norm,
                   converged=fit.converged, eps_g=eps, overlap=fit.readout_overlap.tolist())
    out["rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    return out


def run(**kw) -> dict:
    """:func:`case` in a fresh process."""
    cmd = [sys.executable, __file__, "--case", json.dumps(kw)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fmt(r: dict) -> str:
    held = "held" if r["held"] else "recomputed"
    if "evaluation_s" in r:
        return (f"| P={r['P']}, n_p={r['n_p']} (m={r['patch']}), C={r['N1']:g} | {r['kernel_gb']:.2f} GB ({held}) | "
                f"one evaluation of S and dS/dQ (two passes, each recomputing the blocks): {r['evaluation_s']:.1f} s "
                f"| — | {r['rss_gb']:.2f} GB |")
    return (f"| P={r['P']}, n_p={r['n_p']} (m={r['patch']}), C={r['N1']:g} | {r['kernel_gb']:.2f} GB ({held}) | "
            f"{r['kernels_s']:.1f} / {r['solve_s']:.1f} ({r['n_iter']} Newton it., |dS/dQ| {r['grad_norm']:.1g}) / "
            f"{r['eps_g_s']:.1f} | **{r['total_s']:.1f} s** | {r['rss_gb']:.2f} GB |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip-large", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--case", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.case:
        print(json.dumps(case(**json.loads(args.case))))
        return
    base = dict(kernel_memory=2**31, evaluate_only=False, p_test=P_TEST)
    if args.quick:
        base.update(p_test=100)
        print(fmt(run(P=100, patch=7, N1=50, **base)))
        print(fmt(run(P=100, patch=14, N1=50, **base)))
        return
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {platform.processor() or platform.machine()}, nproc {os.cpu_count()}, "
          f"load average at start {os.getloadavg()[0]:.1f}, numpy {np.__version__}")
    print("| case | patch kernels i<=j | kernels / minimization / eps_g (s) | total | peak RSS |")
    print("|---|---|---|---|---|")
    # the target: repeats of C = 50 (alpha = 10) and C = 500 (alpha = 1), in turn
    runs = {50: [], 500: []}
    for _ in range(args.repeats):
        for N1 in runs:
            runs[N1].append(run(P=500, patch=7, N1=N1, **base))
            print(fmt(runs[N1][-1]), flush=True)
    for N1, rs in runs.items():
        tot = statistics.median(r["total_s"] for r in rs)
        rss = max(r["rss_gb"] for r in rs)
        verdict = "PASS" if tot <= TARGET_S and rss <= TARGET_GB else "FAIL"
        print(f"target, C={N1}: median total {tot:.1f} s (runs {', '.join(f'{r['total_s']:.1f}' for r in rs)}), "
              f"peak RSS {rss:.2f} GB, eps_g {rs[0]['eps_g']:.5f}, Newton iterations {rs[0]['n_iter']}: {verdict}")
    # the scaling in P and n_p, at C = 50, once each
    print("\nscaling (C = 50):")
    cases = [dict(P=250, patch=7), dict(P=1000, patch=7), dict(P=500, patch=14)]
    if not args.skip_large:
        cases += [dict(P=250, patch=4), dict(P=500, patch=4, kernel_memory=3e9)]
    for c in cases:
        print(fmt(run(N1=50, **(base | c))), flush=True)
    if not args.skip_large:  # 9.8 GB of kernels: recomputed at every pass; one evaluation, no solve
        print(fmt(run(N1=50, **(base | dict(P=1000, patch=4, evaluate_only=True)))), flush=True)
    print(f"load average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
