"""At a tempered solve's converged field: do its tempered populations sit at (F1), and how far apart? (issue 46)

Reads the finished checkpoint of ``studies/field_equilibrium.py --tempered --N1 100 --seed 0 --maxiter 160
--checkpoint PATH`` (MNIST (0, 1), P = 200, 4 000 neurons; the solve returns at once from it) and, at its field,
reports for new tempered populations (from the fitted proposal: two streams with the default effective sample size
0.8 a stage, one with 0.99; from the prior: two with 0.8, one with 0.999) and for the first one moved on
``--blocks`` (120, 240, 480) Langevin steps (``--long N``: another moved on N steps): the residual of m against the
population's own moments of (F2), its training error and ε_g as one population, its specialists of N1 and its mean
log tilt. Independent populations at (F1) agree within their Monte Carlo error; a population that shifts when moved
on was not at (F1).

Run:  .venv/bin/python studies/tempered_populations.py --checkpoint runs/a2_tempered.npz [--root DATA] [--long 2000]
      (about 10 minutes on 2 cores, and 15 more for --long 2000)
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
ap.add_argument("--blocks", type=lambda v: [int(b) for b in v.split(",")], default=[120, 120, 240],
                help="steps of the blocks the first population is moved on")
ap.add_argument("--long", type=int, default=0, help="also one population moved on this many steps, 250 a block")
args = ap.parse_args()
if not Path(args.checkpoint).exists():
    sys.exit(f"no checkpoint at {args.checkpoint}: run studies/field_equilibrium.py --tempered --N1 100 --seed 0 "
             f"--maxiter 160 --checkpoint {args.checkpoint} first")
d = rp.datasets.mnist(classes=(0, 1), P=200, P_test=1000, root=args.root, seed=0)
X, Y = np.asarray(d.X, float), np.asarray(d.Y, float)
X0, Y0 = np.asarray(d.X_test, float), np.asarray(d.Y_test, float)
u = directions(X, Y, Y - Y.mean(axis=0))["labels"]
fit = sf.solve(X, Y, N1=100, T=0.01, neurons=4000, maxiter=160, seed=0, fresh=True, tempered=True, moves=30,
               checkpoint=args.checkpoint)
print(fit, flush=True)
law = fit.proposal
target = sf.moves._tilt_target(X, "erf", 1.0, law.c)
ctx = dict(X=X, activation="erf", lambda0=1.0, c=law.c)
K = kernels.nngp(X, lambda0=1.0, activation="erf")


def row(gauss, xi, tag):
    """One table row: the population ``xi`` (coordinates under ``gauss``) at the fit's field."""
    one = replace(fit, proposal=replace(law, proposal=gauss, moved=xi), populations=1, fresh=False, tempered=False)
    w, s, rho0, C, y, rho = one._law()
    res = sf.equations._field(*sf.equations._guarded_moments(s, rho, C, y, sf.equations._control(s, s, rho0, K), fit.N1, fit.T), fit.m,
                    fit.Sigma, Y, fit.T)[2]
    e = fe.errors(one, X, Y, X0, Y0)
    lt = sf.equations._per_neuron(s, fit.m, fit.Sigma, law.c)[2]
    print(f"| {tag} | {res[0]:.3f} | {e['train_mse']:.4f} | {e['test_bias2'] + e['test_var']:.4f} | "
          f"{fit.N1 * np.mean((w @ u)**2 > 9):.2f} | {lt.mean():.3f} |", flush=True)


def moved_on(g, xi, rng, h, blocks):
    """Rows of the population ``xi`` moved on ``blocks`` Langevin steps at a time at the fit's field."""
    total = 0
    for b in blocks:
        xi, _, _, h = sf.moves._moved(xi, target.at(g, fit.m, fit.Sigma), b, rng, h=h)
        total += b
        row(g, xi, f"  moved on {total}")


def tempered(g, seed, ess=sf.moves._STAGE_ESS, name="from the fitted proposal"):
    """A tempered population from the Gaussian ``g`` (its coordinates are tempered from g's unit normals), its row."""
    rng = np.random.default_rng(seed)
    t = time.perf_counter()
    xi, rates, _, h, betas, _ = sf.moves._tempered(rng.standard_normal(g.noise.shape), target.at(g, fit.m, fit.Sigma),
                                          rng, ess=ess)
    row(g, xi, f"{name}, ESS {ess:g}, stream {seed}: {len(betas) - 1} stages, {len(rates)} steps, "
               f"{time.perf_counter() - t:.0f} s")
    return xi, rng, h


print("| population | residual of m | training MSE | ε_g (one population) | specialists of N1 | mean log tilt |\n"
      "|---|---|---|---|---|---|")
fitted = sf.proposals._fitted(replace(law.proposal, noise=np.random.default_rng(10).standard_normal(law.proposal.noise.shape)),
                    fit.m, fit.Sigma, **ctx)[0]  # the proposal fitted at the field, as _renewed fits it
prior = sf.Proposal.prior(law.proposal.noise, law.proposal.basis, 1.0)  # the tempering from the prior
moved_on(fitted, *tempered(fitted, 11), args.blocks)
tempered(fitted, 12)
tempered(fitted, 13, ess=0.99)
tempered(prior, 21, name="from the prior")
tempered(prior, 22, name="from the prior")
tempered(prior, 23, ess=0.999, name="from the prior")
if args.long:
    moved_on(fitted, *tempered(fitted, 31), [250] * (args.long // 250))
