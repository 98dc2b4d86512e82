"""Chains from several kinds of start (issue 34, item 2): the starting points (renormpp.infer.starts), the test of
agreement between the kinds (chain_spread with groups, converged, compare) and `renormpp run` with run.starts."""
import json
import warnings

import jax
import numpy as np
import pytest
import scipy.optimize

import renormpp as rp
from renormpp import mcstats as ms
from renormpp.experiments import config as config_mod
from renormpp.infer import starts
from renormpp.network import x64_context
from series import ar1


def _data(P=40, N0=10, D=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((P, N0)).astype(np.float32)
    return X, np.sign(X[:, :D]).astype(np.float32)


def test_assign_and_kinds_errors():
    assert starts.assign(["prior", "mode"], 4) == ["prior", "mode", "prior", "mode"]
    assert starts.assign("scaled", 2) == ["scaled", "scaled"]
    with pytest.raises(ValueError, match="need at least 3 chains"):
        starts.assign(["prior", "mode", "scaled"], 2)
    with pytest.raises(ValueError, match="unknown kind.*'prior', 'mode', 'scaled'"):
        starts.assign(["prior", "trained"], 2)
    with pytest.raises(ValueError, match="given twice"):
        starts.check_kinds(["mode", "mode"])


def test_prior_and_scaled_starts_are_prior_draws_and_their_rescaling():
    """A 'prior' start is a prior draw (w ~ N(0, 1/lambda0), v ~ N(0, 1/lambda1): the sample variance of 4000 weights
    within 10%); a 'scaled' start is the same chain's prior draw times the scale (the chains' keys do not depend on
    the kinds)."""
    X, Y = _data()
    kw = dict(N1=200, T=0.01, lambda0=4.0, lambda1=0.25)
    key = jax.random.PRNGKey(3)
    prior = starts.positions(key, rp.models.one_hidden_layer, ["prior", "prior"], (X, Y), kw)
    mixed = starts.positions(key, rp.models.one_hidden_layer, ["prior", "scaled"], (X, Y), kw, scale=0.3)
    assert prior["w"].shape == (2, 200, 10) and prior["v"].shape == (2, 2, 200)
    assert np.var(np.asarray(prior["w"][0])) == pytest.approx(1 / 4.0, rel=0.1)
    assert np.var(np.asarray(prior["v"][0])) == pytest.approx(1 / 0.25, rel=0.1)
    np.testing.assert_array_equal(mixed["w"][0], prior["w"][0])
    np.testing.assert_allclose(mixed["w"][1], 0.3 * prior["w"][1], rtol=1e-6)
    np.testing.assert_allclose(mixed["v"][1], 0.3 * prior["v"][1], rtol=1e-6)
    assert not np.allclose(prior["w"][0], prior["w"][1])


def test_mode_start_is_a_minimum_of_the_potential_and_the_trained_network():
    """A 'mode' start is a local minimum of the potential energy of (w, v) (float64, by hand): the gradient is near
    zero, the dense Hessian has no negative eigenvalue, scipy's L-BFGS (an independent optimizer) started there finds
    nothing lower (0.01%), and U is far below the prior draw it was trained from. With v integrated out the start is
    that trained network's w (w's marginal has its mode at w -> 0, where the chains freeze)."""
    from jax.flatten_util import ravel_pytree
    from numpyro.infer.initialization import init_to_sample

    from renormpp.infer.binding import initialize

    X, Y = _data(P=30, N0=6)
    kw = dict(N1=5, T=0.05)
    key = jax.random.PRNGKey(0)
    model = rp.models.one_hidden_layer
    got = starts.positions(key, model, ["prior", "mode"], (X, Y), kw, steps=300)
    drawn = starts.positions(key, model, ["prior", "prior"], (X, Y), kw)  # chain 1's network before training
    np.testing.assert_array_equal(got["w"][0], drawn["w"][0])
    integrated = starts.positions(key, model, ["prior", "mode"], (X, Y), {**kw, "integrate_v": True}, steps=300)
    assert set(integrated) == {"w"}
    np.testing.assert_allclose(integrated["w"][1], got["w"][1], rtol=1e-5, atol=1e-6)
    _, pg, _ = initialize(key, model, init_to_sample, (X, Y), kw)
    with x64_context():
        U = pg(X.astype(np.float64), Y.astype(np.float64), **kw)
        at = lambda p, c: ravel_pytree(jax.tree_util.tree_map(lambda a: np.asarray(a[c], np.float64), p))  # noqa: E731
        mode, unravel = at(got, 1)
        prior, _ = at(drawn, 1)
        flat = lambda x: U(unravel(x))  # noqa: E731
        f = jax.jit(jax.value_and_grad(flat))
        fun = lambda x: tuple(np.asarray(a, np.float64) for a in f(x))  # noqa: E731
        u_mode, g_mode = fun(np.asarray(mode))
        u_prior, g_prior = fun(np.asarray(prior))
        hessian = np.asarray(jax.hessian(flat)(mode))
        ref = scipy.optimize.minimize(fun, np.asarray(mode), jac=True, method="L-BFGS-B",
                                      options=dict(maxiter=20000, gtol=1e-9))
    assert np.linalg.norm(g_mode) < 1e-3 * np.linalg.norm(g_prior)
    assert np.linalg.eigvalsh(hessian)[0] > -1e-3 * np.abs(np.linalg.eigvalsh(hessian)).max()
    assert ref.fun > u_mode * (1 - 1e-4), (ref.fun, u_mode)
    assert u_prior > 3 * u_mode


def test_positions_refuse_bad_options():
    X, Y = _data()
    with pytest.raises(ValueError, match="scale of a 'scaled' start"):
        starts.positions(jax.random.PRNGKey(0), rp.models.one_hidden_layer, ["scaled"], (X, Y), dict(N1=4), scale=0)
    with pytest.raises(ValueError, match="steps >= 1"):
        starts.positions(jax.random.PRNGKey(0), rp.models.one_hidden_layer, ["mode"], (X, Y), dict(N1=4), steps=0)


def test_chain_spread_by_groups_finds_kinds_held_apart():
    """Four AR(1) chains (tau_int = 19), two per kind of start: where each kind's chains agree among themselves but one
    kind sits 6 combined error bars from the other, the test between the kinds flags it (the chains' own test, which
    sees four chains, is weaker); without the offset it passes, in 38 of 40 seeds at least (0.3% expected)."""
    phi, n, K = 0.9, 4000, 4
    labels = ["prior", "mode", "prior", "mode"]
    false = 0
    for seed in range(40):
        x = np.stack([ar1(phi, n, seed=10 * seed + c) for c in range(4)])
        false += ms.chain_spread(x, cut=0, groups=labels).apart()
    assert false <= 2
    x = np.stack([ar1(phi, n, seed=c) for c in range(4)])
    err = ms.error_of_mean(x[[0, 2]], cut=0).error
    x[[1, 3]] += 6 * np.sqrt(2) * err
    spread = ms.chain_spread(x, cut=0, groups=labels)
    assert spread.dof == 1 and spread.apart(K) and spread.means[1] > spread.means[0]
    est = ms.error_of_mean(x, cut=0)
    assert not ms.converged(est, x, family=K, groups=labels)
    y = np.stack([ar1(phi, n, seed=c) for c in range(4)])
    assert ms.converged(ms.error_of_mean(y, cut=0), y, family=K, groups=labels)
    with pytest.raises(ValueError, match="3 labels for 4 chains"):
        ms.chain_spread(x, cut=0, groups=labels[:3])


def test_compare_says_starts_disagree_and_never_calls_it_settled():
    """compare with starts: an observable whose two kinds of start sit apart gets "starts disagree: not equilibrium",
    settled False (so it is drawn hollow) and a STARTS DISAGREE line in the summary; the same draws without the
    offset agree across the kinds."""
    X, Y = _data(P=40, N0=10)
    fit = rp.theory.solve(X, Y, N1=20, T=0.01, method="exact")
    rng = np.random.default_rng(0)
    n = 3000
    eps = np.stack([fit.generalization_error(X, Y) + 0.01 * ar1(0.8, n, seed=c) for c in range(4)])
    ov = np.stack([np.stack([ar1(0.8, n, seed=10 + 4 * c + k) for k in range(4)], -1).reshape(n, 2, 2)
                   for c in range(4)]) * 0.01 + fit.readout_overlap
    ov = (ov + np.swapaxes(ov, -1, -2)) / 2
    labels = ["prior", "mode", "prior", "mode"]
    ok = rp.diagnostics.compare({"eps_g": eps, "overlap": ov}, fit, X, Y, starts=labels)
    assert not bool(ok.starts_apart.any()) and ok.attrs["starts"] == "prior,mode,prior,mode"
    eps[[1, 3]] += 0.01
    bad = rp.diagnostics.compare({"eps_g": eps, "overlap": ov}, fit, X, Y, starts=labels)
    e = bad.sel(quantity="eps_g")
    assert bool(e.starts_apart) and not bool(e.settled)
    assert "starts disagree: not equilibrium" in e.verdict.sel(theory="exact").item()
    assert "STARTS DISAGREE" in bad.attrs["summary"]
    one = rp.diagnostics.compare({"eps_g": eps, "overlap": ov}, fit, X, Y)  # no kinds given: not judged
    assert not bool(one.starts_apart.any()) and np.isnan(one.starts_p.values).all()
    del rng


def test_config_starts_checks():
    raw = {"data": {"name": "synthetic", "P": 20, "N0": 5}, "model": {"N1": 4}, "run": {"out": "x"}}
    cfg = config_mod.resolve({**raw, "run": {"out": "x", "starts": ["prior", "mode"]}, "sampler": {"num_chains": 4}},
                             point=False)
    assert cfg.run.starts == ["prior", "mode"]
    with pytest.raises(config_mod.ConfigError, match="num_chains >= 3"):
        config_mod.resolve({**raw, "run": {"out": "x", "starts": ["prior", "mode", "scaled"]}})
    with pytest.raises(config_mod.ConfigError, match="sampler.init = 'scaled' is not among run.starts"):
        config_mod.resolve({**raw, "run": {"out": "x", "starts": ["prior", "mode"]},
                            "sampler": {"init": "scaled"}})
    with pytest.raises(config_mod.ConfigError, match="init"):
        config_mod.resolve({**raw, "sampler": {"init": "trained"}})
    # the config's kinds (kept beside it so that reading a config does not import jax) are the sampler's
    from renormpp.experiments.samplers import START_KINDS
    from renormpp.infer import starts

    assert START_KINDS == starts.KINDS


def test_run_with_two_kinds_of_start(tmp_path):
    """`renormpp run` with run.starts = ["prior", "mode"]: the chains start from their kinds (the mode chains' first
    draws fit the training data better), observables.nc names each chain's start, result.json and the report say
    whether the kinds agree."""
    import arviz as az

    from renormpp.experiments import runner

    raw = {"data": {"name": "synthetic", "P": 60, "P_test": 100, "N0": 20, "D": 2, "teacher": "linear"},
           "model": {"N1": [10], "T": 0.01},
           "sampler": {"num_warmup": 0, "num_samples": 60, "num_chains": 4, "inner_steps": 2, "step_size": 1e-4,
                       "adapt_step_size": False, "init_steps": 200},
           "run": {"out": str(tmp_path), "starts": ["prior", "mode"], "progress": False, "kernel_diagnosis": False}}
    runner.run(config_mod.resolve(raw))
    folder = next((tmp_path / "points").iterdir())
    dt = az.from_netcdf(folder / "observables.nc")
    assert list(dt.posterior.coords["start"].values) == ["prior", "mode", "prior", "mode"]
    first = dt.posterior.eps_g.values[:, 0]
    assert max(first[1], first[3]) < min(first[0], first[2])  # trained chains start where the data are fitted
    res = json.loads((folder / "result.json").read_text())
    assert res["starts"] == ["mode", "prior"] and isinstance(res["starts_agree"], bool)
    assert "starts" in (tmp_path / "summary.csv").read_text()


@pytest.mark.slow
def test_three_kinds_of_start_agree_on_a_small_posterior(tmp_path):
    """On a small posterior (P = 100, N0 = 20, N1 = 20, D = 2, T = 0.01) chains from the prior, from half its scale
    and from the trained network reach the same posterior: the kinds agree on every quantity (chain_spread between
    kinds, p above the family's false-alarm rate), each quantity settled, and the six chains' late means of eps_g
    (the last 500 draws, each with its own Gamma-method error) share one value: the chi-square of their spread has
    p above stat_bounds.FALSE_ALARM (issue 44: the old bound, spread < 10% of the mean, was set by hand and failed
    on some machines: spread 10.3% and 11.4% at seeds 0 and 2 below, though the chains agree).

    Checked over seeds 0-3 (run.seeds) on correct code: no failure, p = 0.17, 0.38, 0.094, 0.92 (runs at T = 0.012
    and 0.015, chains of one T each: 0.032, 0.43). Planted bug, one kind of start's two chains sampling at T x 1.5
    (spliced from a run at T = 0.015): fails in 10 of the 12 (seed, kind) pairs, p 2e-10 to 3e-5 (misses at 1.8e-4
    and 4.3e-4). T x 1.2 (a 4% shift of eps_g) is below this size's errors and is not caught. Not smaller: at
    num_samples = 700 (the last 350) seed 0 already fails (p = 7e-6, seed 1: 0.007; why, not established: the
    errors of late windows this short, or chains not yet settled).

    3000 draws, not 1000: overlap[1,1] has a slow tail its Gamma window does not see within 1000 draws. Its
    autocorrelation time from block means of a 4000-draw run grows from 15 (blocks of 100 draws) to 17 (200) and
    about 25 (800), where the Gamma method reports 13 (eps_g levels off at 15). At 1000 draws one trajectory (key
    offset 17, XLA's AVX2 code) had chain means 2.115 +- 0.025 and 1.925 +- 0.020: chain_spread p = 1e-5, not
    settled. At 3000 draws, offsets 0-6 and 17 with XLA's AVX2 and the default code all pass. The planted bug above
    was measured at 1000 draws; at 3000 the errors are smaller, so the same shift stands out more."""
    import arviz as az
    import xarray as xr

    from renormpp.experiments import runner
    from stat_bounds import FALSE_ALARM, homogeneity_p

    raw = {"data": {"name": "synthetic", "P": 100, "P_test": 200, "N0": 20, "D": 2, "teacher": "linear"},
           "model": {"N1": [20], "T": 0.01},
           "sampler": {"num_samples": 3000, "num_chains": 6},
           "run": {"out": str(tmp_path), "starts": ["prior", "scaled", "mode"], "progress": False,
                   "kernel_diagnosis": False}}
    runner.run(config_mod.resolve(raw))
    folder = next((tmp_path / "points").iterdir())
    res = json.loads((folder / "result.json").read_text())
    ds = xr.open_dataset(folder / "comparison.nc")
    assert res["starts_agree"] and res["starts"] == ["mode", "prior", "scaled"]
    assert np.all(ds.starts_p.values > ms.FALSE_ALARM / ds.sizes["quantity"]) and bool(ds.settled.all())
    eps = az.from_netcdf(folder / "observables.nc").posterior.eps_g.values
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ms.ShortRunWarning)  # a chain of 500 draws: tau_int up to ~25
        late = [ms.gamma_method(chain[-500:], cut=0) for chain in eps]
    means, errors = [e.mean for e in late], [e.error for e in late]
    assert homogeneity_p(means, errors) > FALSE_ALARM, (means, errors)
