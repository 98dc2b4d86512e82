"""At a tempered solve's converged field: do its tempered populations sit at (F1), and how far apart? (issue 46)

Reads the finished checkpoint of ``benchmarks/field_equilibrium.py --tempered --N1 100 --seed 0 --maxiter 160
--checkpoint PATH`` (MNIST (0, 1), P = 200, 4 000 neurons; the solve returns at once from it) and, at its field,
reports for new tempered populations (two streams; the default effective sample size 0.8 a stage, and 0.99) and for
the first one moved on 120, 240, 480 Langevin steps: the residual of m against the population's own moments of (F2),
its training error and ε_g as one population, its specialists of N1 and its mean log tilt. Independent populations at
(F1) agree within their Monte Carlo error; a population that shifts when moved on was not at (F1).

Run:  .venv/bin/python benchmarks/tempered_populations.py --checkpoint runs/a2_tempered.npz [--root DATA]
      (about 6 minutes on 2 cores)
"""
import argparse
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

import renormpp as rp
from renormpp import kernels
from renormpp.theory import shared_field as sf
from renormpp.theory.single_neuron import directions

sys.path.insert(0, str(Path(__file__).parent))
import field_equilibrium as fe  # noqa: E402

warnings.simplefilter("ignore")
ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--root", help="the data sets' folder (default: the loaders' rules, RENORMPP_DATA)")
ap.add_argument("--checkpoint", required=True, help="the finished checkpoint of the tempered solve")
args = ap.parse_args()
if not Path(args.checkpoint).exists():
    sys.exit(f"no checkpoint at {args.checkpoint}: run benchmarks/field_equilibrium.py --tempered --N1 100 --seed 0 "
             f"--maxiter 160 --checkpoint {args.checkpoint} first")
d = rp.datasets.mnist(classes=(0, 1), P=200, P_test=1000, root=args.root, seed=0)
X, Y = np.asarray(d.X, float), np.asarray(d.Y, float)
X0, Y0 = np.asarray(d.X_test, float), np.asarray(d.Y_test, float)
u = directions(X, Y, Y - Y.mean(axis=0))["labels"]
fit = sf.solve(X, Y, N1=100, T=0.01, neurons=4000, maxiter=160, seed=0, fresh=True, tempered=True, moves=30,
               checkpoint=args.checkpoint)
print(fit, flush=True)
law = fit.proposal
target = sf._tilt_target(X, "erf", 1.0, law.c)
ctx = dict(X=X, activation="erf", lambda0=1.0, c=law.c)
K = kernels.nngp(X, lambda0=1.0, activation="erf")


def row(gauss, xi, tag):
    """One table row: the population ``xi`` (coordinates under ``gauss``) at the fit's field."""
    one = replace(fit, proposal=replace(law, proposal=gauss, moved=xi), populations=1, fresh=False, tempered=False)
    w, s, rho0, C, y, rho = one._law()
    res = sf._field(*sf._guarded_moments(s, rho, C, y, sf._control(s, s, rho0, K), fit.N1, fit.T), fit.m,
                    fit.Sigma, Y, fit.T)[2]
    e = fe.errors(one, X, Y, X0, Y0)
    lt = sf._per_neuron(s, fit.m, fit.Sigma, law.c)[2]
    print(f"| {tag} | {res[0]:.3f} | {e['train_mse']:.4f} | {e['test_bias2'] + e['test_var']:.4f} | "
          f"{fit.N1 * np.mean((w @ u)**2 > 9):.2f} | {lt.mean():.3f} |", flush=True)


print("| population | residual of m | training MSE | eps_g (one population) | specialists | mean log tilt |\n"
      "|---|---|---|---|---|---|")
for seed in (11, 12):
    rng = np.random.default_rng(seed)
    t = time.time()
    g, xi, rates, _, h = sf._renewed(law.proposal, fit.m, fit.Sigma, target, 30, rng, 0.5, tempered=True, **ctx)
    row(g, xi, f"tempered (ess 0.8), seed {seed}, {len(rates)} steps, {time.time()-t:.0f} s")
    if seed == 11:
        tot = 0
        for b in (120, 120, 240):
            xi, _, _, h = sf._moved(xi, lambda z: target(z, g, fit.m, fit.Sigma), b, rng, h=h); tot += b
            row(g, xi, f"  moved on {tot}")
rng = np.random.default_rng(13)
g = sf._fitted(replace(law.proposal, noise=rng.standard_normal(law.proposal.noise.shape)), fit.m, fit.Sigma, **ctx)[0]
t = time.time()
xi, rates, _, h, betas = sf._tempered(rng.standard_normal(g.noise.shape), lambda z: target(z, g, fit.m, fit.Sigma),
                                      rng, ess=0.99)
row(g, xi, f"tempered (ess 0.99), {len(betas)-1} stages, {len(rates)} steps, {time.time()-t:.0f} s")
