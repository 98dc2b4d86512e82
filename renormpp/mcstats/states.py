r"""Metastable states of a Monte Carlo run: which regions the chains hold, and how often they move between them.

A posterior with several states (MNIST D = 3 at α = 10: chains that keep their own readout overlaps for thousands of
draws) fails :func:`~.equilibrium.chain_spread`, but that test says only *that* the chains disagree. :func:`states`
says *how*. It cuts every chain into blocks of ``block`` draws and takes each block's mean of every quantity,
in units of the block noise :math:`\sigma_q` of quantity q, estimated from the differences of successive blocks of
the same chain,

.. math::  \hat\sigma_q = \operatorname{median}_{c,k} |m_{c,k+1,q} - m_{c,k,q}| \,/\, (\sqrt2\,\Phi^{-1}(3/4)),  \tag{S1}

which chains that stay in their states for most of their blocks give unbiased by the jumps between states (a median
ignores the few differences that straddle a transition). A chain's blocks form a *segment* until a block steps more
than ``threshold`` block noises (in any quantity) from the one before; a segment of at least ``min_blocks`` blocks is
a *stay*, and stays whose means lie within ``threshold`` of each other (single linkage, Chebyshev distance, over all
chains) are one **state**. A slow drift is one segment, so it is one state; a block that straddles a transition
(between two states) is a segment of its own, too short to join them, and goes to the nearest state. Two states
closer than about twice ``threshold`` block noises are not told apart: a longer block resolves them.

Then, per chain, the sequence of states, the **transitions** (changes of state between successive blocks) and the
**occupancy**; over all chains each state's **weight** (its share of the blocks) and its **visits** (stretches of
successive blocks in it). A weight is known only as well as the visits that make it: where the chains hold their
states (:attr:`States.held`: no transition at all), the weights are those of the starts, not of the posterior.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: the default number of blocks each chain is cut into (:func:`states`)
BLOCKS = 40

#: a step between successive blocks above this many block noises (in any quantity) ends a segment; stays whose means
#: lie within it are one state (:func:`states`)
THRESHOLD = 4.0

_MAD_NORMAL = 0.6744897501960817 * np.sqrt(2.0)  # median |x - y| of two independent standard normals


@dataclass(frozen=True)
class States:
    """What :func:`states` found: ``labels`` (chain, block), the state of every block; ``centers`` (state, quantity),
    the mean of each state's blocks; ``noise`` (quantity,), the block noise (S1); ``block``, draws per block;
    ``names``, the quantities; ``cut``, the draws dropped from the start of every chain before the blocks."""

    labels: np.ndarray
    centers: np.ndarray
    noise: np.ndarray
    block: int
    names: tuple
    cut: int = 0

    @property
    def count(self) -> int:
        """The number of states."""
        return int(self.centers.shape[0])

    @property
    def transitions(self) -> np.ndarray:
        """Changes of state between successive blocks, per chain."""
        return np.sum(self.labels[:, 1:] != self.labels[:, :-1], axis=1)

    @property
    def occupancy(self) -> np.ndarray:
        """(chain, state): the share of each chain's blocks in each state."""
        return np.stack([np.mean(self.labels == s, axis=1) for s in range(self.count)], axis=1)

    @property
    def weights(self) -> np.ndarray:
        """Each state's share of all blocks (its weight, if the visits are many)."""
        return np.array([np.mean(self.labels == s) for s in range(self.count)])

    @property
    def visits(self) -> np.ndarray:
        """Per state, the stretches of successive blocks of one chain in it."""
        starts = np.concatenate([np.ones((self.labels.shape[0], 1), bool),
                                 self.labels[:, 1:] != self.labels[:, :-1]], axis=1)
        return np.array([int(np.sum(starts & (self.labels == s))) for s in range(self.count)])

    @property
    def held(self) -> bool:
        """More than one state and not one transition: each chain holds where it started, so the states' weights
        (and any mean over them) are the starts', not the posterior's."""
        return self.count > 1 and int(np.sum(self.transitions)) == 0

    @property
    def separation(self) -> float:
        """The smallest distance between two states' centers, in block noises (the largest over quantities); inf
        for one state."""
        if self.count < 2:
            return float("inf")
        z = self.centers / self.noise
        return float(min(np.max(np.abs(z[a] - z[b])) for a in range(self.count) for b in range(a)))

    def verdict(self) -> str:
        """One sentence: one state; or the states, the transitions, and what that means for the weights."""
        n, t = self.count, int(np.sum(self.transitions))
        if n == 1:
            return f"one state (blocks of {self.block} draws)"
        text = (f"{n} states (blocks of {self.block} draws, at least {self.separation:.0f} block noises apart), "
                f"{t} transition{'s' if t != 1 else ''} in {self.labels.shape[0]} chains")
        if self.held:
            return text + ": each chain holds its state, so their weights are unknown"
        return text + f"; visits per state {self.visits.tolist()}"

    def __str__(self) -> str:
        rows = [self.verdict(), "| state | weight | visits | chains (share of their blocks) | "
                + " | ".join(self.names) + " |", "|---" * (4 + len(self.names)) + "|"]
        occ = self.occupancy
        for s in range(self.count):
            chains = ", ".join(f"{c} ({occ[c, s]:.2f})" for c in range(occ.shape[0]) if occ[c, s] > 0)
            rows.append(f"| {s} | {self.weights[s]:.2f} | {self.visits[s]} | {chains} | "
                        + " | ".join(f"{x:.4g}" for x in self.centers[s]) + " |")
        rows.append(f"transitions per chain: {self.transitions.tolist()}")
        return "\n".join(rows)


def _as_quantities(series):
    """(names, array (chain, draw, quantity)) from a dict of (chain, draw) series or an array."""
    if isinstance(series, dict):
        if not series:
            raise ValueError("states needs at least one quantity")
        names = tuple(series)
        arrays = [np.asarray(series[k], dtype=np.float64) for k in names]
        arrays = [a[None] if a.ndim == 1 else a for a in arrays]
        if any(a.ndim != 2 or a.shape != arrays[0].shape for a in arrays):
            raise ValueError("each quantity must be a (chain, draw) series of the same shape; got "
                             + ", ".join(f"{k} {np.shape(series[k])}" for k in names))
        x = np.stack(arrays, axis=-1)
    else:
        x = np.asarray(series, dtype=np.float64)
        if x.ndim == 2:
            x = x[..., None]
        if x.ndim != 3:
            raise ValueError(f"series must be (chain, draw) or (chain, draw, quantity); got shape {x.shape}")
        names = tuple(f"q{i}" for i in range(x.shape[-1]))
    if not np.all(np.isfinite(x)):
        raise ValueError("the series contains NaN or inf; a sampler diverged or the observable overflowed")
    return names, x


def _components(z: np.ndarray, threshold: float) -> np.ndarray:
    """Single-linkage clusters of the rows of ``z`` at Chebyshev distance ``threshold``: a label per row."""
    from scipy.cluster.hierarchy import fcluster, linkage

    if len(z) == 1:
        return np.zeros(1, int)
    return fcluster(linkage(z, method="single", metric="chebyshev"), t=threshold, criterion="distance") - 1


def _segments(z: np.ndarray, threshold: float) -> np.ndarray:
    """(chain, block): the index of each block's segment, a new segment wherever a block steps more than
    ``threshold`` (Chebyshev) from the one before it in its chain; numbered over all chains."""
    breaks = np.max(np.abs(np.diff(z, axis=1)), axis=-1) > threshold  # (chain, block - 1)
    new = np.concatenate([np.ones((z.shape[0], 1), bool), breaks], axis=1)
    return np.cumsum(new.reshape(-1)).reshape(new.shape) - 1


def states(series, block: int | None = None, *, threshold: float = THRESHOLD, min_blocks: int = 3,
           cut: int = 0) -> States:
    """The metastable states of a run: see the module docstring.

    Quantities that do not move (a noise of zero) are left out of the distance.

    Parameters
    ----------
    series : dict or array_like
        A dict of (chain, draw) series, e.g. :func:`~.equilibrium.scalar_series` of a run's draws, or an array
        (chain, draw[, quantity]).
    block : int, optional
        Draws per block (default: each chain in :data:`BLOCKS` blocks).
    threshold : float, default THRESHOLD
        The largest step between blocks of one state, in block noises (S1).
    min_blocks : int, default 3
        The blocks a segment needs to be a stay.
    cut : int, default 0
        Draws dropped from the start of every chain (a thermalization cut, e.g. :func:`~.errors.thermalization_cut`
        of ``eps_g``: a transient held for a few blocks would be a state of its own).

    Returns
    -------
    States
        The states, the blocks each chain spent in them and the transitions counted.

    Raises
    ------
    ValueError
        Where ``cut`` is outside [0, draws).
    """
    names, x = _as_quantities(series)
    if not 0 <= int(cut) < x.shape[1]:
        raise ValueError(f"cut must be in [0, {x.shape[1]}) draws; got {cut}")
    x = x[:, int(cut):]
    C, N, Q = x.shape
    block = max(1, N // BLOCKS) if block is None else int(block)
    if block < 1:
        raise ValueError(f"block must be a positive number of draws; got {block}")
    K = N // block
    if K < 3:
        raise ValueError(f"{N} draws per chain make {K} blocks of {block}: need at least 3 (a shorter block, or more "
                         "draws)")
    if threshold <= 0 or min_blocks < 1:
        raise ValueError(f"threshold must be positive and min_blocks at least 1; got {threshold}, {min_blocks}")
    means = x[:, :K * block].reshape(C, K, block, Q).mean(axis=2)  # (chain, block, quantity)
    noise = np.median(np.abs(np.diff(means, axis=1)), axis=(0, 1)) / _MAD_NORMAL
    moving = noise > 0
    if not np.any(moving):  # every quantity constant: one state
        return States(np.zeros((C, K), int), means.mean(axis=(0, 1))[None], noise, block, names, int(cut))
    z = means[..., moving] / noise[moving]  # (chain, block, quantity), in block noises
    flat_z, segment = z.reshape(C * K, -1), _segments(z, threshold).reshape(-1)
    length = np.bincount(segment)
    stays = np.flatnonzero(length >= min_blocks)
    if len(stays) == 0:  # no chain holds anything for min_blocks blocks: nothing to tell apart
        return States(np.zeros((C, K), int), means.mean(axis=(0, 1))[None], np.where(moving, noise, np.inf), block,
                      names, int(cut))
    stay_z = np.stack([flat_z[segment == g].mean(axis=0) for g in stays])
    cluster = _components(stay_z, threshold)  # the states: stays whose means join, single linkage
    of_segment = dict(zip(stays.tolist(), cluster.tolist()))
    centers_z = np.stack([flat_z[np.isin(segment, stays[cluster == s])].mean(axis=0) for s in np.unique(cluster)])
    nearest = np.argmin(np.max(np.abs(flat_z[:, None] - centers_z[None]), axis=-1), axis=1)
    flat = np.array([of_segment.get(g, n) for g, n in zip(segment.tolist(), nearest.tolist())])
    # states numbered by first appearance, chain by chain
    order = list(dict.fromkeys(flat.tolist()))
    flat = np.array([order.index(s) for s in flat])
    labels = flat.reshape(C, K)
    centers = np.stack([means.reshape(C * K, Q)[flat == s].mean(axis=0) for s in range(len(order))])
    return States(labels, centers, np.where(moving, noise, np.inf), block, names, int(cut))
