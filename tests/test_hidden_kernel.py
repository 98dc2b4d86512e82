"""The posterior's hidden kernel (issue 32): the theory's predicted K_post against a dense finite-difference
computation, the oracle against the theory, the streamed sums against a direct computation on stored draws, the
alignment on known cases, the cells of a run, and (slow) K_post against sampling."""
import jax
import numpy as np
import pytest
import scipy.special
import scipy.stats

import renormpp as rp
from renormpp.diagnostics import kernel as dk
from renormpp.infer import Accumulator, Chains, Langevin
from renormpp.theory import hidden as ht


def _data(P=12, N0=5, D=2, P0=4, seed=0, teacher=np.tanh):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(N0, D))
    X, X0 = rng.normal(size=(P, N0)), rng.normal(size=(P0, N0))
    return X, teacher(X @ W / np.sqrt(N0) * 2), X0, teacher(X0 @ W / np.sqrt(N0) * 2)


def test_predicted_kernel_is_the_derivative_of_the_free_energy_by_finite_differences():
    # (H1): K_post = K + (2/N1) K (d log Z/dK) K, log Z = -(1/2)[y^T A^-1 y + log det A] at fixed Q*, A dense PD x PD
    X, Y, X0, _ = _data()
    fit = rp.theory.solve(X, Y, N1=4, T=0.1, method="exact")
    Xa = np.vstack([X, X0])
    Ka = rp.kernels.nngp(Xa)
    P, D = len(X), Y.shape[1]
    y = Y.T.reshape(-1)

    def data_term(K):
        A = fit.T * np.eye(P * D) + np.kron(fit.Q, K) / fit.lambda1
        return y @ np.linalg.solve(A, y) + np.linalg.slogdet(A)[1]

    eps, g = 1e-6, np.zeros((len(Xa), len(Xa)))
    for i in range(P):
        for j in range(P):
            E = np.zeros((P, P))
            E[i, j] = eps
            g[i, j] = (data_term(Ka[:P, :P] + E) - data_term(Ka[:P, :P] - E)) / (2 * eps)
    dense = Ka - Ka @ g @ Ka / fit.N1
    train, cross, test = ht.predicted_kernel(fit, X0)
    assert np.abs(dense[:P, :P] - Ka[:P, :P]).max() > 0.05  # the theory predicts a kernel that moved
    np.testing.assert_allclose(train, dense[:P, :P], atol=1e-6)
    np.testing.assert_allclose(cross, dense[:P, P:], atol=1e-6)
    np.testing.assert_allclose(test, np.diag(dense)[P:], atol=1e-6)
    V, k = fit.spectrum.V, fit.spectrum.k
    np.testing.assert_allclose(ht.spectrum_ratios(fit), np.einsum("pm,pq,qm->m", V, dense[:P, :P], V) / k, atol=1e-6)
    # infinite width predicts K itself; far wider than P, the exact theory's K_post tends to K
    np.testing.assert_allclose(ht.predicted_kernel(fit.refit("infinite_width"))[0], Ka[:P, :P], atol=1e-10)
    wide = np.abs(ht.predicted_kernel(fit.refit(N1=4e4))[0] - Ka[:P, :P]).max()
    assert wide < 1e-3 * np.abs(dense[:P, :P] - Ka[:P, :P]).max() * 1e1


def test_the_theory_with_its_own_kernel_is_the_theory_and_bad_kernels_are_refused():
    X, Y, X0, Y0 = _data()
    fit = rp.theory.solve(X, Y, N1=4, T=0.1, method="exact")
    K, C, k0 = rp.kernels.nngp(X), rp.kernels.nngp(X, X0), rp.kernels.nngp_diag(X0)
    for method in ("exact", "infinite_width"):
        o = ht.with_kernel(K, Y, N1=4, T=0.1, method=method, K_cross=C, k_test=k0, Y_test=Y0)
        ref = fit.refit(method)
        np.testing.assert_allclose(o.Q, ref.Q, atol=1e-8)
        np.testing.assert_allclose(o.eps_g, ref.generalization_error(X0, Y0), rtol=1e-10)
        np.testing.assert_allclose(o.mean, ref.predict(X0).mean, atol=1e-10)
    with pytest.raises(ValueError, match=r"K must be a \(P, P\) matrix with P = 12"):
        ht.with_kernel(K[:5, :5], Y, N1=4, T=0.1)
    with pytest.raises(ValueError, match="NaN or inf"):
        ht.with_kernel(np.full_like(K, np.nan), Y, N1=4, T=0.1)
    with pytest.raises(ValueError, match="exact, one_loop and infinite_width"):
        ht.with_kernel(K, Y, N1=4, T=0.1, method="corrected")
    relu = rp.theory.solve(X, Y, N1=4, T=0.1, activation="relu", method="exact")
    with pytest.raises(ValueError, match="one hidden layer and an odd activation"):
        ht.predicted_kernel(relu)


def test_alignment_on_cases_with_a_known_answer():
    rng = np.random.default_rng(1)
    Y = rng.normal(size=(20, 2))
    assert dk.alignment(Y @ Y.T, Y) == pytest.approx(1.0)
    assert dk.alignment(3.0 * Y @ Y.T, Y) == pytest.approx(1.0)
    Q, _ = np.linalg.qr(np.column_stack([Y, rng.normal(size=(20, 18))]))
    other = Q[:, 2:] @ Q[:, 2:].T  # the projector orthogonal to Y's columns
    assert dk.alignment(other, Y) == pytest.approx(0.0, abs=1e-12)
    # the identity: <I, YY^T> / (sqrt(P) |YY^T|) by hand
    assert dk.alignment(np.eye(20), Y) == pytest.approx(np.trace(Y @ Y.T) / (np.sqrt(20) * np.linalg.norm(Y @ Y.T)))


def test_measure_equals_a_direct_computation_on_stored_draws_with_batch_errors():
    rng = np.random.default_rng(2)
    X, X0 = rng.normal(size=(15, 6)), rng.normal(size=(7, 6))
    w = rng.normal(size=(2, 40, 5, 6)).astype(np.float32)  # (chain, draw, N1, N0)
    hk = dk.measure({"w": w, "v": rng.normal(size=(2, 40, 1, 5))}, X, X0, segments=4)
    phi = scipy.special.erf(np.einsum("pn,cdhn->cdph", X, w) / np.sqrt(6))
    phi0 = scipy.special.erf(np.einsum("pn,cdhn->cdph", X0, w) / np.sqrt(6))
    np.testing.assert_allclose(hk.train, np.einsum("cdph,cdqh->pq", phi, phi) / 5 / 80, atol=1e-5)
    np.testing.assert_allclose(hk.cross, np.einsum("cdph,cdqh->pq", phi, phi0) / 5 / 80, atol=1e-5)
    np.testing.assert_allclose(hk.test, np.einsum("cdph,cdph->p", phi0, phi0) / 5 / 80, atol=1e-5)
    np.testing.assert_allclose(hk.first_layer, np.einsum("cdhn,cdhm->nm", w, w) / 5 / 80, atol=1e-5)
    assert hk.summands == 80 and hk.segments == 4
    # a linear function of equal segments: the jackknife error is the batch-means error of the segment means
    value, err = hk.jackknife(lambda m: m["train"][0, 1])
    means = (np.einsum("cdh,cdh->cd", phi[:, :, 0], phi[:, :, 1]) / 5).reshape(2, 4, 10).mean(axis=(0, 2))
    np.testing.assert_allclose(value, means.mean(), atol=1e-6)
    np.testing.assert_allclose(err, means.std(ddof=1) / 2, rtol=1e-4)


def test_cells_merge_on_a_grid_that_does_not_depend_on_the_blocks_and_round_trip():
    rng = np.random.default_rng(3)
    values = rng.normal(size=100)

    def fill(block_sizes):
        seg, n = dk.Segments(max_cells=4), 0
        for b in block_sizes:
            seg.coarsen(seg.cell_for(n + b))
            for k in range(n // seg.cell, (n + b - 1) // seg.cell + 1):
                first, stop = max(n, k * seg.cell), min(n + b, (k + 1) * seg.cell)
                seg.add({"x": values[first:stop].sum()}, stop - first, first, stop)
            n += b
        return seg

    a, b = fill([10, 10, 30, 50]), fill([7, 1, 40, 2, 50])
    assert a.cell == b.cell == 32 and sorted(a.sums) == [0, 1, 2, 3]
    for k in a.sums:
        assert a.count[k] == b.count[k]
        np.testing.assert_allclose(a.sums[k]["x"], values[k * 32:(k + 1) * 32].sum())
        np.testing.assert_allclose(a.sums[k]["x"], b.sums[k]["x"])
    back = dk.Segments.from_arrays(a.arrays())
    assert back.cell == a.cell and back.count == a.count
    hk = back.kernel(cut=40)  # cells starting at draw 64 and 96 remain
    assert hk.first_draw == 64 and hk.summands == 36
    np.testing.assert_allclose(hk.x, values[64:].mean())
    with pytest.raises(ValueError, match="not in one cell"):
        a.add({"x": 1.0}, 2, 30, 34)


def test_chains_sum_what_they_would_record_on_the_grid_of_cells():
    def model(X, Y):
        import numpyro
        import numpyro.distributions as dist
        x = numpyro.sample("x", dist.Normal(0.0, 1.0).expand([3]))
        numpyro.deterministic("unused", x.sum())

    record = lambda p: {"x": p["x"], "pass": p["x"]}  # noqa: E731
    acc = Accumulator(lambda x: {"sq": x**2}, "pass", thin=3, pieces=3)
    chains = Chains(Langevin(model, step_size=0.1, observables=record), num_chains=2, accumulate=acc)
    start = chains.init(jax.random.PRNGKey(0), 0, None, None)
    state, draws, _ = chains.run(start, 14, 20, offset=5, cell=8)  # draws 5..18: cells [0, 8), [8, 16), [16, 24)
    assert "pass" not in draws and draws["x"].shape == (2, 14, 3)
    pieces = chains.pieces()
    assert [(a, b) for a, b, _ in pieces] == [(5, 8), (8, 16), (16, 19)]
    index = np.arange(5, 19)
    for j, (first, stop, count) in enumerate(pieces):
        mine = (index >= first) & (index < stop) & (index % 3 == 0)  # global draws 6, 9, 12, 15, 18
        assert count == mine.sum()
        np.testing.assert_allclose(chains.sums["sq"][j], (draws["x"][:, mine] ** 2).sum(axis=(0, 1)), rtol=1e-6)
    with pytest.raises(ValueError, match="spans more than 3 cells"):
        chains.run(state, 14, 20, offset=0, cell=4)
    _, unsummed, _ = chains.run(start, 14, 20, offset=5, cell=8, summing=False)  # the warmup's blocks: no sums
    assert chains.sums is None and chains.pieces() == []
    np.testing.assert_array_equal(unsummed["x"], draws["x"])  # and the same draws


#: segments of the jackknife in the slow test: its errors carry S - 1 = 39 degrees of freedom
SEGMENTS = 40


def _normal_equivalent(t, dof):
    """The standard normal deviate with the tail probability of Student's t with ``dof`` degrees of freedom: a
    z-score whose error is itself estimated (a jackknife over S segments) has t's heavier tails, which the Bonferroni
    bound of stat_bounds (normal tails) must see."""
    t = np.asarray(t, dtype=float)
    return np.sign(t) * scipy.stats.norm.isf(scipy.stats.t.sf(np.abs(t), dof))


def _hidden_kernel_claims(d10, d120, segments=SEGMENTS):
    """The slow test's assertions on the diagnoses at N1 = 10 and N1 = 120 (one function, so that a seeds check can
    run them on stored draws)."""
    from stat_bounds import assert_z_within, z_bound

    # N1 = 10: the kernel moved along the top directions of K, resolved (each |r - 1| up to 0.26, errors 0.013-0.018)
    moved = _normal_equivalent((d10.r - 1) / d10.r_err, segments - 1)
    assert np.max(np.abs(moved)) > z_bound(len(moved)), f"the kernel did not move at N1 = 10: z {moved}"
    # ... and the theory's K_post accounts for that movement. The leading-order theory has its own 1/N1 error here
    # (0.01-0.02 in r, the size of the statistical error, so a z-test against it would not be valid): the claim is
    # that the squared residual from the theory is under a tenth of the squared movement. On correct code the residual
    # is 6 errors^2 plus that bias^2, about 0.003 (1e-4 quantile of its chi-square about 0.008), the movement 0.12.
    resid, move = np.sum((d10.r - d10.r_theory) ** 2), np.sum((d10.r - 1) ** 2)
    assert resid < 0.1 * move, f"N1 = 10: residual from the theory {resid:.4f}, movement {move:.4f}"
    # the kernel-target alignment moved from K's (0.31) to about 0.70; the theory's is within a tenth of that move
    # (its 1/N1 error about 0.005, the error 0.003: at the 1e-4 quantile the gap is 0.02, a tenth is 0.04)
    a_gap, a_move = abs(d10.alignment_post - d10.alignment_theory), abs(d10.alignment_post - d10.alignment)
    assert a_gap < 0.1 * a_move, f"N1 = 10: alignment {d10.alignment_post:.4f}, theory {d10.alignment_theory:.4f}"
    # N1 = 120: the theory's 1/N1 error is under a third of the errors; the measured r_k and the alignment agree with
    # it within the Bonferroni bound at false-alarm rate 1e-4 (4.3 over 7), and the kernel is near K
    z = np.append(d120.z, (d120.alignment_post - d120.alignment_theory) / d120.alignment_err)
    assert_z_within(_normal_equivalent(z, segments - 1), what="N1 = 120: sampled r_k and alignment against theory")
    assert np.max(np.abs(d120.r - 1)) < 0.5 * np.max(np.abs(d10.r - 1))


@pytest.mark.slow
def test_sampled_hidden_kernel_tends_to_the_prior_kernel_and_follows_the_theory_where_it_holds():
    """NUTS on a linear network (where the theory holds at large N1), P = 30, alpha = 3 at N1 = 10: the measured r_k
    along the top six directions of K move away from 1 (resolved) and the theory's K_post accounts for the movement;
    at N1 = 120 they and the kernel-target alignment agree with the theory within errors, and are near 1.

    The errors are delete-one-segment jackknife errors over 40 segments (with 8, as before, the error estimate has
    7 degrees of freedom and its z-scores t_7's tails: |z| = 5.0 on correct code, issue 44); the z-scores are mapped
    to their normal equivalents before the Bonferroni bound. Seeds check (NUTS keys 0-4, 500 draws per chain, as
    here): no failure; at N1 = 120 the largest normal-equivalent |z| 2.2 against the bound 4.3; at N1 = 10 the
    movement's largest |z| 8.5-9.5 (bound 4.3), residual/movement 0.007-0.025 (< 0.1), alignment gap/move <= 0.026
    (< 0.1). Planted bugs in the theory's K_post (renormpp.theory.hidden._G_tilde fed a wrong Q): Q x 1.3 fails
    (residual/movement 0.29; at N1 = 120 |z| 4.9), Q x 0.8 fails (0.15; |z| 5.5), Q = 1 fails (0.20), the theory at
    N1 = 13 for 10 fails (alignment gap/move 0.19). Not caught, and not this test's business: the networks sampled at
    T = 0.06 instead of 0.05 (the linear network's hidden kernel hardly depends on T, in theory and in sampling)."""
    from numpyro.infer import MCMC, NUTS

    rng = np.random.default_rng(2)
    P, N0, D, T = 30, 40, 2, 0.05
    X, W = rng.normal(size=(P, N0)), rng.normal(size=(N0, D))
    Y = X @ W / np.sqrt(N0)
    out = {}
    for N1 in (10, 120):
        mcmc = MCMC(NUTS(rp.models.mlp), num_warmup=400, num_samples=500, num_chains=2, chain_method="sequential",
                    progress_bar=False)
        mcmc.run(jax.random.PRNGKey(0), X.astype(np.float32), Y.astype(np.float32), N1=N1, T=T, activation="linear",
                 integrate_v=True)
        hk = dk.measure(mcmc.get_samples(group_by_chain=True), X, X[:5], "linear", segments=SEGMENTS)
        fit = rp.theory.solve(X, Y, N1=N1, T=T, activation="linear", method="exact")
        out[N1] = dk.diagnose(hk, fit, n=6)
    _hidden_kernel_claims(out[10], out[120])


def test_the_first_layer_is_read_in_the_data_and_teacher_directions():
    """Fake draws whose first layer grows along the linear teacher's direction: the top eigenvalue of
    lambda0 <w^T w>/N1 is that growth and its eigenvector lies in the teacher's span; the rest stay at the prior."""
    data = rp.datasets.synthetic(P=40, P_test=10, N0=12, D=1, seed=1)
    W = data.metadata["teacher_directions"]
    np.testing.assert_allclose(data.Y, data.X @ W.T / np.sqrt(12))
    rng = np.random.default_rng(4)
    u = W[0] / np.linalg.norm(W[0])
    w = rng.normal(size=(1, 400, 30, 12))
    w += (np.sqrt(4.0) - 1.0) * np.einsum("...n,n,m->...m", w, u, u)  # variance 4 along u, 1 elsewhere
    hk = dk.measure({"w": w.astype(np.float32)}, data.X, data.X_test)
    d = dk.diagnose(hk, rp.theory.solve(data.X, data.Y, N1=30, T=0.1), n=3, teacher=W)
    assert d.first_layer[0] == pytest.approx(4.0, rel=0.1) and d.first_layer[1] < 1.5
    assert d.first_layer_in_teacher[0] > 0.99 and d.first_layer_in_teacher[1] < 0.05
    assert np.isnan(dk.diagnose(hk, rp.theory.solve(data.X, data.Y, N1=30, T=0.1), n=3).first_layer_in_teacher).all()
