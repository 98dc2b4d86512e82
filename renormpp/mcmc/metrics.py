r"""The mass of kinetic Langevin: diagonal, or shared by the rows of a weight matrix.

A kernel sees the inverse mass :math:`M^{-1}` only through three functions of :func:`functions`: the momentum
draw :math:`p = M^{1/2}\eta`, the velocity :math:`M^{-1}p` and the kinetic energy :math:`\tfrac12 p^\top M^{-1} p`.

* A diagonal :math:`M^{-1}` is an array of the position's shape. A zero entry is an infinite mass: the dynamics
  leaves that coordinate where it is (its momentum is 0), for coordinates that a Gibbs step draws exactly (v given w):
  their stiffness then no longer limits the step.
* :class:`RowMass` is diagonal everywhere except on one weight matrix :math:`w \in \mathbb R^{R\times C}` (laid out row
  by row in the flat position), where it is :math:`I_R \otimes A` with one dense, positive definite
  :math:`A \in \mathbb R^{C\times C}` shared by the R rows:

  .. math::  (M^{-1}p)_w = p_w A, \qquad p_w = \eta_w L^{-1}\;\;(A = LL^\top,\;
             {\rm Cov}(p_{w,r}) = L^{-\top}L^{-1} = A^{-1}).   \tag{M1}

  The rows of a hidden layer's weights are exchangeable a posteriori (the hidden units are), and each row feels the
  data through the same input covariance: on MNIST the data's curvature along its top principal direction is ~30
  times the prior's, an anisotropy that no diagonal mass can undo because it is not along the axes. With
  :math:`A = {\rm Cov}(w_r)` pooled over rows and warmup draws (:func:`renormpp.mcmc.adaptation.window_adaptation`),
  one step moves every direction of a row by its own scale. Applying (M1) costs :math:`RC^2` flops, about one
  forward pass of the first layer when the data has as many points as the layer has units.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp


class Rows(NamedTuple):
    """Where the weight matrix sits in the flat position: entries ``offset … offset + rows*cols``, row by row."""

    offset: int
    rows: int
    cols: int


@jax.tree_util.register_pytree_node_class
class RowMass:
    """:math:`M^{-1}`: ``diag`` (n,) on every coordinate, replaced on the block ``rows`` by :math:`I_R\\otimes A`
    with ``block`` :math:`= A` (C, C) and ``factor`` :math:`= L^{-1}` (:math:`A = LL^\\top`), see (M1)."""

    def __init__(self, diag, block, factor, rows: Rows):
        self.diag, self.block, self.factor, self.rows = diag, block, factor, rows

    def tree_flatten(self):
        return (self.diag, self.block, self.factor), self.rows

    @classmethod
    def tree_unflatten(cls, rows, children):
        return cls(*children, rows)

    @classmethod
    def identity(cls, dim: int, rows: Rows, dtype=jnp.float32) -> "RowMass":
        eye = jnp.eye(rows.cols, dtype=dtype)
        return cls(jnp.ones(dim, dtype), eye, eye, rows)

    @classmethod
    def from_covariance(cls, diag, cov, rows: Rows) -> "RowMass":
        """The mass with ``A = cov`` (symmetrized) on the block and ``diag`` elsewhere."""
        cov = (cov + cov.T) / 2
        chol = jnp.linalg.cholesky(cov)
        factor = jax.scipy.linalg.solve_triangular(chol, jnp.eye(rows.cols, dtype=cov.dtype), lower=True)
        return cls(diag, cov, factor, rows)


def _split(x, rows: Rows):
    start, stop = rows.offset, rows.offset + rows.rows * rows.cols
    return x[start:stop].reshape(rows.rows, rows.cols), start, stop


def _scaled(eta, inverse_mass):
    r""":math:`M^{1/2}\eta` for a diagonal inverse mass; 0 where it is 0 (coordinates the dynamics leaves fixed)."""
    positive = inverse_mass > 0
    return jnp.where(positive, eta / jnp.sqrt(jnp.where(positive, inverse_mass, 1.0)), 0.0)


def functions(inverse_mass) -> tuple[Callable, Callable, Callable]:
    """``(draw, velocity, kinetic)`` of an inverse mass (diagonal array or :class:`RowMass`):
    ``draw(key, like) -> p ~ N(0, M)``, ``velocity(p) = M^{-1} p``, ``kinetic(p) = p^T M^{-1} p / 2``."""
    if not isinstance(inverse_mass, RowMass):
        m = inverse_mass

        def draw(key, like):
            return _scaled(jax.random.normal(key, like.shape, like.dtype), m)

        def velocity(momentum):
            return m * momentum
    else:
        m, rows = inverse_mass, inverse_mass.rows

        def draw(key, like):
            eta = jax.random.normal(key, like.shape, like.dtype)
            block, start, stop = _split(eta, rows)
            return _scaled(eta, m.diag).at[start:stop].set((block @ m.factor).ravel())

        def velocity(momentum):
            block, start, stop = _split(momentum, rows)
            return (m.diag * momentum).at[start:stop].set((block @ m.block).ravel())

    def kinetic(momentum):
        return 0.5 * jnp.vdot(momentum, velocity(momentum))

    return draw, velocity, kinetic


def matrix_site(z: dict, site: str) -> Rows:
    """The :class:`Rows` of the matrix site ``site`` of the parameter dict ``z`` in ``ravel_pytree(z)``'s layout."""
    if not isinstance(z, dict) or site not in z:
        names = sorted(z) if isinstance(z, dict) else "none: the parameters are not a dict"
        raise ValueError(f"row_mass={site!r} is not a site of the model (its sites: {names})")
    leaves = jax.tree_util.tree_flatten_with_path(z)[0]
    offset = 0
    for path, leaf in leaves:
        if path[0].key == site:
            if jnp.ndim(leaf) != 2:
                raise ValueError(f"row_mass={site!r} needs a matrix site (rows, columns); its shape is "
                                 f"{jnp.shape(leaf)}")
            return Rows(offset, *map(int, jnp.shape(leaf)))
        offset += int(jnp.size(leaf))
    raise AssertionError("unreachable")
