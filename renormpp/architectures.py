r"""Architectures: one record per kind of network, the one place where a network declares everything the rest of
the package needs of it.

An :class:`Architecture` holds

* ``model``: its NumPyro model, and ``model_kwargs``, which turns the common parameters (N1, T, the prior precisions,
  the activation, whether v is integrated out) and the architecture's own options into that model's arguments;
* ``features``: what its linear readout sees, :math:`\phi(x)` with :math:`f(x) = v\,\phi(x)/\sqrt{n}` — given the
  other weights the readout is a Bayesian linear regression, so :mod:`renormpp.readout` (the exact Gibbs draw of v,
  v integrated out, the Rao-Blackwellized observables) works for any architecture from its features alone;
* ``kernel`` and ``solve``: its theory — the NNGP kernel of its features and the solve of its effective action for
  the order parameter (a :class:`renormpp.theory.TheoryFit`);
* ``options``: a function whose signature declares the architecture's own options (their types, defaults and, as
  ``Annotated[type, "description"]``, what they mean) and whose body refuses a combination the theory does not cover.
  ``renormpp run`` builds the ``[model]`` table of ``model.architecture = name`` from it
  (:mod:`renormpp.experiments.config`);
* ``first_layer``: the site of the weights that see the input (the ``"rows"`` mass of the kinetic sampler), and
  ``dims``: the named dimensions of its sites for ArviZ.

The fully connected network of the paper (``"fc"``, :func:`renormpp.models.mlp`, ``depth`` hidden layers) is the one
record today; a new architecture is one more record in :data:`ARCHITECTURES` (docs/architecture.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Callable, Mapping

from . import kernels, models, theory
from ._checks import positive_int
from .network import get_activation, hidden, layer_sites


@dataclass(frozen=True)
class Architecture:
    """One kind of network: its NumPyro model, the readout's features, its theory, its options and named dims (see
    the module docstring)."""

    name: str
    label: str
    model: Callable
    model_kwargs: Callable[..., dict]
    features: Callable
    kernel: Callable
    solve: Callable
    options: Callable[..., None]
    first_layer: Callable[..., str]
    dims: Mapping[str, list] = field(default_factory=dict)

    def check(self, activation, **options) -> None:
        """Refuse options (with the activation) that the architecture or its theory does not cover: a ValueError
        naming the option and the fix."""
        self.options(activation=activation, **options)


# ---- the fully connected network ------------------------------------------------------------------------------
def _fc_options(depth: Annotated[int, "hidden layers, each of width N1 (renormpp.models.mlp; theory: odd "
                                      "activations)"] = 1, *, activation="erf") -> None:
    positive_int("depth", depth, "number of hidden layers")
    if depth > 1 and not get_activation(activation).odd:
        raise ValueError(f"model.depth = {depth} needs an odd activation (erf, tanh or linear): the theory of deep "
                         f"networks is derived for odd activations, and {get_activation(activation).name!r} is not "
                         "odd. Use depth = 1 for a non-odd activation")


def _fc_model_kwargs(*, N1, T, lambda0, lambda1, activation, integrate_v, depth: int = 1) -> dict:
    """:func:`renormpp.models.mlp`'s arguments: one prior precision per hidden layer, then the readout's."""
    return dict(N1=N1, depth=depth, activation=activation, T=T, lambdas=(lambda0,) * depth + (lambda1,),
                integrate_v=integrate_v)


def _fc_solve(X, Y, *, N1, T, lambda0, lambda1, activation, method, depth: int = 1, **solver):
    return theory.solve(X, Y, N1=N1, T=T, lambda0=lambda0, lambda1=lambda1, activation=activation, method=method,
                        depth=depth, **solver)


def _fc_kernel(X1, X2=None, *, lambda0=1.0, activation="erf", depth: int = 1):
    return kernels.nngp(X1, X2, lambda0=lambda0, activation=activation, depth=depth)


def _fc_first_layer(depth: int = 1) -> str:
    return layer_sites(depth)[0]


FC = Architecture(name="fc", label="fully connected", model=models.mlp, model_kwargs=_fc_model_kwargs,
                  features=hidden, kernel=_fc_kernel, solve=_fc_solve, options=_fc_options,
                  first_layer=_fc_first_layer, dims=models.DIMS)

#: Every architecture, by name (``model.architecture`` in a config).
ARCHITECTURES: dict[str, Architecture] = {FC.name: FC}


def get_architecture(name) -> Architecture:
    """The record of ``name`` (or ``name`` itself if it is a record); a ValueError listing the names otherwise."""
    if isinstance(name, Architecture):
        return name
    if name not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {name!r}; choose one of {', '.join(map(repr, ARCHITECTURES))}")
    return ARCHITECTURES[name]
