r"""Where chains start. Two chains from the prior that agree and stop drifting can still share a trap: the posterior of
a finite network can be metastable. Chains from physically different starts that agree cannot share one, so
``renormpp run`` can start the chains of one point from several kinds (``run.starts``) and judge agreement across the
kinds (:func:`renormpp.mcstats.chain_spread` with ``groups``; :func:`renormpp.diagnostics.compare`, "starts
disagree: not equilibrium").

Kinds of start (:data:`KINDS`), each a position of the sampled sites (unconstrained; every site of the networks of
:mod:`renormpp.models` has a Normal prior, so constrained and unconstrained coincide):

* ``"prior"``: a draw from the prior (the paper's start, NumPyro's ``init_to_sample``);
* ``"mode"``: a network trained to a mode of the sampled density from a prior draw: ``steps`` L-BFGS iterations
  (optax's, with its zoom line search) on its potential energy
  :math:`U = \frac{1}{2T}\sum_\mu\|y^\mu - f(x^\mu)\|^2 + \frac{\lambda_0}{2}\|w\|^2 + \frac{\lambda_1}{2}\|v\|^2`
  (with v integrated out, the first layer of that trained network: the mode of w's marginal is a degenerate one,
  w -> 0, where the erf units are linear and the chains freeze): the network of the optax baseline (:mod:`renormpp.baselines.adam`)
  at its MAP setting :math:`l_2 = 2T\lambda/P`, full batch, trained to convergence, a network that fits the
  training data as well as the posterior's penalty allows. (Adam at the baseline's learning rates stops short of
  the minimum: on the 5-unit network of ``tests/test_starts.py`` U = 92.6 after 3000 steps, L-BFGS 74.8 in 200.);
* ``"scaled"``: a prior draw with every weight multiplied by ``scale`` (default 0.5: half the prior's scale, the
  erf units in their linear range; 2: saturated).

:func:`assign` shares the chains out among the kinds; :func:`positions` makes their starting points.
"""
from __future__ import annotations

from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

KINDS = ("prior", "mode", "scaled")


def check_kinds(kinds: Sequence[str]) -> list[str]:
    """``kinds`` as a list, with a ValueError that names the allowed kinds for an unknown or repeated one."""
    kinds = [kinds] if isinstance(kinds, str) else list(kinds)
    if not kinds:
        raise ValueError(f"give at least one kind of start, from {KINDS}")
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise ValueError(f"unknown kind(s) of start {bad}: use {', '.join(map(repr, KINDS))}")
    if len(set(kinds)) != len(kinds):
        raise ValueError(f"a kind of start is given twice in {kinds}")
    return kinds


def assign(kinds: Sequence[str], num_chains: int) -> list[str]:
    """The kind of start of each chain: chain c starts from ``kinds[c % len(kinds)]``. Every kind needs a chain."""
    kinds = check_kinds(kinds)
    if num_chains < len(kinds):
        raise ValueError(f"{len(kinds)} kinds of start {kinds} need at least {len(kinds)} chains; got num_chains = "
                         f"{num_chains}: raise sampler.num_chains (e.g. to {2 * len(kinds)}: two chains per kind)")
    return [kinds[c % len(kinds)] for c in range(num_chains)]


def _prior(model: Callable, model_args, model_kwargs) -> Callable:
    """``draw(key) -> {site: value}``: the latent sites of one prior draw of ``model``."""
    from numpyro import handlers

    from .binding import is_plain

    def draw(key):
        trace = handlers.trace(handlers.seed(model, key)).get_trace(*model_args, **model_kwargs)
        if not is_plain(trace):
            raise ValueError("starts other than the sampler's own need a model whose latent sites are all real "
                             "(unconstrained), as the networks of renormpp.models are")
        return {name: site["value"] for name, site in trace.items()
                if site["type"] == "sample" and not site["is_observed"]}

    return draw


def _descend(model: Callable, model_args, model_kwargs, steps: int) -> Callable:
    """``train(params) -> params``: ``steps`` L-BFGS iterations (optax's, with its zoom line search) on the model's
    potential energy from ``params``."""
    import optax
    from numpyro.infer.initialization import init_to_sample

    from ..precision import full_precision
    from .binding import initialize

    _, potential_gen, _ = initialize(jax.random.PRNGKey(0), model, init_to_sample, model_args, model_kwargs)
    U = potential_gen(*model_args, **model_kwargs)
    opt = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(U)

    @full_precision()
    def train(params):
        def step(carry, _):
            p, s = carry
            value, grad = value_and_grad(p, state=s)
            updates, s = opt.update(grad, s, p, value=value, grad=grad, value_fn=U)
            return (optax.apply_updates(p, updates), s), None

        (params, _), _ = jax.lax.scan(step, (params, opt.init(params)), None, length=steps)
        return params

    return train


def positions(rng_key, model: Callable, kinds: Sequence[str], model_args=(), model_kwargs=None, *,
              scale: float = 0.5, steps: int = 1000) -> dict:
    """The starting points of chains of ``model``, one per entry of ``kinds`` (the kind of start of each chain,
    :func:`assign`), stacked on a leading chain axis: ``init_params`` for :meth:`renormpp.infer.Chains.init` or
    ``numpyro.infer.MCMC.run``. Each chain's start is made from its own prior draw (``rng_key`` split per chain).

    Parameters
    ----------
    rng_key : jax.Array
        The key; split per chain.
    model : callable
        The NumPyro model.
    kinds : sequence of str
        The kind of start of each chain (:data:`KINDS`).
    model_args : tuple, default ()
        The model's arguments.
    model_kwargs : dict, optional
        The model's keyword arguments.
    scale : float, default 0.5
        The scale of a ``"scaled"`` start's prior draw.
    steps : int, default 1000
        L-BFGS iterations of a ``"mode"`` start.

    Returns
    -------
    dict
        The sites' starting values, with a leading chain axis.
    """
    model_kwargs = dict(model_kwargs or {})
    kinds = list(kinds)
    check_kinds(list(dict.fromkeys(kinds)))
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"the scale of a 'scaled' start must be a finite number > 0; got {scale!r}")
    if int(steps) != steps or steps < 1:
        raise ValueError(f"a 'mode' start needs steps >= 1 (L-BFGS iterations); got {steps!r}")
    params = jax.jit(jax.vmap(_prior(model, model_args, model_kwargs)))(jax.random.split(rng_key, len(kinds)))

    def where(kind: str):
        return np.array([c for c, k in enumerate(kinds) if k == kind], dtype=int)

    scaled, mode = where("scaled"), where("mode")
    if scaled.size:
        params = jax.tree_util.tree_map(lambda x: x.at[scaled].multiply(scale), params)
    if mode.size:  # only the chains that start from the mode are trained: the whole network, v included
        joint = {**model_kwargs, "integrate_v": False} if model_kwargs.get("integrate_v") else model_kwargs
        keys = jax.random.split(rng_key, len(kinds))[mode]
        network = jax.jit(jax.vmap(_prior(model, model_args, joint)))(keys)  # the same w as ``params``'
        trained = jax.jit(jax.vmap(_descend(model, model_args, joint, int(steps))))(network)
        params = {k: x.at[mode].set(trained[k]) for k, x in params.items()}
    return params
