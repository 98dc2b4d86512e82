"""The pure sampler core (renormpp.mcmc) without any NumPyro model: exactness on a correlated Gaussian, adaptation,
the inner loop's divergence handling and the Gibbs step."""
import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from renormpp import mcmc

COV = np.array([[1.0, 0.9 * 2.0], [0.9 * 2.0, 4.0]])  # correlation 0.9, scales 1 and 2
PREC = jnp.asarray(np.linalg.inv(COV))


def potential(x):
    return 0.5 * x @ PREC @ x


def run(kernel_args, init, num_chains=300, draws=300, inner=5, seed=0, build=mcmc.langevin.build_kernel(True)):
    """Vectorized chains of the inner loop of a core kernel; returns draws (chain, draw, 2) in float64."""
    loop = jax.jit(jax.vmap(lambda k, s: mcmc.base.inner_loop(build, inner)(k, s, potential, *kernel_args)))

    def step(carry, _):
        keys, states = carry
        keys, sub = jnp.swapaxes(jax.vmap(jax.random.split)(keys), 0, 1)
        states, info = loop(sub, states)
        return (keys, states), (states.position, info.accept_prob)

    keys = jax.random.split(jax.random.PRNGKey(seed), num_chains)
    states = jax.vmap(init)(jnp.zeros((num_chains, 2)), keys)
    _, (pos, acc) = jax.lax.scan(step, (keys, states), None, length=draws)
    return np.swapaxes(np.asarray(pos, np.float64), 0, 1)[:, 30:], float(np.mean(acc))


def z_scores(draws):
    """(estimate - exact) / standard error for the variances and the covariance, errors from ArviZ's ESS."""
    out = {}
    for name, x, exact in [("var0", draws[..., 0] ** 2, COV[0, 0]), ("var1", draws[..., 1] ** 2, COV[1, 1]),
                           ("cov", draws[..., 0] * draws[..., 1], COV[0, 1])]:
        out[name] = (x.mean() - exact) / (x.std() / np.sqrt(float(az.ess(x))))
    return out


def test_mala_core_samples_a_correlated_gaussian_exactly():
    draws, acc = run((0.15,), lambda x, k: mcmc.langevin.init(x, potential))
    z = z_scores(draws)
    assert all(abs(v) < 4 for v in z.values()), z
    assert 0.3 < acc < 0.99
    # the same check sees ULA's O(h) bias at this step: it can fail
    biased, _ = run((0.15,), lambda x, k: mcmc.langevin.init(x, potential), build=mcmc.langevin.build_kernel(False))
    assert max(abs(v) for v in z_scores(biased).values()) > 8


def test_ghmc_core_samples_a_correlated_gaussian_exactly():
    inv_mass = jnp.ones(2)
    draws, acc = run((0.3, inv_mass, 0.5), lambda x, k: mcmc.kinetic.init(x, potential, k),
                     build=mcmc.kinetic.build_kernel(adjust=True))
    z = z_scores(draws)
    assert all(abs(v) < 4 for v in z.values()), z
    assert 0.3 < acc < 0.999
    biased, _ = run((0.8, inv_mass, 0.5), lambda x, k: mcmc.kinetic.init(x, potential, k),
                    build=mcmc.kinetic.build_kernel(adjust=False))
    assert max(abs(v) for v in z_scores(biased).values()) > 8


def test_inner_loop_rejects_a_non_finite_draw_and_counts_it():
    kernel = mcmc.langevin.build_kernel(adjust=False)
    quartic = lambda x: jnp.sum(x**4)  # noqa: E731 - ULA explodes at a large step
    start = mcmc.langevin.init(jnp.full(2, 3.0), quartic)
    state, info = mcmc.base.inner_loop(kernel, 5)(jax.random.PRNGKey(0), start, quartic, 5.0)
    np.testing.assert_array_equal(state.position, start.position)
    assert int(info.num_divergent) == 1 and float(info.accept_prob) == 0.0
    # MALA rejects each non-finite proposal (here U overflows float32) and counts every one
    far = mcmc.langevin.init(jnp.full(2, 1000.0), quartic)
    mala = mcmc.langevin.build_kernel(adjust=True)
    state, info = mcmc.base.inner_loop(mala, 5)(jax.random.PRNGKey(0), far, quartic, 5.0)
    np.testing.assert_array_equal(state.position, far.position)
    assert int(info.num_divergent) == 5 and float(info.accept_prob) == 0.0


def test_step_size_adaptation_reaches_its_target():
    init, update = mcmc.adaptation.window_adaptation(200, 0.6, adapt_step_size=True, adapt_mass=True)
    kernel = mcmc.base.inner_loop(mcmc.kinetic.build_kernel(True), 5)

    def one_chain(key):
        def step(carry, i):
            key, st, ws = carry
            key, sub = jax.random.split(key)
            st, info = kernel(sub, st, potential, ws.step_size, ws.inverse_mass, 1.0)
            return (key, st, update(i, ws, info.accept_prob, st.position)), info.accept_prob
        ws = init(1e-3, 2)
        st = mcmc.kinetic.init(jnp.zeros(2), potential, key)
        (_, _, ws), acc = jax.lax.scan(step, (key, st, ws), jnp.arange(400))
        return ws, acc

    ws, acc = jax.jit(jax.vmap(one_chain))(jax.random.split(jax.random.PRNGKey(1), 100))
    assert abs(float(jnp.mean(acc[:, 250:])) - 0.6) < 0.08
    assert bool(jnp.all(ws.step_size > 0.05))  # up from 1e-3
    # the diagonal mass learned the variances (1 and 4) from the warmup draws
    np.testing.assert_allclose(np.median(np.asarray(ws.inverse_mass), axis=0), np.diag(COV), rtol=0.35)


def test_gibbs_step_keeps_the_momentum_and_refuses_non_finite_draws():
    st = mcmc.kinetic.init(jnp.zeros(2), potential, jax.random.PRNGKey(0))
    new = mcmc.base.gibbs_step(jax.random.PRNGKey(1), st, potential, lambda k, x: x.at[1].set(0.9 * 2.0 * x[0] + 1.0))
    np.testing.assert_array_equal(new.momentum, st.momentum)
    assert float(new.position[1]) == pytest.approx(1.0) and float(new.potential_energy) == pytest.approx(
        float(potential(jnp.array([0.0, 1.0]))))
    same = mcmc.base.gibbs_step(jax.random.PRNGKey(1), st, potential, lambda k, x: x.at[1].set(jnp.nan))
    np.testing.assert_array_equal(same.position, st.position)
