r"""The posterior's hidden kernel, measured from draws, against the NNGP kernel and against what the theory predicts:
does kernel *shape* renormalization hold at a point, or did the network learn a kernel?

* :class:`Segments`: sums of the summands of :func:`renormpp.observables.hidden_sums` over consecutive stretches of
  draws (streamed: no per-draw P x P matrix is kept), at most ``max_segments`` of them;
* :class:`HiddenKernel`: the measured means, :math:`K_{\rm post} = \langle\sigma(h)\sigma(h)^\top\rangle/N_1` on
  the train inputs, the train-test cross kernel and the test diagonal, and :math:`\langle w^\top w\rangle/N_1`, with
  jackknife error bars over the segments (:meth:`HiddenKernel.jackknife`); :func:`measure` makes one from stored
  draws (e.g. NumPyro NUTS), ``renormpp run`` streams it while sampling;
* :func:`diagnose`: the :class:`KernelDiagnosis` of a point: (a) the spectrum ratios
  :math:`r_k = u_k^\top K_{\rm post} u_k / u_k^\top K u_k` along the top eigenvectors :math:`u_k` of K, measured and
  as the theory predicts them (Eq. (H2) of :mod:`renormpp.theory.hidden`); (b) the kernel-target alignment
  :math:`A(K) = \langle K, YY^\top\rangle_F / (\|K\|_F \|YY^\top\|_F)` of K, of the measured and of the predicted
  :math:`K_{\rm post}`; (c) the first layer: the top eigenvalues of :math:`\lambda_0\langle w^\top w\rangle/N_1` (1
  under the prior) and how much of their eigenvectors lies in the data's top principal directions; and the oracle
  test: the theory with the measured :math:`K_{\rm post}` in place of K (:func:`renormpp.theory.hidden.with_kernel`),
  and the *matched* oracle with :math:`K + K_{\rm post} - K_{\rm post}^{\rm theory}`: the theory itself predicts a
  :math:`K_{\rm post} \ne K` (Eq. (H1)), so feeding it the measured :math:`K_{\rm post}` counts its own adaptation
  twice (on a linear network, where the theory holds, the plain oracle misses the sampled eps_g by 38%, the matched
  one by 5%, as the theory).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..theory import hidden as hidden_theory
from .comparison import Z_AGREE

#: a measured K_post within this relative deviation of the theory's along every top direction still "holds" (to
#: this tolerance): the theory is the leading order in 1/N1
KERNEL_TOLERANCE = 0.05


# ---- streamed sums -------------------------------------------------------------------------------------------------
@dataclass
class Segments:
    """Sums of the hidden-kernel summands over the cells of a grid of draws: cell k covers the draws
    k * ``cell`` to (k + 1) * ``cell`` - 1 (of every chain, after the warmup) and sums ``count[k]`` summands (over
    the chains and the thinned draws). The cell is a power of two, doubled (neighbours merged) to keep at most
    ``max_cells`` cells (:meth:`cell_for`): the cells depend only on the number of draws, never on the blocks."""

    max_cells: int = 16
    cell: int = 1
    sums: dict = field(default_factory=dict)
    count: dict = field(default_factory=dict)

    def cell_for(self, total: int) -> int:
        """The cell for ``total`` draws: the smallest power of two, at least the present one, with at most
        ``max_cells`` cells."""
        cell = self.cell
        while -(-int(total) // cell) > self.max_cells:
            cell *= 2
        return cell

    def coarsen(self, cell: int) -> None:
        """Merge the cells into cells of ``cell`` draws (a power-of-two multiple of the present cell)."""
        if cell == self.cell:
            return
        if cell < self.cell or cell % self.cell:
            raise ValueError(f"cells of {self.cell} draws can only merge into multiples of {self.cell}; got {cell}")
        sums, count = {}, {}
        for k in sorted(self.sums):
            K = k * self.cell // cell
            sums[K] = self.sums[k] if K not in sums else {n: sums[K][n] + v for n, v in self.sums[k].items()}
            count[K] = count.get(K, 0) + self.count[k]
        self.sums, self.count, self.cell = sums, count, cell

    def add(self, sums: dict, count: int, first: int, stop: int) -> None:
        """Sums of ``count`` summands (already summed over the chains) of the draws first..stop-1, all in one cell."""
        k = int(first) // self.cell
        if (int(stop) - 1) // self.cell != k:
            raise ValueError(f"draws {first}..{stop - 1} are not in one cell of {self.cell} draws")
        if count <= 0:
            return
        new = {n: np.asarray(v, dtype=np.float64) for n, v in sums.items()}
        self.sums[k] = new if k not in self.sums else {n: self.sums[k][n] + v for n, v in new.items()}
        self.count[k] = self.count.get(k, 0) + int(count)

    def arrays(self, prefix: str = "kernel") -> dict:
        """The cells as flat arrays (for a checkpoint, :meth:`from_arrays`)."""
        if not self.sums:
            return {}
        ks = sorted(self.sums)
        out = {f"{prefix}/{n}": np.stack([self.sums[k][n] for k in ks]) for n in self.sums[ks[0]]}
        return out | {f"{prefix}/.cells": np.asarray(ks), f"{prefix}/.count": np.asarray([self.count[k] for k in ks]),
                      f"{prefix}/.cell": np.asarray(self.cell), f"{prefix}/.max": np.asarray(self.max_cells)}

    @classmethod
    def from_arrays(cls, files: dict, prefix: str = "kernel", max_cells: int = 16) -> "Segments":
        seg = cls(max_cells=int(files.get(f"{prefix}/.max", max_cells)), cell=int(files.get(f"{prefix}/.cell", 1)))
        names = [k.split("/", 1)[1] for k in files if k.startswith(prefix + "/") and "/." not in k]
        for i, k in enumerate(np.asarray(files.get(f"{prefix}/.cells", []), dtype=int)):
            seg.sums[int(k)] = {n: np.asarray(files[f"{prefix}/{n}"][i], dtype=np.float64) for n in names}
            seg.count[int(k)] = int(files[f"{prefix}/.count"][i])
        return seg

    def kernel(self, cut: int = 0) -> "HiddenKernel | None":
        """The measured means from the cells that start at or after draw ``cut`` (the thermalization cut; all of
        them where fewer than two do), or None without cells."""
        if not self.sums:
            return None
        ks = sorted(self.sums)
        keep = [k for k in ks if k * self.cell >= cut]
        keep = keep if len(keep) >= 2 else ks
        seg = {n: np.stack([self.sums[k][n] for k in keep]) for n in self.sums[ks[0]]}
        return HiddenKernel(seg, [self.count[k] for k in keep], first_draw=keep[0] * self.cell)


# ---- the measured kernel ---------------------------------------------------------------------------------------------
class HiddenKernel:
    """The posterior means of the hidden-kernel summands (:func:`renormpp.observables.hidden_sums`): ``train``
    (P, P) = :math:`K_{\\rm post}`, ``cross`` (P, P0), ``test`` (P0,), ``first_layer`` (N0, N0) =
    :math:`\\langle w^\\top w\\rangle/N_1`; from segment sums ``seg`` {name: (S, ...)} of ``count`` (S,) summands."""

    def __init__(self, seg: dict, count, first_draw: int = 0):
        self._seg, self.count = seg, np.asarray(count, dtype=np.float64)
        self.first_draw = int(first_draw)
        total = self.count.sum()
        for k, v in seg.items():
            setattr(self, k, v.sum(axis=0) / total)

    @property
    def segments(self) -> int:
        return len(self.count)

    @property
    def summands(self) -> int:
        """How many draws (over the chains) the means average."""
        return int(self.count.sum())

    def means(self) -> dict:
        return {k: getattr(self, k) for k in self._seg}

    def jackknife(self, fn) -> tuple[np.ndarray, np.ndarray]:
        """``(value, error)`` of ``fn(means)`` (``means``: {name: array}), the error by the delete-one-segment
        jackknife (segments are long stretches of draws, nearly independent); NaN errors with fewer than 3 segments."""
        value = np.asarray(fn(self.means()), dtype=np.float64)
        S = self.segments
        if S < 3:
            return value, np.full_like(value, np.nan)
        total = self.count.sum()
        reps = np.stack([np.asarray(fn({k: (v.sum(axis=0) - v[s]) / (total - self.count[s])
                                         for k, v in self._seg.items()}), dtype=np.float64) for s in range(S)])
        return value, np.sqrt((S - 1) / S * np.sum((reps - reps.mean(axis=0)) ** 2, axis=0))


def measure(samples: dict, X, X_test, activation="erf", *, features=None, first_layer: str = "w",
            segments: int = 8, chunk: int = 32, batch_dims: int = 2) -> HiddenKernel:
    """The posterior's hidden kernel from stored draws of the weights.

    The draws are summed ``chunk`` at a time, never holding a P x P matrix per draw.

    Parameters
    ----------
    samples : dict
        Draws of the hidden weights, e.g. ``mcmc.get_samples(group_by_chain=True)`` of NumPyro NUTS on
        :func:`renormpp.models.mlp`, with ``batch_dims`` leading draw axes.
    X : array_like, shape (P, N0)
        Training inputs.
    X_test : array_like, shape (P0, N0)
        Test inputs.
    activation : str or callable, default "erf"
        The network's activation.
    features : callable, optional
        The architecture's features (:func:`renormpp.network.conv_hidden` for the CNN); the fully connected
        network's last hidden layer by default.
    first_layer : str, default "w"
        The site of the weights that see the input.
    segments : int, default 8
        Stretches of equal length (pooled over the chains) the draws are cut into, for the error bars.
    chunk : int, default 32
        Draws summed at a time.
    batch_dims : int, default 2
        Leading draw axes of ``samples``: 2 for (chain, draw), 1 for (draw,).

    Returns
    -------
    HiddenKernel
        The posterior means of the summands of :func:`renormpp.observables.hidden_sums`, with jackknife errors over
        the segments.

    Raises
    ------
    ValueError
        Where ``samples`` is empty.
    """
    import jax
    import jax.numpy as jnp

    from .. import observables

    summand = observables.hidden_sums(X, X_test, activation, first_layer=first_layer,
                                      **({"features": features} if features is not None else {}))
    fn = jax.jit(lambda ps: jax.tree_util.tree_map(lambda a: jnp.sum(a, axis=0), jax.vmap(summand)(ps)))
    leaves = jax.tree_util.tree_leaves(samples)
    if not leaves:
        raise ValueError("samples is empty")
    if batch_dims not in (1, 2):
        raise ValueError(f"batch_dims must be 1 (draw) or 2 (chain, draw); got {batch_dims}")
    samples = {k: (np.asarray(v) if batch_dims == 2 else np.asarray(v)[None]) for k, v in samples.items()
               if k not in ("v", "c")}
    chains, n = next(iter(samples.values())).shape[:2]
    if n < segments:
        raise ValueError(f"{n} draws per chain cannot make {segments} segments: give more draws or fewer segments")
    cell = -(-n // segments)
    seg = Segments(max_cells=segments, cell=cell)
    for lo in range(0, n, cell):
        hi = min(lo + cell, n)
        total = None
        for a in range(lo, hi, chunk):
            part = fn({k: jnp.asarray(v[:, a:min(a + chunk, hi)].reshape((-1,) + v.shape[2:]))
                       for k, v in samples.items()})
            part = {k: np.asarray(v, dtype=np.float64) for k, v in part.items()}
            total = part if total is None else {k: total[k] + part[k] for k in total}
        seg.add(total, chains * (hi - lo), lo, hi)
    return seg.kernel()


# ---- the diagnosis ---------------------------------------------------------------------------------------------------
def alignment(K, Y) -> float:
    """Kernel-target alignment :math:`\\langle K, YY^\\top\\rangle_F / (\\|K\\|_F\\,\\|YY^\\top\\|_F)` (Cristianini et al.
    2001), in [-1, 1]; 1 for :math:`K \\propto YY^\\top`."""
    Y = np.asarray(Y, dtype=np.float64).reshape(len(Y), -1)
    YtY = Y.T @ Y
    return float(np.sum((Y.T @ K) * Y.T) / (np.linalg.norm(K) * np.linalg.norm(YtY)))


@dataclass(frozen=True)
class KernelDiagnosis:
    r"""What the posterior did to the hidden kernel at one point (:func:`diagnose`).

    ``k`` (n,): the top eigenvalues of K, ``r``/``r_err``: the measured ratios along their eigenvectors,
    ``r_theory``: as the exact theory predicts them (H2), ``z``: (r - r_theory)/r_err; ``alignment`` of K, the
    measured K_post (``alignment_post`` ± ``alignment_err``) and the predicted one (``alignment_theory``);
    ``oracle_eps_g`` ± ``oracle_err``: the exact theory with the measured K_post in place of K, ``theory_eps_g``:
    with K; ``matched_eps_g`` ± ``matched_err``: the exact theory with the input kernel that makes its own predicted
    K_post the measured one, to first order, :math:`K + K_{\rm post} - K_{\rm post}^{\rm theory}` (where the theory
    holds this is K, and ``matched_eps_g`` its eps_g; the plain oracle then counts the theory's own adaptation twice;
    NaN where that kernel is not positive semi-definite: the theory's own adaptation exceeds the measured one); ``first_layer`` (n,): top eigenvalues of lambda0 <w^T w>/N1, ``first_layer_in_data`` (n,): the weight of
    their eigenvectors in the data's top-n principal directions, ``first_layer_in_teacher`` (n,): in the span of the
    teacher's directions (NaN without them); ``holds``: whether kernel shape renormalization holds
    (every measured r_k within Z_AGREE error bars of the theory's); ``summands``: draws averaged."""

    k: np.ndarray
    r: np.ndarray
    r_err: np.ndarray
    r_theory: np.ndarray
    alignment: float
    alignment_post: float
    alignment_err: float
    alignment_theory: float
    oracle_eps_g: float
    oracle_err: float
    matched_eps_g: float
    matched_err: float
    theory_eps_g: float
    first_layer: np.ndarray
    first_layer_in_data: np.ndarray
    first_layer_in_teacher: np.ndarray
    summands: int

    @property
    def z(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return (self.r - self.r_theory) / self.r_err

    @property
    def holds(self) -> bool:
        """Every measured r_k within :data:`~renormpp.diagnostics.Z_AGREE` error bars of the theory's."""
        return bool(np.all(np.abs(self.z) < Z_AGREE))

    @property
    def deviation(self) -> float:
        r"""The largest relative deviation :math:`|r_k/r_k^{\rm theory} - 1|` over the top directions."""
        return float(np.max(np.abs(self.r / self.r_theory - 1.0)))

    def verdict(self) -> str:
        """In words: whether kernel shape renormalization holds (within the errors; or within
        :data:`KERNEL_TOLERANCE`, the size of a leading-order theory's finite-size corrections), or along which
        directions the kernel adapted."""
        if not np.all(np.isfinite(self.r_err)):
            return "kernel: no verdict (too few segments of draws for an error bar)"
        if not np.all(np.isfinite(self.r_theory)):
            return "kernel: no theory prediction to judge it against"
        if self.holds:
            return (f"kernel shape renormalization holds: K_post along the top {len(self.k)} directions of K as the "
                    f"theory predicts (|z| < {Z_AGREE:g})")
        worst = int(np.argmax(np.abs(self.z)))
        if self.deviation <= KERNEL_TOLERANCE:
            return (f"kernel shape renormalization holds to {KERNEL_TOLERANCE:.0%}: K_post along the top {len(self.k)} "
                    f"directions of K within {self.deviation:.1%} of the theory's (resolved: u{worst + 1} at "
                    f"z = {self.z[worst]:+.1f})")
        off = np.argsort(-np.abs(self.z))[:3]
        dirs = ", ".join(f"u{i + 1} x{self.r[i]:.2f} (theory x{self.r_theory[i]:.2f}, z = {self.z[i]:+.1f})"
                         for i in sorted(off))
        return (f"the kernel adapted beyond shape renormalization: {dirs}; alignment {self.alignment:.3f} -> "
                f"{self.alignment_post:.3f} (theory {self.alignment_theory:.3f})")

    def table(self) -> str:
        """The spectrum ratios as a markdown table."""
        rows = ["| direction | k | r measured | r theory | z |", "|---|---|---|---|---|"]
        rows += [f"| u{i + 1} | {self.k[i]:.4g} | {self.r[i]:.4f} ± {self.r_err[i]:.4f} | {self.r_theory[i]:.4f} | "
                 f"{self.z[i]:+.1f} |" for i in range(len(self.k))]
        return "\n".join(rows)

    def markdown(self) -> str:
        """The diagnosis for a report: the verdict, the spectrum ratios, the alignment, the oracles, the first
        layer."""
        matched = ("with K + K_post - K_post(theory), the kernel that makes the theory's own K_post the measured one "
                   f"(to first order): {self.matched_eps_g:.5g} ± {self.matched_err:.2g}"
                   if np.isfinite(self.matched_eps_g) else "no kernel makes the theory's own K_post the measured one to "
                   "first order (the theory's adaptation exceeds the measured)")
        teacher = (f"; in the teacher's directions: {', '.join(f'{g:.2f}' for g in self.first_layer_in_teacher[:5])}"
                   if np.isfinite(self.first_layer_in_teacher).all() else "")
        return (f"**{self.verdict()}**\n\nSpectrum ratios r_k = u_k^T K_post u_k / k_k along the top eigenvectors of K "
                "(1 under the prior; theory: the exact theory's K_post, Eq. (H2) of renormpp.theory.hidden):\n\n"
                f"{self.table()}\n\nKernel-target alignment: K {self.alignment:.4f}, K_post {self.alignment_post:.4f} ± "
                f"{self.alignment_err:.4f}, theory {self.alignment_theory:.4f}.\n\nOracle: the exact theory with the "
                f"measured K_post in place of K gives eps_g = {self.oracle_eps_g:.5g} ± {self.oracle_err:.2g} (with K: "
                f"{self.theory_eps_g:.5g}); {matched}.\n\nFirst layer: top eigenvalues of lambda0 <w^T w>/N1 (1 under "
                f"the prior; the top of a noisy estimate of 1 lies above 1): "
                f"{', '.join(f'{g:.3g}' for g in self.first_layer[:5])}; their weight in the data's top "
                f"{len(self.first_layer)} principal directions: "
                f"{', '.join(f'{g:.2f}' for g in self.first_layer_in_data[:5])}{teacher}.")

    def as_dict(self) -> dict:
        out = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in self.__dict__.items()}
        return out | {"z": self.z.tolist(), "holds": self.holds, "deviation": self.deviation, "verdict": self.verdict()}


def diagnose(kernel: HiddenKernel, fit, X_test=None, Y_test=None, n: int = 10, teacher=None) -> KernelDiagnosis:
    """The diagnosis of a measured hidden kernel against a theory fit: does kernel shape renormalization hold?

    Parameters
    ----------
    kernel : HiddenKernel
        The measured kernel, from :func:`measure`.
    fit : TheoryFit
        Any method of a fully connected network with one hidden layer and an odd activation, on the same data; its
        exact refit predicts K_post.
    X_test : array_like, shape (P0, N0), optional
        Test inputs, the kernel's.
    Y_test : array_like, shape (P0, D), optional
        Test labels: with them, the oracle's eps_g.
    n : int, default 10
        The top directions of K compared.
    teacher : array_like, shape (k, N0), optional
        The input directions the labels depend on (e.g. a linear teacher's rows): how much of the first layer's top
        eigenvectors lies in their span.

    Returns
    -------
    KernelDiagnosis

    Raises
    ------
    ValueError
        Where the kernel and the fit have different training sets.
    """
    exact = fit.refit("exact") if fit.method != "exact" else fit
    spectrum = exact.spectrum
    P, Y = len(spectrum.k), spectrum.V @ spectrum.Yt
    if kernel.train.shape != (P, P):
        raise ValueError(f"the measured kernel is {kernel.train.shape} but the fit has P = {P} training points")
    n = min(int(n), P)
    top = np.argsort(spectrum.k)[::-1][:n]
    U, k = spectrum.V[:, top], spectrum.k[top]
    r, r_err = kernel.jackknife(lambda m: np.einsum("pi,pq,qi->i", U, m["train"], U) / k)
    r_theory = hidden_theory.spectrum_ratios(exact)[top]
    K = spectrum.V @ (spectrum.k[:, None] * spectrum.V.T)
    K_theory = hidden_theory.predicted_kernel(exact)[0]
    a_post, a_err = kernel.jackknife(lambda m: alignment(m["train"], Y))
    oracle, oracle_err, matched, matched_err, theory_eps = (np.nan,) * 5
    if X_test is not None and Y_test is not None:
        kappa, k00 = exact.test_kernel(X_test)
        prior = (K, spectrum.V @ kappa, k00)
        own = [th - k for th, k in zip(hidden_theory.predicted_kernel(exact, X_test), prior)]

        def eps(m, shift=(0.0, 0.0, 0.0)):
            return hidden_theory.with_kernel(m["train"] - shift[0], Y, N1=exact.N1, T=exact.T, lambda1=exact.lambda1,
                                             K_cross=m["cross"] - shift[1], k_test=m["test"] - shift[2],
                                             Y_test=Y_test).eps_g
        oracle, oracle_err = kernel.jackknife(eps)
        k_in = np.linalg.eigvalsh(kernel.train - own[0])
        if k_in[0] >= -1e-6 * k_in[-1]:  # else the theory's own adaptation exceeds the measured: no first-order match
            matched, matched_err = kernel.jackknife(lambda m: eps(m, own))
        theory_eps = exact.generalization_error(X_test, Y_test)
    lam0 = np.mean(np.atleast_1d(exact.lambda0))
    g, E = np.linalg.eigh(0.5 * (kernel.first_layer + kernel.first_layer.T) * lam0)
    g, E = g[::-1][:n], E[:, ::-1][:, :n]
    X = np.asarray(exact.X, dtype=np.float64)
    pcs = np.linalg.svd(X - X.mean(axis=0), full_matrices=False)[2][:n]  # (n, N0) top principal directions
    in_data = np.sum((pcs @ E) ** 2, axis=0)
    in_teacher = np.full(len(g), np.nan)
    if teacher is not None:
        basis = np.linalg.svd(np.atleast_2d(np.asarray(teacher, dtype=np.float64)), full_matrices=False)[2]
        in_teacher = np.sum((basis @ E) ** 2, axis=0)
    return KernelDiagnosis(k=k, r=r, r_err=r_err, r_theory=r_theory, alignment=alignment(K, Y),
                           alignment_post=float(a_post), alignment_err=float(a_err),
                           alignment_theory=alignment(K_theory, Y), oracle_eps_g=float(oracle),
                           oracle_err=float(oracle_err), matched_eps_g=float(matched), matched_err=float(matched_err),
                           theory_eps_g=float(theory_eps), first_layer=g,
                           first_layer_in_data=in_data, first_layer_in_teacher=in_teacher,
                           summands=kernel.summands)
