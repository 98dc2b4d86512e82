r"""A pure sampler core in BlackJAX's style: states and infos as NamedTuples, and small pure functions.

Every kernel here works on a *flat* array position :math:`\theta \in \mathbb R^n` and a potential energy
:math:`U(\theta) = -\log p(\theta) + {\rm const}`, and knows nothing of NumPyro; :mod:`renormpp.infer` wraps
them as ``numpyro.infer.mcmc.MCMCKernel`` adapters.

* :mod:`.base`: the shared state (position, potential energy, gradient), ``select``, an inner loop of k
  updates that counts acceptance and divergences, and an exact Gibbs step;
* :mod:`.langevin`: the unadjusted Langevin algorithm (ULA) and its Metropolis-adjusted form (MALA);
* :mod:`.kinetic`: underdamped Langevin dynamics (OBABO), Metropolis-adjusted (generalized HMC) or not;
* :mod:`.metrics`: the mass of kinetic Langevin, diagonal or shared by the rows of a weight matrix;
* :mod:`.sampling`: a whole run (warmup, then draws, chains vectorized) as one function, the signature of a sampler
  passed to a theory that samples (:func:`.sampling.ghmc`);
* :mod:`.adaptation`: step size by dual averaging and the mass from the warmup draws, on NumPyro's
  ``dual_averaging`` and ``welford_covariance``.

A kernel is built once and called as ``kernel(rng_key, state, potential_fn, step_size, ...) -> (state, info)``::

    from renormpp import mcmc
    step = mcmc.langevin.build_kernel(adjust=True)                 # MALA
    state = mcmc.langevin.init(jnp.zeros(3), potential_fn)
    state, info = step(key, state, potential_fn, 0.1)
    draw = mcmc.base.inner_loop(step, 10)                          # 10 updates per recorded draw
"""
from . import adaptation, base, kinetic, langevin, metrics, sampling

__all__ = ["adaptation", "base", "kinetic", "langevin", "metrics", "sampling"]
