"""The single-neuron picture (renormpp.theory.single_neuron, issue 46 item 1): the oracle tilt (S1) is the response of
the exact log-evidence to one neuron's features (finite differences of a dense computation), the cavity law (S3) is
the exact conditional of one neuron (dense log-evidence), the tilted law (S2) of a linear neuron is the Gaussian with
precision lambda0 + X^T G X / N0 (closed form), bad input is refused."""
import numpy as np
import pytest

from renormpp.experiments.tilted import sample_tilted
from renormpp.theory import single_neuron as sn


def _log_evidence(A, Y):
    """-1/2 tr Y^T A^-1 Y - D/2 log det A, densely."""
    return -0.5 * np.trace(Y.T @ np.linalg.solve(A, Y)) - 0.5 * Y.shape[1] * np.linalg.slogdet(A)[1]


def _problem(P=12, N0=5, N1=3, D=2, draws=3, seed=0):
    rng = np.random.default_rng(seed)
    X, Y = rng.normal(size=(P, N0)), rng.normal(size=(P, D))
    return X, Y, rng.normal(size=(draws, N1, N0))


def test_the_oracle_tilt_is_the_response_of_the_log_evidence_to_one_neuron():
    X, Y, w = _problem()
    T, lam1 = 0.3, 1.7
    tilt = sn.oracle_tilt(w, X, Y, T=T, lambda1=lam1)
    c = lam1 * w.shape[1]
    s0 = np.tanh(np.random.default_rng(1).normal(size=X.shape[0]))  # any feature vector
    eps, slopes = 1e-5, []
    for one in w:
        s = np.asarray(sn.features(one, X))
        A = T * np.eye(X.shape[0]) + s @ s.T / c
        up, down = (_log_evidence(A + e * np.outer(s0, s0) / c, Y) for e in (eps, -eps))
        slopes.append((up - down) / (2 * eps))
    assert np.mean(slopes) == pytest.approx(-0.5 * s0 @ tilt.G @ s0, rel=1e-6)
    A0 = T * np.eye(X.shape[0]) + (lambda s: s @ s.T / c)(np.asarray(sn.features(w[0], X)))
    assert sn.oracle_tilt(w[:1], X, Y, T=T, lambda1=lam1).residual == pytest.approx(np.linalg.solve(A0, Y))


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["nuts", "tempered"])
def test_the_tilted_law_of_a_linear_neuron_is_the_gaussian_with_the_tilted_precision(sampler):
    """With a linear activation s = Xw/sqrt(N0) and (S2) is N(0, Sigma), Sigma^-1 = lambda0 + X^T G X / N0. The
    sampled covariance of the weights against Sigma, each entry's z from its standard error by batch means (4 chains x
    10 batches). The labels are scaled so that X^T G X has a negative eigenvalue (the -r r^T part of (S1) at work)
    and the law stays normalizable. On correct code the largest |z| of the 21 entries is 1.5-3.0 (NUTS) and 1.6-3.5
    (replica exchange) over keys 0-4; the bound 5 is a false alarm below 1 in 1000 (21 entries, t with 39 degrees of
    freedom). With a planted factor 2 on G it is 15.7 and 22.2."""
    X, Y, w = _problem(P=30, N0=6, N1=4, D=1, draws=5)
    G = sn.oracle_tilt(w, X, 0.5 * Y, T=0.5, activation="linear").G
    lam0 = 1.3
    prec = lam0 * np.eye(6) + X.T @ G @ X / 6
    assert np.linalg.eigvalsh(prec)[0] > 0.1  # a normalizable law
    assert np.linalg.eigvalsh(X.T @ G @ X)[0] < 0
    Sigma = np.linalg.inv(prec)
    draws, _ = sample_tilted(X, G, lambda0=lam0, activation="linear", num_warmup=500, num_samples=2000,
                                num_chains=4, seed=0, sampler=sampler, replicas=4, beta_min=0.3)
    products = np.einsum("cni,cnj->cnij", draws, draws)  # E w w^T = Sigma (mean zero)
    batches = products.reshape(4, 10, -1, 6, 6).mean(axis=2).reshape(40, 6, 6)
    S, se = batches.mean(axis=0), batches.std(axis=0, ddof=1) / np.sqrt(40)
    z = (S - Sigma) / se
    assert np.max(np.abs(z[np.triu_indices(6)])) < 5.0, z


def test_directions_are_unit_vectors_and_the_label_direction_is_the_class_mean_difference():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(20, 7))
    labels = rng.integers(0, 2, size=20)
    Y = np.eye(2)[labels]
    dirs = sn.directions(X, Y, residual=rng.normal(size=(20, 2)))
    assert set(dirs) == {"pc1", "pc2", "labels", "residual"}
    assert all(np.linalg.norm(u) == pytest.approx(1.0) for u in dirs.values())
    diff = X[labels == 0].mean(axis=0) - X[labels == 1].mean(axis=0)
    assert abs(dirs["labels"] @ diff) == pytest.approx(np.linalg.norm(diff))


def test_bad_input_is_refused_with_the_problem_named():
    X, Y, w = _problem()
    with pytest.raises(ValueError, match="draws, N1, N0"):
        sn.oracle_tilt(w[0], X, Y, T=0.1)
    with pytest.raises(ValueError, match="NaN"):
        sn.oracle_tilt(np.where(w > 1, np.nan, w), X, Y, T=0.1)
    with pytest.raises(ValueError, match="positive"):
        sn.oracle_tilt(w, X, Y, T=0.0)
    with pytest.raises(ValueError, match="N0 = 5"):
        sn.oracle_tilt(w[..., :4], X, Y, T=0.1)
    with pytest.raises(ValueError, match=r"\(P, P\) matrix with P = 12"):
        sample_tilted(X, np.eye(11))
    with pytest.raises(ValueError, match="either G"):
        sample_tilted(X, np.eye(12), cavity=(np.eye(12), Y, 3.0))
    with pytest.raises(ValueError, match="lambda0"):
        sample_tilted(X, np.eye(12), lambda0=-1.0)


def test_the_cavity_law_is_the_exact_conditional_of_one_neuron_and_its_oracle_the_mean_cavity_inverse():
    """(S3) with B = A_{-i}^{-1} differs between two weight vectors of neuron i by what the dense log-evidence does
    (the other neurons held), and the oracle B is the dense inverse without neuron i, averaged over neurons and
    draws."""
    import jax.numpy as jnp

    X, Y, w = _problem(P=10, N0=4, N1=3, D=2, draws=2)
    T, lam1 = 0.2, 1.4
    c = lam1 * w.shape[1]

    def A_of(W):
        s = np.asarray(sn.features(W, X))
        return T * np.eye(10) + s @ s.T / c

    dense = np.mean([np.linalg.inv(A_of(np.delete(W, i, axis=0))) for W in w for i in range(3)],
                    axis=0)
    tilt = sn.oracle_tilt(w, X, Y, T=T, lambda1=lam1)
    assert tilt.B == pytest.approx(dense, rel=1e-9, abs=1e-12) and tilt.c == c
    W, i = w[0], 1
    B = np.linalg.inv(A_of(np.delete(W, i, axis=0)))
    u, u2 = np.random.default_rng(3).normal(size=(2, 4))
    with_u = [W.copy(), W.copy()]
    with_u[0][i], with_u[1][i] = u, u2
    exact = _log_evidence(A_of(with_u[0]), Y) - _log_evidence(A_of(with_u[1]), Y)
    cav = [float(sn.log_cavity(jnp.asarray(x, jnp.float32), jnp.asarray(X, jnp.float32), jnp.asarray(B, jnp.float32),
                               jnp.asarray(Y, jnp.float32), c)) for x in (u, u2)]
    assert cav[0] - cav[1] == pytest.approx(exact, rel=1e-4)
