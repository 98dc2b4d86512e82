"""A fixed workload that says how fast a machine is, in seconds: what the README's time promises are scaled by.

It is the kind of work the demo does, written without renormpp (so that a slower renormpp cannot slow it): JAX
compiles and runs a loop of Langevin steps on the potential of a one-hidden-layer erf network (P = 200, N0 = 50,
N1 = 200, D = 3, float32), twice with new programs (compilation counts, as in the demo's every width), and NumPy
diagonalizes a 400 x 400 kernel ten times. About 5 s on a 2-core AMD EPYC. Run it alone for a machine's figure:

    python tests/reference_workload.py        # prints {"seconds": ...}

The persistent compilation cache is switched off here (a cached program would measure the disk, not the machine).
"""
from __future__ import annotations

import json
import os
import time

os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

P, N0, N1, D, STEPS = 200, 50, 200, 3, 1500


def _langevin(seed: int):
    """Compile and run STEPS Langevin steps of a fresh program; returns the last potential (so nothing is skipped)."""
    rng = np.random.default_rng(seed)
    X = jnp.asarray(rng.normal(size=(P, N0)), jnp.float32)
    Y = jnp.asarray(rng.normal(size=(P, D)), jnp.float32)

    def potential(theta):
        w, v = theta
        f = jax.scipy.special.erf(X @ w.T / np.sqrt(N0)) @ v.T / np.sqrt(N1)
        return 0.5 * jnp.sum((Y - f) ** 2) / 0.01 + 0.5 * jnp.sum(w**2) + 0.5 * jnp.sum(v**2) + seed * 0.0

    grad = jax.grad(potential)

    def step(i, carry):
        theta, key = carry
        key, k1, k2 = jax.random.split(key, 3)
        g = grad(theta)
        h = 1e-4
        theta = (theta[0] - h * g[0] + jnp.sqrt(2 * h) * jax.random.normal(k1, theta[0].shape),
                 theta[1] - h * g[1] + jnp.sqrt(2 * h) * jax.random.normal(k2, theta[1].shape))
        return theta, key

    @jax.jit
    def run(theta, key):
        theta, _ = jax.lax.fori_loop(0, STEPS, step, (theta, key))
        return potential(theta)

    theta = (jnp.asarray(rng.normal(size=(N1, N0)), jnp.float32), jnp.asarray(rng.normal(size=(D, N1)), jnp.float32))
    return float(run(theta, jax.random.PRNGKey(seed)))


def _eigh():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(400, 400))
    K = A @ A.T / 400
    return sum(float(np.linalg.eigh(K)[0][-1]) for _ in range(10))


def seconds() -> float:
    """The workload's wall time in seconds."""
    t0 = time.perf_counter()
    for seed in (1, 2):
        _langevin(seed)
    _eigh()
    return time.perf_counter() - t0


if __name__ == "__main__":
    print(json.dumps({"seconds": round(seconds(), 2)}))
