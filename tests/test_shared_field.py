"""The shared-field theory (renormpp.theory.shared_field, issue 46 item 2): at infinite width it is the NNGP posterior
exactly (the control variate makes the Monte Carlo exact there), for a linear network it is the exact theory (exact
for linear networks), its iterations and their residuals, "did not converge" where the reweighted neurons degenerate,
bad input, and one slow check against sampled networks at two widths."""
import re

import numpy as np
import pytest

import renormpp as rp
from renormpp.theory import shared_field as sf


def _data(P=16, N0=5, D=2, P0=25, seed=0, scale=2.0):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(N0, D))
    X, X0 = rng.normal(size=(P, N0)), rng.normal(size=(P0, N0))
    return X, np.tanh(X @ W / np.sqrt(N0) * scale), X0, np.tanh(X0 @ W / np.sqrt(N0) * scale)


def test_at_infinite_width_it_is_the_nngp_posterior_whatever_the_neuron_sample():
    """At N1 -> infinity (F1)'s tilt vanishes (rho = 1) and the control variate turns every average into the exact
    NNGP kernel: mean K(x, X)(K + lambda1 T)^-1 Y and variance (K(x, x) - K(x, X)(K + lambda1 T)^-1 K(X, x))/lambda1,
    the infinite-width theory's, with 200 neurons as with 2000."""
    X, Y, X0, Y0 = _data()
    ref = rp.theory.solve(X, Y, N1=1e12, T=0.05, lambda1=1.3, method="infinite_width").predict(X0)
    for neurons in (200, 2000):
        fit = sf.solve(X, Y, N1=1e12, T=0.05, lambda1=1.3, neurons=neurons, seed=neurons)
        assert fit.converged, fit.reason
        got = fit.predict(X0)
        np.testing.assert_allclose(got.mean, ref.mean, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(np.einsum("pdd->pd", got.cov), ref.var, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(got.cov[:, 0, 1], 0.0, atol=1e-9)


def test_iterations_keep_their_residuals_and_stop_at_tol():
    X, Y, X0, Y0 = _data()
    fit = sf.solve(X, Y, N1=8, T=0.05, neurons=4000, tol=1e-6, maxiter=200)
    assert fit.converged, fit.reason
    assert fit.residuals.shape == (fit.n_iter, 2) and fit.n_iter >= 2
    assert np.max(fit.residuals[-1]) < 1e-6 < np.max(fit.residuals[0])
    assert "converged" in repr(fit) and fit.ess > 100
    again = sf.solve(X, Y, N1=8, T=0.05, init=fit, tol=1e-6)  # continuation from itself: already there
    assert again.n_iter == 1 and again.converged
    assert again.generalization_error(X0, Y0) == pytest.approx(fit.generalization_error(X0, Y0), rel=1e-5)
    short = sf.solve(X, Y, N1=8, T=0.05, neurons=4000, tol=1e-6, maxiter=2)
    assert not short.converged and "did not fall below tol" in short.reason


def test_degenerate_neuron_weights_say_did_not_converge():
    X, Y, X0, Y0 = _data(scale=4.0)
    fit = sf.solve(X, Y * 3, N1=1, T=0.01, neurons=300, min_ess=150)
    assert not fit.converged and "degenerate" in fit.reason and fit.ess < 150
    # the reason says how far the heaviest neuron's log-weight lies above the median's: M / ESS = M sum w^2 / (sum
    # w)^2 <= M w_max / sum w <= 2 w_max / w_median (half the weights are at least the median), so at least
    # log(M / ESS) - log 2
    tail = float(re.search(r"log-weight lies ([0-9.]+) above the median", fit.reason)[1])
    assert tail >= np.log(300 / fit.ess) - np.log(2) - 0.05
    assert "did not converge" in repr(fit)
    with pytest.raises(RuntimeError, match="did not converge"):
        fit.generalization_error(X0, Y0)


def test_bad_input_is_refused_with_the_problem_named():
    X, Y, X0, Y0 = _data()
    with pytest.raises(ValueError, match="N1"):
        sf.solve(X, Y, N1=0, T=0.1)
    with pytest.raises(ValueError, match="T must be a positive"):
        sf.solve(X, Y, N1=4, T=-1)
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        sf.solve(bad, Y, N1=4, T=0.1)
    with pytest.raises(ValueError, match="damping"):
        sf.solve(X, Y, N1=4, T=0.1, damping=0)
    with pytest.raises(ValueError, match="activation"):
        sf.solve(X, Y, N1=4, T=0.1, activation="softplus")
    fit = sf.solve(X, Y, N1=4, T=0.1, neurons=300, maxiter=3)
    with pytest.raises(ValueError, match="other training inputs"):
        sf.solve(X[:10], Y[:10], N1=4, T=0.1, init=fit)


# ---- against sampled networks -----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_against_sampled_networks_at_two_widths():
    """NUTS on the network with v integrated out (P = 40, N0 = 8, tanh teacher, T = 0.05) at N1 = 80 and 20 (alpha =
    0.5 and 2), where the exact theory is 10% and 45% above the sampled eps_g: the shared-field theory (continued
    80 -> 40 -> 30 -> 20) closes at least four fifths of that gap at both widths. Measured (NUTS 2 x 2000 draws;
    the theory over neuron seeds 0-3): sampled 0.13077 +- 0.00013 and 0.09465 +- 0.00029, shared field 0.1300-0.1319
    (+0.6% to +0.9%) and 0.0965-0.1011 (+2.0% to +6.8%), exact theory 0.14477 (+10.7%) and 0.13782 (+45.6%); so the
    ratio of the gaps is 0.06-0.08 and 0.04-0.15 against the bound 0.2 (the test's own NUTS run, 2 x 1000 draws:
    0.06 and 0.14). Planted bugs: without (F1)'s determinant the ratio at N1 = 20 is 0.24 (fails); without (F3)'s
    response of m the theory is +560% off (fails)."""
    import jax
    from numpyro.infer import MCMC, NUTS

    from renormpp.readout import rao_blackwell

    X, Y, X0, Y0 = _data(P=40, N0=8, P0=200, seed=7, scale=2.0)
    T, init, fits = 0.05, None, {}
    for N1 in (80, 40, 30, 20):
        init = fits[N1] = sf.solve(X, Y, N1=N1, T=T, neurons=10_000, maxiter=150, damping=0.3, init=init)
        assert init.converged, (N1, init.reason)
    rows = []
    for N1 in (80, 20):
        with jax.enable_x64(True):
            mcmc = MCMC(NUTS(rp.models.one_hidden_layer), num_warmup=500, num_samples=1000, num_chains=2,
                        chain_method="sequential", progress_bar=False)
            mcmc.run(jax.random.PRNGKey(0), X, Y, N1=N1, T=T, integrate_v=True)
            w = mcmc.get_samples()["w"]
            eps = np.asarray(jax.jit(jax.vmap(rao_blackwell(X, Y, X0, Y0, T=T, lambda1=1.0)))({"w": w})["eps_g"])
        sampled, err = eps.mean(), eps.reshape(20, -1).mean(axis=1).std(ddof=1) / np.sqrt(20)
        shared = fits[N1].generalization_error(X0, Y0)
        exact = rp.theory.solve(X, Y, N1=N1, T=T).generalization_error(X0, Y0)
        rows.append((N1, sampled, err, shared, exact))
    print("| N1 | sampled | shared field: Δ, z | exact theory: Δ, z |")
    for N1, s, e, sh, ex in rows:
        print(f"| {N1} | {s:.5f} ± {e:.5f} | {sh / s - 1:+.1%}, {(sh - s) / e:+.1f} | {ex / s - 1:+.1%}, {(ex - s) / e:+.1f} |")
    for N1, s, e, sh, ex in rows:
        assert abs(ex - s) > 20 * e  # the exact theory is resolved off: the test can tell the two apart
        assert abs(sh - s) < 0.2 * abs(ex - s), (N1, s, sh, ex)


def test_the_benchmark_table_is_the_solves_and_their_spread_over_neuron_seeds():
    """benchmarks/shared_field_theory.py's table (issue 46, item 3): each width's eps_g is that of an independent
    solve at seed 0 continued from the wider width, its spread the standard deviation over the seeds' own solves, and
    Delta and z are against the sampled values given."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "shared_field_theory", Path(__file__).resolve().parents[1] / "benchmarks" / "shared_field_theory.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    X, Y, X0, Y0 = _data()
    from types import SimpleNamespace

    d = SimpleNamespace(X=X, Y=Y, X_test=X0, Y_test=Y0)
    rows, table = bench.erf_table(d, [32, 16], {16: (0.5, 0.01)}, neurons=4000, maxiter=200, seeds=2, T=0.05)
    eps = {}
    for seed in (0, 1):
        wide = sf.solve(X, Y, N1=32, T=0.05, neurons=4000, maxiter=200, seed=seed)
        eps[seed] = sf.solve(X, Y, N1=16, T=0.05, neurons=4000, maxiter=200, init=wide).generalization_error(X0, Y0)
    r = dict(rows)[16]
    assert r["converged"] and r["eps_g"] == pytest.approx(eps[0], rel=1e-9)
    assert r["spread"] == pytest.approx(np.std([eps[0], eps[1]], ddof=1), rel=1e-6) and r["spread"] > 0
    line = next(line for line in table.splitlines() if line.startswith("| 16 "))
    assert f"{(eps[0] - 0.5) / 0.5:+.1%} | {(eps[0] - 0.5) / 0.01:+.1f}" in line
