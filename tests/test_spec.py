"""rp.Spec: one network declared once yields the model, the recommended kernel (plain numpyro MCMC, no step size),
the observables, the theory and an az.summary-like comparison; a fit or a run of another network is refused."""
import functools

import jax
import numpy as np
import pytest
from numpyro.infer import MCMC, NUTS

import renormpp as rp
from stat_bounds import assert_z_within


@pytest.fixture(scope="module")
def data():
    return rp.datasets.synthetic(P=30, P_test=60, N0=8, D=2, teacher="linear", seed=3)


@pytest.fixture(scope="module")
def spec(data):
    return rp.Spec(data, N1=6, T=0.1, lambda1=1.5)


@pytest.fixture(scope="module")
def run(spec):
    mcmc = MCMC(spec.kernel(), num_warmup=200, num_samples=1500, num_chains=2, chain_method="vectorized",
                progress_bar=False)
    mcmc.run(jax.random.PRNGKey(0))
    return mcmc


def test_the_theory_is_the_solve_with_the_specs_values(data, spec):
    fit = spec.theory()
    ref = rp.theory.solve(data.X, data.Y, N1=6, T=0.1, lambda0=1.0, lambda1=1.5, activation="erf")
    np.testing.assert_allclose(fit.Q, ref.Q, rtol=1e-10)
    assert spec.theory("one_loop").method == "one_loop"
    assert (spec.P, spec.D, spec.alpha) == (30, 2, 5.0)


def test_the_model_has_the_data_and_hyperparameters_bound(data, spec):
    """The bound model's potential is the paper's U = L/T + lambda0 |w|^2/2 + lambda1 |v|^2/2, computed here by hand."""
    from numpyro.infer.util import potential_energy

    rng = np.random.default_rng(0)
    w, v = rng.normal(size=(6, 8)), rng.normal(size=(2, 6))
    U = potential_energy(spec.model, (), {}, {"w": w, "v": v})
    f = v @ np.asarray(jax.scipy.special.erf(w @ data.X.T / np.sqrt(8))) / np.sqrt(6)
    loss = 0.5 * np.sum((data.Y.T - f) ** 2)
    expected = loss / 0.1 + 1.0 * np.sum(w ** 2) / 2 + 1.5 * np.sum(v ** 2) / 2
    const = potential_energy(spec.model, (), {}, {"w": 0 * w, "v": 0 * v}) - 0.5 * np.sum(data.Y ** 2) / 0.1
    np.testing.assert_allclose(float(U - const), expected, rtol=2e-4)


def test_the_recommended_kernel_runs_in_plain_mcmc_and_compares_as_a_table(spec, run):
    table = spec.compare(run)
    assert list(table.index) == ["eps_g", "overlap[0,0]", "overlap[0,1]", "overlap[1,1]"]
    assert list(table.columns) == ["mean", "mcse", "ess", "r_hat", "theory", "delta", "z"]
    assert table["r_hat"].max() < 1.1 and (table["ess"] > 50).all()
    fit = spec.theory()
    np.testing.assert_allclose(table.loc["overlap[1,1]", "theory"], fit.readout_overlap[1, 1])
    row = table.loc["eps_g"]
    assert np.sign(row["delta"]) == np.sign(row["mean"] - row["theory"]) == np.sign(row["z"])  # signed delta
    wide = spec.compare(run, fit, theories=["exact", "infinite_width"])
    assert set(wide.columns.get_level_values(0)) == {"sampled", "exact", "infinite_width"}
    np.testing.assert_allclose(wide["infinite_width", "theory"].iloc[1:], [1 / 1.5, 0, 1 / 1.5], atol=1e-12)


@pytest.mark.parametrize("change", [dict(T=0.2), dict(N1=7), dict(lambda1=1.0), dict(activation="tanh"),
                                    dict(lambda0=2.0)])
def test_a_fit_of_another_network_is_refused(data, spec, run, change):
    kw = dict(N1=6, T=0.1, lambda1=1.5) | change
    other = rp.Spec(data, **kw).theory()
    name = next(iter(change))
    with pytest.raises(ValueError, match=f"different networks.*{name}"):
        spec.compare(run, other)
    with pytest.raises(ValueError, match=f"different networks.*{name}"):  # and in the library's own compare
        rp.diagnostics.compare(run, other, data.X_test, data.Y_test)


def test_a_run_of_another_network_is_refused(data, spec, run):
    other = rp.Spec(data, N1=6, T=0.2, lambda1=1.5)
    with pytest.raises(ValueError, match="T: 0.2 in the spec, 0.1 in the run"):
        other.compare(run, other.theory())
    # a hand-made run whose mcmc.run keywords contradict the theory's
    mcmc = MCMC(NUTS(rp.models.one_hidden_layer), num_warmup=5, num_samples=5, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(1), data.X, data.Y, N1=6, T=0.05, lambda1=1.5)
    with pytest.raises(ValueError, match="T: 0.1 in the fit, 0.05 in the run"):
        rp.diagnostics.compare(mcmc, spec.theory(), data.X_test, data.Y_test)


def test_the_run_goes_to_arviz_with_named_dims(spec, run):
    import arviz as az

    dt = rp.diagnostics.to_datatree(run)
    assert dt.posterior["overlap"].dims == ("chain", "draw", "output", "output_")
    summary = az.summary(dt, var_names=["eps_g"])
    table = spec.compare(run)
    # ArviZ's own mean of the same draws; the table's is after the thermalization cut, within a few of its errors
    assert abs(summary.loc["eps_g", "mean"] - table.loc["eps_g", "mean"]) < 5 * table.loc["eps_g", "mcse"] + 1e-3


def test_a_drifting_run_warns_that_it_has_not_settled(spec, run):
    """Samples whose eps_g climbs through the run (an unsettled chain) are compared with a warning naming it."""
    samples = {k: np.asarray(v) for k, v in run.get_samples(group_by_chain=True).items()}
    n = samples["eps_g"].shape[1]
    samples["eps_g"] = samples["eps_g"] + np.linspace(0, 0.5, n) * samples["eps_g"].mean()
    with pytest.warns(rp.spec.NotSettledWarning, match="eps_g"):
        spec.compare(samples)


def test_a_fit_on_other_data_is_refused(spec):
    other = rp.datasets.synthetic(P=30, P_test=60, N0=8, D=2, teacher="linear", seed=4)
    with pytest.raises(ValueError, match="other training data"):
        spec.compare({}, rp.Spec(other, N1=6, T=0.1, lambda1=1.5).theory())


def test_run_settings_reads_partials_run_keywords_and_defaults():
    model = functools.partial(rp.models.mlp, N1=4, depth=2, lambdas=(1.0, 2.0, 3.0))

    class Run:
        sampler = NUTS(model)
        _kwargs = {"T": 0.3}

    s = rp.diagnostics.matching.run_settings(Run())
    assert s == dict(N1=4, T=0.3, lambda0=(1.0, 2.0), lambda1=3.0, depth=2, activation="erf")
    assert rp.diagnostics.matching.run_settings({"eps_g": np.zeros(3)}) == {}


@pytest.mark.parametrize("kw, message", [
    (dict(N1=0), "N1"), (dict(N1=5, T=-1.0), "T"), (dict(N1=5, lambda1=0.0), "lambda1"),
    (dict(N1=5, activation="softsign"), "softsign"), (dict(N1=5, architecture="rnn"), "architecture"),
    (dict(N1=5, depth=2, architecture="conv", image_shape=4, patch=2), "depth"),
])
def test_bad_input_is_named(data, kw, message):
    with pytest.raises(ValueError, match=message):
        rp.Spec(data, **kw)


def test_bad_data_is_named(data):
    X = np.array(data.X)
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        rp.Spec(X=X, Y=data.Y, N1=4)
    with pytest.raises(ValueError, match="same P"):
        rp.Spec(X=data.X, Y=data.Y[:-1], N1=4)
    with pytest.raises(ValueError, match="needs training data"):
        rp.Spec(N1=4)
    with pytest.raises(ValueError, match="test set"):
        rp.Spec(X=data.X, Y=data.Y, N1=4).observables


@pytest.mark.slow
def test_the_recommended_kernel_agrees_with_nuts_on_the_specs_model(spec, run):
    """The spec's kernel (kinetic Langevin on w, v integrated out, Rao-Blackwellized observables) and NUTS on the
    spec's full model with the spec's observables (an independent sampler of the same posterior) agree on eps_g and
    the three overlaps within the family's bound (stat_bounds, 4.42 for 4). A kernel on another posterior fails: the
    planted T x 1.5 (rp.Spec(data, N1=6, T=0.15, ...).kernel(), key 0, against this NUTS run) gives z = +30.7 on eps_g,
    -10.8 and -8.7 on the diagonal overlaps; the correct kernel at keys 1 and 2 gives largest |z| 0.93 and 0.58."""
    nuts = MCMC(rp.infer.Observed(NUTS(spec.model), spec.observables), num_warmup=300, num_samples=1500,
                num_chains=2, chain_method="vectorized", progress_bar=False)
    nuts.run(jax.random.PRNGKey(5))
    ours, ref = spec.compare(run), spec.compare(nuts)
    z = (ours["mean"] - ref["mean"]) / np.hypot(ours["mcse"], ref["mcse"])
    assert_z_within(z.values, what=f"spec kernel against NUTS:\n{ours}\n{ref}")
