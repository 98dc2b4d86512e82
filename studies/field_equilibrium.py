"""Is a shared-field solve's field a fixed point of (F1)'s law, or of its own population? (issue 46)

``rp.theory.shared_field.solve`` (``proposal="mcmc"``) moves one population of neurons ``steps`` (3) Langevin steps
an iteration and stops where the field's residual against the moments averaged over its iterations is below ``tol``.
This script solves MNIST (0, 1) at P = 200 and one width, then keeps the field fixed and

1. moves the solve's last population on by the same exact (Metropolis-adjusted) steps, and at each stage reports the
   residual of the fixed field against this population's own moments of (F2), the mean squared error of the
   population's predicted mean on the training labels and on the test set, the predicted variance, the number of
   specialists ((u·w)² > 9 on the label direction, studies/specialists.py) and the weights' mean squared norm in
   the row space of X and its null space (the prior's: rank and N0 - rank);
2. predicts with ``--populations`` populations ``--spacing`` steps apart (``dataclasses.replace(fit, steps=...)``)
   and reports the same errors: if the field solves (F2) for (F1)'s law, the training error of an average over many
   populations is small (the m-equation of (F2) is T m + N1 E[y s] = Y); if it stays at single populations' level,
   the field was fitted to the solve's own population.

``--fresh`` solves with ``fresh=True`` instead (each iteration's population drawn anew and moved ``--moves`` steps,
independent of the last); its predictions are fresh populations too, and item 2 draws them from another random
stream than the solve's own prediction.

``--tempered`` (implies ``--fresh``): each population taken to (F1) by tempered sequential Monte Carlo instead.

``--verify 4`` only tests the solve's field on 4 new populations moved 30 and then 240 steps to (F1) at it
(``fit.verify``: the residuals of (F2) against their moments, with the jackknife error over the populations;
``--verify-moves 480`` other step counts, ``--verify-seed 1`` another random stream than the solve's seed).
``--predict 4`` (with or without ``--verify``) only predicts from 4 fresh populations at the solve's field, each moved
``--predict-moves`` (240) steps from the proposal fitted there (``replace(fit, fresh=True, ...)``, stream
``--verify-seed``): the training error of the predicted mean, the test bias², variance and ε_g. Where the field is
a fixed point of (F1)'s law this is the theory's prediction at it; a solve that did not converge is measured all the
same, and the output says so.

``--formation 30,30,60,120,240`` only measures how fast (F1)'s specialists form: the proposal's neurons at the exact
theory's field moved on at that field, their specialists and mean log tilt after each block; with ``--tempered`` the
neurons start from a tempered population instead (at equilibrium, the rows stay flat).

Run:  .venv/bin/python studies/field_equilibrium.py [--root DATA] [--N1 20] [--seed 1]   (about 15 minutes on 2
      cores at 4 000 neurons: the solve 5, the moves 3, the spaced prediction 5)
      .venv/bin/python studies/field_equilibrium.py --fresh [...]     (about an hour: 30 steps an iteration)
      .venv/bin/python studies/field_equilibrium.py --quick                              (smoke run)
"""
from __future__ import annotations

import argparse
import json
import time
import warnings
from dataclasses import replace

import numpy as np

import renormpp as rp
from renormpp import kernels
from renormpp.theory import shared_field as sf
from renormpp.theory.single_neuron import directions

T = 0.01


def errors(fit, X, Y, X0, Y0):
    """Training and test mean squared errors of ``fit``'s predicted mean, and its mean predicted variance (test)."""
    pred = fit.predict(np.vstack([X, X0]))
    P = len(X)
    return dict(train_mse=float(np.mean(np.sum((Y - pred.mean[:P]) ** 2, axis=1))),
                test_bias2=float(np.mean(np.sum((Y0 - pred.mean[P:]) ** 2, axis=1))),
                test_var=float(np.mean(pred.var[P:].sum(axis=1))))


def moved_on(fit, X, Y, X0, Y0, blocks, u, seed=7):
    """Rows of item 1: the solve's population moved on ``blocks`` steps at a time at the fixed field."""
    law, K = fit.proposal, kernels.nngp(X, lambda0=fit.lambda0, activation=fit.activation)
    target = sf.moves._tilt_target(X, fit.activation, fit.lambda0, law.c)
    rows_space = np.linalg.svd(X, full_matrices=False)[2]
    rng, xi, h, total, rows = np.random.default_rng([seed, 8]), law.moved, law.step, 0, []
    for b in [0] + list(blocks):
        if b:
            xi, _, _, h = sf.moves._moved(xi, target.at(law.proposal, fit.m, fit.Sigma), b, rng, h=h)
            total += b
        one = replace(fit, proposal=replace(law, moved=xi), populations=1, fresh=False, tempered=False)  # its own
        w, s, rho0, C, y, rho = one._law()
        res = sf.equations._field(*sf.equations._guarded_moments(s, rho, C, y, sf.equations._control(s, s, rho0, K), fit.N1, fit.T), fit.m,
                        fit.Sigma, Y, fit.T)[2]
        row_norm = float(np.mean(np.sum((w @ rows_space.T) ** 2, axis=1)))
        rows.append(dict(steps=total, residual_m=float(res[0]), residual_Sigma=float(res[1]),
                         specialists=float(fit.N1 * np.mean((w @ u) ** 2 * fit.lambda0 > 9)),
                         w2_row=row_norm, w2_null=float(np.mean(np.sum(w**2, axis=1))) - row_norm,
                         **errors(one, X, Y, X0, Y0)))
    return rows


def formation(X, Y, N1, M, blocks, u, seed=0, tempered=False):
    """How fast (F1)'s specialists form: ``M`` neurons of the proposal fitted at the exact theory's field (where the
    solves start), drawn by their weights (``tempered``: taken to (F1) by tempered SMC), then moved on by Langevin
    steps at that fixed field; the number of specialists of N1 and the mean log tilt after each block of ``blocks``
    steps."""
    law = sf.solve(X, Y, N1=N1, T=T, neurons=M, maxiter=1, tol=1.0, moves=1, populations=1).proposal
    m, Sigma = law.m, law.Sigma  # the exact theory's field: the solve's start, its one iteration not applied
    target, rng = sf.moves._tilt_target(X, "erf", 1.0, law.c), np.random.default_rng([seed, 9])
    t = time.perf_counter()
    gauss, xi, rates, _, h = sf.moves._renewed(law.proposal, m, Sigma, target, 0, rng, 0.5, X=X, activation="erf",
                                         lambda0=1.0, c=law.c, tempered=tempered)
    if tempered:
        print(f"(tempered: {len(rates)} Langevin steps in {time.perf_counter() - t:.0f} s)\n", flush=True)
    rows, total = [], 0
    for b in [0] + list(blocks):
        if b:
            xi, _, _, h = sf.moves._moved(xi, target.at(gauss, m, Sigma), b, rng, h=h)
            total += b
        w = replace(gauss, noise=xi).draw(1.0)[0]
        log_tilt = sf.equations._per_neuron(rp.theory.single_neuron.features(w, X, "erf").T, m, Sigma, law.c)[2]
        rows.append(dict(steps=total, specialists=float(N1 * np.mean((w @ u) ** 2 > 9)),
                         log_tilt=float(log_tilt.mean())))
        print(f"| {total} | {rows[-1]['specialists']:.1f} | {rows[-1]['log_tilt']:.2f} |", flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", help="the data sets' folder (default: the loaders' rules, RENORMPP_DATA)")
    ap.add_argument("--N1", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--neurons", type=int, default=4000)
    ap.add_argument("--blocks", default="30,30,30,30", help="steps of each stage of item 1")
    ap.add_argument("--populations", type=int, default=16)
    ap.add_argument("--spacing", type=int, default=30, help="steps between the populations of item 2")
    ap.add_argument("--out", default="field_equilibrium.json")
    ap.add_argument("--fresh", action="store_true", help="solve with fresh=True: each iteration's population new")
    ap.add_argument("--tempered", action="store_true", help="fresh populations by tempered SMC (tempered=True)")
    ap.add_argument("--moves", type=int, default=30, help="Langevin steps of each fresh population")
    ap.add_argument("--steps", type=int, default=3, help="Langevin steps of the one population an iteration")
    ap.add_argument("--maxiter", type=int, default=160, help="the solve's most iterations")
    ap.add_argument("--checkpoint", help="a .npz path where the solve saves its progress and continues from")
    ap.add_argument("--formation", default=None, help="only measure how fast the specialists form at the exact "
                    "theory's field, moved on blocks of these steps (e.g. 30,30,60,120,240)")
    ap.add_argument("--verify", type=int, default=0, help="only test the solve's field on this many new "
                    "populations at (F1) (fit.verify, 30 and 240 Langevin steps each) instead of items 1-2")
    ap.add_argument("--verify-moves", default="30,240", help="Langevin steps of --verify's populations")
    ap.add_argument("--verify-seed", type=int, default=None, help="the random stream of --verify's and --predict's "
                    "populations (default: the solve's seed)")
    ap.add_argument("--predict", type=int, default=0, help="only predict from this many fresh populations at the "
                    "solve's field (with --verify: after it)")
    ap.add_argument("--predict-moves", type=int, default=240, help="Langevin steps of --predict's populations")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    P, N1, M, maxiter = (40, 4, 300, 20) if args.quick else (200, args.N1, args.neurons, args.maxiter)
    blocks = [5, 5] if args.quick else [int(b) for b in args.blocks.split(",")]
    pops, spacing = (2, 5) if args.quick else (args.populations, args.spacing)
    d = rp.datasets.mnist(classes=(0, 1), P=P, P_test=200 if args.quick else 1000, root=args.root, seed=0)
    X, Y = np.asarray(d.X, float), np.asarray(d.Y, float)
    X0, Y0 = np.asarray(d.X_test, float), np.asarray(d.Y_test, float)
    u = directions(X, Y, Y - Y.mean(axis=0))["labels"]
    if args.formation:
        print(f"MNIST (0, 1), P = {P}, N1 = {N1}, {M} neurons at the exact theory's field\n\n"
              "| steps | specialists of N1 | mean log tilt |\n|---|---|---|")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rows = formation(X, Y, N1, M, [int(b) for b in args.formation.split(",")], u, args.seed, args.tempered)
        with open(args.out, "w") as f:
            json.dump(dict(P=P, N1=N1, neurons=M, seed=args.seed, tempered=args.tempered, formation=rows), f,
                      indent=1)
        return
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = sf.solve(X, Y, N1=N1, T=T, neurons=M, maxiter=maxiter, seed=args.seed, tol=1.0 if args.quick else None,
                       fresh=args.fresh or args.tempered, tempered=args.tempered,
                       moves=5 if args.quick else args.moves, steps=args.steps, progress=not args.quick,
                       checkpoint=args.checkpoint)
    solved = time.perf_counter() - t
    state = (f"converged at iteration {fit.n_iter}, Monte Carlo error of the field {fit.mc_error[0]:.2g} (m), "
             f"{fit.mc_error[1]:.2g} (Sigma)")
    if not fit.converged:  # measured all the same, and said so: the field its iterations reached
        state = (f"DID NOT CONVERGE ({fit.reason}; Monte Carlo error {fit.mc_error[0]:.2g}, {fit.mc_error[1]:.2g}); "
                 "the checks below are of the field it reached")
        fit = replace(fit, converged=True)
    if args.verify or args.predict:  # only the field against new populations at (F1), and (F3) from such
        print(f"MNIST (0, 1), P = {P}, N1 = {N1}, {M} neurons, seed {args.seed}: {state}")
        seed = fit.seed if args.verify_seed is None else args.verify_seed
        steps = [5, 10] if args.quick else [int(b) for b in args.verify_moves.split(",")]
        for moves in steps if args.verify else []:
            t = time.perf_counter()
            v = fit.verify(populations=args.verify, moves=moves, seed=seed, progress=not args.quick)
            print(f"{v} ({time.perf_counter() - t:.0f} s); mean log tilt of each population "
                  f"{np.round(v.log_tilt, 2).tolist()}", flush=True)
        if args.predict:
            t, moves = time.perf_counter(), 5 if args.quick else args.predict_moves
            e = errors(replace(fit, fresh=True, tempered=False, moves=moves, populations=args.predict, seed=seed),
                       X, Y, X0, Y0)
            print(f"(F3) from {args.predict} fresh populations of {moves} steps (stream {seed}): training MSE "
                  f"{e['train_mse']:.5f}, test bias² {e['test_bias2']:.5f}, test variance {e['test_var']:.5f}, "
                  f"ε_g {e['test_bias2'] + e['test_var']:.5f} ({time.perf_counter() - t:.0f} s)", flush=True)
        return
    rows = moved_on(fit, X, Y, X0, Y0, blocks, u)
    # a fresh fit's predictions are already independent populations: the second one draws them from another stream
    spaced = errors(replace(fit, populations=pops, steps=spacing,
                            seed=fit.seed + 1000 if fit.fresh else fit.seed), X, Y, X0, Y0)
    own = errors(fit, X, Y, X0, Y0)
    print(f"MNIST (0, 1), P = {P}, N1 = {N1} (α = {P / N1:g}), {M} neurons, seed {args.seed}: "
          f"{state} ({solved:.0f} s), rank of X {min(X.shape)}, N0 {X.shape[1]}\n")
    print("| steps moved on at the fixed field | residual of m | training MSE | test bias² | test variance | "
          "specialists | ‖w‖² row space; null space |\n|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['steps']} | {r['residual_m']:.3f} | {r['train_mse']:.5f} | {r['test_bias2']:.4f} | "
              f"{r['test_var']:.4f} | {r['specialists']:.2f} | {r['w2_row']:.0f}; {r['w2_null']:.0f} |")
    print("\n| prediction | training MSE | test bias² | test variance | ε_g |\n|---|---|---|---|---|")
    how = "tempered" if fit.tempered else f"{fit.moves} steps each"
    kind = (lambda n, k: f"{n} fresh populations ({how}){k}") if fit.fresh else (
        lambda n, k: f"{n} populations {spacing if k else fit.steps} steps apart")
    for name, e in ((f"the solve's ({kind(fit.populations, '')})", own), (kind(pops, ", another stream"), spaced)):
        print(f"| {name} | {e['train_mse']:.5f} | {e['test_bias2']:.4f} | {e['test_var']:.4f} | "
              f"{e['test_bias2'] + e['test_var']:.4f} |")
    with open(args.out, "w") as f:
        json.dump(dict(P=P, N1=N1, neurons=M, seed=args.seed, fresh=fit.fresh, tempered=fit.tempered, state=state, n_iter=fit.n_iter,
                       residuals=fit.residuals.tolist(), mc_error=list(fit.mc_error), moved_on=rows, own=own,
                       spaced=spaced, populations=pops, spacing=spacing), f, indent=1)


if __name__ == "__main__":
    main()
