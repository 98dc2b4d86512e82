"""The measurement of specialist neurons (renormpp.mcstats.specialists, rp.diagnostics.specialists).

Checked against independent computations: the readout energy against E[v vᵀ | w] of the dense Gaussian conditional of
the readout (the full N1·D precision matrix, no push-through), the alignment against the projector Ỹ Ỹ⁺, the
persistence against a hand count; a planted label-contrast neuron in a network of prior draws on MNIST (0, 1) is the
one specialist, and prior draws alone have none.
"""
import importlib

import numpy as np
import pytest
from realdata import missing

import renormpp as rp

sp_module = importlib.import_module("renormpp.mcstats.specialists")

needs_mnist = pytest.mark.skipif(missing("mnist") is not None, reason=missing("mnist") or "")


def dense_energy(w, X, Y, T, lambda1):
    """e_i = E[|v_i|² | w] from the Gaussian conditional of vec(v) (N1·D), built from the log-posterior
    -λ1|v|²/2 - |Y - s v/√N1|²/(2T) directly: precision λ1 + (sᵀs ⊗ 1_D)/(N1 T), linear term vec(sᵀY)/(√N1 T)."""
    N1, N0 = w.shape
    D = Y.shape[1]
    from scipy.special import erf

    s = erf(X @ w.T / np.sqrt(N0))
    prec = lambda1 * np.eye(N1 * D) + np.kron(s.T @ s, np.eye(D)) / (N1 * T)  # index i*D + a
    b = (s.T @ Y).reshape(-1) / (np.sqrt(N1) * T)
    cov = np.linalg.inv(prec)
    m = cov @ b
    second = cov + np.outer(m, m)
    return np.diag(second).reshape(N1, D).sum(axis=1)


def direct_alignment(w, X, Y):
    from scipy.special import erf

    s = erf(X @ w.T / np.sqrt(X.shape[1]))
    sc = s - s.mean(axis=0)
    Yc = Y - Y.mean(axis=0)
    Pi = Yc @ np.linalg.pinv(Yc)
    return np.einsum("pi,pq,qi->i", sc, Pi, sc) / np.sum(sc**2, axis=0)


@pytest.mark.parametrize("D", [1, 3])
def test_energy_and_alignment_against_the_dense_conditional(D):
    """Energy (2) against the dense conditional of v and alignment (3) against Ỹ Ỹ⁺, at T and λ1 away from 1 (so that
    a misplaced factor shows); the score is N1 e_i/Σe a_i. Checked to fail on planted bugs (the energy's fluctuation
    term without its factor D: mismatch at D = 3; the alignment of features not centred: mismatch)."""
    rng = np.random.default_rng(1)
    P, N0, N1, T, lambda1 = 30, 12, 6, 0.3, 2.0
    X = rng.standard_normal((P, N0))
    Y = np.eye(D)[rng.integers(0, D, P)] if D > 1 else rng.standard_normal((P, 1))
    w = rng.standard_normal((2, 3, N1, N0))
    r = rp.diagnostics.specialists(w, X, Y, T=T, lambda1=lambda1, batch=4)
    assert r.energy.shape == r.alignment.shape == r.score.shape == (2, 3, N1)
    for c in range(2):
        for n in range(3):
            np.testing.assert_allclose(r.energy[c, n], dense_energy(w[c, n], X, Y, T, lambda1), rtol=1e-9)
            np.testing.assert_allclose(r.alignment[c, n], direct_alignment(w[c, n], X, Y), rtol=1e-9, atol=1e-12)
    e = r.energy
    np.testing.assert_allclose(r.score, N1 * e / e.sum(axis=-1, keepdims=True) * r.alignment, rtol=1e-12)


def test_draws_without_a_chain_axis_and_batches():
    """(draws, N1, N0) is one chain; the batch size changes nothing."""
    rng = np.random.default_rng(2)
    X, Y = rng.standard_normal((20, 8)), np.eye(2)[rng.integers(0, 2, 20)]
    w = rng.standard_normal((5, 4, 8))
    a = rp.diagnostics.specialists(w, X, Y, T=0.05, batch=1)
    b = rp.diagnostics.specialists(w[None], X, Y, T=0.05, batch=16)
    assert a.energy.shape == (1, 5, 4)
    np.testing.assert_allclose(a.energy, b.energy, rtol=1e-10)
    np.testing.assert_allclose(a.score, b.score, rtol=1e-10)


def test_summaries_by_hand():
    """k, its distribution, the specialists' share and the persistence from hand-set scores: an activation-free check
    of the bookkeeping (scores planted through a linear network whose one neuron is the label column itself).
    Checked to fail on a planted bug (persistence as the fraction of draws equal to the first draw's set: 0.5, not
    2/3)."""
    P, N0 = 40, 40
    rng = np.random.default_rng(3)
    y = np.repeat([1.0, -1.0], P // 2)
    Y = np.stack([y, -y], axis=1)  # centred labels of rank 1
    X = np.sqrt(N0) * np.eye(P)  # linear features s_i = w_i: a neuron's feature is its own weights
    N1 = 8
    w = 0.1 * rng.standard_normal((1, 4, N1, N0))
    for n, i in enumerate((3, 3, 5, 5)):  # the planted neuron moves from 3 to 5 half way
        w[0, n, i] = y
    r = rp.diagnostics.specialists(w, X, Y, T=0.01, activation="linear", threshold=3.0)
    assert r.k.tolist() == [[1, 1, 1, 1]]
    assert [np.flatnonzero(m).tolist() for m in r.specialist[0]] == [[3], [3], [5], [5]]
    np.testing.assert_allclose(r.k_fractions, [0.0, 1.0])
    np.testing.assert_allclose(r.persistence, 2 / 3)  # Jaccard of successive pairs: 1, 0, 1
    share = [r.energy[0, n, i] / r.energy[0, n].sum() for n, i in enumerate((3, 3, 5, 5))]
    np.testing.assert_allclose(r.specialist_share, np.mean(share))
    np.testing.assert_allclose(r.top_scores[0], r.score.max(axis=-1).mean())


def clusters(P=200, N0=100, mu=2.0, seed=0):
    """Two Gaussian classes (one-hot labels) at ±mu along a random unit direction of input space."""
    rng = np.random.default_rng(seed)
    e = rng.standard_normal(N0)
    e /= np.linalg.norm(e)
    labels = rng.integers(0, 2, P)
    X = rng.standard_normal((P, N0)) + np.outer(np.where(labels == 0, mu, -mu), e)
    return X, np.eye(2)[labels]


def planted(X, Y, N1, where, rng, draws=4):
    """Prior draws (draws, N1, N0) with neuron ``where`` set to the class-mean difference at the prior's norm √N0."""
    N0 = X.shape[1]
    w = rng.standard_normal((draws, N1, N0))
    labels = Y.argmax(axis=1)
    u = X[labels == 0].mean(axis=0) - X[labels == 1].mean(axis=0)
    w[:, where] = u / np.linalg.norm(u) * np.sqrt(N0)
    return w


@pytest.mark.parametrize("N1, where", [(20, 7), (100, 42), (200, 0)])
def test_a_planted_label_neuron_is_the_one_specialist(N1, where):
    """One neuron along the class-mean difference (at the prior's norm) among prior draws, on two Gaussian classes:
    k = 1 in every draw and the specialist is that neuron. Checked to fail on a planted bug (the score without its
    factor N1: the planted neuron's score falls below the threshold)."""
    X, Y = clusters()
    rng = np.random.default_rng(N1)
    r = rp.diagnostics.specialists(planted(X, Y, N1, where, rng), X, Y, T=0.01)
    assert r.k.tolist() == [[1] * 4]
    assert np.all(r.specialist[0, :, where])


@pytest.mark.parametrize("N1", [5, 20, 100, 200])
def test_prior_draws_have_no_specialist(N1):
    """Networks of prior draws on two Gaussian classes have k = 0 (no specialist share, no persistence to speak of).
    Checked to fail on a planted bug (the score without its alignment factor: prior neurons pass)."""
    X, Y = clusters()
    w = np.random.default_rng(10 + N1).standard_normal((2, 4, N1, X.shape[1]))
    r = rp.diagnostics.specialists(w, X, Y, T=0.01)
    assert np.all(r.k == 0)
    assert r.k_fractions.tolist() == [1.0]
    assert np.isnan(r.specialist_share) and np.isnan(r.persistence)


@needs_mnist
def test_mnist_planted_neuron_has_the_top_score():
    """On MNIST (0, 1), P = 200, N1 = 20: the planted class-mean-difference neuron among prior draws has the largest
    score of every draw and the largest energy share (prior neurons of MNIST are themselves aligned with the label
    contrast, up to a = 0.9, so the score of prior networks is not small there: the threshold is set from sampled
    networks, studies/specialist_count.py)."""
    d = rp.datasets.mnist(classes=(0, 1), P=200, P_test=10, seed=0)
    X, Y = np.asarray(d.X), np.asarray(d.Y)
    r = rp.diagnostics.specialists(planted(X, Y, 20, 7, np.random.default_rng(0), draws=8), X, Y, T=0.01)
    assert np.all(r.score[0].argmax(axis=-1) == 7)
    assert np.all(r.energy[0].argmax(axis=-1) == 7)


@pytest.mark.parametrize("change, match", [
    (dict(w=np.zeros((3, 4))), "chains, draws, N1, N0"),
    (dict(w=np.zeros((2, 3, 4, 7))), "N0 = 6"),
    (dict(X=np.zeros((9, 6))), "same P"),
    (dict(T=0.0), "T must be a positive"),
    (dict(T=-1.0), "T must be a positive"),
    (dict(lambda1=float("nan")), "lambda1 must be a positive"),
    (dict(threshold=0), "threshold must be a positive"),
    (dict(activation="softsign"), "unknown activation"),
])
def test_bad_input_is_named(change, match):
    rng = np.random.default_rng(0)
    kw = dict(w=rng.standard_normal((2, 3, 4, 6)), X=rng.standard_normal((10, 6)), Y=np.eye(2)[np.arange(10) % 2],
              T=0.01)
    kw.update(change)
    with pytest.raises(ValueError, match=match):
        rp.diagnostics.specialists(kw.pop("w"), kw.pop("X"), kw.pop("Y"), **kw)


@pytest.mark.parametrize("name", ["w", "X", "Y"])
def test_nan_is_refused(name):
    rng = np.random.default_rng(0)
    arrays = dict(w=rng.standard_normal((2, 3, 4, 6)), X=rng.standard_normal((10, 6)),
                  Y=np.eye(2)[np.arange(10) % 2])
    arrays[name] = arrays[name].copy()
    arrays[name].flat[3] = np.nan
    with pytest.raises(ValueError, match=f"{name} contains NaN"):
        rp.diagnostics.specialists(arrays["w"], arrays["X"], arrays["Y"], T=0.01)


def test_exported():
    assert rp.diagnostics.specialists is sp_module.specialists
    assert rp.diagnostics.SPECIALIST_THRESHOLD == sp_module.SPECIALIST_THRESHOLD
