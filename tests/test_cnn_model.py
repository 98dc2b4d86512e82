"""The one-hidden-layer CNN as a NumPyro model (issue 33, item 1): rp.models.cnn, the "conv" architecture record,
its features, readout and overlap normalization, its [model] table and a `renormpp run` of it.

The references are independent of the package's code paths: the features from an explicit loop over channels and
patches of each image, densities from scipy.stats, the n_p = 1 network from rp.models.one_hidden_layer, the kernel
from the closed form of erf's NNGP map, expectations from many prior draws."""
import json

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import pandas as pd
import pytest
from numpyro.infer import MCMC, NUTS
from numpyro.infer.util import log_density
from scipy import special, stats

import renormpp as rp
from renormpp import architectures, observables, readout
from renormpp.cli import main
from renormpp.experiments import config as config_mod
from renormpp.experiments import stages
from renormpp.network import conv_hidden, x64_context

S, M, C, D = 4, 2, 3, 2  # image side, patch side, channels, outputs: n_p = 4 patches of 4 pixels


def images(P=7, side=S, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(P, side * side)), rng.normal(size=(P, D))


def loop_features(w, X, side, m, act=special.erf):
    """phi[mu, c * n_p + i] = act(w_c . x_i / m), the patches cut by hand from each image."""
    g = side // m
    n_p = g * g
    phi = np.empty((X.shape[0], w.shape[0] * n_p))
    for mu, row in enumerate(X):
        img = row.reshape(side, side)
        for c in range(w.shape[0]):
            for i in range(n_p):
                r, q = divmod(i, g)
                phi[mu, c * n_p + i] = act(w[c] @ img[r * m:(r + 1) * m, q * m:(q + 1) * m].ravel() / m)
    return phi


def loop_outputs(w, v, X, side, m):
    """f_a(x) = sum_{c,i} v[a, c, i] act(w_c . x_i / m) / sqrt(C n_p), summed term by term."""
    phi = loop_features(w, X, side, m)
    n_c, n_p = v.shape[1], v.shape[2]
    f = np.zeros((X.shape[0], v.shape[0]))
    for a in range(v.shape[0]):
        for c in range(n_c):
            for i in range(n_p):
                f[:, a] += v[a, c, i] * phi[:, c * n_p + i]
    return f / np.sqrt(n_c * n_p)


def draw(seed=1, channels=C, patch=M, side=S):
    rng = np.random.default_rng(seed)
    n_p = (side // patch) ** 2
    return {"w": rng.normal(size=(channels, patch * patch)), "v": rng.normal(size=(D, channels, n_p))}


def model_log_density(model, X, Y, params, **kw):
    with x64_context():
        return float(log_density(model, (jnp.asarray(X), jnp.asarray(Y)), kw,
                                 {k: jnp.asarray(v) for k, v in params.items()})[0])


# ---- the model ------------------------------------------------------------------------------------------------
def test_features_and_outputs_match_a_loop_over_channels_and_patches():
    X, _ = images()
    p = draw()
    with x64_context():
        phi = np.asarray(conv_hidden({"w": jnp.asarray(p["w"])}, jnp.asarray(X)))
        f = np.asarray(rp.network.forward({k: jnp.asarray(v) for k, v in p.items()}, jnp.asarray(X), "erf",
                                          conv_hidden))
    np.testing.assert_allclose(phi, loop_features(p["w"], X, S, M), rtol=1e-12)
    np.testing.assert_allclose(f, loop_outputs(p["w"], p["v"], X, S, M), rtol=1e-12)


@pytest.mark.parametrize("lambdas", [(1.0, 1.0), (2.0, 0.5)])
def test_log_density_against_numpy(lambdas):
    """(a) priors + Gaussian likelihood at temperature T, f from the loop; with v integrated out, the Gaussian
    marginal of each output column given the features."""
    lam0, lam1 = lambdas
    T = 0.05
    X, Y = images()
    p = draw()
    kw = dict(N1=C, image_shape=S, patch=M, T=T, lambda0=lam0, lambda1=lam1)
    f = loop_outputs(p["w"], p["v"], X, S, M)
    prior_w = stats.norm.logpdf(p["w"], scale=lam0 ** -0.5).sum()
    expected = prior_w + stats.norm.logpdf(p["v"], scale=lam1 ** -0.5).sum() + stats.norm.logpdf(Y, f, T ** 0.5).sum()
    np.testing.assert_allclose(model_log_density(rp.models.cnn, X, Y, p, **kw), expected, rtol=1e-10)

    phi = loop_features(p["w"], X, S, M)
    cov = phi @ phi.T / (lam1 * phi.shape[1]) + T * np.eye(len(X))
    marginal = sum(stats.multivariate_normal(np.zeros(len(X)), cov).logpdf(Y[:, a]) for a in range(D))
    np.testing.assert_allclose(model_log_density(rp.models.cnn, X, Y, {"w": p["w"]}, integrate_v=True, **kw),
                               prior_w + marginal, rtol=1e-10)


@pytest.mark.parametrize("integrate_v", [False, True])
def test_one_patch_is_the_fully_connected_network(integrate_v):
    """(b) patch = side: n_p = 1 and w . x / m = w . x / sqrt(N0), the model of one_hidden_layer."""
    X, Y = images(side=6)
    p = draw(patch=6, side=6)
    kw = dict(N1=C, T=0.02, lambda0=1.5, lambda1=0.7, integrate_v=integrate_v)
    if integrate_v:
        p = {"w": p["w"]}
    cnn = model_log_density(rp.models.cnn, X, Y, p, image_shape=(6, 6), patch=6, **kw)
    fc = model_log_density(rp.models.one_hidden_layer, X, Y, {k: v.reshape(v.shape[0], -1) for k, v in p.items()},
                           **kw)
    np.testing.assert_allclose(cnn, fc, rtol=1e-12)


def test_sites_plates_and_prediction():
    X, Y = images()
    tr = numpyro.handlers.trace(numpyro.handlers.seed(rp.models.cnn, 0)).get_trace(X, None, N1=C, image_shape=S,
                                                                                   patch=M, D=D)
    assert tr["w"]["value"].shape == (C, M * M) and tr["v"]["value"].shape == (D, C, 4)
    assert tr["f"]["value"].shape == (7, D) and tr["y"]["value"].shape == (7, D)
    assert {f.name: f.dim for f in tr["v"]["cond_indep_stack"]} == {"output": -3, "channel": -2, "patch": -1}
    f = np.asarray(tr["f"]["value"])
    np.testing.assert_allclose(f, loop_outputs(np.asarray(tr["w"]["value"], np.float64),
                                               np.asarray(tr["v"]["value"], np.float64), X, S, M), rtol=2e-5,
                               atol=1e-6)


def test_arviz_names_the_dims():
    X, Y = images(P=12)
    mcmc = MCMC(NUTS(rp.models.cnn), num_warmup=5, num_samples=5, num_chains=1, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(0), X, Y, N1=C, image_shape=S, patch=M)
    post = az.from_numpyro(mcmc)["posterior"]
    assert post["w"].dims == ("chain", "draw", "channel", "patch_pixel")
    assert post["v"].dims == ("chain", "draw", "output", "channel", "patch")
    assert rp.diagnostics.to_datatree(mcmc)["posterior"]["v"].dims == ("chain", "draw", "output", "channel", "patch")
    samples = mcmc.get_samples(group_by_chain=True)
    for dims in (architectures.get_architecture("conv").dims, None):  # given, or told from v's extra axis
        dt = rp.diagnostics.to_datatree(dict(samples), dims=dims)
        assert dt["posterior"]["w"].dims == ("chain", "draw", "channel", "patch_pixel")
        assert dt["posterior"]["v"].dims == ("chain", "draw", "output", "channel", "patch")


# ---- the readout: overlap normalization, Gibbs draw -----------------------------------------------------------
def test_overlap_is_v_vT_over_channels_times_patches():
    """observables.overlap of a CNN draw is v v^T / (C n_p), the mean over patches of the local overlaps; the
    Rao-Blackwellized overlap is its mean over exact draws of v given w (the Gibbs draw, in the site's shape)."""
    X, Y = images(P=9)
    p = draw()
    v = p["v"]
    local = np.einsum("aci,bci->abi", v, v) / C  # v_{a,.,i} . v_{b,.,i} / C per patch
    np.testing.assert_allclose(observables.overlap()({"v": jnp.asarray(v)}), local.mean(axis=-1), rtol=1e-6)

    kw = dict(T=0.1, lambda1=1.3, features=conv_hidden)
    w = jnp.asarray(p["w"], jnp.float32)
    x, y = jnp.asarray(X, jnp.float32), jnp.asarray(Y, jnp.float32)
    update = readout.gibbs_fn(x, y, **kw)
    v_site = jnp.zeros((D, C, 4), jnp.float32)
    one = update(jax.random.PRNGKey(0), {"v": v_site}, {"w": w})["v"]
    assert one.shape == (D, C, 4)
    keys = jax.random.split(jax.random.PRNGKey(1), 20000)
    draws = jax.vmap(lambda k: observables.overlap()(update(k, {"v": v_site}, {"w": w})))(keys)
    mean, err = np.mean(draws, axis=0), np.std(draws, axis=0) / np.sqrt(len(keys))
    rb = readout.rao_blackwell(x, y, x, y, **kw)({"w": w})["overlap"]
    assert np.all(np.abs(mean - rb) < 5 * err + 1e-4), (mean, rb, err)


def test_local_overlap_of_a_draw_and_its_rao_blackwellized_mean():
    """observables.local_overlap is sum_c v_{a,c,i} v_{b,c,j} / C by loops, its patch diagonal averages to the overlap;
    readout's Rao-Blackwellized local overlap equals the dense Gaussian posterior of v given w (mean m m^T plus the
    covariance from the (D C n_p)-dimensional precision, built in NumPy) and the mean over exact Gibbs draws."""
    X, Y = images(P=9)
    p = draw()
    v = p["v"]
    n_p = v.shape[-1]
    loop = np.zeros((D, n_p, D, n_p))
    for a in range(D):
        for b in range(D):
            for i in range(n_p):
                for j in range(n_p):
                    loop[a, i, b, j] = sum(v[a, c, i] * v[b, c, j] for c in range(C)) / C
    local = observables.local_overlap(n_p)({"v": jnp.asarray(v)})
    np.testing.assert_allclose(local, loop, rtol=1e-6, atol=1e-6)  # float32 draw
    np.testing.assert_allclose(np.einsum("aibi->ab", local) / n_p, observables.overlap()({"v": jnp.asarray(v)}),
                               rtol=1e-6)

    T, lam1 = 0.1, 1.3
    phi = loop_features(p["w"], X, S, M)  # (P, C n_p), channel-major
    n = phi.shape[1]
    cov = np.linalg.inv(lam1 * np.eye(n) + phi.T @ phi / (n * T))  # the posterior of each v_a given w
    mean = cov @ phi.T @ Y / (T * np.sqrt(n))  # (n, D)
    second = np.einsum("ka,lb->akbl", mean, mean) + np.einsum("ab,kl->akbl", np.eye(D), cov)
    dense = np.einsum("acibcj->aibj", second.reshape(D, C, n_p, D, C, n_p)) / C
    with x64_context():
        rb = readout.rao_blackwell(X, Y, X, Y, T=T, lambda1=lam1, features=conv_hidden, patches=n_p)(
            {"w": jnp.asarray(p["w"])})
        np.testing.assert_allclose(rb["local_overlap"], dense, rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(np.einsum("aibi->ab", rb["local_overlap"]) / n_p, rb["overlap"], rtol=1e-10)
    update = readout.gibbs_fn(jnp.asarray(X, jnp.float32), jnp.asarray(Y, jnp.float32), T=T, lambda1=lam1,
                              features=conv_hidden)
    v_site, w = jnp.zeros((D, C, n_p), jnp.float32), jnp.asarray(p["w"], jnp.float32)
    keys = jax.random.split(jax.random.PRNGKey(2), 20000)
    draws = jax.vmap(lambda k: observables.local_overlap(n_p)(update(k, {"v": v_site}, {"w": w})))(keys)
    mc, err = np.mean(draws, axis=0), np.std(draws, axis=0) / np.sqrt(len(keys))
    assert np.all(np.abs(mc - dense) < 5 * err + 1e-4)
    with pytest.raises(ValueError, match="patches must be a positive integer"):
        readout.rao_blackwell(X, Y, X, Y, T=T, lambda1=lam1, features=conv_hidden, patches=0)


# ---- the architecture record ----------------------------------------------------------------------------------
def test_conv_record():
    conv = architectures.get_architecture("conv")
    assert conv.model is rp.models.cnn and conv.features is conv_hidden
    assert conv.first_layer(image_shape=4, patch=2) == "w"
    kw = conv.model_kwargs(N1=5, T=0.02, lambda0=2.0, lambda1=3.0, activation="tanh", integrate_v=True,
                           image_shape="4x4", patch=2)
    assert kw == dict(N1=5, image_shape=(4, 4), patch=2, activation="tanh", T=0.02, lambda0=2.0, lambda1=3.0,
                      integrate_v=True)
    assert conv.model_kwargs(N1=5, T=0.02, lambda0=2.0, lambda1=3.0, activation="erf", integrate_v=False,
                             image_shape=4, patch=2)["image_shape"] == (4, 4)
    conv.check("erf", image_shape=" 28 x 28 ", patch=7)
    conv.check_inputs(16, image_shape=4, patch=2)
    assert not conv.kernel_diagnosis and architectures.get_architecture("fc").kernel_diagnosis


def test_conv_kernel_is_the_mean_patch_kernel_and_the_wide_limit_of_the_features():
    """The infinite-width CNN kernel (1/n_p) sum_i K_ii against erf's closed form per patch, and against the
    empirical kernel phi phi^T / (lambda1 C n_p) of many prior filters (what the readout sees at C -> infinity)."""
    X, _ = images(P=5, side=6)
    lam0, m, g = 2.0, 3, 2
    K = architectures.get_architecture("conv").kernel(X, lambda0=lam0, activation="erf", image_shape=6, patch=m)
    ref = np.zeros((5, 5))
    for i in range(g * g):
        r, q = divmod(i, g)
        xi = X.reshape(5, 6, 6)[:, r * m:(r + 1) * m, q * m:(q + 1) * m].reshape(5, -1)
        Cii = xi @ xi.T / (m * m * lam0)
        d = np.diag(Cii)
        ref += 2 / np.pi * np.arcsin(2 * Cii / np.sqrt(np.outer(1 + 2 * d, 1 + 2 * d)))
    np.testing.assert_allclose(K, ref / (g * g), rtol=1e-10)
    X2, _ = images(P=3, side=6, seed=4)
    np.testing.assert_allclose(architectures.get_architecture("conv").kernel(X, X2, lambda0=lam0, image_shape=6,
                                                                             patch=m)[:, :2],
                               architectures.get_architecture("conv").kernel(np.vstack([X, X2[:2]]), lambda0=lam0,
                                                                             image_shape=6, patch=m)[:5, 5:],
                               rtol=1e-10)
    # the features' empirical kernel averages the patch-diagonal blocks only: cross-patch terms never enter
    w = np.random.default_rng(3).normal(size=(20000, m * m)) / np.sqrt(lam0)
    with x64_context():
        phi = np.asarray(conv_hidden({"w": jnp.asarray(w)}, jnp.asarray(X)))
    np.testing.assert_allclose(phi @ phi.T / phi.shape[1], K, atol=0.02)


def test_conv_kernel_is_the_theorys_infinite_width_kernel():
    """The record's kernel, over lambda1, is the kernel of the theory's Q = 1 (infinite-width) predictions: the GP
    mean K0 (K + T)^-1 Y and variance k00 - K0 (K + T)^-1 K0^T, the same for every output."""
    pytest.importorskip("renormpp.theory.conv", reason="waits on the CNN theory (renormpp.theory.conv)")
    conv = architectures.get_architecture("conv")
    X, Y = images(P=12)
    X0, _ = images(P=4, seed=5)
    T, lam0, lam1 = 0.1, 1.3, 1.7
    kw = dict(lambda0=lam0, activation="erf", image_shape=S, patch=M)
    fit = conv.solve(X, Y, N1=5, T=T, lambda0=lam0, lambda1=lam1, activation="erf", method="infinite_width",
                     image_shape=S, patch=M)
    K, K0 = conv.kernel(X, **kw) / lam1, conv.kernel(X0, X, **kw) / lam1
    k00 = np.diag(conv.kernel(X0, **kw)) / lam1
    G = K + T * np.eye(len(X))
    pred = fit.predict(X0)
    np.testing.assert_allclose(pred.mean, K0 @ np.linalg.solve(G, Y), rtol=1e-8, atol=1e-10)
    var = k00 - np.einsum("pq,qp->p", K0, np.linalg.solve(G, K0.T))
    np.testing.assert_allclose(pred.cov, var[:, None, None] * np.eye(D), rtol=1e-8, atol=1e-10)


def test_conv_record_solves_through_the_theory(monkeypatch):
    """The record calls rp.theory.solve with conv = dict(image_shape=(s, s), patch=m) (the agreed interface)."""
    seen = {}
    monkeypatch.setattr(architectures.theory, "solve", lambda X, Y, **kw: seen.update(kw) or "fit")
    X, Y = images()
    out = architectures.get_architecture("conv").solve(X, Y, N1=3, T=0.1, lambda0=1.0, lambda1=2.0, activation="erf",
                                                       method="exact", image_shape="4x4", patch=2)
    assert out == "fit"
    assert seen == dict(N1=3, T=0.1, lambda0=1.0, lambda1=2.0, activation="erf", method="exact",
                        conv=dict(image_shape=(4, 4), patch=2))


# ---- bad input ------------------------------------------------------------------------------------------------
def test_bad_input_is_refused_clearly():
    """(e) non-square N0, a patch that does not divide the side, Y with the wrong rows, a non-odd activation in a
    config, an image shape that is not one."""
    X, Y = images()
    kw = dict(N1=C, image_shape=S, patch=M)
    trace = numpyro.handlers.trace
    run = lambda *a, **k: trace(numpyro.handlers.seed(rp.models.cnn, 0)).get_trace(*a, **k)  # noqa: E731
    with pytest.raises(ValueError, match=r"X has 15 columns, but image_shape \(4, 4\) needs 16"):
        run(X[:, :15], Y, **kw)
    with pytest.raises(ValueError, match="X has 15 columns, which is not a square image"):
        conv_hidden({"w": jnp.ones((C, 4))}, jnp.ones((2, 15)))
    with pytest.raises(ValueError, match="patch = 3 does not divide the image side 4.*Choose a divisor of 4: 1, 2, 4"):
        run(X, Y, N1=C, image_shape=S, patch=3)
    with pytest.raises(ValueError, match=r"Y must have shape \(P, D\) = \(7, D\); got \(6, 2\)"):
        run(X, Y[:6], **kw)
    with pytest.raises(ValueError, match="integrate_v=True needs the labels Y"):
        run(X, None, D=2, integrate_v=True, **kw)
    with pytest.raises(ValueError, match="square images; got image_shape"):
        run(X, Y, N1=C, image_shape=(4, 2), patch=2)

    base = {"data": {"name": "synthetic", "P": 10, "P_test": 10, "N0": 16}, "run": {"out": "/tmp/unused"}}
    model = {"N1": 4, "architecture": "conv", "image_shape": 4, "patch": 2}
    cases = {
        "activation": ({"activation": "relu"}, "odd activations .* 'relu' is not odd: choose an odd activation"),
        "patch": ({"patch": 3}, "patch = 3 does not divide the image side 4"),
        "missing": ({"patch": None}, "missing key model.patch: the side m of the non-overlapping square patches"),
        "shape": ({"image_shape": "4 by 4"}, "image_shape = '4 by 4' is not an image shape: give the side"),
        "type": ({"image_shape": 4.5}, "model.image_shape = 4.5 is not allowed: expected an integer >= 1 or a "
                                       "non-empty string"),
        "depth": ({"depth": 2}, "unknown key model.depth; allowed keys in \\[model\\]: .*image_shape, patch"),
    }
    for change, match in cases.values():
        m = {k: v for k, v in {**model, **change}.items() if v is not None}
        with pytest.raises(config_mod.ConfigError, match=match):
            config_mod.resolve({**base, "model": m})


def test_data_of_another_shape_is_a_config_error(tmp_path):
    cfg = {"data": {"name": "synthetic", "P": 10, "P_test": 10, "N0": 25},
           "model": {"N1": 4, "architecture": "conv", "image_shape": "4x4", "patch": 2},
           "sampler": {"num_warmup": 5, "num_samples": 5}, "run": {"out": str(tmp_path / "run"), "progress": False}}
    with pytest.raises(config_mod.ConfigError, match=r"\[data\] name = 'synthetic' gives inputs of N0 = 25 features, "
                                                     r"which model.architecture = 'conv' with model.image_shape = "
                                                     r"'4x4', model.patch = 2 cannot take: the data's X has 25 "
                                                     r"columns, but image_shape \(4, 4\) needs 16"):
        rp.experiments.run(cfg)
    assert not (tmp_path / "run" / "points").exists()


# ---- sampling ----------------------------------------------------------------------------------------------------
def _point(tmp_path, **sampler):
    raw = {"data": {"name": "synthetic", "P": 20, "P_test": 50, "N0": S * S, "D": D},
           "model": {"architecture": "conv", "N1": C, "image_shape": S, "patch": M, "T": 0.1},
           "sampler": {"kind": "kinetic", **sampler}, "run": {"out": str(tmp_path), "seed": 0, "progress": False}}
    return config_mod.resolve(raw, point=True)


def _means(series):
    """{quantity: (mean, error)} of eps_g and the overlap entries a <= b, draws (chain, draw, ...)."""
    out = {}
    for name, x in (("eps_g", series["eps_g"]), *(((f"overlap[{a},{b}]", series["overlap"][..., a, b])
                                                      for a in range(D) for b in range(a, D)))):
        e = rp.diagnostics.error_of_mean(np.asarray(x, np.float64))
        out[name] = (e.mean, e.error)
    return out


@pytest.mark.slow
def test_default_sampler_and_nuts_agree(tmp_path):
    """(c) The kinetic sampler of `renormpp run` (v integrated out, Rao-Blackwellized observables; and with the
    exact Gibbs draw of v and the draws' own observables) and NumPyro's NUTS on (w, v) jointly give the same means
    of eps_g and v v^T / (C n_p), within their errors: the eight z-scores (two samplers, four quantities) within the
    Bonferroni bound at false-alarm rate 1e-4 (4.37). Over 3 seeds (PRNG keys 0-2 for the kinetic samplers, 1-3
    for NUTS) at these sizes (kinetic 500 draws, NUTS 700, 4 chains each): no failure, largest |z| 2.7; fails with
    NUTS sampling at T = 0.115 instead of 0.1 (|z| 5.7 on eps_g)."""
    from stat_bounds import assert_z_within

    runs = {}
    for name, sampler in {"integrated": {}, "gibbs": {"v_sampling": "gibbs", "rao_blackwell": False}}.items():
        point = _point(tmp_path, num_warmup=300, num_samples=500, num_chains=4, **sampler)
        data = stages.load_data(point.data, point.model)
        mcmc = MCMC(stages.make_sampler(point, data), num_warmup=300, num_samples=500, num_chains=4,
                    chain_method="vectorized", progress_bar=False)
        mcmc.run(jax.random.PRNGKey(0), *stages._float32(data.X, data.Y), **stages.model_kwargs(point))
        runs[name] = _means(mcmc.get_samples(group_by_chain=True))
    kw = {**stages.model_kwargs(point), "integrate_v": False}
    nuts = MCMC(NUTS(rp.models.cnn), num_warmup=500, num_samples=700, num_chains=4, chain_method="vectorized",
                progress_bar=False)
    nuts.run(jax.random.PRNGKey(1), *stages._float32(data.X, data.Y), **kw)
    s = nuts.get_samples(group_by_chain=True)
    fn = observables.default(data.X_test, data.Y_test, "erf", conv_hidden)
    ref = _means(observables.evaluate(fn, {"w": s["w"], "v": s["v"]}, batch_dims=2))
    z = {f"{name} {q}": (mean - ref[q][0]) / np.hypot(err, ref[q][1]) for name, got in runs.items()
         for q, (mean, err) in got.items()}
    assert_z_within(list(z.values()), what=f"the kinetic samplers against NUTS, z {z}")


# ---- renormpp run ------------------------------------------------------------------------------------------------
def test_renormpp_run_of_a_cnn(tmp_path, capsys):
    """(d) A smoke-size sweep of the CNN end to end from a TOML file through the CLI: the theory's solve with conv=,
    the sampler, the comparison and the report, which names the architecture and the patch."""
    pytest.importorskip("renormpp.theory.conv", reason="waits on the CNN theory (renormpp.theory.conv)")
    toml = tmp_path / "cnn.toml"
    toml.write_text(f"""
[data]
name = "synthetic"
P = 20
P_test = 20
N0 = 16
D = 2

[model]
architecture = "conv"
image_shape = "4x4"
patch = 2
N1 = [3]
T = 0.1

[sampler]
num_warmup = 20
num_samples = 100

[run]
out = "{tmp_path / 'run'}"
chunk_seconds = 0.5
""")
    assert main(["run", str(toml), "--no-progress"]) == 0
    assert "network: convolutional" in capsys.readouterr().out
    out, folder = tmp_path / "run", tmp_path / "run" / "points" / "N1=3_seed=0"
    data = rp.datasets.synthetic(P=20, P_test=20, N0=16, D=2)
    fit = rp.theory.solve(data.X, data.Y, N1=3, T=0.1, method="exact", conv=dict(image_shape=(4, 4), patch=2))
    theory = json.loads((folder / "theory.json").read_text())
    np.testing.assert_allclose(theory["exact"]["readout_overlap"], fit.readout_overlap, rtol=1e-6)
    assert theory["infinite_width"]["applies"]
    dt = az.from_netcdf(folder / "observables.nc")
    assert dt["posterior"]["overlap"].shape == (2, 100, 2, 2)
    assert dt["posterior"]["local_overlap"].dims == ("chain", "draw", "output", "patch", "output_", "patch_")
    assert dt["posterior"]["local_overlap"].shape == (2, 100, 2, 4, 2, 4)
    comp = pd.read_csv(folder / "comparison.csv")
    exact = comp[(comp.quantity == "eps_g") & (comp.theory == "exact")].prediction.iloc[0]
    np.testing.assert_allclose(exact, fit.generalization_error(data.X_test, data.Y_test), rtol=1e-6)
    assert not (folder / "kernel.nc").exists()  # the hidden-kernel diagnosis is the fully connected theory's
    text = (out / "report.md").read_text()
    assert "network: convolutional, one hidden layer of N1 channels (architecture=conv, image_shape=4x4, patch=2)" \
        in text
    assert "## Local overlaps over patch pairs (CNN)" in text and "* N1 = 3: exact: misses" in text
    assert (out / "local_overlaps_N1=3.png").is_file()
