r"""The core algorithms that :class:`renormpp.infer.adapter.Adapter` runs, one record each: how to build the core
kernel of :mod:`renormpp.mcmc`, start it, pack the adapter's state into the core's state and back, which adapted
arguments (step, mass) it takes, and how it describes itself.

* :class:`Overdamped`: Langevin dynamics, ULA or (``adjust``) MALA (:mod:`renormpp.mcmc.langevin`);
* :class:`Kinetic`: underdamped Langevin, OBABO, Metropolis-adjusted (generalized HMC) or not
  (:mod:`renormpp.mcmc.kinetic`), with a mass learned in the warmup.

A new core algorithm is one more record with the same fields and methods.

The paper (supplement, Eq. supp:eq:langevin) writes the Langevin update as :math:`\theta' = \theta - \epsilon\nabla
(TU) + \sqrt{2\epsilon T}\eta`: that is ULA with step :math:`h = \epsilon T` on the potential U (:func:`paper_step_size`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .._checks import positive
from ..mcmc import base, kinetic, langevin


def paper_step_size(epsilon: float = 1e-3, T: float = 0.01) -> float:
    r"""ULA step :math:`h = \epsilon T` equivalent to the paper's update with learning rate :math:`\epsilon`.

    The paper's :math:`\theta \leftarrow \theta - \epsilon\nabla(T U) + \sqrt{2\epsilon T}\eta` equals
    :math:`\theta \leftarrow \theta - h\nabla U + \sqrt{2h}\eta` with :math:`h = \epsilon T`; e.g. the paper's
    :math:`\epsilon = 10^{-3}` at :math:`T = 0.01` is ``step_size=1e-5``.

    Parameters
    ----------
    epsilon : float, default 1e-3
        The paper's learning rate.
    T : float, default 0.01
        Temperature.

    Returns
    -------
    float
        The step h of :class:`~renormpp.infer.Langevin`.

    Raises
    ------
    ValueError
        Where epsilon or T is not positive.
    """
    if not (epsilon > 0 and T > 0):
        raise ValueError(f"epsilon and T must be positive; got epsilon={epsilon}, T={T}")
    return float(epsilon) * float(T)


@dataclass(frozen=True)
class Overdamped:
    """ULA (``adjust=False``) or MALA: the update (L1) of :mod:`renormpp.mcmc.langevin`, with a step only (no mass).
    ``target_accept_prob``: MALA's default acceptance target, 0.574 (optimal in high dimension, Roberts & Rosenthal
    1998)."""

    adjust: bool = False
    target_accept_prob: float = 0.574
    adapt_mass = False  #: no mass: the update (L1) has none
    row_mass = None
    freeze_gibbs_sites = False

    @property
    def label(self) -> str:
        return "MALA" if self.adjust else "ULA"

    @property
    def checks_curvature(self) -> bool:
        """ULA's step is checked against the potential's curvature at the start (:func:`.alerts.check_ula_step`)."""
        return not self.adjust

    def build(self) -> Callable:
        """The core kernel, ``kernel(rng_key, state, potential_fn, *self.args(...))``."""
        return langevin.build_kernel(self.adjust)

    def init(self, position, potential_fn, rng_key, inverse_mass):
        return langevin.init(position, potential_fn)

    def core_state(self, position, state):
        """The core's state at ``position`` from the adapter's ``state`` (its energy and gradient)."""
        return base.State(position, state.potential_energy, state.z_grad)

    @staticmethod
    def unpack(core) -> dict:
        """The adapter's fields that the core's state holds besides position, energy and gradient."""
        return dict(momentum=None, accept_level=None)

    def args(self, adapted) -> tuple:
        """The core kernel's arguments after the potential, from the warmup's ``adapted`` state."""
        return (adapted.step_size,)

    def details(self, gibbs_sites) -> str:
        """What the description adds after the common part."""
        return ""


@dataclass(frozen=True)
class Kinetic:
    """Underdamped Langevin, OBABO (K1) of :mod:`renormpp.mcmc.kinetic`: ``friction`` :math:`\\gamma`, Metropolis-
    adjusted if ``adjust``, Neal's non-reversible uniform moved by ``accept_shift`` per update (0: a fresh uniform);
    a diagonal mass learned in the warmup (``adapt_mass``), dense on the rows of the matrix site ``row_mass``;
    ``freeze_gibbs_sites``: the Gibbs sites get an infinite mass (the dynamics leaves them to the Gibbs draw).
    Default acceptance target 0.8."""

    adjust: bool = True
    friction: float = 1.0
    accept_shift: float = 0.0
    adapt_mass: bool = True
    row_mass: str | None = None
    freeze_gibbs_sites: bool = False
    target_accept_prob: float = 0.8
    checks_curvature = False

    def __post_init__(self):
        object.__setattr__(self, "friction", positive("friction", self.friction, "the friction gamma"))
        if self.row_mass is not None and not self.adapt_mass:
            raise ValueError("row_mass is learned in the warmup: it needs adapt_mass=True (and num_warmup > 0)")
        if not 0.0 <= self.accept_shift < 2.0 or (self.accept_shift and not self.adjust):
            raise ValueError(f"accept_shift = {self.accept_shift!r}: it is the shift of Neal's acceptance variable per "
                             "update, in [0, 2) (0: a fresh uniform each test), and needs adjust=True")
        object.__setattr__(self, "accept_shift", float(self.accept_shift))

    @property
    def label(self) -> str:
        return "kinetic Langevin (GHMC)" if self.adjust else "kinetic Langevin"

    def build(self) -> Callable:
        return kinetic.build_kernel(self.adjust, self.accept_shift)

    def init(self, position, potential_fn, rng_key, inverse_mass):
        return kinetic.init(position, potential_fn, rng_key, inverse_mass, persistent_accept=self.accept_shift > 0)

    def core_state(self, position, state):
        return kinetic.State(position, state.momentum, state.potential_energy, state.z_grad, state.accept_level)

    @staticmethod
    def unpack(core) -> dict:
        return dict(momentum=core.momentum, accept_level=core.accept_level)

    def args(self, adapted) -> tuple:
        return adapted.step_size, adapted.inverse_mass, self.friction

    def details(self, gibbs_sites) -> str:
        mass = (f", mass adapted (dense on the rows of {self.row_mass})" if self.row_mass
                else ", diagonal mass adapted")
        frozen = f", {'/'.join(gibbs_sites)} left to the Gibbs draw" if self.freeze_gibbs_sites else ""
        neal = f", Neal's non-reversible acceptance (shift {self.accept_shift:g})" if self.accept_shift else ""
        return f", friction {self.friction:g}" + (mass if self.adapt_mass else "") + frozen + neal
