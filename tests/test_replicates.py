"""Replicates of a sampled theory (``rp.theory.solve(..., replicates=R)``, Eqs. (R1)-(R2)): R solves with consecutive
seeds, their predictions averaged, ε_g less the variance of the averaged mean and the error measured from their spread, checked against the same solves made one
by one; and, on the hyperplane problem, two disjoint sets of seeds agree within that error."""
import warnings

import numpy as np
import pytest
from scipy.stats import t as student

import renormpp as rp
from renormpp.experiments import config as config_mod
from renormpp.theory.replicates import Replicates
from stat_bounds import FALSE_ALARM

N1, T = 30, 0.1
SMALL = dict(neurons=500, proposal="fitted")


@pytest.fixture(scope="module")
def data():
    return rp.datasets.synthetic(P=30, P_test=20, N0=10, D=2, seed=0)


def test_replicates_are_the_seeds_solved_one_by_one(data):
    X0, Y0 = data.X_test, data.Y_test
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = rp.theory.solve(data.X, data.Y, N1, T=T, method="shared_field", replicates=3, seed=5, **SMALL)
        single = [rp.theory.shared_field.solve(data.X, data.Y, N1=N1, T=T, seed=s, **SMALL) for s in (5, 6, 7)]
    assert isinstance(rep, Replicates) and rep.seeds == (5, 6, 7)
    assert [a for a in rp.theory.PROTOCOL if not hasattr(rep, a)] == []
    assert (rep.method, rep.N1, rep.T, rep.D, rep.P, rep.converged, rep.reason) == ("shared_field", N1, T, 2, 30,
                                                                                   True, "")
    preds = [f.predict(X0) for f in single]
    pred = rep.predict(X0)
    np.testing.assert_allclose(pred.mean, np.mean([p.mean for p in preds], axis=0), rtol=1e-12)
    np.testing.assert_allclose(pred.cov, np.mean([p.cov for p in preds], axis=0), rtol=1e-12)
    eps = np.array([f.generalization_error(X0, Y0) for f in single])
    assert len(set(np.round(eps, 10))) == 3  # three seeds, three answers
    np.testing.assert_allclose(rep.eps_g_per_replicate(X0, Y0), eps, rtol=1e-12)
    # (R2): the averaged prediction's ε_g less the variance of its mean; the same as the replicates' mean ε_g less
    # the means' spread s^2 (two computations)
    Y0 = np.asarray(Y0)
    s2 = np.mean([np.sum((p.mean - pred.mean) ** 2, axis=1) for p in preds], axis=0) * 3 / 2
    eps_avg = np.mean(np.sum((Y0 - pred.mean) ** 2, axis=1) + np.einsum("pdd->p", pred.cov))
    np.testing.assert_allclose(rep.generalization_error(X0, Y0), eps_avg - s2.mean() / 3, rtol=1e-12)
    np.testing.assert_allclose(rep.generalization_error(X0, Y0), eps.mean() - s2.mean(), rtol=1e-12)
    err = rep.monte_carlo_error(X0, Y0)
    np.testing.assert_allclose(err["eps_g"], np.std(eps, ddof=1) / np.sqrt(3), rtol=1e-12)
    ov = np.array([f.readout_overlap for f in single])
    np.testing.assert_allclose(rep.readout_overlap, ov.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(err["overlap"], ov.std(axis=0, ddof=1) / np.sqrt(3), rtol=1e-12)
    assert rep.variant == "R=3" and "seeds=[5, 6, 7]" in repr(rep)
    # what `renormpp run` keeps of it (theory.json), the replicates' numbers
    from renormpp.theory.recorded import RecordedFit

    kept = RecordedFit.of(rep, X0, Y0)
    assert (kept.method, kept.variant, kept.draws) == ("shared_field", "R=3", rep.draws)
    np.testing.assert_allclose([kept.eps_g, kept.eps_g_error], [rep.generalization_error(X0, Y0), err["eps_g"]],
                               rtol=1e-12)


@pytest.mark.parametrize("method, value, match", [
    ("shared_field", 0, "replicates must be a positive integer"),
    ("shared_field", 2.5, "replicates must be a positive integer"),
    ("exact", 3, "samples nothing"),
])
def test_bad_replicates_are_named(data, method, value, match):
    with pytest.raises(ValueError, match=match):
        rp.theory.solve(data.X, data.Y, N1, T=T, method=method, replicates=value)


def test_a_run_config_takes_replicates_for_a_sampled_theory():
    raw = {"data": {"name": "synthetic", "P": 20, "N0": 5}, "model": {"N1": 4}, "run": {"out": "x"},
           "theory": {"methods": ["exact", "shared_field"], "options": {"shared_field": {"replicates": 4}}}}
    cfg = config_mod.resolve(raw)
    assert cfg.theory.options_of("shared_field") == {"replicates": 4}
    with pytest.raises(config_mod.ConfigError, match="replicates"):
        config_mod.resolve({**raw, "theory": {"methods": ["exact"], "options": {"exact": {"replicates": 4}}}})


@pytest.mark.slow
def test_two_sets_of_seeds_agree_within_the_replicates_error():
    """Specialists in the field of an adaptive bulk, k = 0 (the shared field, whose fixed point is itself noisy), on
    the hyperplane problem (N1 = 6, T = 0.05) at a small size: seeds 0-3 and 10-13 agree within the error each set
    measures from its spread (Welch's t, at stat_bounds.FALSE_ALARM). A single fit's own error counts only the draws
    it averages over, 0 at k = 0 (none sampled): it would fail here."""
    from hyperplane import hyperplane_problem

    X, Y, X0, Y0, _ = hyperplane_problem()
    small = dict(k=0, neurons=1000, iterations=4, inner=10, populations=8, rtol=0.1)
    sets = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in (0, 10):
            rep = rp.theory.solve(X, Y, 6, T=0.05, method="field_specialists", replicates=4, seed=seed, **small)
            sets.append((rep.generalization_error(X0, Y0), rep.monte_carlo_error(X0, Y0)["eps_g"],
                         rep.eps_g_per_replicate(X0, Y0)))
    (a, ea, ra), (b, eb, rb) = sets
    print(f"\nseeds 0-3: {a:.4f} +- {ea:.4f} {np.round(ra, 4)}; seeds 10-13: {b:.4f} +- {eb:.4f} {np.round(rb, 4)}")
    assert ea > 0 and eb > 0
    df = (ea**2 + eb**2) ** 2 / (ea**4 / 3 + eb**4 / 3)
    assert abs(a - b) / np.hypot(ea, eb) < student.isf(FALSE_ALARM / 2, df), (a, ea, b, eb)

