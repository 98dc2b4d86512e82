r"""The single-neuron laws (S2) and (S3) of :mod:`renormpp.theory.single_neuron`, sampled exactly by the package's
samplers: the theory gives the log-density of one neuron's weights, the sampling is an experiment's."""
from __future__ import annotations

import functools

import numpy as np

from ..network import ActivationLike
from ..theory.single_neuron import log_cavity, log_tilt


def sample_tilted(X, G=None, *, cavity: tuple | None = None, lambda0: float = 1.0, activation: ActivationLike = "erf",
                  num_warmup: int = 1000, num_samples: int = 2000, num_chains: int = 4, seed: int = 0,
                  sampler: str = "tempered", replicas: int = 16, beta_min: float = 0.003, progress_bar: bool = False):
    """Draws of one neuron's weights from (S2) with tilt ``G``, or from (S3) with ``cavity = (B, Y, c)`` (chains
    vectorized, float32): ``(w, mcmc)`` with w of shape (chains, draws, N0).

    ``sampler="tempered"`` (default): replica exchange (:class:`renormpp.infer.ReplicaExchange`, ``replicas`` rungs
    from the law down to ``beta_min`` times its data factor, kinetic Langevin in each). The laws are multimodal (a
    neuron aligned with the labels or not, and the sign of w): on MNIST at P = 200 eight NUTS chains of (S2) held
    their modes (R-hat of (u.w)^2 up to 4) and gave E (u.w)^2 = 6.3 along the first principal direction where the
    ladder, crossing between the modes hundreds of times, gives 0.9. ``sampler="nuts"``: NumPyro NUTS, for a law
    with one mode."""
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from numpyro.infer import MCMC, NUTS

    X = np.asarray(X, dtype=np.float32)
    if (G is None) == (cavity is None):
        raise ValueError("give either G (the tilt of (S2)) or cavity = (B, Y, c) (the cavity law (S3))")
    M = np.asarray(G if G is not None else cavity[0], dtype=np.float64)
    if M.shape != (X.shape[0], X.shape[0]) or not np.all(np.isfinite(M)):
        raise ValueError(f"{'G' if G is not None else 'B'} must be a finite (P, P) matrix with P = {X.shape[0]}; "
                         f"got shape {M.shape}")
    if lambda0 <= 0:
        raise ValueError(f"lambda0 must be positive; got {lambda0}")
    Xj, Mj = jnp.asarray(X), jnp.asarray(0.5 * (M + M.T), dtype=jnp.float32)
    if G is not None:
        factor = functools.partial(log_tilt, X=Xj, G=Mj, activation=activation)
    else:
        Yj = jnp.asarray(np.asarray(cavity[1], dtype=np.float32).reshape(X.shape[0], -1))
        factor = functools.partial(log_cavity, X=Xj, B=Mj, Y=Yj, c=float(cavity[2]), activation=activation)

    def model():
        w = numpyro.sample("w", dist.Normal(0.0, 1.0 / np.sqrt(lambda0)).expand([X.shape[1]]).to_event(1))
        numpyro.factor("tilt", factor(w))

    if sampler == "nuts":
        kernel = NUTS(model)
    elif sampler == "tempered":
        from ..infer import KineticLangevin, ReplicaExchange, geometric_ladder

        kernel = ReplicaExchange(KineticLangevin(model, step_size=1e-2, inner_steps=10),
                                 geometric_ladder(replicas, beta_min))
    else:
        raise ValueError(f"sampler must be 'tempered' or 'nuts'; got {sampler!r}")
    mcmc = MCMC(kernel, num_warmup=num_warmup, num_samples=num_samples, num_chains=num_chains,
                chain_method="vectorized", progress_bar=progress_bar)
    mcmc.run(jax.random.PRNGKey(seed))
    return np.asarray(mcmc.get_samples(group_by_chain=True)["w"], dtype=np.float64), mcmc
