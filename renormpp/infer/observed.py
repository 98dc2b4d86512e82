"""Any NumPyro kernel with observables recorded in its state, so that a long run keeps ``fn(params)`` per draw
instead of the parameters (a draw of w at N1=1000, N0=784 is 3 MB)."""
from __future__ import annotations

from collections import namedtuple
from typing import Callable

import jax
from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import identity, is_prng_key

from ..precision import full_precision
from .wrapper import ReadsThrough, Wrapper


class ObservedState(ReadsThrough, namedtuple("ObservedState", ["inner", "obs"])):
    """The wrapped kernel's state ``inner`` and the observables ``obs`` of its current point; every field of the
    inner state reads through (``state.z``, ``state.diverging``, ``state.rng_key``, ...: :class:`~.wrapper.ReadsThrough`)."""

    __slots__ = ()


class Observed(Wrapper):
    """``Observed(NUTS(model), fn)``: the kernel's draws, with ``fn(params)`` of the constrained parameters recorded
    in the state's ``obs`` (the sample field): e.g. ``fn = renormpp.observables.default(X_test, Y_test)``.

    Works with every ``chain_method`` and with ``post_warmup_state``; ``extra_fields`` read the inner state.

    Parameters
    ----------
    kernel : numpyro.infer.mcmc.MCMCKernel
        The wrapped kernel, e.g. ``NUTS(model)``.
    observables : callable
        ``fn(params) -> pytree`` of the constrained parameters, recorded per draw in place of the parameters.
    """

    def __init__(self, kernel: MCMCKernel, observables: Callable):
        self.inner, self.observables = kernel, observables
        self._batched = False

    @property
    def sample_field(self):
        return "obs"

    @property
    def default_fields(self):
        return ("obs",) + tuple(f for f in self.inner.default_fields if f != self.inner.sample_field)

    def postprocess_fn(self, model_args, model_kwargs):
        return identity

    def _observe(self, inner, model_args, model_kwargs):
        constrain = self.inner.postprocess_fn(model_args, model_kwargs)
        fn = lambda z: self.observables(constrain(z))  # noqa: E731
        z = getattr(inner, self.inner.sample_field)
        return jax.vmap(fn)(z) if self._batched else fn(z)

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        self._batched = not is_prng_key(rng_key)
        inner = self.inner.init(rng_key, num_warmup, init_params, model_args, model_kwargs)
        with full_precision():
            return ObservedState(inner, self._observe(inner, model_args, model_kwargs or {}))

    def sample(self, state, model_args, model_kwargs):
        with full_precision():  # the wrapped kernel's step and the record (no TF32 on GPUs)
            inner = self.inner.sample(state.inner, model_args, model_kwargs)
            return ObservedState(inner, self._observe(inner, model_args, model_kwargs or {}))


__all__ = ["Observed", "ObservedState"]
