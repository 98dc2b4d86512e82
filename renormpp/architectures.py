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
  ``dims``: the named dimensions of its sites for ArviZ;
* ``inputs``: a function ``(N0, **options)`` that refuses inputs of N0 features the network cannot take (``renormpp
  run`` checks the data against it); ``patches``: into how many groups (patches) the readout's features fall (1, or
  the CNN's n_p: its runs record the local overlaps too, :func:`renormpp.readout.expected_local_overlap`); and
  ``kernel_diagnosis``: whether :mod:`renormpp.diagnostics.kernel` (the
  hidden kernel the fully connected theory predicts) judges this network's measured hidden kernel.

The records: the fully connected network of the paper (``"fc"``, :func:`renormpp.models.mlp`, ``depth`` hidden
layers) and the one-hidden-layer convolutional network (``"conv"``, :func:`renormpp.models.cnn`, options
``image_shape`` and ``patch``; its theory :func:`renormpp.theory.solve` with ``conv=``). A new architecture is one more
record in :data:`ARCHITECTURES` (docs/architecture.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Callable, Mapping, Union

import numpy as np

from . import kernels, models, theory
from ._checks import positive_int
from .network import ODD_ACTIVATIONS, conv_hidden, get_activation, hidden, layer_sites
from .patches import Patches


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
    inputs: Callable[..., None] = lambda N0, **options: None
    kernel_diagnosis: bool = True
    patches: Callable[..., int] = lambda **options: 1

    def check(self, activation, **options) -> None:
        """Refuse options (with the activation) that the architecture or its theory does not cover: a ValueError
        naming the option and the fix."""
        self.options(activation=activation, **options)

    def check_inputs(self, N0: int, **options) -> None:
        """Refuse inputs of ``N0`` features that the network with these options cannot take: a ValueError naming the
        problem and the fix."""
        self.inputs(N0, **options)


# ---- the fully connected network ------------------------------------------------------------------------------
def _fc_options(depth: Annotated[int, "hidden layers, each of width N1 (renormpp.models.mlp; theory: odd "
                                      "activations)"] = 1, *, activation="erf") -> None:
    positive_int("depth", depth, "number of hidden layers")
    if depth > 1 and not get_activation(activation).odd:
        raise ValueError(f"model.depth = {depth} needs an odd activation ({', '.join(ODD_ACTIVATIONS)}): the theory "
                         f"of deep networks is derived for odd activations, and {get_activation(activation).name!r} is "
                         "not odd. Use depth = 1 for a non-odd activation")


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


# ---- the one-hidden-layer convolutional network ---------------------------------------------------------------
def _conv_options(image_shape: Annotated[Union[int, str], "the side s of the square single-channel images, in "
                                                           "pixels (28), or 's x s' ('28x28'): each row of X is an "
                                                           "image, row-major, N0 = s^2"],
                  patch: Annotated[int, "the side m of the non-overlapping square patches, a divisor of s: n_p = "
                                        "(s/m)^2 patches, C = N1 channels (filters of m^2 weights)"],
                  *, activation="erf") -> None:
    Patches(image_shape, patch)
    act = get_activation(activation)
    if not act.odd:
        raise ValueError(f"the convolutional network's theory is derived for odd activations "
                         f"({', '.join(ODD_ACTIVATIONS)}), and {act.name!r} is not odd: choose an odd activation for "
                         "model.architecture = 'conv'")


def _conv_inputs(N0, *, image_shape, patch) -> None:
    Patches(image_shape, patch).check(N0, "the data's X")


def _conv_model_kwargs(*, N1, T, lambda0, lambda1, activation, integrate_v, image_shape, patch) -> dict:
    """:func:`renormpp.models.cnn`'s arguments."""
    geometry = Patches(image_shape, patch)
    return dict(N1=N1, image_shape=geometry.image_shape, patch=geometry.patch, activation=activation, T=T,
                lambda0=lambda0, lambda1=lambda1, integrate_v=integrate_v)


def _conv_solve(X, Y, *, N1, T, lambda0, lambda1, activation, method, image_shape, patch, **solver):
    """The CNN's theory, :func:`renormpp.theory.solve` with ``conv=`` (the local order parameter over (output,
    patch) pairs, :mod:`renormpp.theory.conv`)."""
    geometry = Patches(image_shape, patch)
    return theory.solve(X, Y, N1=N1, T=T, lambda0=lambda0, lambda1=lambda1, activation=activation, method=method,
                        conv=dict(image_shape=geometry.image_shape, patch=geometry.patch), **solver)


def _conv_kernel(X1, X2=None, *, lambda0=1.0, activation="erf", image_shape, patch):
    r"""The infinite-width CNN kernel :math:`\frac1{n_p}\sum_i K_{ii}(x, x')`: the NNGP kernel of each patch,
    :math:`K_{ii} = \kappa(C_{ii}(x,x), C_{ii}(x',x'), C_{ii}(x,x'))` with :math:`C_{ii} = x_i\cdot x'_i/(m^2\lambda_0)`
    (:func:`renormpp.kernels.nngp` of the patches, whose width is m²), averaged over the patches."""
    geometry = Patches(image_shape, patch)
    p1 = geometry.extract(np.asarray(X1, dtype=np.float64))
    p2 = p1 if X2 is None else geometry.extract(np.asarray(X2, dtype=np.float64))
    return sum(kernels.nngp(p1[:, i], None if X2 is None else p2[:, i], lambda0=lambda0, activation=activation)
               for i in range(geometry.n_patches)) / geometry.n_patches


CONV = Architecture(name="conv", label="convolutional, one hidden layer of N1 channels", model=models.cnn,
                    model_kwargs=_conv_model_kwargs, features=conv_hidden, kernel=_conv_kernel, solve=_conv_solve,
                    options=_conv_options, first_layer=lambda **options: "w", dims=models.CNN_DIMS,
                    inputs=_conv_inputs, kernel_diagnosis=False,
                    patches=lambda image_shape, patch: Patches(image_shape, patch).n_patches)

#: Every architecture, by name (``model.architecture`` in a config).
ARCHITECTURES: dict[str, Architecture] = {a.name: a for a in (FC, CONV)}


def get_architecture(name) -> Architecture:
    """The record of ``name`` (or ``name`` itself if it is a record); a ValueError listing the names otherwise.

    Parameters
    ----------
    name : str or Architecture
        A name of the architectures' table, or a record.

    Returns
    -------
    Architecture

    Raises
    ------
    ValueError
        For an unknown name (the message lists them).
    """
    if isinstance(name, Architecture):
        return name
    if name not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {name!r}; choose one of {', '.join(map(repr, ARCHITECTURES))}")
    return ARCHITECTURES[name]
