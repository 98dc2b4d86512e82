"""The evidence of the field-specialist theory, rp.theory.evidence (E1)-(E2): exact at both ends, every neuron
explicit against Gauss-Hermite quadrature of the finite network's evidence, and the shared field at large width
against the NNGP's closed form; its errors."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import erf

import renormpp as rp
from renormpp.theory import evidence as ev
from renormpp.theory import field_specialists as fs
from renormpp.theory.specialists import _problem
from stat_bounds import FALSE_ALARM

T = 0.1


def _quadrature(X, Y, N1, nodes):
    r"""The finite network's log evidence :math:`\log E_W\,\mathcal N(Y; 0, T + \mathbb 1_D\otimes SS^\top/N_1)`
    (erf, unit priors, N0 = 1) by Gauss-Hermite quadrature over the N1 weights."""
    P, D = Y.shape
    x, wq = np.polynomial.hermite_e.hermegauss(nodes)
    W = np.stack([g.ravel() for g in np.meshgrid(*([x] * N1), indexing="ij")], axis=1)  # (n, N1)
    log_w = sum(np.log(g.ravel() / np.sqrt(2 * np.pi)) for g in np.meshgrid(*([wq] * N1), indexing="ij"))
    S = erf(X[None, :, 0:1] * W[:, None, :])  # (n, P, N1)
    A = T * np.eye(P) + np.einsum("npk,nqk->npq", S, S) / N1
    quad = np.einsum("pa,npq,qa->n", Y, np.linalg.inv(A), Y)
    log_lik = -0.5 * D * np.linalg.slogdet(A)[1] - 0.5 * quad - 0.5 * P * D * np.log(2 * np.pi)
    return float(np.logaddexp.reduce(log_w + log_lik))


def _bound(e: ev.Evidence) -> float:
    """The largest distance of the evidence from an exact value that its replicates' spread allows (Student's t at
    FALSE_ALARM)."""
    return stats.t.isf(FALSE_ALARM / 2, len(e.replicates) - 1) * e.error


@pytest.mark.parametrize("N1", [2, 3])
def test_every_neuron_explicit_is_the_exact_evidence(N1):
    """k = N1: (E2) is the finite network's evidence; tempered SMC over the N1 weights against quadrature (the
    quadrature converged to 1e-6 at 100 nodes; the SMC's error is about 0.001)."""
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((5, 1)), rng.standard_normal((5, 2))
    exact = _quadrature(X, Y, N1, 100)
    P, D = Y.shape
    zero = np.zeros((P * D, P * D))
    fit = fs.FieldSpecialistFit(W=np.zeros((1, N1, 1)), k=N1, m=None, Sigma=None, L_W=zero, L_C=zero, history=[],
                                bulk=None, _pb=_problem(X, Y, N1, N1, T, 1.0, 1.0, "erf"))
    e = ev.log_evidence(fit, replicates=8)
    assert 0 < e.error < 0.01
    assert abs(e.log_z - exact) < _bound(e), (e, exact)
    assert e.free_energy == -e.log_z and np.all(e.bulk == 0)


def test_the_shared_field_at_large_width_is_the_nngp_evidence():
    """k = 0 at N1 = 10 000: (E1) at the shared field's fixed point is the NNGP's log N(Y; 0, T + K), to within its
    error. Its bulk term N1 log Z1 (about 1 nat here) and the Gaussian terms each matter: without the first the
    distance would be ten times the bound."""
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((5, 2)), rng.standard_normal((5, 2))
    P, D = Y.shape
    A = T * np.eye(P * D) + np.kron(np.eye(D), rp.kernels.nngp(X))
    y = Y.T.reshape(-1)
    nngp = -0.5 * y @ np.linalg.solve(A, y) - 0.5 * np.linalg.slogdet(A)[1] - 0.5 * P * D * np.log(2 * np.pi)
    fit = fs.solve(X, Y, N1=10_000, k=0, T=T)
    e = ev.log_evidence(fit, replicates=8)
    assert abs(e.log_z - nngp) < _bound(e) < 0.3, (e, nngp)
    assert abs(e.bulk.mean()) > 3 * _bound(e)


def test_bad_input_is_named():
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((5, 1)), rng.standard_normal((5, 2))
    with pytest.raises(TypeError, match="field-specialist fit"):
        ev.log_evidence(rp.theory.solve(X, Y, N1=4, T=T))
    P, D = Y.shape
    zero = np.zeros((P * D, P * D))
    fit = fs.FieldSpecialistFit(W=np.zeros((1, 2, 1)), k=2, m=None, Sigma=None, L_W=zero, L_C=zero, history=[],
                                bulk=None, _pb=_problem(X, Y, 2, 2, T, 1.0, 1.0, "erf"))
    with pytest.raises(ValueError, match="at least 2"):
        ev.log_evidence(fit, replicates=1)
    with pytest.raises(ValueError, match="neurons"):
        ev.log_evidence(fit, neurons=0)
