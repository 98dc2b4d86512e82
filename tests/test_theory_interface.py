"""One theory interface: every record of ``rp.theory.THEORIES`` is solved through ``rp.theory.solve`` and
``spec.theory``, keeps the fit protocol, and is compared with sampled draws through ``spec.compare``, whose
predictions, errors and z are recomputed here from the fits and the draws."""
import warnings

import numpy as np
import pytest

import renormpp as rp
from renormpp.mcstats import error_of_mean

N1, T = 30, 0.1
#: small options for the theories that iterate or sample, so that every record solves in seconds here
OPTIONS = {"shared_field": dict(neurons=2000, proposal="fitted"),
           "specialists": dict(k=1, iterations=3, num_warmup=150, num_samples=100, chains=2),
           "field_specialists": dict(k=1, neurons=500, iterations=2, inner=6, num_warmup=150, num_samples=100,
                                     chains=2, rtol=0.2),
           "measured_kernel": dict(kernel=lambda A, B: rp.kernels.nngp(A, B))}


@pytest.fixture(scope="module")
def spec():
    data = rp.datasets.synthetic(P=30, P_test=20, N0=10, D=2, seed=0)
    return rp.Spec(data, N1=N1, T=T)


@pytest.fixture(scope="module")
def fits(spec):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: spec.theory(name, **OPTIONS.get(name, {})) for name in rp.theory.THEORIES}


@pytest.fixture(scope="module")
def draws():
    """A stand-in run: draws of eps_g and the overlaps around plausible values, 2 chains of 400."""
    rng = np.random.default_rng(3)
    eps = 0.25 + 0.01 * rng.standard_normal((2, 400))
    ov = np.eye(2) * 1.1 + 0.02 * rng.standard_normal((2, 400, 2, 2))
    return {"eps_g": eps, "overlap": 0.5 * (ov + np.swapaxes(ov, -1, -2))}


def test_every_theory_is_reached_by_solve_and_keeps_the_protocol(spec, fits):
    X0, Y0 = spec._test_set()
    assert set(fits) == set(rp.theory.THEORIES) >= {"exact", "one_loop", "infinite_width", "corrected", "adaptive_kernel",
                                                     "shared_field", "specialists"}
    for name, fit in fits.items():
        missing = [a for a in rp.theory.PROTOCOL if not hasattr(fit, a)]
        assert not missing, f"{name}: {missing}"
        assert fit.method == name
        assert (fit.N1, fit.T, fit.lambda0, fit.lambda1, fit.depth, fit.D, fit.P) == (N1, T, 1.0, 1.0, 1, 2, 30)
        assert isinstance(fit.converged, bool) and fit.converged, (name, fit.reason)
        assert fit.reason == ""
        pred = fit.predict(X0)
        assert pred.mean.shape == (20, 2) and pred.cov.shape == (20, 2, 2)
        np.testing.assert_allclose(pred.cov, np.swapaxes(pred.cov, 1, 2), atol=1e-12)
        assert np.linalg.eigvalsh(pred.cov).min() > -1e-10
        eps = np.mean(np.sum((Y0 - pred.mean) ** 2, axis=1) + np.einsum("pdd->p", pred.cov))
        np.testing.assert_allclose(fit.generalization_error(X0, Y0), eps, rtol=1e-10)
        ov = fit.readout_overlap
        assert ov.shape == (2, 2) and np.allclose(ov, ov.T)
        err = fit.monte_carlo_error(X0, Y0)
        sampled = name in ("specialists", "field_specialists")
        assert (fit.draws > 0) == sampled
        assert (err["eps_g"] > 0) == sampled and err["overlap"].shape == (2, 2)


def test_the_specialists_mixture_is_the_average_over_their_draws(spec, fits):
    """The mixture's moments (mean of the covariances plus covariance of the means) give the ε_g averaged draw by
    draw: the law of total variance, two computations."""
    fit = fits["specialists"]
    X0, Y0 = spec._test_set()
    np.testing.assert_allclose(fit.generalization_error(X0, Y0), fit.eps_g_per_draw(X0, Y0).mean(), rtol=1e-10)


def test_spec_compare_takes_fits_of_any_theory(spec, fits, draws):
    X0, Y0 = spec._test_set()
    shown = [fits[name] for name in rp.theory.THEORIES]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = spec.compare(draws, *shown, cut=0)
    names = ["exact", "one_loop", "infinite_width", "corrected", "adaptive_kernel", "shared_field", "specialists[k=1]",
             "field_specialists[k=1]", "measured_kernel"]
    assert list(dict.fromkeys(table.columns.get_level_values(0))) == ["sampled", *names]
    mc = error_of_mean(draws["eps_g"], cut=0)
    for name, fit in zip(names, shown):
        col = table[name]
        th = fit.generalization_error(X0, Y0)
        own = fit.monte_carlo_error(X0, Y0)["eps_g"]
        assert col.loc["eps_g", "theory"] == pytest.approx(th, rel=1e-10)
        assert col.loc["eps_g", "z"] == pytest.approx((mc.mean - th) / np.hypot(mc.error, own), rel=1e-8)
        assert col.loc["overlap[0,1]", "theory"] == pytest.approx(fit.readout_overlap[0, 1], rel=1e-10)
    assert "theory_mcse" in table["specialists[k=1]"] and "theory_mcse" not in table["exact"]


def test_a_theory_says_why_it_cannot_be_solved(spec):
    d = spec
    with pytest.raises(ValueError, match="unknown method 'nope'.*'specialists'"):
        rp.theory.solve(d.X, d.Y, N1, method="nope")
    with pytest.raises(ValueError, match="needs the option 'k'"):
        rp.theory.solve(d.X, d.Y, N1, method="specialists")
    with pytest.raises(ValueError, match="takes no option 'k'.*'gtol' and 'maxiter'"):
        rp.theory.solve(d.X, d.Y, N1, method="exact", k=2)
    with pytest.raises(ValueError, match="method='adaptive_kernel' needs an odd activation.*'relu'.*Use method=.*'exact'"):
        rp.theory.solve(d.X, d.Y, N1, activation="relu", method="adaptive_kernel")
    with pytest.raises(ValueError, match="method='shared_field' is derived for one hidden layer.*Use method="):
        rp.theory.solve(d.X, d.Y, N1, method="shared_field", depth=2)
    with pytest.raises(ValueError, match="method='adaptive_kernel' is derived for one hidden layer.*No theory of renormpp"):
        rp.theory.solve(d.X, d.Y, N1, method="adaptive_kernel", activation="relu", depth=2)


def test_an_unconverged_fit_is_shown_with_its_reason(spec, fits, draws):
    """A fit that did not converge has no prediction in the comparison, and the reason is its own."""
    import dataclasses

    bad = dataclasses.replace(fits["specialists"], history=[10.0])  # a last step far above rtol
    assert not bad.converged and "did not settle" in bad.reason
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = spec.compare(draws, fits["exact"], bad, cut=0).attrs["dataset"]
    assert np.isnan(ds.prediction.sel(theory="specialists[k=1]")).all()
    assert "did not settle" in str(ds.not_applicable.sel(theory="specialists[k=1]").item())


def test_a_recorded_fit_compares_as_its_fit_and_refuses_another_test_set(spec, fits, draws, tmp_path):
    """rp.theory.RecordedFit, how theory.json keeps a fit that took minutes: through JSON and back, spec.compare
    gives the same table with the record as with the fit; on any other test set it refuses to answer."""
    import json

    X0, Y0 = spec._test_set()
    for name in ("adaptive_kernel", "specialists"):
        fit = fits[name]
        (tmp_path / "r.json").write_text(json.dumps(rp.theory.RecordedFit.of(fit, X0, Y0, seconds=1.0).to_dict()))
        rec = rp.theory.RecordedFit.from_dict(json.loads((tmp_path / "r.json").read_text()))
        a, b = spec.compare(draws, fit), spec.compare(draws, rec)
        assert list(a.columns) == list(b.columns) and a.index.equals(b.index)
        np.testing.assert_allclose(b.select_dtypes("number").to_numpy(float), a.select_dtypes("number").to_numpy(float),
                                   rtol=1e-12, equal_nan=True)
        with pytest.raises(ValueError, match="recorded on another test set"):
            rec.generalization_error(X0[:-1], Y0[:-1])


def test_the_measured_kernel_theory_with_the_nngp_kernel_is_the_exact_theory(spec, fits):
    """The oracle record (method="measured_kernel") given the NNGP kernel itself as its measured kernel: Q, the
    predictions and eps_g are the exact theory's, which computes its test kernel on its own (TheoryFit.test_kernel)."""
    X0, Y0 = spec._test_set()
    oracle, exact = fits["measured_kernel"], fits["exact"]
    assert oracle.theory == "exact" and oracle.converged
    np.testing.assert_allclose(oracle.Q, exact.Q, rtol=1e-7)
    a, b = oracle.predict(X0), exact.predict(X0)
    np.testing.assert_allclose(a.mean, b.mean, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(a.cov, b.cov, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(oracle.generalization_error(X0, Y0), exact.generalization_error(X0, Y0), rtol=1e-7)
    with pytest.raises(ValueError, match="needs the option 'kernel'"):
        spec.theory("measured_kernel")
    with pytest.raises(ValueError, match="a measured kernel takes the methods exact, one_loop, infinite_width"):
        spec.theory("measured_kernel", kernel=OPTIONS["measured_kernel"]["kernel"], theory="corrected")


def test_the_sampled_kernel_is_the_draws_mean_feature_product():
    """rp.theory.measured.sampled_kernel against a loop over draws and neurons with scipy's erf."""
    from scipy.special import erf

    rng = np.random.default_rng(0)
    w, A, B = rng.normal(size=(3, 2, 5, 4)), rng.normal(size=(6, 4)), rng.normal(size=(3, 4))
    ref = np.zeros((6, 3))
    for draw in w.reshape(-1, 5, 4):
        for neuron in draw:
            ref += np.outer(erf(A @ neuron / 2.0), erf(B @ neuron / 2.0))
    ref /= 6 * 5
    np.testing.assert_allclose(rp.theory.measured.sampled_kernel(w, "erf")(A, B), ref, rtol=1e-12)
