"""Where a draw's time goes on a GPU (issue 45, item 4): the pieces of the default sampler's draw timed alone.

The H100 check (benchmarks/README.md) found a draw of 32 chains 7.8x dearer than one of 2 and hardly dearer at
N1 = 500 than at 100: per-chain work that does not batch. The suspects are the batched N1 x N1 Cholesky factors
and triangular solves (the solver library's routines at n ~ 100) and, for the start, XLA's autotuning. This times,
vectorized over C chains (``jax.vmap``, as ``Chains`` runs them), at P = 1000, N0 = 144, D = 2:

* ``chol``: ``jnp.linalg.cholesky`` of C matrices N1 x N1; ``trsm``: the triangular solve of the factor's inverse;
* ``cholinv[leaf]``: :func:`renormpp.readout.cholesky_inverse` with the solver library on diagonal blocks of at
  most ``leaf`` rows and matrix products elsewhere (``leaf = 1``: products alone);
* ``gram``: the products of the potential (features and their Gram matrix);
* ``force[leaf]``: the potential and its gradient, ``log_marginal_of`` (the integrated sampler's), at that leaf;
* ``draw[leaf]``: a whole draw of ``renormpp run``'s default sampler on Fig. 1a's linear teacher (the record
  included), with the seconds its start and compilation took (``XLA_FLAGS`` as the process has them).

    python benchmarks/gpu_profile.py --out gpu-profile [--budget 420]
    python benchmarks/gpu_profile.py --size smoke        # N1 = 20, C = 2: the pipeline on a CPU

Prints a table per part and writes ``gpu_profile.json`` to ``--out``; rows begun after ``--budget`` seconds say
"not measured".
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SIZES = {"full": dict(P=1000, widths=(100, 500), chains=(2, 32), leaves=(128, 32, 8, 1), draws=10),
         "smoke": dict(P=40, widths=(20,), chains=(2,), leaves=(128, 1), draws=2)}
N0, D, T = 144, 2, 0.01


def timed(fn, *args, repeats: int = 10) -> tuple[float, float]:
    """``(compile seconds, median ms)`` of the jitted ``fn(*args)``."""
    import jax

    f = jax.jit(fn)
    t0 = time.perf_counter()
    jax.block_until_ready(f(*args))
    compile_s = time.perf_counter() - t0
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        ts.append(time.perf_counter() - t0)
    return compile_s, 1e3 * float(np.median(ts))


def pieces(P: int, N1: int, C: int, leaves) -> list[dict]:
    """The pieces above at one width and chain count."""
    import jax
    import jax.numpy as jnp

    from renormpp import readout
    from renormpp.precision import full_precision

    rng = np.random.default_rng(0)
    X = jnp.asarray(rng.normal(size=(P, N0)), jnp.float32)
    Y = jnp.asarray(rng.normal(size=(P, D)), jnp.float32)
    w = jnp.asarray(rng.normal(size=(C, N1, N0)), jnp.float32)
    A = jax.vmap(lambda w: jax.scipy.special.erf(X @ w.T / np.sqrt(N0)) / np.sqrt(N1))(w)
    S = jnp.einsum("cpi,cpj->cij", A, A) + T * jnp.eye(N1, dtype=jnp.float32)
    L = jnp.linalg.cholesky(S)
    eye = jnp.eye(N1, dtype=jnp.float32)
    rows = []

    def add(name, fn, *args):
        with full_precision():
            c, ms = timed(fn, *args)
        rows.append(dict(piece=name, N1=N1, chains=C, ms=ms, compile_s=c))
        print(f"| {name} | {N1} | {C} | {ms:.3f} | {c:.1f} |", flush=True)

    add("chol", jax.vmap(jnp.linalg.cholesky), S)
    add("trsm", jax.vmap(lambda L: jax.scipy.linalg.solve_triangular(L, eye, lower=True)), L)
    for leaf in leaves:
        add(f"cholinv[{leaf}]", jax.vmap(lambda S, leaf=leaf: readout.cholesky_inverse(S, leaf)), S)
    add("gram", jax.vmap(lambda w: (lambda a: a.T @ a)(jax.scipy.special.erf(X @ w.T / np.sqrt(N0)))), w)
    for leaf in leaves:
        def force(w, leaf=leaf):
            readout._LEAF = leaf
            try:
                return jax.value_and_grad(lambda w: readout.log_marginal_of({"w": w}, X, Y, T=T, lambda1=1.0))(w)
            finally:
                readout._LEAF = LEAF0
        add(f"force[{leaf}]", jax.vmap(force), w)
    return rows


def draw(P: int, N1: int, C: int, leaf: int, draws: int) -> dict:
    """Seconds per draw of the default sampler at Fig. 1a's linear teacher, width N1, C chains, and the seconds its
    start and first (compiling) block took."""
    from paper_cost import seconds_per_draw, series_configs

    from renormpp import readout

    raw = series_configs("full" if P == 1000 else "smoke")["linear-D2"]
    readout._LEAF = leaf
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = seconds_per_draw(raw, N1, draws, num_chains=C)
    finally:
        readout._LEAF = LEAF0
    total = time.perf_counter() - t0
    row = dict(piece=f"draw[{leaf}]", N1=N1, chains=C, ms=1e3 * s, start_compile_s=total - s * draws,
               chain_draws_per_s=C / s, xla_flags=os.environ.get("XLA_FLAGS", ""))
    print(f"| draw[{leaf}] | {N1} | {C} | {1e3 * s:.1f} | start + compile {row['start_compile_s']:.0f} s; "
          f"{C / s:.0f} chain-draws/s; XLA_FLAGS={row['xla_flags']!r} |", flush=True)
    return row


LEAF0 = None


def main(argv=None) -> dict:
    global LEAF0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=tuple(SIZES), default="full")
    ap.add_argument("--out", default="gpu-profile")
    ap.add_argument("--budget", type=float, default=420.0, help="seconds: rows begun after this say 'not measured'")
    ap.add_argument("--parts", nargs="+", default=["pieces", "draw"], choices=("pieces", "draw"))
    ap.add_argument("--draw-leaves", type=int, nargs="+", help="leaves of the whole draws (default: the library's "
                    "and the fastest cholinv leaf at the narrow width and most chains)")
    ap.add_argument("--draw-widths", type=int, nargs="+", help="widths of the whole draws (default: all)")
    ap.add_argument("--draw-chains", type=int, nargs="+", help="chain counts of the whole draws (default: the most)")
    a = ap.parse_args(argv)
    import jax

    from renormpp import readout

    LEAF0 = readout._LEAF
    o = SIZES[a.size]
    d = jax.devices()[0]
    report = dict(device=f"{d.platform}: {d.device_kind} (jax {jax.__version__})", size=a.size, rows=[])
    print(report["device"], flush=True)
    t_end = time.perf_counter() + a.budget
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)

    def save():
        (out / "gpu_profile.json").write_text(json.dumps(report, indent=1))

    if "pieces" in a.parts:
        print("\n| piece | N1 | chains | ms (median of 10) | compile s |\n|---|---:|---:|---:|---:|", flush=True)
        for N1 in o["widths"]:
            for C in o["chains"]:
                if time.perf_counter() > t_end:
                    report["rows"].append(dict(piece="pieces", N1=N1, chains=C, skipped="budget"))
                    continue
                report["rows"] += pieces(o["P"], N1, C, o["leaves"])
                save()
    leaves = a.draw_leaves
    if leaves is None:
        inv = [r for r in report["rows"] if r["piece"].startswith("cholinv") and r["N1"] == o["widths"][0]
               and r["chains"] == o["chains"][-1] and "ms" in r]
        best = int(min(inv, key=lambda r: r["ms"])["piece"][8:-1]) if inv else LEAF0
        leaves = sorted({LEAF0, best}, reverse=True)
    if "draw" in a.parts:
        print("\n| draw | N1 | chains | ms per draw | |\n|---|---:|---:|---:|---|", flush=True)
        for N1 in a.draw_widths or o["widths"]:
            for C in a.draw_chains or o["chains"][-1:]:
                for leaf in leaves:
                    if time.perf_counter() > t_end:
                        report["rows"].append(dict(piece=f"draw[{leaf}]", N1=N1, chains=C, skipped="budget"))
                        continue
                    report["rows"].append(draw(o["P"], N1, C, leaf, o["draws"]))
                    save()
    save()
    return report


if __name__ == "__main__":
    main()
