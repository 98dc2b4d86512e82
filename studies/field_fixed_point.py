"""Is a shared-field solve's field a fixed point of (F1)'s law, and where does its Monte Carlo error come from? (issue 46)

Reads the finished checkpoint of ``studies/field_equilibrium.py --tempered --N1 100 --seed 0 --maxiter 160
--checkpoint PATH`` (MNIST (0, 1), P = 200, α = 2, 4 000 neurons; the solve returns at once from it; ``--default``:
of the default solve, one population moved on, ``field_equilibrium.py --N1 100 --seed 0 --maxiter 160``) and, at its
field, measures three things:

1. **The noise of one population.** ``--populations`` (6) new tempered populations: the spread between them of (F2)'s
   m-moment N1 E[s y^T] (in the m-residual's norm, |.|/|Y|) against the standard error within one (its neurons taken
   as independent); and the same with each neuron's coordinate along the labels' direction integrated by quadrature
   over its exact conditional law given the rest (97 points on [-12, 12]: a Rao-Blackwellized average, the
   stratification by that coordinate at its best), with the specialists (|w . u| > 3) of N1 both ways.
2. **Are the populations at (F1)?** One tempered population, then exact moves along the labels' direction (a
   Metropolized Gibbs step: the coordinate drawn from its conditional law on that grid, accepted by the exact ratio),
   then blocks of 40 Langevin steps, each followed by such a move: its specialists, the residual of m against its
   own moments, and its mean log tilt.
3. ``fit.verify`` at 30 and 240 Langevin steps a population (4 populations).

Run:  .venv/bin/python studies/field_fixed_point.py --checkpoint runs/a2_tempered_mc.npz [--root DATA]
      (about 15 minutes on 2 cores)
"""
import argparse
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

import renormpp as rp
from renormpp.theory import shared_field as sf
from renormpp.theory.single_neuron import directions, features

sys.path.insert(0, str(Path(__file__).parent))
import field_equilibrium as fe  # noqa: E402

GRID = np.linspace(-12, 12, 97)


def parts(fit, w):
    """Features (M, P), y (M, D) and log tilt (M,) of the neurons ``w`` at the fit's field."""
    s = features(w, fit.X, fit.activation).T
    C, y, log_tilt = sf.equations._per_neuron(s, fit.m, fit.Sigma, fit.lambda1 * fit.N1)
    return s, y, log_tilt


def along(fit, w, u, chunk=250):
    """Each neuron's conditional law of its coordinate along ``u`` on GRID, given the rest of its weights: the log
    densities (M, G) and the rest (M, N0)."""
    t = w @ u
    rest = w - np.outer(t, u)
    out = []
    for k in range(0, len(w), chunk):
        grid_w = (rest[k:k + chunk, None, :] + GRID[None, :, None] * u).reshape(-1, w.shape[1])
        out.append(parts(fit, grid_w)[2].reshape(-1, len(GRID)) - 0.5 * fit.lambda0 * GRID**2)
    return np.concatenate(out), rest


def m_moments(fit, w, u):
    """Per neuron, N1 s y^T (M, P, D) plain and integrated along ``u`` over GRID (one pass, the weights rescaled as
    the largest log density grows), and the specialists of N1 both ways."""
    s, y, _ = parts(fit, w)
    plain = fit.N1 * np.einsum("mp,ma->mpa", s, y)
    rest = w - np.outer(w @ u, u)
    quad, total, spec, top = np.zeros_like(plain), np.zeros(len(w)), np.zeros(len(w)), np.full(len(w), -np.inf)
    for t in GRID:
        sg, yg, log_tilt = parts(fit, rest + t * u)
        ell = log_tilt - 0.5 * fit.lambda0 * t**2
        new_top = np.maximum(top, ell)
        scale, weight = np.exp(top - new_top), np.exp(ell - new_top)
        quad = quad * scale[:, None, None] + weight[:, None, None] * fit.N1 * np.einsum("mp,ma->mpa", sg, yg)
        total, spec, top = total * scale + weight, spec * scale + weight * (t**2 > 9), new_top
    return plain, quad / total[:, None, None], fit.N1 * np.mean((w @ u) ** 2 > 9), fit.N1 * np.mean(spec / total)


def gibbs_along(fit, w, u, rng):
    """One Metropolized Gibbs move of every neuron's coordinate along ``u``: a cell of GRID drawn by its conditional
    density, a uniform point in it, accepted by the exact ratio (the proposal's density is piecewise constant)."""
    ell, rest = along(fit, w, u)
    M, step = len(w), GRID[1] - GRID[0]
    pi = np.exp(ell - ell.max(axis=1, keepdims=True))
    cell = np.minimum((np.cumsum(pi / pi.sum(axis=1, keepdims=True), axis=1) < rng.random(M)[:, None]).sum(1),
                      len(GRID) - 1)
    t_new = GRID[cell] + step * (rng.random(M) - 0.5)
    t = w @ u
    old = np.clip(np.round((t - GRID[0]) / step).astype(int), 0, len(GRID) - 1)
    w_new = rest + np.outer(t_new, u)

    def log_density(v):
        return parts(fit, v)[2] - 0.5 * fit.lambda0 * (v @ u) ** 2

    log_a = (log_density(w_new) - ell[np.arange(M), cell]) - (log_density(w) - ell[np.arange(M), old])
    take = (np.abs(t - GRID[old]) <= step / 2) & (np.log(rng.random(M)) < log_a)
    return np.where(take[:, None], w_new, w), float(take.mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", help="the data sets' folder (default: the loaders' rules, RENORMPP_DATA)")
    ap.add_argument("--checkpoint", required=True, help="the finished checkpoint of the solve")
    ap.add_argument("--default", action="store_true", help="the checkpoint is of the default solve (not tempered)")
    ap.add_argument("--populations", type=int, default=6)
    args = ap.parse_args()
    if not Path(args.checkpoint).exists():
        sys.exit(f"no checkpoint at {args.checkpoint}: run studies/field_equilibrium.py "
                 f"{'' if args.default else '--tempered '}--N1 100 --seed 0 --maxiter 160 --checkpoint "
                 f"{args.checkpoint} first")
    warnings.simplefilter("ignore")
    d = rp.datasets.mnist(classes=(0, 1), P=200, P_test=1000, root=args.root, seed=0)
    X, Y = np.asarray(d.X, float), np.asarray(d.Y, float)
    u = directions(X, Y, Y - Y.mean(axis=0))["labels"]
    how = {} if args.default else dict(fresh=True, tempered=True, moves=30)
    fit = sf.solve(X, Y, N1=100, T=fe.T, neurons=4000, maxiter=160, seed=0, checkpoint=args.checkpoint, **how)
    print(f"{fit}\nMonte Carlo error of the solve: {fit.mc_error[0]:.3g} (m), {fit.mc_error[1]:.3g} (Sigma)\n")
    law, c, norm = fit.proposal, fit.lambda1 * fit.N1, np.linalg.norm(Y)
    target = sf.moves._tilt_target(X, fit.activation, fit.lambda0, c)
    ctx = dict(X=X, activation=fit.activation, lambda0=fit.lambda0, c=c)
    rng = np.random.default_rng(77)

    def tempered():
        g, xi, _, _, _ = sf.moves._renewed(law.proposal, fit.m, fit.Sigma, target, 30, rng, 0.5, tempered=True, **ctx)
        return g, replace(g, noise=xi).draw(fit.lambda0)[0]

    print("1. The noise of one population of 4 000 (tempered), in |N1 E[s y^T]| / |Y|\n\n"
          "| population | specialists of N1: plain; along u integrated | standard error within: plain; integrated |\n"
          "|---|---|---|")
    means = {"plain": [], "integrated": []}
    for i in range(args.populations):
        plain, quad, spec, spec_q = m_moments(fit, tempered()[1], u)
        means["plain"].append(plain.mean(axis=0))
        means["integrated"].append(quad.mean(axis=0))
        se = [np.linalg.norm(v.std(axis=0)) / np.sqrt(len(v)) / norm for v in (plain, quad)]
        print(f"| {i} | {spec:.2f}; {spec_q:.2f} | {se[0]:.4f}; {se[1]:.4f} |", flush=True)
    for k, v in means.items():
        v = np.array(v)
        print(f"\n{k}: spread between the populations {np.linalg.norm(v.std(axis=0, ddof=1)) / norm:.4f}; "
              f"residual of m against their mean {np.linalg.norm(fit.T * fit.m + v.mean(axis=0) - Y) / norm:.3f}")

    print("\n2. One tempered population moved at the fixed field\n\n"
          "| population | specialists of N1 | residual of m | mean log tilt |\n|---|---|---|---|")
    g, w = tempered()

    def row(tag):
        s, y, log_tilt = parts(fit, w)
        res = np.linalg.norm(fit.T * fit.m + fit.N1 * s.T @ y / len(w) - Y) / norm
        print(f"| {tag} | {fit.N1 * np.mean((w @ u) ** 2 > 9):.2f} | {res:.3f} | {log_tilt.mean():.3f} |", flush=True)

    row("tempered")
    h, steps = 0.5, 0
    for i in range(3):
        w, acc = gibbs_along(fit, w, u, rng)
        row(f"+ a move along u ({acc:.0%} accepted)")
    for _ in range(6):
        xi, _, _, h = sf.moves._moved(g.coordinates(w, fit.lambda0), target.at(g, fit.m, fit.Sigma), 40, rng, h=h)
        w, steps = replace(g, noise=xi).draw(fit.lambda0)[0], steps + 40
        row(f"+ {steps} Langevin steps")
        w, acc = gibbs_along(fit, w, u, rng)
        row(f"  + a move along u ({acc:.0%} accepted)")

    print("\n3. fit.verify")
    for moves in (30, 240):
        t = time.perf_counter()
        v = fit.verify(populations=4, moves=moves)
        print(f"{v} ({time.perf_counter() - t:.0f} s; mean log tilt {np.round(v.log_tilt, 3).tolist()})", flush=True)


if __name__ == "__main__":
    main()
