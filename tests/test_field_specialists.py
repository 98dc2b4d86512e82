"""Specialists in the field of an adaptive bulk, rp.theory.field_specialists: its two limits (k = 0 is the shared
field's (F2)-(F3) on the same neurons, k = N1 the finite network's exact posterior given the weights) and the rank-Dk
updates between them against dense PD x PD algebra; its solve, registry record and errors."""
from __future__ import annotations


import numpy as np
import pytest

import renormpp as rp
from renormpp.network import hidden, x64_context
from renormpp.theory import field_specialists as fs
from renormpp.theory import shared_field as sf
from renormpp.theory.shared_field.equations import _field, _population_moments
from renormpp.theory.specialists import _problem
from hyperplane import hyperplane_problem, nuts_posterior

T = 0.05


def _toy(P=24, N0=6, D=2, seed=0):
    rng = np.random.default_rng(seed)
    X, X0 = rng.standard_normal((P, N0)), rng.standard_normal((7, N0))
    return X, rng.standard_normal((P, D)), X0


def _bulk(X, Y, N1, Nb, neurons=300, seed=1):
    """A shared-field fit on ``neurons`` prior neurons at the exact theory's field (no solve: any field and any
    neurons will do for the algebra), and its moments (F2) for ``Nb`` bulk neurons."""
    P, D = Y.shape
    rng = np.random.default_rng(seed)
    K = rp.kernels.nngp(X)
    Q = rp.theory.solve(X, Y, N1=N1, T=T).Q
    A0 = T * np.eye(P * D) + np.kron(Q, K)
    m, Sigma = np.linalg.solve(A0, Y.T.reshape(-1)).reshape(D, P).T, np.linalg.inv(A0)
    gauss = sf.Proposal.prior(rng.standard_normal((neurons, X.shape[1])), sf.proposal_basis(X, m), 1.0)
    law = sf.Population(gauss, gauss.noise, m, Sigma, float(N1), X, "erf")
    bulk = sf.SharedFieldFit(X=X, Y=Y, N1=N1, T=T, lambda1=1.0, lambda0=1.0, activation="erf", m=m, Sigma=Sigma,
                             residuals=np.zeros((0, 2)), ess=neurons, pareto_k=0.0, converged=True, reason="",
                             proposal=law)
    L_W, L_C, _ = _population_moments(law.weights(1.0), X, "erf", m, Sigma, float(N1), K, Nb, T)
    return bulk, L_W, L_C


def _fit(X, Y, W, N1, bulk=None, L_W=None, L_C=None):
    P, D = Y.shape
    k = W.shape[1]
    zero = np.zeros((P * D, P * D))
    return fs.FieldSpecialistFit(W=W, k=k, m=None, Sigma=None, L_W=zero if L_W is None else L_W,
                                 L_C=zero if L_C is None else L_C, history=[], bulk=bulk,
                                 _pb=_problem(X, Y, N1, k, T, 1.0, 1.0, "erf"), chains=1)


def _features(W, X, N1):
    with x64_context():
        return np.asarray(hidden({"w": W}, X)) / np.sqrt(N1)


def _dense(X, Y, W, N1, L_W, L_C):
    """(FS1)-(FS2) with the PD x PD matrices formed: the log-density's data part, the field's mean and covariance."""
    P, D = Y.shape
    Ts = T * np.eye(P * D) + np.kron(np.eye(D), (S := _features(W, X, N1)) @ S.T)
    y = Y.T.reshape(-1)
    A_C, A_W = Ts + L_C, Ts + L_W
    log_p = -0.5 * y @ np.linalg.solve(A_C, y) - 0.5 * np.linalg.slogdet(A_W)[1] - 0.5 * np.sum(W * W)
    return log_p, np.linalg.solve(A_C, y).reshape(D, P).T, np.linalg.inv(A_W)


def test_every_neuron_explicit_is_the_exact_posterior():
    """k = N1: no bulk; the density (FS2) is the finite network's exact marginal likelihood with v integrated out,
    the prediction given the weights the Gaussian process of their features (dense conditioning), and the overlaps
    the exact posterior of v given the weights."""
    X, Y, X0 = _toy()
    N1, P, D = 4, *Y.shape
    rng = np.random.default_rng(2)
    W = rng.standard_normal((3, N1, X.shape[1]))
    fit = _fit(X, Y, W, N1)
    with x64_context():
        log_p = fs._log_density(fit._pb, fit.L_W, fit.L_C)
        got = [float(log_p(w)) for w in W]
    mean, cov = fit.predict_per_draw(X0)
    overlap = fit.overlap_per_draw()
    y = Y.T.reshape(-1)
    want = []
    for j, w in enumerate(W):
        S, S0 = _features(w, X, N1), _features(w, X0, N1)
        A = T * np.eye(P) + S @ S.T
        want.append(-0.5 * np.sum(w * w) - 0.5 * D * np.linalg.slogdet(A)[1] - 0.5 * sum(
            Y[:, a] @ np.linalg.solve(A, Y[:, a]) for a in range(D)))
        np.testing.assert_allclose(mean[j], S0 @ S.T @ np.linalg.solve(A, Y), rtol=1e-8, atol=1e-10)
        var = np.sum(S0**2, axis=1) - np.einsum("xp,px->x", S0 @ S.T, np.linalg.solve(A, S @ S0.T))
        np.testing.assert_allclose(cov[j], var[:, None, None] * np.eye(D), rtol=1e-7, atol=1e-10)
        # v (N1, D) given w: prior N(0, 1/lambda1), f = s v / sqrt(N1), noise T: <v v^T>/N1 summed over neurons
        s = S * np.sqrt(N1)
        prec = np.eye(N1) + s.T @ s / (N1 * T)
        V = np.linalg.solve(prec, s.T @ Y / (np.sqrt(N1) * T))
        np.testing.assert_allclose(overlap[j], (V.T @ V + np.trace(np.linalg.inv(prec)) * np.eye(D)) / N1,
                                   rtol=1e-8)
    np.testing.assert_allclose(np.diff(got), np.diff(want), rtol=1e-8, atol=1e-8)  # up to the constant


def test_no_specialist_is_the_shared_field():
    """k = 0: the field (FS1) of the bulk's moments is (F2)'s, and the predictions and overlaps are the shared
    field's (F3) on the same neurons at the same field."""
    X, Y, X0 = _toy()
    N1 = 5
    bulk, L_W, L_C = _bulk(X, Y, N1, N1)
    fit = _fit(X, Y, np.zeros((1, 0, X.shape[1])), N1, bulk, L_W, L_C)
    m, Sigma, _ = _field(L_W, L_C, bulk.m, bulk.Sigma, Y, T)
    _, m_all, Sigma_all = fs.fields(L_W, L_C, np.zeros((1, len(X), 0)), Y, T)
    np.testing.assert_allclose(m_all, m, rtol=1e-9)
    np.testing.assert_allclose(Sigma_all, Sigma, rtol=1e-9, atol=1e-12)
    want, got = bulk.predict(X0), fit.predict(X0)
    np.testing.assert_allclose(got.mean, want.mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got.cov, want.cov, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(fit.readout_overlap, bulk.readout_overlap, rtol=1e-12)
    assert fit.draws == 0 and fit.monte_carlo_error(X0, np.zeros((len(X0), 2)))["eps_g"] == 0


@pytest.mark.parametrize("D", [1, 2])
def test_between_the_limits_against_dense_algebra(D):
    """0 < k < N1: the density (FS2), the fields (FS1)-(FS3), the predictions (FS4) and the overlaps, computed by
    rank-Dk updates, against the same equations with the PD x PD matrices formed and solved."""
    X, Y, X0 = _toy(D=D)
    N1, k = 5, 2
    P = len(X)
    bulk, L_W, L_C = _bulk(X, Y, N1, N1 - k)
    W = np.random.default_rng(3).standard_normal((3, k, X.shape[1]))
    fit = _fit(X, Y, W, N1, bulk, L_W, L_C)
    with x64_context():
        log_p = fs._log_density(fit._pb, L_W, L_C)
        got = [float(log_p(w)) for w in W]
    dense = [_dense(X, Y, w, N1, L_W, L_C) for w in W]
    np.testing.assert_allclose(np.diff(got), np.diff([d[0] for d in dense]), rtol=1e-8, atol=1e-8)
    m, m_all, Sigma_all = fs.fields(L_W, L_C, fit._features(), Y, T)
    np.testing.assert_allclose(m, [d[1] for d in dense], rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(Sigma_all, np.mean([d[2] for d in dense], axis=0), rtol=1e-7, atol=1e-10)

    mean, cov = fit.predict_per_draw(X0)
    avg, Nb = bulk._population_averages(X0), N1 - k
    Lb = T * np.eye(P * D) + Nb * (avg["L"] - np.outer(avg["Eys"], avg["Eys"]))
    nb = Nb * np.moveaxis(avg["nW"] - np.einsum("pa,bq->apbq", avg["Ey_sx"], avg["Eys"].reshape(D, P)), 1, 0)
    for j, w in enumerate(W):
        S, S0 = _features(w, X, N1), _features(w, X0, N1)
        U = np.kron(np.eye(D), S)
        n = nb.reshape(len(X0), D, P * D) + np.einsum("ab,xq->xabq", np.eye(D), S0 @ S.T).reshape(len(X0), D, -1)
        quad = np.einsum("xar,xbr->xab", n, np.linalg.solve(Lb + U @ U.T, n.reshape(-1, P * D).T).T
                         .reshape(n.shape))
        want = (Nb * (avg["EC_s2"] + avg["Eyy_s2"] - np.einsum("pa,pb->pab", avg["Ey_sx"], avg["Ey_sx"]))
                + np.sum(S0**2, axis=1)[:, None, None] * np.eye(D) - quad)
        np.testing.assert_allclose(cov[j], want, rtol=1e-7, atol=1e-10)
        resp = Nb * np.einsum("axbp,pb->xa", avg["EC_xs"], m[j]) + S0 @ S.T @ m[j]
        np.testing.assert_allclose(mean[j], resp, rtol=1e-8, atol=1e-10)
        # a specialist's readout v/sqrt(N1) given the weights, the bulk a Gaussian of covariance A (c = N1 here):
        # precision c + s^T A^-1 s, mean from the mean's A_C, covariance from the field's A_W
        s = U * np.sqrt(N1)
        prec = {name: N1 * np.eye(D * k) + s.T @ np.linalg.solve(A, s)
                for name, A in (("C", T * np.eye(P * D) + L_C), ("W", T * np.eye(P * D) + L_W))}
        A_C = T * np.eye(P * D) + L_C
        mu = np.linalg.solve(prec["C"], s.T @ np.linalg.solve(A_C, Y.T.reshape(-1))).reshape(D, k)
        C = np.linalg.inv(prec["W"]).reshape(D, k, D, k)
        spec = mu @ mu.T + np.einsum("aibi->ab", C)
        np.testing.assert_allclose(fit.overlap_per_draw()[j], Nb / N1 * bulk.readout_overlap + spec, rtol=1e-7)


@pytest.mark.parametrize("change, match", [(dict(k=7), "0 <= k <= N1"), (dict(damping=0.0), "damping"),
                                           (dict(activation="relu"), "odd activation"), (dict(inner=0), "inner"),
                                           (dict(average=0), "average"), (dict(T=-1.0), "must be positive")])
def test_bad_input_is_named(change, match):
    X, Y, _ = _toy()
    kwargs = dict(N1=6, k=1, T=T, neurons=50, iterations=1, inner=2, num_warmup=10, num_samples=10) | change
    with pytest.raises(ValueError, match=match):
        fs.solve(X, Y, **kwargs)


def test_the_registry_reaches_it_with_its_k():
    record = rp.theory.THEORIES["field_specialists"]
    assert record.required == ("k",) and {"neurons", "iterations", "sampler"} <= set(record.options)
    X, Y, _ = _toy()
    with pytest.raises(ValueError, match="needs the option 'k'"):
        rp.theory.solve(X, Y, 6, method="field_specialists")


@pytest.mark.slow
def test_against_sampled_networks_at_two_widths():
    """The problem of test_specialist_theory's NUTS test (P = 60 Gaussian inputs in N0 = 6, two classes split by a
    hyperplane, D = 2, T = 0.05, alpha = 10 and 5), at N1 = 6 and 12, against NUTS with v integrated out (the network
    has two specialists). Measured with the default settings (docs/log/validity.md, "Specialists in the field of an
    adaptive bulk"; Δ = (NUTS - theory)/theory): the exact theory −21% and −14%; k = 0 (the shared field) −1.3% and
    −1.5%; k = 2 +13.6% and −2.4% (+10.1% and −0.2% in this test's run, with its own NUTS draws; its explicit neurons do not specialize, (u.w)^2 about 1: the bulk's own law holds
    the specialists); k = N1, every neuron explicit and drawn by the default sampler, −1.3% and +3.8% (z −0.5, +2.1).
    The readout overlaps are not held: the bulk's N1 E[(c+q)^-1 + yy^T] puts the diagonal 40-140% above the sampled
    networks' at k = 0 and 2; only k = N1 gives them. Asserted: at k = 2 the theory is closer to NUTS than the exact
    theory at both widths, and its k = N1 limit agrees with NUTS (|z| < 4)."""
    T_ = 0.05
    X, Y, X0, Y0, _ = hyperplane_problem()
    rows = []
    for N1 in (6, 12):
        _, eps, overlap = nuts_posterior(X, Y, X0, Y0, N1=N1, T=T_, key=N1, num_warmup=400, num_samples=600)
        sampled, err = eps.mean(), eps.reshape(20, -1).mean(axis=1).std(ddof=1) / np.sqrt(20)
        exact = rp.theory.solve(X, Y, N1=N1, T=T_).generalization_error(X0, Y0)
        ks = (2, N1) if N1 == 6 else (2,)
        for k in ks:
            fit = fs.solve(X, Y, N1=N1, k=k, T=T_)
            theory, own = fit.generalization_error(X0, Y0), fit.monte_carlo_error(X0, Y0)["eps_g"]
            rows.append((N1, k, sampled, err, exact, theory, own, np.diag(overlap.mean(axis=0)),
                         np.diag(fit.readout_overlap)))
    print("\n| N1 | k | NUTS ε_g | exact Δ | theory ε_g | Δ | z | overlap diag NUTS | theory |")
    for N1, k, s, e, ex, th, own, ov_s, ov_t in rows:
        print(f"| {N1} | {k} | {s:.4f} ± {e:.4f} | {(s - ex) / ex:+.1%} | {th:.4f} ± {own:.4f} | {(s - th) / th:+.1%} | "
              f"{(s - th) / np.hypot(e, own):+.1f} | {np.round(ov_s, 2)} | {np.round(ov_t, 2)} |")
    for N1, k, s, e, ex, th, own, _, _ in rows:
        if k == 2:
            assert abs(th - s) < abs(ex - s), (N1, s, th, ex)
        else:
            assert abs(th - s) < 4 * np.hypot(e, own), (N1, s, th, own)
