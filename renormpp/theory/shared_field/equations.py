r"""(F1)-(F2) per neuron and over a population: each neuron's bulk, spike and tilt, the moments of (F2) and the
field they give, and the importance weights of the neurons (normalization, effective sample size, Pareto k,
systematic resampling, the control variate's weights)."""
from __future__ import annotations


import numpy as np

from ..single_neuron import features


#: Pareto k of the importance weights down to which the proposal is fitted, and above which the averages are
#: unreliable (Vehtari, Simpson, Gelman, Yao & Gabry, JMLR 25, 72 (2024): k < 0.7 for a usable estimate): a field
#: that settles with k above it starts a new round
_K_FIT, _K_BAD = 0.5, 0.7


def _normalized(log_w):
    """Weights of mean 1 from their logs, and how far the largest log lies above the median."""
    rho = np.exp(log_w - log_w.max())
    return rho / rho.mean(), float(log_w.max() - np.median(log_w))


def _ess(log_w) -> float:
    """The effective sample size (Kish) of weights from their logs."""
    rho = np.exp(log_w - log_w.max())
    return float(rho.sum() ** 2 / np.sum(rho**2))


def pareto_k(log_w) -> float:
    """The Pareto k of importance weights: the shape of their upper tail (ArviZ's Pareto-smoothed importance sampling).

    Weights of tail exp(r x^2 / 2) on a unit Gaussian x have k = r, and a finite variance only below k = 1/2; their
    averages hold below k = 0.7.

    Parameters
    ----------
    log_w : array_like
        The logs of the weights, up to a constant.

    Returns
    -------
    float
        The tail's shape k: 0 for equal weights, and where the largest weights all equal (a bounded tail); infinite
        where one weight holds nearly all of them (ArviZ's fit of the tail gives NaN there).
    """
    from arviz_stats.base import array_stats

    log_w = np.asarray(log_w, dtype=float)
    if np.ptp(log_w) <= 1e-12 * max(1.0, np.abs(log_w).max()):  # equal weights (neurons drawn from the law itself)
        return 0.0
    try:
        k = float(array_stats.psislw(-log_w, 1.0)[1])
    except ValueError as err:  # the largest weights all equal: a bounded tail
        if "tail values are the same" not in str(err):
            raise
        return 0.0
    return np.inf if np.isnan(k) else k


def _control_weights(log_w0):
    """The weights rho0 (mean 1) that carry the neurons to the prior for the control variate (:func:`_control`), from
    their logs; None where they are unreliable: a Pareto k above 0.7, or an effective sample size below half the
    neurons (the proposal's own standard of good weights). From (F1) to the prior they degenerate where the tilt is
    strong: on MNIST P = 200 at α = 10, ESS 1-200 of 4000 and k up to 9, the sample's "kernel" off by 2-4 times the
    norm of the exact one (0.03-0.09 where the weights are good), and T + L_W of (F2) indefinite (its smallest
    eigenvalue down to -1.7e5): the field's covariance blew up and the solve wandered. There the plain averages,
    without the control, are taken."""
    return None if _ess(log_w0) < len(log_w0) / 2 or not pareto_k(log_w0) <= _K_BAD else _normalized(log_w0)[0]


def _resampled(log_w, rng) -> np.ndarray:
    """Indices of M neurons drawn in proportion to exp(log_w), systematically (one uniform for all: the least noise)."""
    rho = np.exp(log_w - log_w.max())
    edges = np.cumsum(rho / rho.sum())
    return np.minimum(np.searchsorted(edges, (rng.random() + np.arange(len(rho))) / len(rho)), len(rho) - 1)


def _per_neuron(s, m, Sigma, c):
    """(C, y, log_tilt) of the M neurons with features ``s`` (M, P): C = (c + q)^-1 (M, D, D), y = C z (M, D) and the
    log of (F1)'s tilt, -1/2 logdet(1 + q/c) + 1/2 z^T C z."""
    D, P = m.shape[1], m.shape[0]
    q = np.empty((len(s), D, D))
    for a in range(D):  # matrix products (an einsum over the three took 20x longer at P = 1000)
        for b in range(a, D):
            q[:, a, b] = q[:, b, a] = np.sum((s @ Sigma[a * P:(a + 1) * P, b * P:(b + 1) * P]) * s, axis=1)
    C = np.linalg.inv(c * np.eye(D) + q)
    z = s @ m
    y = np.einsum("mab,mb->ma", C, z)
    return C, y, -0.5 * np.linalg.slogdet(np.eye(D) + q / c)[1] + 0.5 * np.einsum("ma,ma->m", z, y)


def _control(s1, s2, rho0, K):
    """The control variate: the weighted sample's estimate of the NNGP kernel, :math:`\\overline{\\rho_0 s_1 s_2^\\top}`,
    minus the exact one ``K``; zero where ``rho0`` is None (:func:`_control_weights`)."""
    if rho0 is None:
        return np.zeros(K.shape)
    return (s1 * rho0[:, None]).T @ s2 / len(rho0) - K


def _moments(s, rho, C, y, dK, N1):
    r"""(F2)'s moments over the neurons ``s`` with weights ``rho``: :math:`L_W = N_1 E[W\otimes ss^\top]`,
    W = (c+q)^{-1} + yy^T, and :math:`L_C = N_1 E[(c+q)^{-1}\otimes ss^\top]`, each (PD, PD)."""
    PD = s.shape[1] * C.shape[1]
    return tuple(N1 * _moment(s, s, rho, Z, dK).reshape(PD, PD) for Z in (C + np.einsum("ma,mb->mab", y, y), C))


def _population_moments(w, X, activation, m, Sigma, c, K, N1, T):
    """(F2)'s moments from one population ``w`` of neurons drawn at (F1)'s law (equal weights), with the control
    variate of the prior over (F1) (its weights 1 / tilt) where :func:`_guarded_moments` keeps it; and each neuron's
    log tilt."""
    s = features(w, X, activation).T
    C, y, log_tilt = _per_neuron(s, m, Sigma, c)
    dK = _control(s, s, _control_weights(-log_tilt), K)
    return (*_guarded_moments(s, np.ones(len(s)), C, y, dK, N1, T), log_tilt)


def _guarded_moments(s, rho, C, y, dK, N1, T):
    r"""(F2)'s moments (:func:`_moments`) of one iteration, with the control variate ``dK``
    where it keeps them above :math:`-T/2` (both :math:`T/2 + L_W` and :math:`T/2 + L_C` positive definite), and
    without it otherwise. The plain moments are positive semidefinite, so :math:`\Sigma' = (T + L_W)^{-1}` is
    bounded by 1/T; the control, exact where the tilt is weak (at infinite width it removes the Monte Carlo error of
    the kernel), is a noisy difference where the tilt is strong: on MNIST P = 200 at α = 10, with weights that pass
    :func:`_control_weights` (50-80% of the neurons effective, Pareto k below 0), it made :math:`T + L_W` indefinite
    (smallest eigenvalue -0.2 to -0.004 at T = 0.01; each such iteration a spike of the field's covariance) and
    (F3)'s :math:`T + N_1 L` too (-0.22: ε_g 0.0097 where the plain averages give 0.0145). The same test keeps it out
    of (F3) (:meth:`SharedFieldFit.predict`)."""
    moments = _moments(s, rho, C, y, dK, N1)
    if not np.any(dK) or all(_above(L, T) for L in moments):
        return moments
    return _moments(s, rho, C, y, np.zeros(dK.shape), N1)


def _above(L, T) -> bool:
    """Whether T/2 + L is positive definite."""
    return _positive(L + 0.5 * T * np.eye(len(L)))


def _positive(A) -> bool:
    """Whether the symmetric matrix ``A`` is positive definite (its Cholesky factor exists)."""
    try:
        np.linalg.cholesky(A)
    except np.linalg.LinAlgError:
        return False
    return True


#: the most halvings of the cavity's step (:func:`_update`)
_HALVINGS = 10


def _update(L_W, L_C, m, Sigma, Y, T, cavity=None):
    r"""The linear equation :math:`A m' = y` for the new field's mean, and its covariance :math:`\Sigma'`, that the
    moments (:func:`_moments`) at the field (m, Sigma) give.

    The shared field (``cavity`` None), (F2): :math:`A = T + L_C`, :math:`\Sigma' = (T + L_W)^{-1}`.

    Averaged expectation propagation (``cavity`` = N1; Dehaene & Barthelmé, JRSS B 80, 199 (2018)): the field the
    neurons are taken in is the cavity of one neuron's site, the other N1 - 1 sites and the prior. The field's
    moments over one neuron's law at the cavity (m, Sigma), matched by a Gaussian (C1):

    .. math::
        \mu = E[y\otimes s] = L_C m/N_1,\qquad A_1 = L_W/N_1 - \mu\mu^\top,\qquad
        m_g = m - \Sigma\mu,\qquad \Sigma_g = \Sigma - \Sigma A_1\Sigma,

    (the field is :math:`i m + g`: the spread of the neurons' means enters with a minus), the site is their ratio to
    the cavity, :math:`\Lambda = \Sigma_g^{-1} - \Sigma^{-1} = A_1 + A_1(\Sigma^{-1} - A_1)^{-1}A_1` and
    :math:`b = \Sigma_g^{-1}m_g - \Sigma^{-1}m = \Lambda(m - \Sigma\mu) - \mu`, and the new cavity holds
    N1 - 1 of them, :math:`\Sigma'^{-1} = T + (N_1 - 1)\Lambda` and :math:`\Sigma'^{-1}m' = y + (N_1 - 1)b`. With
    :math:`\mu = L_C m/N_1` the mean's equation is linear in m; solved for it (C2):

    .. math::
        \big(T + \tfrac{N_1-1}{N_1}(1 + \Lambda\Sigma)L_C\big)\,m = y,\qquad \Sigma' = (T + (N_1 - 1)\Lambda)^{-1}

    (iterated as written, :math:`m' = \Sigma'(y + (N_1-1)b)` moves m by nearly nothing where T is small against
    :math:`(N_1-1)\Lambda`, and drifted off on the hyperplane problem at N1 = 6). At N1 = 1 the cavity is the prior
    and the field's law exact; at large N1, :math:`\Lambda \to L_W/N_1` and (C2) becomes (F2). A site's precision
    may be indefinite, the cavity's may not: where it is not positive definite the sites' step is halved in their
    natural parameters from the present field's (Minka's damping of EP), :data:`_HALVINGS` times at most (then
    :class:`numpy.linalg.LinAlgError`). The last of the returned values is the step taken (1 for (F2))."""
    P, D = Y.shape
    eye = np.eye(P * D)
    if cavity is None:
        return T * eye + L_C, Y.T.reshape(-1), np.linalg.inv(T * eye + L_W), 1.0
    mu = L_C @ m.T.reshape(-1) / cavity
    A1 = L_W / cavity - np.outer(mu, mu)
    A1 = 0.5 * (A1 + A1.T)
    Lam = A1 + A1 @ np.linalg.solve(np.linalg.inv(Sigma) - A1, A1)
    Lam = 0.5 * (Lam + Lam.T)
    old = (np.linalg.inv(Sigma) - T * eye) / (cavity - 1) if cavity > 1 else 0 * eye
    step = 1.0
    for _ in range(_HALVINGS + 1):  # the sites' step, halved until the cavity is proper
        A = T * eye + (cavity - 1) * Lam
        if _positive(A):
            return (T * eye + (cavity - 1) / cavity * (eye + Lam @ Sigma) @ L_C, Y.T.reshape(-1), np.linalg.inv(A),
                    step)
        step /= 2
        Lam = 0.5 * (old + Lam)
    raise np.linalg.LinAlgError(f"the cavity's precision is not positive definite {_HALVINGS} halvings of the "
                                "sites' step from the present field")


def _field(L_W, L_C, m, Sigma, Y, T, cavity=None):
    r"""The field that the moments (:func:`_moments`) give, (F2) or the cavity's (C1)-(C2) (:func:`_update`): the mean
    :math:`m' = A^{-1}h` (P, D), the covariance :math:`\Sigma'` (symmetrized), and the residuals of the present field
    (m, Sigma): :math:`\|Am - y\|/\|y\|` and :math:`\|\Sigma' - \Sigma\|/\|\Sigma\|` over the sites' step taken. A
    cavity that no step makes proper gives infinite residuals."""
    P, D = Y.shape
    try:
        A1, h, Sigma_new, step = _update(L_W, L_C, m, Sigma, Y, T, cavity)
    except np.linalg.LinAlgError:
        return m, Sigma, (np.inf, np.inf)
    y_vec = Y.T.reshape(-1)
    res = (np.linalg.norm(A1 @ m.T.reshape(-1) - h) / np.linalg.norm(y_vec),
           np.linalg.norm(Sigma_new - Sigma) / np.linalg.norm(Sigma) / step)
    return np.linalg.solve(A1, h).reshape(D, P).T, 0.5 * (Sigma_new + Sigma_new.T), res


def _moment(s1, s2, rho, W, dK):
    r""":math:`E[W_{ab}\, s_1 s_2^\top]` over (F1), (D, P1, D, P2), with the control variate ``dK``
    (:func:`_control`). W is symmetric in (a, b): where ``s2`` is ``s1`` (the moments of (F2)) the block (b, a) is
    the block (a, b), computed once (a quarter of (F2)'s moments at D = 2)."""
    M, D = len(rho), W.shape[1]
    out = np.empty((D, s1.shape[1], D, s2.shape[1]))
    for a in range(D):
        for b in range(a if s2 is s1 else 0, D):
            rw = rho * W[:, a, b]
            out[a, :, b] = (s1 * rw[:, None]).T @ s2 / M - rw.mean() * dK
            if s2 is s1:
                out[b, :, a] = out[a, :, b]
    return out
