"""One way to wrap a kernel, :class:`Wrapper`: the wrapped kernel is ``inner`` and a wrapper's state keeps the inner
kernel's state as ``state.inner``. NumPyro's ``MCMCKernel`` members and the warmup protocol are delegated here,
once; a wrapper (:class:`~.observed.Observed`, :class:`~.swaps.StateSwaps`, :class:`~.tempering.ReplicaExchange`)
overrides what it changes.

The warmup protocol, which :class:`~.warmup.AdaptiveWarmup` reads between blocks of draws: ``adapts_warmup`` (the
kernel's own declaration that its warmup has a schedule to move: :class:`~.adapter.Adapter` says True, a kernel that
does not declare it, NumPyro's NUTS, is taken to say False), ``schedule(state)``, ``reschedule(state, ...)``,
``averaged_log_step(state)``, ``adapts_mass`` and ``pools_adaptation``.
"""
from __future__ import annotations

from numpyro.infer.mcmc import MCMCKernel


class ReadsThrough:
    """Mixin of a wrapper's state, a namedtuple with the field ``inner`` (``class S(ReadsThrough, namedtuple(...))``):
    a field the state does not have reads through to the inner state (``state.z``, ``state.rng_key``, ...), mapped by
    :meth:`_through` (the identity here), and ``_replace`` of such a field replaces it there, so NumPyro's ``MCMC``
    treats the state as the inner kernel's."""

    __slots__ = ()

    def _through(self, value):
        return value

    def __getattr__(self, name):
        if name.startswith("__") or name in type(self)._fields:
            raise AttributeError(name)
        return self._through(getattr(self.inner, name))

    def _replace(self, **changes):
        own = {k: changes.pop(k) for k in list(changes) if k in self._fields}
        if changes:
            own["inner"] = own.get("inner", self.inner)._replace(**changes)
        return super()._replace(**own)


def adapts_warmup(kernel) -> bool:
    """Whether ``kernel`` declares a warmup schedule that :class:`~.warmup.AdaptiveWarmup` may move."""
    return bool(getattr(kernel, "adapts_warmup", False))


class Wrapper(MCMCKernel):
    """A kernel around ``inner``, whose state holds the inner kernel's state as ``state.inner``."""

    inner: MCMCKernel

    # ---- MCMCKernel ------------------------------------------------------------------------------------------------
    @property
    def model(self):
        return self.inner.model

    @property
    def sample_field(self):
        return self.inner.sample_field

    @property
    def default_fields(self):
        return self.inner.default_fields

    @property
    def is_ensemble_kernel(self):
        return self.inner.is_ensemble_kernel

    @property
    def _sample_fn(self):  # MCMC re-initializes the kernel while this is None
        return getattr(self.inner, "_sample_fn", None)

    def get_diagnostics_str(self, state):
        return self.inner.get_diagnostics_str(state.inner)

    def postprocess_fn(self, model_args, model_kwargs):
        return self.inner.postprocess_fn(model_args, model_kwargs)

    # ---- the warmup protocol -------------------------------------------------------------------------------------
    @property
    def adapts_warmup(self) -> bool:
        return adapts_warmup(self.inner)

    def schedule(self, state):
        return self.inner.schedule(state.inner)

    def reschedule(self, state, start, stop, end, *, restart_window: bool = False):
        return state._replace(inner=self.inner.reschedule(state.inner, start, stop, end,
                                                          restart_window=restart_window))

    def averaged_log_step(self, state):
        return self.inner.averaged_log_step(state.inner)

    @property
    def adapts_mass(self) -> bool:
        return self.inner.adapts_mass

    @property
    def pools_adaptation(self) -> bool:
        return self.inner.pools_adaptation


__all__ = ["ReadsThrough", "Wrapper", "adapts_warmup"]
