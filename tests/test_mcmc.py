"""The pure sampler core (renormpp.mcmc) without any NumPyro model: exactness on a correlated Gaussian, adaptation,
the inner loop's divergence handling and the Gibbs step."""
import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from renormpp import mcmc
from stat_bounds import assert_z_within, z_bound

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
    """The three moments within the bound a family of three exceeds with probability 1e-4 (|z| 4.15); 20 seeds on
    correct code: largest |z| 2.62 (GHMC below: 2.69). ULA at the same step (the planted bug) exceeds it."""
    draws, acc = run((0.15,), lambda x, k: mcmc.langevin.init(x, potential))
    assert_z_within(list(z_scores(draws).values()), what="MALA on the Gaussian")
    assert 0.3 < acc < 0.99
    # the same check sees ULA's O(h) bias at this step: it can fail
    biased, _ = run((0.15,), lambda x, k: mcmc.langevin.init(x, potential), build=mcmc.langevin.build_kernel(False))
    assert max(abs(v) for v in z_scores(biased).values()) > z_bound(3)


def test_ghmc_core_samples_a_correlated_gaussian_exactly():
    inv_mass = jnp.ones(2)
    draws, acc = run((0.3, inv_mass, 0.5), lambda x, k: mcmc.kinetic.init(x, potential, k),
                     build=mcmc.kinetic.build_kernel(adjust=True))
    assert_z_within(list(z_scores(draws).values()), what="GHMC on the Gaussian")
    assert 0.3 < acc < 0.999
    biased, _ = run((0.8, inv_mass, 0.5), lambda x, k: mcmc.kinetic.init(x, potential, k),
                    build=mcmc.kinetic.build_kernel(adjust=False))
    assert max(abs(v) for v in z_scores(biased).values()) > z_bound(3)


@pytest.mark.parametrize("shift", [0.02, 0.3])
def test_ghmc_with_neal_s_non_reversible_acceptance_is_exact(shift):
    """A long step (acceptance ~0.4) so that the test decides often; low friction so that the momentum matters.
    1200 draws per chain (issue 44's seeds check): at 300, one seed in 20 of shift 0.02 reached |z| 4.67 against the
    bound 4.15 and fell to 0.8 at 1200 draws (its error bars were too small, the chains unbiased: 0.5 at 4800); at 1200,
    20 seeds per shift stay below it, largest 3.25 (0.02) and 4.01 (0.3): a false-alarm rate below 1 in 1000 is not
    shown for this test."""
    init = lambda x, k: mcmc.kinetic.init(x, potential, k, persistent_accept=True)  # noqa: E731
    draws, acc = run((0.9, jnp.ones(2), 0.2), init, draws=1200,
                     build=mcmc.kinetic.build_kernel(True, accept_shift=shift))
    assert_z_within(list(z_scores(draws).values()), what=f"GHMC with Neal's acceptance, shift {shift}")
    assert 0.2 < acc < 0.95
    with pytest.raises(ValueError, match="needs adjust=True"):
        mcmc.kinetic.build_kernel(False, accept_shift=shift)


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


def adapted_chains(potential_fn, dim, *, warmup, draws, target, step0, num_chains, seed, rows=None):
    """Vectorized GHMC chains (5 updates per draw) under the window adaptation, from 0: the final warmup state,
    the positions after the warmup (chain, draw, dim) and the acceptance of every draw (chain, draw)."""
    init, update = mcmc.adaptation.window_adaptation(warmup, target, adapt_step_size=True, adapt_mass=True, rows=rows)
    kernel = mcmc.base.inner_loop(mcmc.kinetic.build_kernel(True), 5)

    def one_chain(key):
        def step(carry, i):
            key, st, ws = carry
            key, sub = jax.random.split(key)
            st, info = kernel(sub, st, potential_fn, ws.step_size, ws.inverse_mass, 1.0)
            return (key, st, update(i, ws, info.accept_prob, st.position)), (st.position, info.accept_prob)
        ws = init(step0, dim)
        st = mcmc.kinetic.init(jnp.zeros(dim), potential_fn, key, ws.inverse_mass)
        (_, _, ws), (pos, acc) = jax.lax.scan(step, (key, st, ws), jnp.arange(warmup + draws))
        return ws, pos[warmup:], acc

    return jax.jit(jax.vmap(one_chain))(jax.random.split(jax.random.PRNGKey(seed), num_chains))


def test_step_size_adaptation_reaches_its_target():
    ws, _, acc = adapted_chains(potential, 2, warmup=200, draws=200, target=0.6, step0=1e-3, num_chains=100, seed=1)
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


# ---- the row mass (renormpp.mcmc.metrics): one dense matrix shared by the rows of a weight matrix ----------------
ROWS, COLS = 6, 3
SIGMA = np.array([[1.0, 0.9, 0.2], [0.9, 1.0, 0.3], [0.2, 0.3, 0.5]])  # a row's covariance: not along the axes


def row_potential(x):
    """Independent rows w_r ~ N(0, SIGMA) at flat entries 1 .. 1 + ROWS*COLS (a dict {"a": (1,), "w": (ROWS, COLS)}
    ravels "a" first), and a = x[0] ~ N(0, 4)."""
    w = x[1:].reshape(ROWS, COLS)
    return 0.5 * jnp.sum((w @ jnp.asarray(np.linalg.inv(SIGMA))) * w) + x[0] ** 2 / 8


def test_row_mass_functions_match_a_dense_inverse_mass():
    rows = mcmc.metrics.matrix_site({"w": jnp.zeros((ROWS, COLS)), "a": jnp.zeros(1)}, "w")
    assert rows == mcmc.metrics.Rows(1, ROWS, COLS)
    rng = np.random.default_rng(0)
    diag = jnp.asarray(rng.uniform(0.5, 2.0, 1 + ROWS * COLS))
    m = mcmc.metrics.RowMass.from_covariance(diag, jnp.asarray(SIGMA), rows)
    dense = np.diag(np.asarray(diag))
    dense[1:, 1:] = np.kron(np.eye(ROWS), SIGMA)  # the row-major layout of (M1)
    draw, velocity, kinetic = mcmc.metrics.functions(m)
    p = jnp.asarray(rng.normal(size=1 + ROWS * COLS))
    np.testing.assert_allclose(velocity(p), dense @ np.asarray(p), rtol=1e-5)
    assert float(kinetic(p)) == pytest.approx(0.5 * np.asarray(p) @ dense @ np.asarray(p), rel=1e-5)
    # momenta have covariance M = (M^{-1})^{-1}
    ps = np.asarray(jax.vmap(lambda k: draw(k, p))(jax.random.split(jax.random.PRNGKey(0), 40000)), np.float64)
    np.testing.assert_allclose(np.cov(ps.T), np.linalg.inv(dense), atol=0.05 * np.abs(np.linalg.inv(dense)).max())
    with pytest.raises(ValueError, match="not a site of the model"):
        mcmc.metrics.matrix_site({"w": jnp.zeros((2, 2))}, "v")
    with pytest.raises(ValueError, match="needs a matrix site"):
        mcmc.metrics.matrix_site({"w": jnp.zeros(3)}, "w")


def _adapted_chains(rows):
    """GHMC chains on row_potential with the window adaptation (diagonal mass, or the row mass with ``rows``)."""
    ws, pos, _ = adapted_chains(row_potential, 1 + ROWS * COLS, warmup=400, draws=400, target=0.8, step0=0.1,
                                num_chains=40, seed=2, rows=rows)
    return ws, pos


def test_row_mass_is_learned_in_the_warmup_samples_exactly_and_allows_a_larger_step():
    rows = mcmc.metrics.Rows(1, ROWS, COLS)
    ws, pos = _adapted_chains(rows)
    block = np.median(np.asarray(ws.inverse_mass.block), axis=0)
    np.testing.assert_allclose(block, SIGMA, atol=0.1)  # the pooled row covariance
    w = np.asarray(pos, np.float64)[..., 1:].reshape(*pos.shape[:2], ROWS, COLS)
    z = {}
    for a, b in [(0, 0), (0, 1), (1, 2), (2, 2)]:
        x = (w[..., a] * w[..., b]).mean(axis=-1)  # pooled over rows: (chain, draw)
        z[a, b] = (x.mean() - SIGMA[a, b]) / (x.std() / np.sqrt(float(az.ess(x))))
    a = np.asarray(pos, np.float64)[..., 0]
    z["a^2"] = ((a**2).mean() - 4.0) / ((a**2).std() / np.sqrt(float(az.ess(a**2))))
    assert_z_within(list(z.values()), what=f"the row-mass chains' second moments {z}")
    # the diagonal mass cannot rotate to SIGMA (condition number 23): its adapted step is smaller
    ws_diag, _ = _adapted_chains(None)
    assert float(np.median(ws.step_size)) > 2 * float(np.median(ws_diag.step_size))  # 2.8x measured


def test_a_zero_inverse_mass_freezes_a_coordinate_and_gibbs_on_it_stays_exact():
    """x1 has inverse mass 0: GHMC moves only x0 (given x1), an exact draw of x1 | x0 moves x1; together exact."""
    init, update = mcmc.adaptation.window_adaptation(100, 0.8, adapt_step_size=True, adapt_mass=True,
                                                     frozen=jnp.array([False, True]))
    kernel = mcmc.base.inner_loop(mcmc.kinetic.build_kernel(True), 3)

    def x1_given_x0(key, x):  # COV: x1 | x0 ~ N(rho s1 x0, s1^2 (1 - rho^2)) with rho = 0.9, s1 = 2
        return x.at[1].set(0.9 * 2.0 * x[0] + 2.0 * np.sqrt(1 - 0.81) * jax.random.normal(key, dtype=x.dtype))

    def one_chain(key):
        def step(carry, i):
            key, st, ws = carry
            key, k1, k2 = jax.random.split(key, 3)
            moved, info = kernel(k1, st, potential, ws.step_size, ws.inverse_mass, 1.0)
            frozen_ok = moved.position[1] == st.position[1]
            st = mcmc.base.gibbs_step(k2, moved, potential, x1_given_x0)
            return (key, st, update(i, ws, info.accept_prob, st.position)), (st.position, frozen_ok)
        ws = init(0.1, 2)
        st = mcmc.kinetic.init(jnp.zeros(2), potential, key, ws.inverse_mass)
        (_, _, ws), (pos, ok) = jax.lax.scan(step, (key, st, ws), jnp.arange(400))
        return ws, pos[100:], ok

    ws, draws, ok = jax.jit(jax.vmap(one_chain))(jax.random.split(jax.random.PRNGKey(3), 100))
    assert bool(jnp.all(ok)) and bool(jnp.all(ws.inverse_mass[:, 1] == 0))
    assert_z_within(list(z_scores(np.asarray(draws, np.float64)).values()), what="GHMC on x0, Gibbs on x1")


def test_a_pooled_window_learns_the_mass_from_every_chain_and_the_step_from_their_mean_acceptance():
    """Pooled adaptation: a stack of k positions per draw gives the regularized variance of all k n positions of the
    window (by hand), and the step follows the dual averaging of the mean acceptance, as one chain fed that mean."""
    init, update = mcmc.adaptation.window_adaptation(200, 0.8, adapt_step_size=True, adapt_mass=True)
    ws = mcmc.adaptation.reschedule(init(0.1, 3), 2, 8, 20)
    alone = ws
    rng = np.random.default_rng(1)
    positions = rng.normal(size=(20, 3, 3)) * np.array([1.0, 2.0, 0.5])  # (draw, chain, coordinate)
    accepts = rng.uniform(0.5, 1.0, size=(20, 3))
    for i in range(20):
        mean_accept = jnp.float32(accepts[i].mean())
        ws = update(i, ws, mean_accept, jnp.asarray(positions[i], jnp.float32))
        alone = update(i, alone, mean_accept, jnp.asarray(positions[i, 0], jnp.float32))
        if i == 7:
            n = 3 * 6
            pooled = positions[2:8].reshape(n, 3)
            expected = n / (n + 5.0) * pooled.var(axis=0, ddof=1) + 1e-3 * 5.0 / (n + 5.0)
            np.testing.assert_allclose(np.asarray(ws.inverse_mass), expected, rtol=1e-4)
            assert not np.allclose(np.asarray(alone.inverse_mass), expected, rtol=1e-2)  # one chain's is not it
    np.testing.assert_allclose(np.asarray(ws.step_size), np.asarray(alone.step_size), rtol=1e-6)


def test_a_restarted_window_drops_the_positions_gathered_before_the_restart():
    """reschedule(..., restart_window=True) in the middle of a window: the mass is the regularized variance of the
    positions from the restart on only (by hand), not of the whole window."""
    init, update = mcmc.adaptation.window_adaptation(40, 0.8, adapt_step_size=True, adapt_mass=True)  # window [10, 30)
    ws = init(0.1, 3)
    rng = np.random.default_rng(2)
    drift = np.where(np.arange(30) < 16, np.arange(30), 0.0)[:, None]  # the chains relax at draw 16
    positions = rng.normal(size=(30, 3)) * np.array([1.0, 2.0, 0.5]) + drift
    for i in range(30):
        if i == 16:
            kept = mcmc.adaptation.reschedule(ws, 10, 30, 40)
            ws = mcmc.adaptation.reschedule(ws, 16, 26, 40, restart_window=True)
        ws = update(i, ws, jnp.float32(0.8), jnp.asarray(positions[i], jnp.float32))
        if i >= 16:
            kept = update(i, kept, jnp.float32(0.8), jnp.asarray(positions[i], jnp.float32))
        if i == 25:
            n = 10
            expected = n / (n + 5.0) * positions[16:26].var(axis=0, ddof=1) + 1e-3 * 5.0 / (n + 5.0)
            np.testing.assert_allclose(np.asarray(ws.inverse_mass), expected, rtol=1e-4)
    n = 20  # without the restart the window [10, 30) learns from the drifting positions as well
    expected = n / (n + 5.0) * positions[10:30].var(axis=0, ddof=1) + 1e-3 * 5.0 / (n + 5.0)
    np.testing.assert_allclose(np.asarray(kept.inverse_mass), expected, rtol=1e-4)


def test_a_moved_schedule_learns_the_mass_in_its_window_and_fixes_the_step_at_its_end():
    """reschedule (the adaptive warmup's lever): the mass is the regularized variance of the positions of the moved
    window [start, stop), computed here by hand; the step after the moved end is the dual-averaged one and stays."""
    init, update = mcmc.adaptation.window_adaptation(200, 0.8, adapt_step_size=True, adapt_mass=True)
    ws = mcmc.adaptation.reschedule(init(0.1, 3), 4, 14, 30)
    np.testing.assert_array_equal(np.asarray(ws.schedule), [4, 14, 30])
    rng = np.random.default_rng(0)
    positions = rng.normal(size=(40, 3)) * np.array([1.0, 2.0, 0.5])
    accepts = rng.uniform(0.5, 1.0, size=40)
    history = []
    for i in range(40):
        ws = update(i, ws, jnp.float32(accepts[i]), jnp.asarray(positions[i], jnp.float32))
        history.append(ws)
    n = 10
    expected = n / (n + 5.0) * positions[4:14].var(axis=0, ddof=1) + 1e-3 * 5.0 / (n + 5.0)
    np.testing.assert_allclose(np.asarray(history[13].inverse_mass), expected, rtol=1e-4)
    np.testing.assert_array_equal(np.asarray(history[12].inverse_mass), np.ones(3))  # unchanged before stop
    final = float(np.exp(history[29].step[1]))
    assert float(history[29].step_size) == pytest.approx(final, rel=1e-6)
    assert float(history[28].step_size) != pytest.approx(final, rel=1e-6)  # still the iterate one draw before
    for later in history[30:]:
        assert float(later.step_size) == float(history[29].step_size)
        np.testing.assert_array_equal(np.asarray(later.inverse_mass), np.asarray(history[29].inverse_mass))


def test_the_whole_run_sampler_adapts_and_samples_the_gaussian_exactly():
    """mcmc.sampling.ghmc, the sampler a theory receives by default: 200 chains from a start far off, warmup, then
    draws of the correlated Gaussian (as (2, 1) arrays: the shape is kept); the three moments within the family
    bound, the step adapted to about its target acceptance, and thinning keeps every second draw. A sampler whose
    warmup draws were kept (the planted bug: no warmup) is off."""
    def U(x):
        return potential(x.reshape(2))

    sample = mcmc.sampling.ghmc(inner_steps=5)
    init = np.full((200, 2, 1), 8.0)
    out = sample(jax.random.PRNGKey(3), U, init, 300, 400, thinning=2)
    assert out.draws.shape == (200, 200, 2, 1) and out.last.shape == (200, 2, 1)
    np.testing.assert_array_equal(out.last, out.draws[:, -1])
    assert_z_within(list(z_scores(out.draws[..., 0].astype(np.float64)).values()), what="the whole-run sampler")
    assert abs(float(out.accept_prob.mean()) - 0.8) < 0.1 and int(out.num_divergent.sum()) == 0
    cold = mcmc.sampling.ghmc(inner_steps=5, step_size=0.01, adapt_mass=False)(jax.random.PRNGKey(3), U, init, 0, 30)
    assert max(abs(v) for v in z_scores(cold.draws[..., 0].astype(np.float64)).values()) > z_bound(3)
    with pytest.raises(ValueError, match=r"shape \(chains, ...\)"):
        sample(jax.random.PRNGKey(0), U, np.zeros(2), 10, 10)
    with pytest.raises(ValueError, match="inner_steps >= 1"):
        mcmc.sampling.ghmc(inner_steps=0)
