"""Langevin kernel (ULA/MALA) on targets with known answers, inside numpyro.infer.MCMC, and the model."""
import functools
import warnings

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import pytest
from numpyro.infer import MCMC, NUTS, HMCGibbs, Predictive
from numpyro.infer.util import potential_energy

import renormpp as rp
from renormpp import infer, models, network, observables, readout
from renormpp.infer.tempering import ReplicaExchange, geometric_ladder
from stat_bounds import assert_z_within

SIGMA = jnp.array([0.5, 1.0, 2.0])


def gaussian_potential(x):
    return 0.5 * jnp.sum((x / SIGMA) ** 2)


def run_gaussian(h, adjust, inner_steps, num_chains=400, num_samples=200, seed=0):
    kernel = infer.Langevin(potential_fn=gaussian_potential, step_size=h, adjust=adjust, inner_steps=inner_steps)
    mcmc = MCMC(kernel, num_warmup=20, num_samples=num_samples, num_chains=num_chains,
                chain_method="vectorized", progress_bar=False)
    mcmc.run(jax.random.PRNGKey(seed), init_params=jnp.zeros((num_chains, 3)), extra_fields=("accept_prob",))
    return np.asarray(mcmc.get_samples(group_by_chain=True), dtype=np.float64), mcmc


def _var_and_se(draws):
    """Variance over all draws and its standard error from the effective sample size (ArviZ)."""
    out = []
    for d in range(draws.shape[-1]):
        x = draws[..., d]
        ess = float(az.ess(x**2))
        out.append((x.var(), x.var() * np.sqrt(2.0 / ess) * 1.2))  # 1.2: fourth moment of a Gaussian, to spare
    return np.array(out).T


def test_mala_is_exact_on_a_gaussian():
    draws, mcmc = run_gaussian(h=0.2, adjust=True, inner_steps=10)
    var, se = _var_and_se(draws)
    assert np.all(np.abs(var - SIGMA**2) < 4 * se), (var, se)
    assert np.all(np.abs(draws.mean(axis=(0, 1))) < 4 * np.sqrt(var / 5000))
    acc = float(mcmc.get_extra_fields()["accept_prob"].mean())
    assert 0.3 < acc < 0.99
    # at this step ULA is visibly biased: the Metropolis test is what makes MALA exact
    ula, _ = run_gaussian(h=0.2, adjust=False, inner_steps=10)
    ula_var, ula_se = _var_and_se(ula)
    assert ula_var[0] - SIGMA[0] ** 2 > 10 * ula_se[0]


def test_mala_step_adaptation_reaches_the_target_and_stays_exact():
    kernel = infer.Langevin(potential_fn=gaussian_potential, step_size=1e-3, adjust=True, inner_steps=5,
                            adapt_step_size=True)
    mcmc = MCMC(kernel, num_warmup=300, num_samples=300, num_chains=200, chain_method="vectorized",
                progress_bar=False)
    mcmc.run(jax.random.PRNGKey(4), init_params=jnp.zeros((200, 3)), extra_fields=("accept_prob", "step_size"))
    steps = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["step_size"])
    assert np.all(steps == steps[:, :1]), "the step must be fixed after the warmup"
    assert np.all(steps[:, 0] > 0.1)  # up from 1e-3; MALA on this target accepts 0.574 near h ~ 0.5-1
    acc = float(mcmc.get_extra_fields()["accept_prob"].mean())
    assert abs(acc - 0.574) < 0.06, acc
    draws = np.asarray(mcmc.get_samples(group_by_chain=True), dtype=np.float64)
    var, se = _var_and_se(draws)
    assert np.all(np.abs(var - SIGMA**2) < 4 * se), (var, se)
    with pytest.raises(ValueError, match="adapt_step_size needs adjust=True"):
        infer.Langevin(potential_fn=gaussian_potential, step_size=0.1, adapt_step_size=True)


@pytest.mark.parametrize("pooled", [False, True])
def test_kinetic_langevin_is_exact_and_learns_the_scales(pooled):
    """Adjusted OBABO (generalized HMC) on an anisotropic Gaussian: exact variances, the diagonal inverse mass
    adapted to the variances, the step tuned to the target acceptance and fixed after the warmup. Pooled over the
    200 chains, one mass and one step for all, the mass from 200 times as many positions (so much closer)."""
    kernel = infer.KineticLangevin(potential_fn=gaussian_potential, step_size=1e-2, inner_steps=5,
                                   pooled_adaptation=pooled)
    mcmc = MCMC(kernel, num_warmup=400, num_samples=300, num_chains=200, chain_method="vectorized",
                progress_bar=False)
    mcmc.run(jax.random.PRNGKey(5), init_params=jnp.zeros((200, 3)), extra_fields=("accept_prob", "step_size"))
    inv_mass = np.asarray(mcmc.last_state.inverse_mass)
    np.testing.assert_allclose(np.median(inv_mass, axis=0), SIGMA**2, rtol=0.3)
    if pooled:  # 200 x 200 draws with tau of a few: a few percent
        np.testing.assert_array_equal(inv_mass, np.broadcast_to(inv_mass[0], inv_mass.shape))
        np.testing.assert_allclose(inv_mass[0], SIGMA**2, rtol=0.05)
        assert np.ptp(np.asarray(mcmc.last_state.step_size)) == 0
    steps = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["step_size"])
    assert np.all(steps == steps[:, :1]) and np.all(steps[:, 0] > 0.1)
    acc = float(mcmc.get_extra_fields()["accept_prob"].mean())
    assert abs(acc - 0.8) < 0.07, acc
    draws = np.asarray(mcmc.get_samples(group_by_chain=True), dtype=np.float64)
    var, se = _var_and_se(draws)
    assert np.all(np.abs(var - SIGMA**2) < 4 * se), (var, se)
    assert np.all(np.abs(draws.mean(axis=(0, 1))) < 4 * np.sqrt(var / float(az.ess(draws[..., 0]))))


RHO = 0.9  # a correlated 2-d Gaussian: a ~ N(0, 1), b | a ~ N(RHO a, 1 - RHO^2)


def correlated_potential(z):
    a, b = z["a"], z["b"]
    return 0.5 * (a**2 - 2 * RHO * a * b + b**2) / (1 - RHO**2)


def exact_b_given_a(scale=1.0):
    def update(key, gibbs_sites, other_sites):
        a = other_sites["a"]
        return {"b": RHO * a + scale * jnp.sqrt(1 - RHO**2) * jax.random.normal(key, a.shape, a.dtype)}
    return update


@pytest.mark.parametrize("kind", ["mala", "kinetic"])
def test_gibbs_step_combined_with_langevin_moves_is_exact(kind):
    """Langevin moves on (a, b) with an exact Gibbs draw of b | a after every draw sample the joint exactly;
    a Gibbs step with the wrong conditional variance is detected by the same check."""
    def run(gibbs):
        common = dict(potential_fn=correlated_potential, inner_steps=2, gibbs_fn=gibbs, gibbs_sites=("b",))
        kernel = (infer.Langevin(step_size=0.05, adjust=True, **common) if kind == "mala" else
                  infer.KineticLangevin(step_size=0.1, adapt_step_size=False, adapt_mass=False, **common))
        mcmc = MCMC(kernel, num_warmup=20, num_samples=300, num_chains=200, chain_method="vectorized",
                    progress_bar=False)
        mcmc.run(jax.random.PRNGKey(7), init_params={"a": jnp.zeros(200), "b": jnp.zeros(200)})
        s = mcmc.get_samples(group_by_chain=True)
        return {k: np.asarray(v, dtype=np.float64) for k, v in s.items()}

    def z_scores(s):
        out = {}
        for name, x, exact in [("var a", s["a"] ** 2, 1.0), ("var b", s["b"] ** 2, 1.0), ("cov", s["a"] * s["b"], RHO)]:
            out[name] = (x.mean() - exact) / (x.std() / np.sqrt(float(az.ess(x))))
        return out

    z = z_scores(run(exact_b_given_a()))
    assert all(abs(v) < 4 for v in z.values()), z
    wrong = z_scores(run(exact_b_given_a(scale=2.0)))  # b | a with 4x the variance: var b = 1 + 3(1 - RHO^2)
    assert wrong["var b"] > 10, wrong
    with pytest.raises(ValueError, match="not sites of the model"):
        MCMC(infer.Langevin(potential_fn=correlated_potential, step_size=0.1, gibbs_fn=exact_b_given_a(),
                            gibbs_sites=("c",)), num_warmup=0, num_samples=1, progress_bar=False).run(
            jax.random.PRNGKey(0), init_params={"a": jnp.zeros(()), "b": jnp.zeros(())})


def test_unadjusted_kinetic_langevin_bias_is_second_order():
    """Unadjusted OBABO on N(0, s^2) (unit mass, no adaptation): the variance bias falls about 4x when h halves."""
    biases = []
    for h in (0.4, 0.2):
        kernel = infer.KineticLangevin(potential_fn=gaussian_potential, step_size=h, adjust=False, inner_steps=20,
                                       adapt_step_size=False, adapt_mass=False)
        mcmc = MCMC(kernel, num_warmup=50, num_samples=400, num_chains=400, chain_method="vectorized",
                    progress_bar=False)
        mcmc.run(jax.random.PRNGKey(6), init_params=jnp.zeros((400, 3)))
        draws = np.asarray(mcmc.get_samples(group_by_chain=True), dtype=np.float64)[..., 0]  # sigma = 0.5
        biases.append(draws.var() - SIGMA[0] ** 2)
    assert biases[0] > 0 and 2.5 < biases[0] / biases[1] < 6.5, biases


def test_ula_bias_is_first_order_in_the_step():
    """ULA on N(0, s^2) has stationary variance s^2 / (1 - h / (2 s^2)): bias O(h)."""
    biases = []
    hs = np.array([0.1, 0.05, 0.025])
    for h in hs:
        draws, _ = run_gaussian(h=h, adjust=False, inner_steps=int(round(4 / h)) // 4, num_chains=800)
        var, se = _var_and_se(draws)
        exact = SIGMA**2 / (1 - h / (2 * SIGMA**2))
        assert np.all(np.abs(var - exact) < 4 * se), (h, var, exact, se)
        biases.append(var[0] - SIGMA[0] ** 2)
    slopes = np.diff(np.log(biases)) / np.diff(np.log(hs))
    assert np.all((slopes > 0.7) & (slopes < 1.5)), slopes


@pytest.mark.parametrize("num_chains", [1, 2])
def test_divergence_is_caught_and_named(num_chains):
    kernel = infer.Langevin(potential_fn=lambda x: jnp.sum(x**4), step_size=5.0, inner_steps=3)
    mcmc = MCMC(kernel, num_warmup=0, num_samples=20, num_chains=num_chains, chain_method="vectorized",
                progress_bar=False)
    with pytest.warns(RuntimeWarning, match=r"step_size=5 gave a NaN or inf .* Reduce step_size"):
        init = jnp.full((num_chains, 2) if num_chains > 1 else (2,), 3.0)
        mcmc.run(jax.random.PRNGKey(0), init_params=init, extra_fields=("diverging",))
    draws = np.asarray(mcmc.get_samples())
    assert np.all(np.isfinite(draws))
    assert np.asarray(mcmc.get_extra_fields()["diverging"]).any()
    assert int(np.sum(mcmc.last_state.num_divergent)) > 0


def test_divergence_flagged_without_warning_when_asked():
    kernel = infer.Langevin(potential_fn=lambda x: jnp.sum(x**4), step_size=5.0, inner_steps=3, warn_divergences=False)
    mcmc = MCMC(kernel, num_warmup=0, num_samples=20, progress_bar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", infer.ULABiasWarning)  # the step is far too large, and said so at the start
        mcmc.run(jax.random.PRNGKey(0), init_params=jnp.full(2, 3.0), extra_fields=("diverging",))
    assert np.all(np.isfinite(np.asarray(mcmc.get_samples())))
    assert int(mcmc.last_state.num_divergent) > 0


def test_no_warning_without_divergence():
    kernel = infer.Langevin(potential_fn=gaussian_potential, step_size=0.01, inner_steps=3)
    mcmc = MCMC(kernel, num_warmup=0, num_samples=50, num_chains=2, chain_method="vectorized", progress_bar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mcmc.run(jax.random.PRNGKey(0), init_params=jnp.ones((2, 3)))
    assert int(np.sum(mcmc.last_state.num_divergent)) == 0


@pytest.mark.parametrize("make", [
    lambda: infer.Langevin(potential_fn=gaussian_potential, step_size=10.0, adjust=True),
    lambda: infer.KineticLangevin(potential_fn=gaussian_potential, step_size=10.0, adapt_step_size=False,
                                  adapt_mass=False),
], ids=["mala", "kinetic"])
def test_a_frozen_chain_warns_inside_plain_numpyro(make):
    # issue 30, item 7: MCMC(Langevin(..., step_size=10.0, adjust=True)) ran with acceptance 0 and not a word
    mcmc = MCMC(make(), num_warmup=10, num_samples=120, num_chains=2, chain_method="vectorized", progress_bar=False)
    with pytest.warns(infer.LowAcceptanceWarning, match=r"chain\(s\) \[0, 1\] accepted .* draws since the warmup "
                                                        r"\(below 0.1\) at step_size=10.*Reduce step_size"):
        mcmc.run(jax.random.PRNGKey(0), init_params=jnp.ones((2, 3)), extra_fields=("accept_prob",))
    assert np.mean(mcmc.get_extra_fields()["accept_prob"]) < infer.alerts.MIN_ACCEPT_PROB
    # the running mean restarts after the warmup, as NumPyro's HMC's does: the post-warmup draws' mean
    acc = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["accept_prob"])
    np.testing.assert_allclose(np.asarray(mcmc.last_state.mean_accept_prob), acc.mean(axis=1), rtol=1e-4, atol=1e-6)


def test_a_moving_chain_does_not_warn_of_low_acceptance():
    kernel = infer.Langevin(potential_fn=gaussian_potential, step_size=0.05, adjust=True)
    mcmc = MCMC(kernel, num_warmup=10, num_samples=120, num_chains=2, chain_method="vectorized", progress_bar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mcmc.run(jax.random.PRNGKey(0), init_params=jnp.ones((2, 3)))
    assert np.all(np.asarray(mcmc.last_state.mean_accept_prob) > 0.5)


def hashed_noise_potential(sigma):
    """0.5|x|^2 plus a noise of standard deviation ``sigma`` that is a fixed function of x's float32 bits (a stand-in
    for rounding noise: the same x always gives the same value, a neighbour an independent one; no gradient)."""
    def U(x):
        bits = jax.lax.bitcast_convert_type(jax.lax.stop_gradient(x).astype(jnp.float32), jnp.uint32)
        seed = jnp.sum(bits * jnp.arange(1, x.shape[-1] + 1, dtype=jnp.uint32))
        noise = jax.random.normal(jax.random.fold_in(jax.random.PRNGKey(1), seed), (), x.dtype)
        return 0.5 * jnp.sum(x**2) + sigma * noise
    return U


@pytest.mark.parametrize("sigma", [0.1, 1.0, 10.0])
def test_potential_noise_measures_a_known_noise(sigma):
    # a quadratic fit on 9 points leaves 6 degrees of freedom: the estimate is within a factor ~2.5 of sigma
    q = jax.random.normal(jax.random.PRNGKey(3), (1000,), jnp.float32)
    for scale in (1.0, 3.0):
        got = float(infer.alerts.potential_noise(hashed_noise_potential(sigma), scale * q))
        assert sigma / 2.5 < got < 2.5 * sigma, (sigma, scale, got)
    # no noise but float32's: a quadratic of size 1.5e4 (rounding ~1e-3) and a quartic, far below the bound
    assert float(infer.alerts.potential_noise(lambda x: 15.0 * jnp.sum(x**2), q)) < 0.01
    assert float(infer.alerts.potential_noise(lambda x: jnp.sum(x**4) + jnp.sum(x), q)) < 0.01


def test_a_noisy_potential_warns_at_the_warmups_end():
    # issue 34: a float32 cancellation made the potential's rounding noise O(1); the Metropolis test then tested noise,
    # the warmup shrank the step to 4e-8 with the acceptance still at 0.75, and nothing said why the chains stood still
    kernel = infer.KineticLangevin(potential_fn=hashed_noise_potential(1.0), step_size=0.1)
    mcmc = MCMC(kernel, num_warmup=20, num_samples=30, num_chains=2, chain_method="vectorized", progress_bar=False)
    with pytest.warns(infer.NoisyPotentialWarning, match=r"rounding noise at the end of the warmup is .* in chain\(s\) "
                                                         r"\[0, 1\] \(above 0.25.*float64"):
        mcmc.run(jax.random.PRNGKey(0), init_params=jnp.ones((2, 50)))
    # the level the check measured, per chain, from the kernel's public method (benchmarks/gpu_check.py reports it)
    level = kernel.potential_noise(mcmc.last_state, ())
    assert level.shape == (2,) and np.all((level > 1.0 / 2.5) & (level < 2.5)), level
    kernel = infer.KineticLangevin(potential_fn=hashed_noise_potential(0.01), step_size=0.1)
    mcmc = MCMC(kernel, num_warmup=20, num_samples=30, num_chains=2, chain_method="vectorized", progress_bar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", infer.NoisyPotentialWarning)
        mcmc.run(jax.random.PRNGKey(0), init_params=jnp.ones((2, 50)))
    level = kernel.potential_noise(mcmc.last_state, ())
    assert np.all((level > 0.01 / 2.5) & (level < 0.01 * 2.5)), level


def test_paper_units():
    assert infer.paper_step_size(1e-3, 0.01) == pytest.approx(1e-5)
    with pytest.raises(ValueError, match="positive"):
        infer.paper_step_size(1e-3, 0.0)


def test_bad_kernel_arguments():
    with pytest.raises(ValueError, match="exactly one of model or potential_fn"):
        infer.Langevin(step_size=0.1)
    with pytest.raises(ValueError, match="step_size must be a positive"):
        infer.Langevin(models.one_hidden_layer, step_size=-1.0)
    with pytest.raises(ValueError, match="inner_steps must be a positive integer"):
        infer.Langevin(models.one_hidden_layer, step_size=1e-3, inner_steps=0)


# ---- the network model -------------------------------------------------------------------------
def _small(P=40, N0=10, D=2, seed=0):
    return rp.datasets.synthetic(P=P, P_test=60, N0=N0, D=D, teacher="linear", seed=seed)


def test_model_potential_is_the_papers_gibbs_measure():
    data = _small()
    kw = dict(N1=7, T=0.3, lambda0=0.8, lambda1=1.7, activation="erf")
    rng = np.random.default_rng(1)

    def draw():
        return {"w": jnp.asarray(rng.standard_normal((7, 10))), "v": jnp.asarray(rng.standard_normal((2, 7)))}

    def U_paper(p):  # L/T + lambda0 |w|^2/2 + lambda1 |v|^2/2, numpy, written out
        w, v = np.asarray(p["w"], float), np.asarray(p["v"], float)
        from scipy.special import erf
        f = erf(data.X @ w.T / np.sqrt(10)) @ v.T / np.sqrt(7)
        L = 0.5 * np.sum((data.Y - f) ** 2)
        return L / kw["T"] + kw["lambda0"] * np.sum(w**2) / 2 + kw["lambda1"] * np.sum(v**2) / 2

    a, b = draw(), draw()
    dU = potential_energy(models.one_hidden_layer, (data.X, data.Y), kw, a) - \
        potential_energy(models.one_hidden_layer, (data.X, data.Y), kw, b)
    np.testing.assert_allclose(float(dU), U_paper(a) - U_paper(b), rtol=2e-4)


def test_predictive_gives_network_outputs_with_and_without_bias():
    data = _small()
    for bias in (False, True):
        kw = dict(N1=5, T=0.1, activation="tanh", bias=bias)
        prior = Predictive(models.one_hidden_layer, num_samples=3)(jax.random.PRNGKey(0), data.X, data.Y, **kw)
        params = {k: prior[k] for k in (("w", "v", "b", "c") if bias else ("w", "v"))}
        pred = Predictive(models.one_hidden_layer, posterior_samples=params)(
            jax.random.PRNGKey(1), data.X_test, None, D=2, **kw)
        assert pred["f"].shape == (3, 60, 2) and pred["y"].shape == (3, 60, 2)
        one = {k: v[1] for k, v in params.items()}
        # float32 outputs of order 1 by two routes: equal to float32 rounding (an absolute 1e-6; a relative bound
        # fails on an output near 0, where one route's rounding is a large share of it)
        np.testing.assert_allclose(pred["f"][1], network.forward(one, data.X_test, "tanh"), rtol=1e-5, atol=1e-6)
        assert ("b" in prior) == bias


def test_model_bad_input():
    data = _small()
    with pytest.raises(ValueError, match="give Y or the number of outputs D"):
        numpyro.handlers.seed(models.one_hidden_layer, 0)(data.X, None, N1=3)
    with pytest.raises(ValueError, match="N1 must be a positive integer"):
        numpyro.handlers.seed(models.one_hidden_layer, 0)(data.X, data.Y, N1=0)
    with pytest.raises(ValueError, match="T must be a positive"):
        numpyro.handlers.seed(models.one_hidden_layer, 0)(data.X, data.Y, N1=3, T=-1.0)
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        numpyro.handlers.seed(models.one_hidden_layer, 0)(data.X, data.Y, N1=3, activation="swish")


# ---- inside MCMC ---------------------------------------------------------------------------------
def _langevin_run(num_samples, chain_method="vectorized", observables_fn=None, key=0, state=None, **kernel_kw):
    data = _small()
    kernel = infer.Langevin(models.one_hidden_layer, step_size=1e-4, inner_steps=5, observables=observables_fn,
                            **kernel_kw)
    mcmc = MCMC(kernel, num_warmup=0, num_samples=num_samples, num_chains=2, chain_method=chain_method,
                progress_bar=False)
    if state is not None:
        mcmc.post_warmup_state = state
    mcmc.run(jax.random.PRNGKey(key) if state is None else state.rng_key, data.X, data.Y, N1=6, T=0.1)
    return mcmc


@pytest.fixture(scope="module")
def vectorized_run():
    """One Langevin run of 2 vectorized chains, 30 draws, shared by the tests that read it."""
    return _langevin_run(30, "vectorized")


def test_vectorized_and_sequential_chains_agree(vectorized_run):
    vec = vectorized_run.get_samples(group_by_chain=True)
    seq = _langevin_run(30, "sequential").get_samples(group_by_chain=True)
    for site in ("w", "v"):
        assert vec[site].shape == (2, 30) + vec[site].shape[2:]
        np.testing.assert_allclose(vec[site], seq[site], rtol=1e-4, atol=1e-5)
    assert not np.allclose(vec["w"][0], vec["w"][1])  # the chains differ from each other


def test_resumed_run_equals_one_long_run():
    full = _langevin_run(40, adjust=True).get_samples(group_by_chain=True)
    first = _langevin_run(20, adjust=True)
    second = _langevin_run(20, state=first.last_state, adjust=True)
    for site in ("w", "v"):
        joined = np.concatenate([first.get_samples(group_by_chain=True)[site],
                                 second.get_samples(group_by_chain=True)[site]], axis=1)
        np.testing.assert_allclose(joined, full[site], rtol=1e-5, atol=1e-6)


def test_neal_s_acceptance_variable_is_carried_across_draws_and_runs():
    data = _small()

    def go(n, state=None):
        kernel = infer.KineticLangevin(models.one_hidden_layer, step_size=0.05, inner_steps=5, accept_shift=0.05,
                                       adapt_step_size=False, adapt_mass=False)
        mcmc = MCMC(kernel, num_warmup=0, num_samples=n, num_chains=2, chain_method="vectorized", progress_bar=False)
        if state is not None:
            mcmc.post_warmup_state = state
        mcmc.run(jax.random.PRNGKey(3) if state is None else state.rng_key, data.X, data.Y, N1=6, T=0.1)
        return mcmc

    full, first = go(30), go(15)
    second = go(15, first.last_state)
    joined = np.concatenate([first.get_samples(group_by_chain=True)["w"], second.get_samples(group_by_chain=True)["w"]],
                            axis=1)
    np.testing.assert_allclose(joined, full.get_samples(group_by_chain=True)["w"], rtol=1e-5, atol=1e-6)
    s = np.asarray(full.last_state.accept_level)
    assert s.shape == (2,) and np.all(np.abs(s) <= 1)
    with pytest.raises(ValueError, match="accept_shift"):
        infer.KineticLangevin(models.one_hidden_layer, step_size=0.05, accept_shift=2.0)


def test_observables_replace_the_weights_and_match_evaluate():
    data = _small()
    obs = observables.default(data.X_test, data.Y_test)
    mcmc = _langevin_run(10, observables_fn=obs, key=3)
    s = mcmc.get_samples(group_by_chain=True)
    assert set(s) == {"eps_g", "overlap"} and s["overlap"].shape == (2, 10, 2, 2)
    # the same chain without observables, evaluated afterwards, gives the same numbers
    weights = _langevin_run(10, key=3).get_samples(group_by_chain=True)
    again = observables.evaluate(obs, weights, batch_dims=2)
    np.testing.assert_allclose(again["eps_g"], s["eps_g"], rtol=1e-4)
    np.testing.assert_allclose(again["overlap"], s["overlap"], rtol=1e-4, atol=1e-6)
    # and v v^T / N1 by hand
    v = np.asarray(weights["v"], float)
    np.testing.assert_allclose(s["overlap"], np.einsum("cdah,cdbh->cdab", v, v) / 6, rtol=1e-4, atol=1e-6)
    post = az.from_numpyro(mcmc, dims=observables.DIMS)["posterior"]  # works with observables too
    assert post["overlap"].dims == ("chain", "draw", "output", "output_") and post["eps_g"].dims == ("chain", "draw")


def test_arviz_gets_named_dimensions(vectorized_run):
    dt = az.from_numpyro(vectorized_run)
    post = dt["posterior"]
    assert post["w"].dims == ("chain", "draw", "hidden", "input")
    assert post["v"].dims == ("chain", "draw", "output", "hidden")
    assert dt["observed_data"]["y"].dims == ("data", "output")


# ---- the three samplers agree on a small network ------------------------------------------------------
def _mean_and_se(x):
    """Mean of draws (chain, draw) and its standard error from ArviZ's effective sample size."""
    x = np.asarray(x, dtype=np.float64)
    return x.mean(), x.std() / np.sqrt(float(az.ess(x)))


def _summaries(s):
    out = {"eps_g": _mean_and_se(s["eps_g"])}
    for a, b in [(0, 0), (0, 1), (1, 1)]:
        out[f"overlap{a}{b}"] = _mean_and_se(s["overlap"][:, :, a, b])
    return out


ULA_STEP = 5e-4


def _ula_relative_bias(data, kw, draws, h=ULA_STEP):
    r"""How far ULA at step ``h`` may move the observables' means, from theory: on a Gaussian target of Hessian H, ULA's
    stationary law has the exact mean and the covariance :math:`\Sigma (1 - hH/2)^{-1}` (every variance inflated by
    at most :math:`1/(1 - h\kappa/2)`, :math:`\kappa` the largest curvature; test_ula_bias_is_first_order_in_the_step
    checks it), so the mean of a quadratic observable (eps_g, v v^T / N1: quadratic in v at given w) moves by at most
    the fraction :math:`r = (h\kappa/2)/(1 - h\kappa/2)` of its value (of :math:`\sqrt{m_{00} m_{11}}` off the
    diagonal). kappa: the largest eigenvalue of the potential's Hessian over ``draws`` (dicts of w, v)."""
    from jax.flatten_util import ravel_pytree

    unravel = ravel_pytree(draws[0])[1]
    hessian = jax.jit(jax.hessian(lambda x: potential_energy(models.one_hidden_layer, (data.X, data.Y), kw,
                                                             unravel(x))))
    kappa = max(float(np.linalg.eigvalsh(np.asarray(hessian(ravel_pytree(p)[0]), np.float64))[-1]) for p in draws)
    half = h * kappa / 2
    assert half < 0.5, f"ULA's step {h} is near its stability limit (h kappa / 2 = {half:.2f})"
    return half / (1 - half)


def _every_sampler_against_nuts(seed, scale=1.0, kw_of=None):
    """Run the samplers of the test below on one network posterior (PRNG key ``seed``; draws times ``scale``; ``kw_of``:
    model arguments for one sampler by name, where a check of the test's power plants a wrong T). Returns the
    summaries {sampler: {quantity: (mean, se)}}, the z-scores of each against NUTS (ULA's within its bias
    allowance) and ULA's relative bias allowance."""
    data = rp.datasets.synthetic(P=40, P_test=200, N0=10, D=2, teacher="linear", seed=0)
    kw = dict(N1=20, T=0.1)
    obs = observables.default(data.X_test, data.Y_test)
    rb = readout.rao_blackwell(data.X, data.Y, data.X_test, data.Y_test, T=kw["T"], lambda1=1.0)
    marginal = functools.partial(models.one_hidden_layer, integrate_v=True)
    gibbs = readout.gibbs_fn(data.X, data.Y, T=kw["T"], lambda1=1.0)
    results, kw_of = {}, kw_of or {}
    for name, kernel, n_warm, n_draws in [
        ("ULA", infer.Langevin(models.one_hidden_layer, step_size=ULA_STEP, inner_steps=100, observables=obs), 300,
         3000),
        ("MALA", infer.Langevin(models.one_hidden_layer, step_size=3e-3, adjust=True, inner_steps=20,
                                observables=obs), 300, 3000),
        ("MALA adapted, Rao-Blackwellized", infer.Langevin(models.one_hidden_layer, step_size=1e-4, adjust=True,
                                                           inner_steps=20, observables=rb, adapt_step_size=True),
         300, 3000),
        ("MALA on w, v integrated out", infer.Langevin(marginal, step_size=1e-3, adjust=True, inner_steps=10,
                                                       observables=rb, adapt_step_size=True), 300, 2000),
        ("kinetic Langevin (GHMC)", infer.KineticLangevin(models.one_hidden_layer, step_size=1e-3, inner_steps=10,
                                                          observables=obs), 400, 2000),
        ("kinetic Langevin on w, v integrated out (renormpp run's default)",
         infer.KineticLangevin(marginal, step_size=1e-3, inner_steps=10, observables=rb), 400, 1500),
        ("the same with Neal's non-reversible acceptance",
         infer.KineticLangevin(marginal, step_size=1e-3, inner_steps=10, observables=rb, accept_shift=0.05), 400, 1500),
        ("MALA with exact Gibbs steps on v",
         infer.Langevin(models.one_hidden_layer, step_size=3e-3, adjust=True, inner_steps=20, observables=obs,
                        gibbs_fn=gibbs), 300, 2000),
        ("kinetic Langevin with exact Gibbs steps on v",
         infer.KineticLangevin(models.one_hidden_layer, step_size=1e-3, inner_steps=10, observables=obs,
                               gibbs_fn=gibbs), 400, 2000),
        ("kinetic Langevin on w (v frozen, row mass), exact Gibbs steps on v",
         infer.KineticLangevin(models.one_hidden_layer, step_size=1e-3, inner_steps=10, observables=obs,
                               gibbs_fn=gibbs, freeze_gibbs_sites=True, row_mass="w"), 400, 2000),
        ("replica exchange on w, v integrated out (4 rungs down to beta = 0.3)",
         ReplicaExchange(infer.KineticLangevin(marginal, step_size=1e-3, inner_steps=10, observables=rb),
                         geometric_ladder(4, 0.3)), 400, 1500),
        ("NUTS on w, Gibbs on v", HMCGibbs(NUTS(models.one_hidden_layer), gibbs_sites=["v"], gibbs_fn=gibbs), 300, 800),
        ("NUTS", NUTS(models.one_hidden_layer), 500, 1500),
    ]:
        method = "sequential" if isinstance(kernel, HMCGibbs) else "vectorized"  # HMCGibbs takes one key
        mcmc = MCMC(kernel, num_warmup=n_warm, num_samples=int(scale * n_draws), num_chains=2, chain_method=method,
                    progress_bar=False)
        mcmc.run(jax.random.PRNGKey(seed), data.X, data.Y, **kw_of.get(name, kw))
        s = mcmc.get_samples(group_by_chain=True)
        if name.startswith("NUTS on w"):
            s = observables.evaluate(obs, s, batch_dims=2)
        if name == "NUTS":
            # the same draws, observed plainly and Rao-Blackwellized
            bias = _ula_relative_bias(data, kw, [{k: s[k][c, i] for k in ("w", "v")} for c in range(2)
                                                 for i in range(0, s["w"].shape[1], s["w"].shape[1] // 5)])
            s, s_rb = observables.evaluate(obs, s, batch_dims=2), observables.evaluate(rb, s, batch_dims=2)
            results["NUTS, Rao-Blackwellized"] = _summaries(s_rb)
        results[name] = _summaries(s)
    z = {}
    for other in [k for k in results if k != "NUTS"]:
        for key, (m_ref, se_ref) in results["NUTS"].items():
            m, se = results[other][key]
            allow = 0.0
            if other == "ULA":
                size = np.sqrt(results["NUTS"]["overlap00"][0] * results["NUTS"]["overlap11"][0]) \
                    if key == "overlap01" else abs(m_ref)
                allow = bias * size
            z[other, key] = np.sign(m - m_ref) * max(abs(m - m_ref) - allow, 0.0) / np.hypot(se, se_ref)
    return results, z, bias


@pytest.mark.slow
def test_every_sampler_agrees_with_nuts_on_a_small_network():
    """ULA, MALA (fixed and adapted step, and with exact Gibbs steps on v), MALA and kinetic Langevin on w with v
    integrated out (also with Neal's non-reversible acceptance, and in replica exchange over 4 likelihood
    temperatures), kinetic Langevin (alone, with exact Gibbs steps on v, and on w alone with a row mass), NUTS on w
    with exact Gibbs steps on v, and Rao-Blackwellized observables of NUTS draws all agree with NUTS on eps_g and the
    three entries of v v^T / N1: 13 x 4 comparisons, each within the bound that the family exceeds with probability
    1e-4 on correct code (stat_bounds, |z| < 4.76; it was 4 by hand). ULA is
    not exact: its bias at this step is allowed for by theory (_ula_relative_bias: about 3% here, the most any
    mean may move), the rest of its difference from NUTS must be within the errors. The NUTS-RB entries use the NUTS
    draws themselves (correlated with the reference: their z is conservative). N1 < P here, so the Gibbs draws and
    the marginal take the N1 x N1 (Woodbury) form.

    Half the draws of _every_sampler_against_nuts's list (``scale=0.5``, issue 44: 150 s -> 75 s in the suite),
    checked at that size: the planted bug, MALA sampling at T x 1.2 (kw_of={"MALA": dict(N1=20, T=0.12)}, key 11), fails on eps_g with |z| 8.5
    against 4.74 (9.6 at full size). On correct code keys 11, 1, 2 and 3 pass, largest |z| 2.5, 2.8, 2.1 and 1.8
    (bound 4.76; replica exchange's largest 0.75, 1.96, 2.12, and below 1.9 at key 3), the largest relative error of eps_g 1.1% and of overlap00 0.021 (the bounds below: 2% and 0.03),
    Rao-Blackwellization never worse."""
    results, z, _ = _every_sampler_against_nuts(11, scale=0.5)
    for name, res in results.items():  # errors small enough for the comparison to mean something
        assert res["eps_g"][1] < 0.02 * res["eps_g"][0] and res["overlap00"][1] < 0.03, (name, res)
    # Rao-Blackwellization removes the readout's noise: never a larger error on the same draws
    for key in results["NUTS"]:
        assert results["NUTS, Rao-Blackwellized"][key][1] < 1.1 * results["NUTS"][key][1], key
    names = list(z)
    detail = {f"{a} / {b}": f"{results[a][b][0]:.4f} +- {results[a][b][1]:.4f} (z {z[a, b]:.1f})" for a, b in names}
    assert_z_within([z[k] for k in names], what=f"samplers against NUTS ({results['NUTS']}): {detail}")


def test_thinning_and_progress_bar(capsys):
    data = _small()
    runs = {}
    for thinning, bar in ((1, False), (3, True)):
        kernel = infer.Langevin(models.one_hidden_layer, step_size=3e-3, adjust=True, inner_steps=2)
        mcmc = MCMC(kernel, num_warmup=5, num_samples=12, thinning=thinning, progress_bar=bar)
        mcmc.run(jax.random.PRNGKey(4), data.X, data.Y, N1=4, T=0.1)
        runs[thinning] = np.asarray(mcmc.get_samples()["v"])
    assert runs[3].shape[0] == 4
    np.testing.assert_allclose(runs[3], runs[1][2::3], rtol=1e-5, atol=1e-6)


def test_init_params_are_respected_with_a_model():
    data = _small()
    init = {"w": jnp.full((4, 10), 0.3), "v": jnp.full((2, 4), -0.2)}
    kernel = infer.Langevin(models.one_hidden_layer, step_size=1e-9, inner_steps=1)
    mcmc = MCMC(kernel, num_warmup=0, num_samples=1, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(0), data.X, data.Y, N1=4, T=0.1, init_params=init)
    np.testing.assert_allclose(mcmc.get_samples()["w"][0], 0.3, atol=1e-3)
    np.testing.assert_allclose(mcmc.get_samples()["v"][0], -0.2, atol=1e-3)


def _eager_init(key, model, *args, **kw):
    from numpyro.infer.initialization import init_to_sample
    from numpyro.infer.util import initialize_model

    info, pot, post, _ = initialize_model(key, model, dynamic_args=True, init_strategy=init_to_sample,
                                         model_args=args, model_kwargs=kw)
    return info, pot, post


def _half_normal_model(X, Y, N1):
    scale = numpyro.sample("scale", numpyro.distributions.HalfNormal(1.0))
    w = numpyro.sample("w", numpyro.distributions.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
    numpyro.sample("y", numpyro.distributions.Normal(X @ w, scale).to_event(1), obs=Y[:, 0])


@pytest.mark.parametrize("model", [models.one_hidden_layer, functools.partial(models.one_hidden_layer,
                                                                              integrate_v=True), _half_normal_model])
def test_the_compiled_initialization_is_numpyros(model):
    """``initialize`` compiles NumPyro's first draw alone where the model allows it (unconstrained sites, a strategy
    that draws from the model), and takes NumPyro's eager path otherwise (a HalfNormal site): either way it gives what
    NumPyro gives, the same initial draw, and a potential whose energy, gradient and constrained values there are
    NumPyro's, for one key and for a batch of keys."""
    from numpyro.infer.initialization import init_to_sample

    data = _small()
    args, kw = (np.asarray(data.X, np.float64), np.asarray(data.Y, np.float64)), {"N1": 5}
    trace = numpyro.handlers.trace(numpyro.handlers.seed(model, 0)).get_trace(*args, **kw)
    assert infer.binding.is_plain(trace) == (model is not _half_normal_model)  # which path is taken
    with jax.enable_x64(True):  # float64: compiled and eager rounding agree to 1e-10, not only to float32's 1e-4
        for key in (jax.random.PRNGKey(3), jax.random.split(jax.random.PRNGKey(4), 2)):
            info, pot, post = infer.binding.initialize(key, model, init_to_sample, args, kw)
            ref, ref_pot, ref_post = _eager_init(key, model, *args, **kw)
            jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12), info.z, ref.z)
            if model is not _half_normal_model:  # only the draw is compiled: no potential energy or gradient
                assert info.potential_energy is None and info.z_grad is None
            else:
                jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12), info, ref)
            one = jax.tree_util.tree_map(lambda x: x if key.ndim == 1 else x[0], info.z)
            np.testing.assert_allclose(pot(*args, **kw)(one), ref_pot(*args, **kw)(one), rtol=1e-12)
            ref_grad = jax.tree_util.tree_map(lambda g: g if key.ndim == 1 else g[0], ref.z_grad)
            jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12),
                                   jax.grad(pot(*args, **kw))(one), ref_grad)
            jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-12),
                                   post(*args, **kw)(one), ref_post(*args, **kw)(one))


def test_the_compiled_initialization_still_refuses_nan_data():
    data = _small()
    X = np.asarray(data.X, np.float32).copy()
    X[1, 2] = np.nan
    kernel = infer.Langevin(models.one_hidden_layer, step_size=1e-4)
    with pytest.raises(ValueError, match="X contains 1 NaN or inf"):
        MCMC(kernel, num_warmup=0, num_samples=1, progress_bar=False).run(jax.random.PRNGKey(0), X, data.Y, N1=4)


# ---- the adapters rebuild the potential from the arguments of every run -----------------------------------------
@pytest.mark.parametrize("cls", ["Langevin", "KineticLangevin"])
def test_a_continued_run_samples_the_new_data(cls):
    """post_warmup_state, then run on data B whose labels are those of A with the opposite sign: the continued chain
    must fit B (its training loss on B far below its loss on A). A kernel that kept the potential of its first run
    keeps fitting A."""
    a = rp.datasets.synthetic(P=40, P_test=10, N0=5, D=2, teacher="linear", seed=0)
    Xb, Yb = a.X, -a.Y
    kw = dict(N1=20, T=0.01, activation="linear")
    common = dict(step_size=1e-3, inner_steps=20)
    kernel = (infer.Langevin(models.one_hidden_layer, adjust=True, adapt_step_size=True, **common) if cls == "Langevin"
              else infer.KineticLangevin(models.one_hidden_layer, **common))
    mcmc = MCMC(kernel, num_warmup=100, num_samples=50, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(0), a.X, a.Y, **kw)

    def losses(samples):
        f = jax.vmap(lambda w, v: network.forward({"w": w, "v": v}, a.X, "linear"))(samples["w"], samples["v"])
        return float(np.mean(np.sum((np.asarray(f) - a.Y) ** 2, -1))), float(np.mean(np.sum((np.asarray(f) - Yb) ** 2, -1)))

    on_a = losses(mcmc.get_samples())
    assert on_a[0] < 0.1 * on_a[1], on_a  # the first run fits A
    mcmc.post_warmup_state = mcmc.last_state
    mcmc.num_samples = 200
    mcmc.run(mcmc.last_state.rng_key, Xb, Yb, **kw)
    loss_a, loss_b = losses({k: v[-50:] for k, v in mcmc.get_samples().items()})
    assert loss_b < 0.1 * loss_a, (loss_a, loss_b)


def test_from_numpyro_names_dims_when_arviz_is_imported_first():
    """``import arviz`` before ``import renormpp`` (arviz loads numpyro lazily, which leaves numpyro.infer without its
    ``initialization`` attribute): ``az.from_numpyro`` itself works on a Langevin run, with named dims. In a
    subprocess, so that the import order is real."""
    import subprocess
    import sys

    code = """
import arviz as az
from numpyro.infer import MCMC
import jax
import renormpp as rp
d = rp.datasets.synthetic(P=10, P_test=5, N0=3, D=2)
m = MCMC(rp.infer.Langevin(rp.models.one_hidden_layer, step_size=1e-4), num_warmup=0, num_samples=5,
         progress_bar=False)
m.run(jax.random.PRNGKey(0), d.X, d.Y, N1=4)
print(az.from_numpyro(m)["posterior"]["w"].dims)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "('chain', 'draw', 'hidden', 'input')" in out.stdout, out.stdout


@pytest.mark.parametrize("chain_method", ["vectorized", "sequential"])
def test_blocks_of_any_size_share_one_compilation_and_give_the_same_draws(chain_method):
    """Chains.run(state, n, length): blocks of 3 + 7 + 2 draws in one compilation of length 7 give the draws of one
    block of 12, and the block is compiled once for all of them."""
    def make():
        kernel = infer.KineticLangevin(potential_fn=gaussian_potential, step_size=0.3)
        chains = infer.Chains(kernel, num_chains=2, chain_method=chain_method, extra_fields=("accept_prob",))
        return chains, chains.init(jax.random.PRNGKey(1), 0, init_params=jnp.zeros((2, 3)))

    chains, state = make()
    straight, stats = chains.run(state, 12)[1:]
    chains, state = make()
    parts = []
    for n in (3, 7, 2):
        state, draws, st = chains.run(state, n, 7)
        assert draws.shape == (2, n, 3) and st["accept_prob"].shape == (2, n)
        parts.append(draws)
    np.testing.assert_array_equal(np.concatenate(parts, axis=1), straight)
    assert chains._block._cache_size() == 1
    with pytest.raises(ValueError, match="num_draws <= length"):
        chains.run(state, 8, 7)


def test_row_mass_and_frozen_v_through_the_numpyro_adapter():
    """KineticLangevin(row_mass="w", freeze_gibbs_sites=True): the adapted mass is dense (N0 x N0) on the rows of w and
    zero on v; bad arguments are named."""
    d = rp.datasets.synthetic(P=30, P_test=5, N0=4, D=2, teacher="linear", seed=1)
    kernel = infer.KineticLangevin(models.one_hidden_layer, step_size=1e-3, inner_steps=5, row_mass="w",
                                   freeze_gibbs_sites=True, gibbs_fn=readout.gibbs_fn(d.X, d.Y, T=0.01, lambda1=1.0))
    mcmc = MCMC(kernel, num_warmup=40, num_samples=10, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(0), d.X, d.Y, N1=6, T=0.01)
    m = mcmc.last_state.inverse_mass
    assert isinstance(m, rp.mcmc.metrics.RowMass) and m.block.shape == (4, 4) and m.rows.rows == 6
    assert not np.allclose(np.asarray(m.block), np.eye(4))  # learned in the warmup
    np.testing.assert_array_equal(np.asarray(m.diag)[:2 * 6], 0.0)  # v (2 x 6) comes first in the flat layout
    assert "dense on the rows of w" in kernel.describe(mcmc.last_state)
    with pytest.raises(ValueError, match="pass gibbs_fn too"):
        infer.KineticLangevin(models.one_hidden_layer, step_size=1e-3, freeze_gibbs_sites=True)
    with pytest.raises(ValueError, match="needs adapt_mass=True"):
        infer.KineticLangevin(models.one_hidden_layer, step_size=1e-3, row_mass="w", adapt_mass=False)
    with pytest.raises(ValueError, match="not a site of the model"):
        MCMC(infer.KineticLangevin(models.one_hidden_layer, step_size=1e-3, row_mass="u"), num_warmup=5,
             num_samples=5, progress_bar=False).run(jax.random.PRNGKey(0), d.X, d.Y, N1=6)


# ---- the adaptive warmup (renormpp.infer.warmup) ----------------------------------------------------------------------
def _sampler(adapt_mass=True):
    """A sampler whose schedule the adaptive warmup reads and moves (its state is made by hand below)."""
    return infer.KineticLangevin(potential_fn=lambda z: 0.5 * jnp.sum(z["x"] ** 2), step_size=0.1, adapt_mass=adapt_mass)


def _warmup_run(observe, steps, *, adapt_mass=True, draws=200, block=10, history=None, **options):
    """Feed an AdaptiveWarmup blocks of given observables (chain, draw) and log-steps (chain, draw) as a chains' run
    would; the kernel's own schedule for 200 draws. Returns the controller and the (start, stop, end) after each
    block."""
    from collections import namedtuple

    from renormpp import mcmc

    init, _ = mcmc.adaptation.window_adaptation(200, 0.8, adapt_step_size=True, adapt_mass=adapt_mass)
    state = namedtuple("State", "i adaptation")(jnp.zeros(2, jnp.int32), jax.vmap(lambda _: init(0.1, 3))(jnp.arange(2)))
    warm = infer.AdaptiveWarmup(_sampler(adapt_mass), 200, history=history, **options)
    schedules = []
    for b in range(0, draws, block):
        part = slice(b, b + block)
        block_draws = {"eps_g": observe[0][:, part], "overlap": observe[1][:, part]}
        state = state._replace(i=state.i + block)
        state = warm.update(state, block_draws, {"step_size": np.exp(steps[:, part])})
        schedules.append(warm.schedule(state))
        if not warm.running(state):
            break
    return warm, schedules


def _observables(rng, n=200, drift=0.0, apart=0.0):
    eps = 0.1 + 0.01 * rng.standard_normal((2, n)) + drift * np.linspace(0.0, 1.0, n) + apart * np.array([[0.0], [1.0]])
    overlap = 1.0 + 0.05 * rng.standard_normal((2, n, 2, 2))
    return eps, (overlap + overlap.swapaxes(-1, -2)) / 2


def test_the_adaptive_warmup_ends_each_phase_when_it_is_done():
    rng = np.random.default_rng(0)
    obs = _observables(rng)
    kept = np.zeros((2, 200))  # the steps sit at the dual-averaged one (exp(0) = 1 at the start of the averaging)
    warm, schedules = _warmup_run(obs, kept)
    # stationary from the start: the mass window opens at a check from draw 20 on (the short-run test may wait a block
    # or two) for max(50, n) draws; the step, settled, ends the warmup at the first check 20 draws after the mass is
    # set, with one more draw that fixes it
    start = schedules[-1][0]
    assert 20 <= start <= 40 and schedules[start // 10 - 1] == (start, start + 50, 200)
    assert all(s == (50, 150, 200) for s in schedules[:start // 10 - 1])
    check = -(-(start + 50 + 20) // 10) * 10
    assert schedules[-1] == (start, start + 50, check + 1) and schedules[check // 10 - 2][2] == 200
    assert "relaxed" in warm.log[0] and f"ends at draw {check + 1}" in warm.log[-1]
    # without a mass to learn, the window is empty and the step decides alone
    lone = _warmup_run(obs, kept, adapt_mass=False)[1]
    assert lone[-1][0] == lone[-1][1] <= 40
    # a step still moving (here 2x the averaged one) keeps the warmup to its full length
    assert _warmup_run(obs, np.full((2, 200), np.log(2.0)))[1][-1] == (start, start + 50, 200)
    # chains that adapt together gather 50 positions in 25 draws of 2 chains
    pooled = _warmup_run(obs, kept, pooled_chains=2)[1]
    assert pooled[-1][:2] == (start, start + 25) and start + 25 + 20 <= pooled[-1][2] - 1 <= check  # (a false alarm
    # of the short relaxation test may cost a block)
    # relaxed at the draw where the fixed window would open (50): the window still shrinks to max(50, n) draws
    assert _warmup_run(obs, kept, min_relax=50)[1][4] == (50, 100, 200)
    # relaxed only after the fixed window has opened (here first checked at 60): the window restarts at 60 with the
    # positions of [50, 60) dropped, for max(50, 60) positions (30 draws of 2 pooled chains)
    warm, late = _warmup_run(obs, kept, min_relax=60)
    assert late[4] == (50, 150, 200) and late[5] == (60, 120, 200) and "restarts: [60, 120)" in warm.log[0]
    assert _warmup_run(obs, kept, min_relax=60, pooled_chains=2)[1][5] == (60, 90, 200)
    # ... unless the restarted window would end no earlier than the fixed one: then the fixed window stands
    warm, kept_window = _warmup_run(obs, kept, min_relax=80)
    assert kept_window[7][:2] == (50, 150) and not any("relaxed" in line for line in warm.log)
    with pytest.raises(ValueError, match="pooled_chains"):
        _warmup_run(obs, kept, pooled_chains=0)


def test_the_adaptive_warmup_waits_for_drifting_or_disagreeing_chains():
    rng = np.random.default_rng(1)
    kept = np.zeros((2, 200))
    # a mean still falling (by ten error bars of a block in every block), and chains held 10 standard deviations
    # apart: the relaxation phase never ends early, and though the step has settled (kept at its average) the warmup
    # is not shortened either (MNIST at the paper's size): the kernel's own schedule (50, 150, 200) stands
    for obs in (_observables(rng, drift=-2.0), _observables(rng, apart=0.1)):
        warm, schedules = _warmup_run(obs, kept)
        assert set(schedules) == {(50, 150, 200)} and not warm.log


def test_the_adaptive_warmup_learns_the_mass_again_when_the_chains_were_found_relaxed_too_early():
    """A fast transient (10 error bars, gone in ~10 draws) over a slow fall of 8 standard deviations per 100 draws
    (MNIST at the paper's size, where eps_g falls until draw ~200): on the draws [10, 20) the fall is not resolved, so
    the chains are found relaxed at draw 20 and the mass is learned on [20, 45). After it, the test fails at two
    checks running (draws 70 and 80), so the window restarts at 80 and runs to the fixed schedule's 150; the chains
    still drift, so the warmup takes its 200 draws. Chains that do relax (the other warmup tests) never restart, nor
    does a warmup without a mass to learn."""
    rng = np.random.default_rng(3)
    t = np.arange(200)
    eps = 0.1 + 0.01 * rng.standard_normal((2, 200)) + 0.1 * np.exp(-t / 3.0) - 0.08 * t / 100
    overlap = 1.0 + 0.05 * rng.standard_normal((2, 200, 1, 1))
    warm, schedules = _warmup_run((eps, overlap), np.zeros((2, 200)), pooled_chains=2)  # as the default sampler
    assert schedules[1] == (20, 45, 200) and schedules[6] == (20, 45, 200), schedules
    assert schedules[7] == (80, 150, 200) and schedules[-1] == (80, 150, 200) and len(schedules) == 20, schedules
    assert "relaxed too early" in warm.log[-1] and "[80, 150)" in warm.log[-1], warm.log
    lone = _warmup_run((eps, overlap), np.zeros((2, 200)), adapt_mass=False, pooled_chains=2)[0]
    assert not any("too early" in line for line in lone.log), lone.log


def test_a_resumed_adaptive_warmup_decides_as_an_uninterrupted_one():
    rng = np.random.default_rng(2)
    eps = 0.1 + 0.01 * rng.standard_normal((2, 200)) - 0.3 * np.exp(-np.arange(200) / 8.0)  # relaxes in ~30 draws
    overlap = np.ones((2, 200, 1, 1)) + 0.05 * rng.standard_normal((2, 200, 1, 1))
    straight = _warmup_run((eps, overlap), np.zeros((2, 200)))[1]
    assert straight[0][0] > 10  # not at once: the relaxation was seen
    # fed the first 40 draws as history, a new controller starting at draw 40 takes the same decisions
    history = ({"eps_g": eps[:, :40], "overlap": overlap[:, :40]}, {"step_size": np.ones((2, 40))})
    from collections import namedtuple

    from renormpp import mcmc

    init, _ = mcmc.adaptation.window_adaptation(200, 0.8, adapt_step_size=True, adapt_mass=True)
    ws = jax.vmap(lambda _: init(0.1, 3))(jnp.arange(2))
    state = namedtuple("State", "i adaptation")(jnp.full(2, 40, jnp.int32), ws)
    sampler = _sampler()
    state = sampler.reschedule(state, *straight[3])  # the schedule as the checkpoint at draw 40 holds it
    resumed = infer.AdaptiveWarmup(sampler, 200, history=history)
    for b in range(40, 200, 10):
        state = state._replace(i=state.i + 10)
        state = resumed.update(state, {"eps_g": eps[:, b:b + 10], "overlap": overlap[:, b:b + 10]},
                               {"step_size": np.ones((2, 10))})
        assert sampler.schedule(state) == straight[b // 10]
        if not resumed.running(state):
            break
    assert sampler.schedule(state) == straight[-1]
