"""The readout given the first layer: closed forms against dense N1 x N1 references, Monte Carlo and scipy."""
import jax
import numpy as np
import pytest
from scipy.special import erf
from scipy.stats import multivariate_normal

from renormpp import readout

from renormpp.network import x64_context
from stat_bounds import assert_z_within


@pytest.fixture(autouse=True)
def x64():
    with x64_context():  # the references are float64; only inside these tests
        yield

P, P0, N0, N1, D, T, LAM1 = 12, 7, 5, 9, 3, 0.07, 1.6


def make_problem(n1=N1):
    rng = np.random.default_rng(3)
    X, X0 = rng.standard_normal((P, N0)), rng.standard_normal((P0, N0))
    Y, Y0 = rng.standard_normal((P, D)), rng.standard_normal((P0, D))
    w = rng.standard_normal((n1, N0))
    N1 = n1
    phi, phi0 = erf(X @ w.T / np.sqrt(N0)), erf(X0 @ w.T / np.sqrt(N0))
    # the N1 x N1 (weight-space) form: precision A = lambda1 + Phi^T Phi / (N1 T) for each output
    A = LAM1 * np.eye(N1) + phi.T @ phi / (N1 * T)
    Sigma = np.linalg.inv(A)
    mu = Sigma @ phi.T @ Y / (np.sqrt(N1) * T)  # (N1, D): E[v_a | w] in column a
    return dict(X=X, X0=X0, Y=Y, Y0=Y0, w=w, phi=phi, phi0=phi0, Sigma=Sigma, mu=mu)


@pytest.fixture(scope="module")
def problem():
    return make_problem()


@pytest.fixture(params=[None, 4], ids=["lapack", "blocked"])
def leaf(request, monkeypatch):
    """Run a test as it is (every matrix here is below the LAPACK leaf of cholesky_inverse) and with a leaf of 4,
    so that the recursive blocking of cholesky_inverse is what computes it."""
    if request.param is not None:
        monkeypatch.setattr(readout, "_LEAF", request.param)
    return request.param


@pytest.mark.parametrize("n, leaf_size", [(1, 8), (37, 8), (37, 1), (300, 16), (300, 128)])
def test_cholesky_inverse_is_the_inverse_of_numpys_factor(n, leaf_size):
    rng = np.random.default_rng(n)
    a = rng.standard_normal((n, n + 3))
    S = a @ a.T / n + 0.01 * np.eye(n)
    L = np.linalg.cholesky(S)
    L_inv, d = readout.cholesky_inverse(jax.numpy.asarray(S), leaf=leaf_size)
    np.testing.assert_allclose(np.asarray(L_inv) @ L, np.eye(n), atol=1e-9)
    np.testing.assert_array_equal(np.triu(np.asarray(L_inv), 1), 0.0)
    np.testing.assert_allclose(d, np.diag(L), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(L_inv).T @ np.asarray(L_inv), np.linalg.inv(S), rtol=1e-7, atol=1e-9)


def test_cholesky_inverse_of_a_matrix_that_is_not_positive_definite_is_nan():
    S = np.eye(40)
    S[30, 30] = -1.0  # in the second half: the recursion's Schur complement fails, not the first leaf
    for leaf_size in (8, 1):  # 1: down to the closed form of a 1 x 1 block
        L_inv, d = readout.cholesky_inverse(jax.numpy.asarray(S), leaf=leaf_size)
        assert np.isnan(np.asarray(d)).any() and np.isnan(np.asarray(L_inv)).any()


def cond_of(p):
    return readout.conditional({"w": p["w"]}, p["X"], p["Y"], T=T, lambda1=LAM1, activation="erf")


@pytest.mark.parametrize("n1", [N1, 2 * P], ids=["N1<P: weight space", "N1>P: data space"])
def test_overlap_and_generalization_loss_match_the_weight_space_form(n1, leaf):
    p, N1 = make_problem(n1), n1
    ref_overlap = (p["mu"].T @ p["mu"] + np.eye(D) * np.trace(p["Sigma"])) / N1
    np.testing.assert_allclose(readout.expected_overlap(cond_of(p)), ref_overlap, rtol=1e-10)
    mean0 = p["phi0"] @ p["mu"] / np.sqrt(N1)
    var0 = np.einsum("ij,jk,ik->i", p["phi0"], p["Sigma"], p["phi0"]) / N1
    ref_eps = np.mean(np.sum((p["Y0"] - mean0) ** 2, axis=1) + D * var0)
    got = readout.expected_eps_g(cond_of(p), p["phi0"], p["Y0"])
    np.testing.assert_allclose(got, ref_eps, rtol=1e-10)
    fn = readout.rao_blackwell(p["X"], p["Y"], p["X0"], p["Y0"], T=T, lambda1=LAM1)
    out = fn({"w": p["w"], "v": np.zeros((D, N1))})
    np.testing.assert_allclose(out["eps_g"], ref_eps, rtol=1e-10)
    np.testing.assert_allclose(out["overlap"], ref_overlap, rtol=1e-10)


def test_the_record_in_float32_at_the_papers_size_is_accurate():
    """P = 1000, N1 = 100, T = 0.01 (Fig. 1a's alpha = 10): the record that ``rao_blackwell`` computes in float32 (the
    sampler's precision) against the same quantities in float64. The N1 x N1 form keeps 1e-7; the P x P form it
    replaced (``conditional``) lost the overlap to 7e-4 there, from ``1 - tr(C^-1 K)/N1``."""
    rng = np.random.default_rng(0)
    P, P0, N0, N1, D, T = 1000, 300, 144, 100, 2, 0.01
    X, X0 = rng.standard_normal((P, N0)), rng.standard_normal((P0, N0))
    teacher = rng.standard_normal((N0, D)) / np.sqrt(N0)
    Y, Y0 = X @ teacher, X0 @ teacher
    w = rng.standard_normal((N1, N0))
    ref = readout.rao_blackwell(X, Y, X0, Y0, T=T, lambda1=1.0)({"w": w})
    with jax.enable_x64(False):
        f32 = [jax.numpy.asarray(a, jax.numpy.float32) for a in (X, Y, X0, Y0, w)]
        got = jax.jit(readout.rao_blackwell(*f32[:4], T=T, lambda1=1.0))({"w": f32[4]})
    assert got["eps_g"].dtype == np.float32
    np.testing.assert_allclose(got["eps_g"], ref["eps_g"], rtol=1e-5)
    np.testing.assert_allclose(got["overlap"], ref["overlap"], rtol=1e-5, atol=1e-5 * np.abs(ref["overlap"]).max())


def test_log_marginal_is_the_gaussian_marginal_likelihood(problem, leaf):
    p = problem
    C = p["phi"] @ p["phi"].T / (LAM1 * N1) + T * np.eye(P)
    ref = sum(multivariate_normal(np.zeros(P), C).logpdf(p["Y"][:, a]) for a in range(D))
    np.testing.assert_allclose(readout.log_marginal(cond_of(p), p["Y"]), ref, rtol=1e-10)


@pytest.mark.parametrize("form", ["data space (P x P)", "weight space (N1 x N1)"])
def test_gibbs_draws_have_the_conditional_mean_and_covariance(problem, form, leaf):
    """40000 exact draws of v | w: their means, covariances and the cross-moments of two outputs, 171 z-scores, within
    the bound the family exceeds with probability 1e-4 (|z| 5.0; it was 4.5 and 5.0 by hand). Keys 0-9 on correct
    code: largest |z| 3.64 (data space) and 3.39 (weight space)."""
    p = problem
    cond = cond_of(p)
    n = 40000
    keys = jax.random.split(jax.random.PRNGKey(0), n)
    if form.startswith("data"):
        v = np.asarray(jax.vmap(lambda k: readout.sample_readout(k, cond, p["Y"], T=T))(keys))  # (n, D, N1)
    else:  # N1 < P here, so draw_readout takes the N1 x N1 form
        v = np.asarray(jax.vmap(lambda k: readout.draw_readout(k, {"w": p["w"]}, p["X"], p["Y"], T=T,
                                                               lambda1=LAM1))(keys))
    se = np.sqrt(np.diag(p["Sigma"]) / n)
    S = p["Sigma"]
    # the standard error of a sample covariance entry is about sqrt((S_ii S_jj + S_ij^2) / n)
    se_cov = np.sqrt((np.outer(np.diag(S), np.diag(S)) + S**2) / n)
    upper = np.triu_indices(N1)  # the distinct entries of a covariance
    z = {}
    for a in range(D):
        z[f"mean {a}"] = (v[:, a].mean(0) - p["mu"][:, a]) / se
        z[f"covariance {a}"] = ((np.cov(v[:, a].T) - S) / se_cov)[upper]
    # outputs are independent given w
    cross = np.mean((v[:, 0] - p["mu"][:, 0]) * (v[:, 1] - p["mu"][:, 1]), axis=0)
    z["cross"] = cross / np.sqrt(np.diag(S) ** 2 / n)
    worst = {k: float(np.max(np.abs(x))) for k, x in z.items()}
    assert_z_within(np.concatenate(list(z.values())), what=f"the Gibbs draws' moments, largest |z| per family {worst}")


def test_output_bias_is_refused(problem):
    p = problem
    fn = readout.rao_blackwell(p["X"], p["Y"], p["X0"], p["Y0"], T=T, lambda1=LAM1)
    with pytest.raises(ValueError, match="output bias"):
        fn({"w": p["w"], "v": np.zeros((D, N1)), "c": np.zeros(D)})


def test_gibbs_fn_refuses_a_network_with_an_output_bias():
    X, Y = np.ones((4, 3)), np.ones((4, 2))
    update = readout.gibbs_fn(X, Y, T=0.1, lambda1=1.0)
    with pytest.raises(ValueError, match="without an output bias c"):
        update(jax.random.PRNGKey(0), {"v": np.zeros((2, 5))}, {"w": np.ones((5, 3)), "c": np.zeros(2)})


@pytest.mark.parametrize("n1", [N1, P + 4])  # N1 < P: the N1 x N1 (Woodbury) form; N1 > P: the P x P form
def test_log_marginal_of_params_in_either_gram_matrix(problem, n1, leaf):
    p = problem
    w = np.random.default_rng(5).standard_normal((n1, N0))
    phi = erf(p["X"] @ w.T / np.sqrt(N0))
    C = phi @ phi.T / (LAM1 * n1) + T * np.eye(P)
    ref = sum(multivariate_normal(np.zeros(P), C).logpdf(p["Y"][:, a]) for a in range(D))
    got = readout.log_marginal_of({"w": w}, p["X"], p["Y"], T=T, lambda1=LAM1, activation="erf")
    np.testing.assert_allclose(got, ref, rtol=1e-10)
    # and its gradient is the dense one's (the integrated sampler's force)
    def dense(w):
        c = readout.conditional({"w": w}, p["X"], p["Y"], T=T, lambda1=LAM1, activation="erf")
        return readout.log_marginal(c, p["Y"])
    g = jax.grad(lambda w: readout.log_marginal_of({"w": w}, p["X"], p["Y"], T=T, lambda1=LAM1))(w)
    np.testing.assert_allclose(g, jax.grad(dense)(w), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("n1", [N1, P, P + 4])  # the hand-written gradient in both Gram matrices and at N1 = P
def test_log_marginal_of_gradient_in_every_argument_is_autodiff_of_the_dense_form(problem, n1, leaf):
    p = problem
    w = np.random.default_rng(6).standard_normal((n1, N0))

    def dense(w, Y, t):  # automatic differentiation through the P x P Cholesky factor: the independent reference
        phi = readout.hidden({"w": w}, p["X"], "erf")
        C = phi @ phi.T / (LAM1 * n1) + t * jax.numpy.eye(P)
        return jax.numpy.sum(jax.vmap(lambda y: jax.scipy.stats.multivariate_normal.logpdf(y, np.zeros(P), C),
                                      in_axes=1)(Y))

    def ours(w, Y, t):
        return readout.log_marginal_of({"w": w}, p["X"], Y, T=t, lambda1=LAM1)

    np.testing.assert_allclose(ours(w, p["Y"], T), dense(w, p["Y"], T), rtol=1e-10)
    grads = [jax.grad(f, argnums=(0, 1, 2))(w, p["Y"], T) for f in (ours, dense)]
    for got, ref in zip(*grads):
        np.testing.assert_allclose(got, ref, rtol=1e-7, atol=1e-9)


def test_log_marginal_of_gradient_inside_shard_map(problem):
    """Inside ``jax.shard_map``, where the draws of w vary along the mesh's axis and the labels do not (BlackJAX's
    ensemble samplers, LAPS among them, run their chains so), the hand-written gradient returns each argument's own
    type: it raised JAX's "manual axis types do not match" for Y until 2026-12-08. The gradients in w (one per chain)
    and in Y (summed over the chains) are automatic differentiation of the dense P x P form."""
    from jax.sharding import PartitionSpec as Spec

    p = problem
    W = np.random.default_rng(7).standard_normal((4, N1, N0))

    def dense(w, Y):
        phi = readout.hidden({"w": w}, p["X"], "erf")
        C = phi @ phi.T / (LAM1 * N1) + T * jax.numpy.eye(P)
        return jax.numpy.sum(jax.vmap(lambda y: jax.scipy.stats.multivariate_normal.logpdf(y, np.zeros(P), C),
                                      in_axes=1)(Y))

    def summed(f):
        return lambda W, Y: jax.numpy.sum(jax.vmap(f, in_axes=(0, None))(W, Y))

    ours = summed(lambda w, Y: readout.log_marginal_of({"w": w}, p["X"], Y, T=T, lambda1=LAM1))
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("chains",))
    grad = jax.shard_map(jax.grad(ours, argnums=(0, 1)), mesh=mesh, in_specs=(Spec("chains"), Spec()),
                         out_specs=(Spec("chains"), Spec()))
    got = jax.jit(grad)(W, p["Y"])
    ref = jax.grad(summed(dense), argnums=(0, 1))(W, p["Y"])
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-7, atol=1e-9)


def test_log_marginal_of_in_float32_is_smooth_at_the_papers_size():
    """The integrated sampler's potential in float32 at P = 1000, N1 = 100, T = 0.01, D = 2, on inputs that carry
    their labels (class means plus noise, as MNIST's digits): the features fit the labels well, and tr Y^T C^-1 Y,
    a few hundred, was computed as the difference of two numbers ~1e5, whose float32 rounding noise (3 and 12 here,
    of order one on MNIST) made the Metropolis test test noise (issue 34). Against float64 (numpy's P x P Cholesky
    factor): the value, and its change under a move of 1e-4 (the scale of a Langevin step), to 0.01."""
    rng = np.random.default_rng(0)
    Pb, N0b, N1b, Tb = 1000, 60, 100, 0.01
    labels = rng.integers(0, 2, Pb)
    X = rng.standard_normal((2, N0b))[labels] + 0.3 * rng.standard_normal((Pb, N0b))
    Y = np.eye(2)[labels]
    w = rng.standard_normal((N1b, N0b)).astype(np.float32)
    dw = 1e-4 * rng.standard_normal(w.shape).astype(np.float32)

    def dense(w):
        phi = erf(X @ w.astype(float).T / np.sqrt(N0b))
        L = np.linalg.cholesky(phi @ phi.T / N1b + Tb * np.eye(Pb))
        Z = np.linalg.solve(L, Y)
        return -0.5 * np.sum(Z**2) - 2 * np.sum(np.log(np.diag(L))) - Pb * np.log(2 * np.pi)

    def ours(w):
        return float(readout.log_marginal_of({"w": w}, X.astype(np.float32), Y.astype(np.float32), T=Tb,
                                             lambda1=1.0))

    ref0, ref1 = dense(w), dense(w + dw)
    with jax.enable_x64(False):
        got0, got1 = ours(w), ours(w + dw)
    assert abs(got0 - ref0) < 0.01, (got0, ref0)
    assert abs((got1 - got0) - (ref1 - ref0)) < 0.01, (got1 - got0, ref1 - ref0)


def test_the_samplers_noise_alert_flags_the_difference_form_and_passes_the_ridge_form():
    """The alert of :func:`renormpp.infer.alerts.potential_noise` (issued at the warmup's end) on the same inputs:
    the integrated potential as it was before the fix of issue 34 (tr Y^T C^-1 Y as (||Y||^2 - Y^T A G^-1 A^T Y)/T,
    two numbers ~1e5) is flagged; the ridge form of :func:`readout.log_marginal_of` is far below the bound."""
    import jax.numpy as jnp

    from renormpp.infer import alerts

    rng = np.random.default_rng(0)
    Pb, N0b, N1b, Tb = 1000, 60, 100, 0.01
    labels = rng.integers(0, 2, Pb)
    X = (rng.standard_normal((2, N0b))[labels] + 0.3 * rng.standard_normal((Pb, N0b))).astype(np.float32)
    Y = np.eye(2, dtype=np.float32)[labels]
    w = jnp.asarray(rng.standard_normal(N1b * N0b).astype(np.float32))

    def ridge(flat):
        return -readout.log_marginal_of({"w": flat.reshape(N1b, N0b)}, X, Y, T=Tb, lambda1=1.0)

    def difference(flat):  # the pre-fix form, up to constants
        A = jax.scipy.special.erf(X @ flat.reshape(N1b, N0b).T / np.sqrt(N0b)) / np.sqrt(N1b)
        L_inv, d = readout.cholesky_inverse(A.T @ A + Tb * jnp.eye(N1b))
        B = (Y - A @ (L_inv.T @ L_inv @ (A.T @ Y))) / Tb
        return 0.5 * jnp.sum(Y * B) + 2 * jnp.sum(jnp.log(d))

    with jax.enable_x64(False):
        assert float(alerts.potential_noise(ridge, w)) < alerts.NOISE_BOUND / 25
        assert float(alerts.potential_noise(difference, w)) > 4 * alerts.NOISE_BOUND
