"""The built-in default job: a theory sweep over N1 on a synthetic linear teacher (Fig. 1a-like).

Run it with ``renormpp demo`` or ``python -m renormpp.demo``. It prints a table of the
generalization loss predicted by the exact saddle point, the one-loop approximation and the
infinite-width limit, and saves a figure with the loss against N1 and the readout overlaps Q*/lambda1.
"""
from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np

from . import datasets, theory


def sweep(data: datasets.Dataset, N1_grid, T=0.01, lambda0=1.0, lambda1=1.0, activation="erf"):
    """Generalization loss and Q* for each N1 (one kernel eigendecomposition for the whole grid)."""
    base = theory.solve(data.X, data.Y, N1=N1_grid[0], T=T, lambda0=lambda0, lambda1=lambda1,
                        activation=activation, method="infinite_width")
    eg_inf = base.generalization_error(data.X_test, data.Y_test)
    rows = []
    for N1 in N1_grid:
        exact = base.refit("exact", N1=N1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # one-loop breaks down at large alpha: shown as such
            one_loop = base.refit("one_loop", N1=N1)
        rows.append(dict(
            N1=float(N1), alpha=data.X.shape[0] / N1,
            exact=exact.generalization_error(data.X_test, data.Y_test),
            one_loop=(one_loop.generalization_error(data.X_test, data.Y_test) if one_loop.converged else np.nan),
            infinite_width=eg_inf, converged=exact.converged, Q=exact.Q,
        ))
    return rows


def format_table(rows) -> str:
    head = f"{'N1':>8} {'alpha':>8} {'eps_g exact':>12} {'one-loop':>12} {'inf. width':>12} {'Q*_01':>9} {'ok':>3}"
    lines = [head, "-" * len(head)]
    for r in rows:
        ol = "  (breaks)" if np.isnan(r["one_loop"]) else f"{r['one_loop']:12.5f}"
        lines.append(f"{r['N1']:8.0f} {r['alpha']:8.3f} {r['exact']:12.5f} {ol:>12} {r['infinite_width']:12.5f} "
                     f"{r['Q'][0, 1]:9.4f} {'yes' if r['converged'] else 'NO':>3}")
    return "\n".join(lines)


def plot(rows, data: datasets.Dataset, path: Path, lambda1: float = 1.0):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    N1 = np.array([r["N1"] for r in rows])
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 4), gridspec_kw=dict(width_ratios=[1.6, 1]))
    ax.plot(N1, [r["exact"] for r in rows], "-", color="C0", label="exact $Q^*$")
    ax.plot(N1, [r["one_loop"] for r in rows], "--", color="C1", label="one-loop $Q$")
    ax.plot(N1, [r["infinite_width"] for r in rows], "-.", color="k", label="infinite width ($Q=1$)")
    ax.set_xscale("log")
    ax.set_xlabel("hidden units $N_1$")
    ax.set_ylabel(r"generalization loss $\epsilon_g$")
    ax.set_title(f"{data.name}: P={data.X.shape[0]}, N0={data.X.shape[1]}, D={data.Y.shape[1]}")
    ax.legend()
    i = int(np.argmin(N1))
    Q = rows[i]["Q"] / lambda1
    shown = Q.copy()
    np.fill_diagonal(shown, np.diag(Q) / 20)  # as in the paper's Fig. 2
    lim = np.abs(shown).max()
    im = ax2.imshow(shown, cmap="RdBu_r", vmin=-lim, vmax=lim)
    ax2.set_title(f"$Q^*/\\lambda_1$ at $N_1$={N1[i]:.0f} (diagonal / 20)")
    ax2.set_xticks(range(len(data.class_names)), data.class_names)
    ax2.set_yticks(range(len(data.class_names)), data.class_names)
    fig.colorbar(im, ax=ax2, shrink=0.8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="renormpp demo", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="renormpp-demo", help="output folder (default: %(default)s)")
    parser.add_argument("--P", type=int, default=1000, help="training examples (default: %(default)s)")
    parser.add_argument("--N0", type=int, default=144, help="input dimension (default: %(default)s)")
    parser.add_argument("--D", type=int, default=2, help="outputs (default: %(default)s)")
    parser.add_argument("--T", type=float, default=0.01, help="temperature (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    data = datasets.synthetic(P=args.P, P_test=args.P, N0=args.N0, D=args.D, teacher="linear", seed=args.seed)
    N1_grid = np.unique(np.round(np.logspace(np.log10(50), np.log10(20 * args.P), 16)))
    rows = sweep(data, N1_grid, T=args.T)
    table = format_table(rows)
    print(f"renormpp theory sweep on {data!r}\nT={args.T}, lambda0=lambda1=1, activation=erf\n")
    print(table)
    (out / "theory_sweep.txt").write_text(table + "\n")
    plot(rows, data, out / "theory_sweep.png")
    print(f"\nsaved {out / 'theory_sweep.txt'} and {out / 'theory_sweep.png'} in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
