"""Speed and memory of the proportional-limit theory solver (renormpp.theory).

Run:  .venv/bin/python benchmarks/theory_speed.py            (full run, ~6 min on 2 cores)
      .venv/bin/python benchmarks/theory_speed.py --skip-large   (no P=10000 case)
      .venv/bin/python benchmarks/theory_speed.py --quick        (smoke run at small sizes)

Every timing is the median of repeated runs; every ratio is between figures measured in the same
run. Setup: synthetic data, N0=784, D=10, T=0.01, lambda0=lambda1=1, erf, N1=500, 1000 test points.
rp.theory.solve is nngp -> Spectrum.from_kernel (one eigh) -> _solve_spectrum (the minimization);
the parts below call exactly these.
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
import scipy
import scipy.linalg

import renormpp as rp
from renormpp.theory import Spectrum
from renormpp.theory.fit import _solve_spectrum

N0, D, T, LAMBDA0, LAMBDA1, ACT, N1, P_TEST = 784, 10, 0.01, 1.0, 1.0, "erf", 500, 1000
TARGET_A_S, TARGET_B_RATIO, TARGET_C_S, TARGET_C_GB = 1.0, 1.5, 300.0, 8.0


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def data(P: int, teacher: str):
    return rp.datasets.synthetic(P=P, P_test=P_TEST, N0=N0, D=D, teacher=teacher, seed=0)


def timed(fn, *args):
    t = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t, out


def interleaved_medians(fns: dict, repeats: int, warmup: int = 0) -> dict:
    """Median wall time of each fn() in `fns`, or of fn(*setup()) for a value (fn, setup), setup
    untimed. The functions run in turn within each repeat, so a change in machine load during the
    run hits all of them alike and ratios between them stay meaningful."""
    fns = {k: v if isinstance(v, tuple) else (v, tuple) for k, v in fns.items()}
    times = {k: [] for k in fns}
    for i in range(warmup + repeats):
        for k, (fn, setup) in fns.items():
            t = timed(fn, *setup())[0]
            if i >= warmup:
                times[k].append(t)
    return {k: statistics.median(v) for k, v in times.items()}


def eigh(K):
    """One eigendecomposition with the same call as Spectrum.from_kernel (K is overwritten)."""
    return scipy.linalg.eigh(K, overwrite_a=True, check_finite=False, driver="evd")


def verdict(ok: bool | None) -> str:
    return "n/a (quick)" if ok is None else ("PASS" if ok else "FAIL")


def machine_info() -> str:
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        blas = f"{blas['name']} {blas['version']}"
    except Exception:  # pragma: no cover - informative only
        blas = "?"
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"machine: nproc={len(os.sched_getaffinity(0))}, CPU '{cpu}', RAM {mem_gb:.1f} GB, "
            f"{platform.python_implementation()} {platform.python_version()}\n"
            f"numpy {np.__version__}, scipy {scipy.__version__}, BLAS {blas}, "
            f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}\n"
            f"load average at start (1/5/15 min): {load}  (> nproc means other jobs compete for the cores)")


# ---------------------------------------------------------------------------------------------
# 1 + 6: the dense action versus the eigenbasis action
# ---------------------------------------------------------------------------------------------
def dense_action(Q, K, Y, n1=N1, t=T, lambda1=LAMBDA1) -> float:
    """S(Q) from the PD x PD matrix A = T 1 + Q (x) K / lambda1 by a Cholesky factorization."""
    A = np.kron(Q, K)  # index (a, mu) -> a*P + mu
    A /= lambda1
    A.flat[:: A.shape[0] + 1] += t
    c = scipy.linalg.cho_factor(A, lower=True, overwrite_a=True, check_finite=False)
    y = Y.T.reshape(-1)
    quad = y @ scipy.linalg.cho_solve(c, y, check_finite=False)
    logdet = 2.0 * np.sum(np.log(np.diag(c[0]))) - y.size * np.log(t)  # log det(1 + Q(x)K/(l1 T))
    return float(np.trace(Q) - np.linalg.slogdet(Q)[1] + (quad + logdet) / n1)


def random_spd(rng, d: int = D):
    G = rng.standard_normal((d, d))
    return G @ G.T / d + 0.5 * np.eye(d)


def bench_dense(ds, repeats: int) -> dict:
    """Time one dense evaluation; cross-check against fit.action_and_gradient at each Q used."""
    K = rp.kernels.nngp(ds.X, lambda0=LAMBDA0, activation=ACT)
    fit = rp.theory.solve(ds.X, ds.Y, N1, T, LAMBDA0, LAMBDA1, ACT)
    rng = np.random.default_rng(1)
    Qs = [random_spd(rng) if i != 1 else fit.Q for i in range(repeats)]  # the 2nd one is Q*
    times, rel = [], []
    for Q in Qs:
        t, S_dense = timed(dense_action, Q, K, ds.Y)
        S_eig = fit.action_and_gradient(Q)[0]
        times.append(t)
        rel.append(abs(S_dense - S_eig) / abs(S_eig))
        print(f"    dense S = {S_dense:.15g}  eigenbasis S = {S_eig:.15g}  rel diff {rel[-1]:.1e}  ({t:.1f} s)")
    n_calls = 200
    loop = lambda: [fit.action_and_gradient(Qs[0]) for _ in range(n_calls)]  # noqa: E731
    t_eig = interleaved_medians(dict(t=loop), 5, warmup=1)["t"] / n_calls
    return dict(dense_s=statistics.median(times), max_rel_diff=max(rel), eigenbasis_s=t_eig)


# ---------------------------------------------------------------------------------------------
# 2 + 4: eigendecomposition, solve and minimization at several P
# ---------------------------------------------------------------------------------------------
def bench_solve_vs_eigh(ds, repeats: int) -> dict:
    """Medians of one eigh of K, rp.theory.solve end to end, and the minimization alone."""
    K = rp.kernels.nngp(ds.X, lambda0=LAMBDA0, activation=ACT)
    spec = Spectrum.from_kernel(K.copy(), ds.Y)
    args = (ds.X, N1, T, LAMBDA0, LAMBDA1, ACT, "exact")
    out = interleaved_medians(dict(
        eigh_s=(eigh, lambda: (K.copy(),)),  # eigh overwrites K: time it on a fresh (untimed) copy
        solve_s=lambda: rp.theory.solve(ds.X, ds.Y, N1, T, LAMBDA0, LAMBDA1, ACT),
        min_s=lambda: _solve_spectrum(spec, *args),
    ), repeats)
    return out | dict(solve_ratio=out["solve_s"] / out["eigh_s"], min_ratio=out["min_s"] / out["eigh_s"])


# ---------------------------------------------------------------------------------------------
# 3 + 5: kernel + exact solve + generalization error, by part
# ---------------------------------------------------------------------------------------------
def pipeline_once(ds) -> dict:
    """One kernel + eigh + minimization + generalization error, the same calls rp.theory.solve makes."""
    t = {}
    t["kernel"], K = timed(lambda: rp.kernels.nngp(ds.X, lambda0=LAMBDA0, activation=ACT))
    t["eigh"], spec = timed(Spectrum.from_kernel, K, ds.Y)
    del K  # overwritten by the eigenvectors; keep memory as in rp.theory.solve
    t["minimize"], fit = timed(_solve_spectrum, spec, ds.X, N1, T, LAMBDA0, LAMBDA1, ACT, "exact")
    t["gen_error"], eps = timed(fit.generalization_error, ds.X_test, ds.Y_test)
    assert fit.converged, f"solve did not converge: |dS/dQ| = {fit.grad_norm:.3g}"
    return t | dict(total=sum(t.values()), eps_g=eps, n_iter=fit.n_iter)


def bench_pipeline(ds, repeats: int) -> dict:
    pipeline_once(ds)  # warm-up
    runs = [pipeline_once(ds) for _ in range(repeats)]
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def bench_large(P: int, teacher: str) -> dict:
    """Run pipeline_once at P in a fresh interpreter; its peak RSS is that of the whole process."""
    t0 = time.perf_counter()
    cmd = [sys.executable, os.path.abspath(__file__), "--only-large", str(P), "--teacher", teacher]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1]) | dict(process_wall=time.perf_counter() - t0)


def only_large(P: int, teacher: str) -> None:
    ds = data(P, teacher)
    r = pipeline_once(ds)
    r["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9  # KiB on Linux
    print(json.dumps(r))


def bench_target_c(P_large: int, teacher: str, judge) -> None:
    print(f"[C] P={P_large}, D={D}: kernel + solve + generalization error, fresh process (1 run):")
    c = bench_large(P_large, teacher)
    ok = c["total"] < TARGET_C_S and c["peak_rss_gb"] < TARGET_C_GB
    print("    " + " | ".join(f"{k} {c[k]:.1f} s" for k in ("kernel", "eigh", "minimize", "gen_error")))
    print(f"    total {c['total']:.1f} s (process incl. imports and data {c['process_wall']:.1f} s), "
          f"peak RSS {c['peak_rss_gb']:.2f} GB (target < {TARGET_C_S:.0f} s and < {TARGET_C_GB:.0f} GB) "
          f"[{verdict(judge(ok))}]; eps_g = {c['eps_g']:.4f}")



# ---------------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run at small sizes (targets not judged)")
    ap.add_argument("--skip-large", action="store_true", help="skip the P=10000 case (target C)")
    ap.add_argument("--teacher", default="erf_1hl", choices=rp.datasets.TEACHERS)
    ap.add_argument("--only-large", type=int, metavar="P", help=argparse.SUPPRESS)  # child of target C
    a = ap.parse_args()
    if a.only_large:
        return only_large(a.only_large, a.teacher)

    q = a.quick
    P_dense, P_A, P_large = (200, 300, 1000) if q else (1000, 1000, 10000)
    sizes = {300: 2, 600: 2} if q else {1000: 5, 2000: 5, 5000: 3}  # P -> repeats
    judge = (lambda ok: None) if q else (lambda ok: ok)

    print(machine_info())
    print(f"setup: synthetic teacher={a.teacher}, N0={N0}, D={D}, T={T}, lambda0={LAMBDA0}, lambda1={LAMBDA1}, "
          f"{ACT}, N1={N1}, {P_TEST} test points; medians of repeated runs{' (QUICK: small sizes)' if q else ''}\n")

    print(f"[1] one dense action evaluation, P={P_dense}, D={D} (PD x PD = {P_dense * D}^2, Cholesky):")
    dn = bench_dense(data(P_dense, a.teacher), repeats=3)
    print(f"    median {dn['dense_s']:.2f} s; max rel diff to fit.action_and_gradient {dn['max_rel_diff']:.1e} "
          f"-> {'agree' if dn['max_rel_diff'] < 1e-8 else 'DISAGREE (> 1e-8)'}\n")

    print("[2]+[B] eigh of K, rp.theory.solve (kernel+eigh+minimization), minimization alone:")
    sv = {}
    for P, reps in sizes.items():
        r = sv[P] = bench_solve_vs_eigh(data(P, a.teacher), reps)
        print(f"    P={P:5d} ({reps} runs): eigh {r['eigh_s']:.3f} s | solve {r['solve_s']:.3f} s = "
              f"{r['solve_ratio']:.2f}x eigh [{verdict(judge(r['solve_ratio'] <= TARGET_B_RATIO))}] | "
              f"minimization {r['min_s'] * 1e3:.1f} ms = {r['min_ratio']:.3f}x eigh")
    print(f"    target B: solve <= {TARGET_B_RATIO}x eigh\n")

    print(f"[A] kernel + exact solve + generalization error on {P_TEST} test points, P={P_A}, D={D} (5 runs):")
    pa = bench_pipeline(data(P_A, a.teacher), repeats=5)
    print("    " + " | ".join(f"{k} {pa[k]:.3f} s" for k in ("kernel", "eigh", "minimize", "gen_error")))
    print(f"    total {pa['total']:.3f} s (target < {TARGET_A_S} s) [{verdict(judge(pa['total'] < TARGET_A_S))}]; "
          f"eps_g = {pa['eps_g']:.4f}, {pa['n_iter']:.0f} iterations\n")

    solve_1k = sv[min(sizes)]["solve_s"]
    print(f"[6] dense evaluation (P={P_dense}) / one eigenbasis evaluation (action+gradient, "
          f"{dn['eigenbasis_s'] * 1e6:.0f} us) = {dn['dense_s'] / dn['eigenbasis_s']:,.0f}x")
    print(f"    dense evaluation / whole exact solve at P={min(sizes)} ({solve_1k:.3f} s) = "
          f"{dn['dense_s'] / solve_1k:.1f}x\n")

    if a.skip_large:
        print("[C] skipped (--skip-large)")
    else:
        bench_target_c(P_large, a.teacher, judge)
    print("\nload average at end (1/5/15 min): " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
