"""Cost of the exact Gibbs draw of v | w and of the integrated sampler's gradient, in the data space (P x P) and in
the weight space (N1 x N1), at the benchmark problems' sizes (issue 17's lever "the Gibbs step's conditional").

Run:  .venv/bin/python studies/gibbs_draw.py            (about a minute)
      .venv/bin/python studies/gibbs_draw.py --quick    (smoke run)

For each (P, N0, N1, D): two chains (vmap), float32, jitted; the median over rounds of
(a) one Gibbs draw, ``readout.sample_readout(conditional(...))`` (data space, Matheron's rule) against
    ``readout.draw_readout`` (the smaller Gram matrix: the weight space where N1 < P);
(b) the gradient of log p(Y|w) (the integrated sampler's force): automatic differentiation of
    ``log_marginal(conditional(...))`` (P x P) and of the smaller Gram matrix's Cholesky form, against
    ``log_marginal_of`` (the smaller Gram matrix with the closed-form gradient);
(c) for scale, one gradient of the joint potential (what one kinetic update costs).
Within a round the contenders run in turn, so a change of the machine's load hits all of them alike.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from renormpp import readout
from renormpp.network import forward

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
from theory_speed import machine_info  # noqa: E402

SIZES = [(500, 100, 250, 3), (1000, 144, 1000, 10), (500, 784, 250, 10), (1000, 784, 1000, 10), (1000, 784, 250, 10)]
T, LAM = 0.01, 1.0


def contenders(X, Y):
    def data_space_draw(key, w):
        return readout.sample_readout(key, readout.conditional({"w": w}, X, Y, T=T, lambda1=LAM), Y, T=T)

    def weight_space_draw(key, w):
        return readout.draw_readout(key, {"w": w}, X, Y, T=T, lambda1=LAM)

    def data_space_grad(key, w):
        return jax.grad(lambda w: readout.log_marginal(readout.conditional({"w": w}, X, Y, T=T, lambda1=LAM), Y))(w)

    def weight_space_autodiff(key, w):  # the smaller Gram matrix, differentiated through its Cholesky factor
        def logp(w):
            A, L = readout._weight_space(readout.hidden({"w": w}, X, "erf"), T, LAM)
            P, N1 = A.shape
            if N1 >= P:
                return readout.log_marginal(readout.conditional({"w": w}, X, Y, T=T, lambda1=LAM), Y)
            half = jax.scipy.linalg.solve_triangular(L, A.T @ Y, lower=True)
            return (-0.5 * (jnp.sum(Y**2) - jnp.sum(half**2)) / T - Y.shape[1] * jnp.sum(jnp.log(jnp.diag(L)))
                    - 0.5 * Y.shape[1] * (P - N1) * jnp.log(T))
        return jax.grad(logp)(w)

    def weight_space_grad(key, w):
        return jax.grad(lambda w: readout.log_marginal_of({"w": w}, X, Y, T=T, lambda1=LAM))(w)

    def joint_grad(key, w):
        v = jnp.ones((Y.shape[1], w.shape[0]), w.dtype)
        return jax.grad(lambda w: jnp.sum((Y - forward({"w": w, "v": v}, X)) ** 2) / (2 * T))(w)

    return {"Gibbs draw, data space (P x P)": data_space_draw, "Gibbs draw, smaller Gram": weight_space_draw,
            "grad log p(Y|w), data space": data_space_grad, "grad log p(Y|w), smaller, autodiff": weight_space_autodiff,
            "grad log p(Y|w), smaller Gram": weight_space_grad,
            "grad of the joint potential": joint_grad}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    sizes = [(60, 10, 20, 2), (60, 10, 120, 2)] if args.quick else SIZES
    rounds = 2 if args.quick else args.rounds
    print(machine_info())
    print(f"two chains (vmap), float32, jitted; medians of {rounds} rounds, ms per call\n")
    for P, N0, N1, D in sizes:
        rng = np.random.default_rng(0)
        X = jnp.asarray(rng.standard_normal((P, N0)), jnp.float32)
        Y = jnp.asarray(rng.standard_normal((P, D)), jnp.float32)
        w = jnp.asarray(rng.standard_normal((2, N1, N0)), jnp.float32)
        keys = jax.random.split(jax.random.PRNGKey(0), 2)
        fns = {name: jax.jit(jax.vmap(f)) for name, f in contenders(X, Y).items()}
        for f in fns.values():
            jax.block_until_ready(f(keys, w))  # compile
        times = {name: [] for name in fns}
        for _ in range(rounds):
            for name, f in fns.items():
                reps = 5
                t0 = time.perf_counter()
                for _ in range(reps):
                    jax.block_until_ready(f(keys, w))
                times[name].append((time.perf_counter() - t0) / reps)
        med = {name: 1e3 * float(np.median(t)) for name, t in times.items()}
        print(f"(P, N0, N1, D) = ({P}, {N0}, {N1}, {D})")
        for name, t in med.items():
            print(f"  {name:36s} {t:9.2f} ms")
        print(f"  Gibbs draw: data space / smaller Gram = {med['Gibbs draw, data space (P x P)'] / med['Gibbs draw, smaller Gram']:.2f}x;"
              f"  grad log p(Y|w): {med['grad log p(Y|w), data space'] / med['grad log p(Y|w), smaller Gram']:.2f}x"
              f" (autodiff in the smaller Gram / closed form = "
              f"{med['grad log p(Y|w), smaller, autodiff'] / med['grad log p(Y|w), smaller Gram']:.2f}x);"
              f"  integrated gradient / joint gradient = {med['grad log p(Y|w), smaller Gram'] / med['grad of the joint potential']:.2f}x\n")


if __name__ == "__main__":
    main()
