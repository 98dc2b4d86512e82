"""A small problem where a finite network's neurons specialize, and its posterior by NUTS: P Gaussian inputs in N0
dimensions split into two classes by a hyperplane (D = 2, one-hot labels), the network sampled with v integrated
out (the theories beyond kernel renormalization are checked against it)."""
from __future__ import annotations

import numpy as np

import renormpp as rp


def hyperplane_problem(P: int = 60, N0: int = 6, P_test: int = 300, seed: int = 0):
    """Training and test sets (X, Y, X0, Y0) and the hyperplane's unit normal u."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal(N0)
    u /= np.linalg.norm(u)

    def data(n):
        X = rng.standard_normal((n, N0))
        return X, np.eye(2)[(X @ u > 0).astype(int)]

    X, Y = data(P)
    X0, Y0 = data(P_test)
    return X, Y, X0, Y0, u


def nuts_posterior(X, Y, X0, Y0, *, N1: int, T: float, key: int = 0, num_warmup: int = 500, num_samples: int = 1000):
    """NUTS on the network with v integrated out, 2 chains (float64): the hidden weights w (draws, N1, N0) and, per
    draw, eps_g and the readout overlaps with v averaged out exactly (:func:`renormpp.readout.rao_blackwell`)."""
    import jax
    from numpyro.infer import MCMC, NUTS

    from renormpp.readout import rao_blackwell

    with jax.enable_x64(True):
        mcmc = MCMC(NUTS(rp.models.one_hidden_layer), num_warmup=num_warmup, num_samples=num_samples, num_chains=2,
                    chain_method="sequential", progress_bar=False)
        mcmc.run(jax.random.PRNGKey(key), X, Y, N1=N1, T=T, integrate_v=True)
        w = np.asarray(mcmc.get_samples()["w"])
        out = jax.jit(jax.vmap(rao_blackwell(X, Y, X0, Y0, T=T, lambda1=1.0)))({"w": w})
    return w, np.asarray(out["eps_g"]), np.asarray(out["overlap"])
