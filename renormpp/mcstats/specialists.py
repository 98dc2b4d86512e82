r"""The specialist neurons of sampled one-hidden-layer networks: which neurons carry the readout along the labels.

A network :math:`f(x) = v\,\sigma(w x/\sqrt{N_0})/\sqrt{N_1}` with :math:`v \sim \mathcal N(0, 1/\lambda_1)` has, given
the first layer w, a Gaussian readout. With the features :math:`s_i = \sigma(X w_i/\sqrt{N_0})` (P,) of neuron i,
:math:`A = s/\sqrt{\lambda_1 N_1}` (P, N1) and

.. math:: G = A^\top A + T\,1_{N_1},\qquad \mathbb E[v\mid w] = G^{-1}A^\top Y/\sqrt{\lambda_1},\qquad
          \operatorname{Cov}[v_{:,a}\mid w] = T\,G^{-1}/\lambda_1 \ \text{(each output a)},  \tag{1}

(the push-through form, N1 x N1: :func:`renormpp.network.readout_given_features`), each neuron's **readout energy**
is its conditional second moment

.. math:: e_i = \mathbb E[\|v_i\|^2 \mid w] = \big(\|(G^{-1}A^\top Y)_i\|^2 + D\,T\,(G^{-1})_{ii}\big)/\lambda_1. \tag{2}

Its **alignment** with the labels is the share of its centred feature :math:`\tilde s_i = s_i - \bar s_i` in the span
of the centred label columns :math:`\tilde Y` (rank D - 1 for one-hot labels), with :math:`\Pi` the projector on it,

.. math:: a_i = \|\Pi \tilde s_i\|^2/\|\tilde s_i\|^2 \in [0, 1], \tag{3}

and its **score** is :math:`\mathrm{score}_i = N_1\,(e_i/\sum_j e_j)\,a_i`, (4): a neuron of the bulk holds about its
share 1 of the energy and a small alignment; a specialist holds many times its share and an alignment near 1. The
neurons whose score exceeds a threshold are the draw's **specialists**, k of them.

The default threshold :data:`SPECIALIST_THRESHOLD` = 7 sits in the gap of the measured scores (studies/
specialist_count.py: MNIST (0, 1), T = 0.01, P = 200 at N1 = 200, 100, 50, 20 and P = 1000 at N1 = 250, 100; the
score histograms in its figure). The bulk's scores stay below about 5 (most of them below 1; their energy share
is of order 1 and their alignment mostly well below 1, though a prior neuron on MNIST can reach a = 0.9), while a
specialist holds an alignment above 0.99 and scores from about 10 (N1 = 20, where the score is at most N1) to 150
(P = 1000, N1 = 250). 7 is about the geometric mean of the two edges, 5 and 10.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..network import get_activation, readout_given_features

#: the default score (7) above which a neuron is a specialist (:func:`specialists`); it sits in the gap between the
#: bulk (scores below about 5) and the specialists (about 10 and more) of the sampled MNIST networks
SPECIALIST_THRESHOLD = 7.0

#: the number of largest scores per draw that :attr:`Specialists.top_scores` averages
TOP = 5


@dataclass(frozen=True)
class Specialists:
    """The specialists of a set of draws (:func:`specialists`); arrays have leading axes (chains, draws).

    Attributes
    ----------
    energy : ndarray (chains, draws, N1)
        Each neuron's readout energy e_i, Eq. (2).
    alignment : ndarray (chains, draws, N1)
        Each neuron's alignment a_i with the centred labels, Eq. (3).
    score : ndarray (chains, draws, N1)
        N1 (e_i / sum_j e_j) a_i, Eq. (4).
    specialist : ndarray of bool (chains, draws, N1)
        score > threshold.
    k : ndarray of int (chains, draws)
        The number of specialists of each draw.
    threshold : float
        The threshold used.
    k_fractions : ndarray (kmax + 1,)
        The fraction of all draws with k = 0, 1, ..., kmax.
    k_fractions_chain : ndarray (chains, kmax + 1)
        The same per chain.
    top_scores : ndarray (TOP,)
        The mean over draws of the largest, second largest, ... score of a draw.
    specialist_share : float
        The specialists' share of the readout energy, sum of e_i over specialists / sum of all e_i, averaged over
        the draws with k >= 1 (NaN where no draw has a specialist).
    persistence : float
        How well the specialists keep their identity along a chain: the mean, over successive pairs of draws of a
        chain whose specialist sets are not both empty, of the Jaccard index |S_t & S_t+1| / |S_t | S_t+1| (1: the
        same neurons throughout; NaN where no draw has a specialist).
    """

    energy: np.ndarray
    alignment: np.ndarray
    score: np.ndarray
    specialist: np.ndarray
    k: np.ndarray
    threshold: float
    k_fractions: np.ndarray
    k_fractions_chain: np.ndarray
    top_scores: np.ndarray
    specialist_share: float
    persistence: float


def _label_basis(Y: np.ndarray) -> np.ndarray:
    """An orthonormal basis (P, r) of the span of the centred label columns (r = D - 1 for one-hot labels)."""
    Yc = Y - Y.mean(axis=0)
    U, sv, _ = np.linalg.svd(Yc, full_matrices=False)
    rank = int(np.sum(sv > sv.max(initial=0.0) * max(Y.shape) * np.finfo(float).eps)) if sv.size else 0
    return U[:, :rank]


def label_contrasts(X, labels, *, pairs: bool = True) -> np.ndarray:
    r"""The label-contrast directions in input space: unit vectors (rows) from the class means :math:`\bar x_c` of
    the inputs ``X`` (P, N0) over the classes present in ``labels`` (P,), in ascending order, the directions along which
    a specialist neuron's weights lie.

    * ``pairs=True``: :math:`\pm(\bar x_p - \bar x_q)/\lVert \bar x_p - \bar x_q \rVert` for every pair p < q,
      both signs, (C (C - 1), N0) for C classes: the pair (p, q) at rows 2k (+) and 2k + 1 (-), pairs in
      lexicographic order. The state directions of :class:`renormpp.infer.StateSwaps`
      (:func:`renormpp.infer.class_contrasts`).
    * ``pairs=False``: each class mean less the mean of the class means,
      :math:`(\bar x_c - \frac1C\sum_{c'}\bar x_{c'})/\lVert\cdot\rVert`, (C, N0): the centred templates the
      specialist theory starts chains on (:mod:`renormpp.theory.specialists`).

    A ValueError for fewer than two classes, or a direction of zero length (two classes with the same mean input).
    """
    X = np.asarray(X, dtype=np.float64)
    labels = np.asarray(labels)
    present = np.unique(labels)
    if len(present) < 2:
        raise ValueError(f"label contrasts need inputs of at least two classes; got {len(present)}")
    means = {k: X[labels == k].mean(axis=0) for k in present}
    if pairs:
        out = []
        for i, p in enumerate(present):
            for q in present[i + 1:]:
                d = means[p] - means[q]
                norm = np.linalg.norm(d)
                if norm == 0:
                    raise ValueError(f"classes {p} and {q} have the same mean input: no contrast direction")
                out += [d / norm, -d / norm]
        return np.stack(out)
    centred = np.stack([means[k] for k in present])
    centred = centred - centred.mean(axis=0)
    norm = np.linalg.norm(centred, axis=1, keepdims=True)
    if np.any(norm == 0):
        raise ValueError(f"class {present[int(np.argmin(norm))]}'s mean input is the mean of the class means: no "
                         "contrast direction")
    return centred / norm


def _check(w, X, Y, T, lambda1, threshold):
    w = np.asarray(w, dtype=np.float64)
    if w.ndim == 3:
        w = w[None]
    if w.ndim != 4:
        raise ValueError(f"w must be the first layer's draws (chains, draws, N1, N0) or (draws, N1, N0); got shape "
                         f"{w.shape}")
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    Y = Y[:, None] if Y.ndim == 1 else Y
    if X.ndim != 2 or Y.ndim != 2 or X.shape[0] != Y.shape[0]:
        raise ValueError(f"X must be (P, N0) and Y (P, D) with the same P; got {X.shape} and {Y.shape}")
    if w.shape[-1] != X.shape[1]:
        raise ValueError(f"w has {w.shape[-1]} inputs per neuron but X has N0 = {X.shape[1]} columns: give w as "
                         "(chains, draws, N1, N0)")
    for name, a in (("w", w), ("X", X), ("Y", Y)):
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} contains NaN or inf entries; drop the non-finite draws (or data) first")
    for name, v in (("T", T), ("lambda1", lambda1), ("threshold", threshold)):
        if isinstance(v, (bool, str)) or not np.isfinite(v) or v <= 0:
            raise ValueError(f"{name} must be a positive finite number; got {v!r}")
    return w, X, Y


def _per_draw(w, X, Y, basis, T, lambda1, sigma):
    """Energy (2) and alignment (3) of a stack of draws w (n, N1, N0): two arrays (n, N1)."""
    n, N1, N0 = w.shape
    s = sigma(np.einsum("pk,nik->npi", X, w) / np.sqrt(N0))  # (n, P, N1)
    _, L_inv, V = readout_given_features(s, Y, T=T, lambda1=lambda1)  # V (n, N1, D) = sqrt(lambda1) E[v | w]
    energy = (np.sum(V**2, axis=-1) + Y.shape[1] * T * np.sum(L_inv**2, axis=-2)) / lambda1  # (G^-1)_ii
    sc = s - s.mean(axis=1, keepdims=True)
    norm2 = np.sum(sc**2, axis=1)
    proj2 = np.sum(np.einsum("pr,npi->nri", basis, sc) ** 2, axis=1)
    alignment = np.divide(proj2, norm2, out=np.zeros_like(norm2), where=norm2 > 0)
    return energy, alignment


def specialists(w, X, Y, *, T: float, lambda1: float = 1.0, activation="erf",
                threshold: float = SPECIALIST_THRESHOLD, batch: int = 16) -> Specialists:
    r"""The specialist neurons of posterior draws of the first layer: energy (2), alignment (3), score (4), count.

    Parameters
    ----------
    w : array_like (chains, draws, N1, N0) or (draws, N1, N0)
        Draws of the first-layer weights (one chain where there is no chain axis).
    X : array_like (P, N0)
        The training inputs the network was sampled on.
    Y : array_like (P, D) or (P,)
        Its labels.
    T : float
        The temperature of the posterior.
    lambda1 : float, default 1.0
        The readout's prior precision.
    activation : str, callable or Activation, default "erf"
        The activation sigma: a name of :data:`renormpp.network.ACTIVATIONS` (its record's numpy form,
        :meth:`renormpp.network.Activation.numpy`), or an elementwise function of numpy arrays.
    threshold : float, default :data:`SPECIALIST_THRESHOLD`
        A neuron whose score exceeds it is a specialist.
    batch : int, default 16
        Draws processed together (memory: about 3 x batch x P x N1 floats).

    Returns
    -------
    Specialists
        Per draw and neuron the energy, alignment, score and the specialists; per draw k; and the summaries (the
        distribution of k pooled and per chain, the mean top scores, the specialists' energy share, their
        persistence along a chain).

    Raises
    ------
    ValueError
        Shapes that disagree, NaN or inf entries, a non-positive T, lambda1 or threshold, an unknown activation.
    """
    w, X, Y = _check(w, X, Y, T, lambda1, threshold)
    sigma = get_activation(activation).numpy
    C, n, N1, N0 = w.shape
    flat = w.reshape(C * n, N1, N0)
    basis = _label_basis(Y)
    parts = [_per_draw(flat[i:i + batch], X, Y, basis, T, lambda1, sigma) for i in range(0, C * n, max(1, batch))]
    energy = np.concatenate([p[0] for p in parts]).reshape(C, n, N1)
    alignment = np.concatenate([p[1] for p in parts]).reshape(C, n, N1)
    score = N1 * energy / energy.sum(axis=-1, keepdims=True) * alignment
    spec = score > threshold
    k = spec.sum(axis=-1)
    kmax = int(k.max())
    k_fractions_chain = np.stack([np.bincount(kc, minlength=kmax + 1) / n for kc in k])
    k_fractions = np.bincount(k.ravel(), minlength=kmax + 1) / k.size
    top = np.sort(score, axis=-1)[..., ::-1][..., :TOP]
    top_scores = top.reshape(-1, top.shape[-1]).mean(axis=0)
    share = np.sum(energy * spec, axis=-1) / energy.sum(axis=-1)
    specialist_share = float(share[k > 0].mean()) if np.any(k > 0) else float("nan")
    inter = np.sum(spec[:, 1:] & spec[:, :-1], axis=-1)
    union = np.sum(spec[:, 1:] | spec[:, :-1], axis=-1)
    persistence = float(np.mean(inter[union > 0] / union[union > 0])) if np.any(union > 0) else float("nan")
    return Specialists(energy=energy, alignment=alignment, score=score, specialist=spec, k=k,
                       threshold=float(threshold), k_fractions=k_fractions, k_fractions_chain=k_fractions_chain,
                       top_scores=top_scores, specialist_share=specialist_share, persistence=persistence)


__all__ = ["SPECIALIST_THRESHOLD", "Specialists", "label_contrasts", "specialists"]
