"""The CNN's theory against sampled finite CNNs (issue 33, item 4), and the comparison of local overlaps.

The slow test samples the posterior of one-hidden-layer CNNs (the default sampler of `renormpp run`, whose agreement
with NumPyro's NUTS on a CNN is tests/test_cnn_model.py's) at two sizes in the proportional scaling (alpha = P/C = 2,
N0/P and m^2/P fixed, n_p = 4 patches, D = 2 outputs, a linear teacher) and tabulates Delta and z of the exact theory
and the infinite width; it asserts what the sampling found (docs/log/benchmarks.md, "cnn_validation.py"), each
claim beyond its error bars: the exact theory is nearer than the infinite width on the overlaps and on the local
overlaps over patch pairs, and its remaining eps_g gap closes as the size grows (on eps_g itself it is nearer by only
3-6 error bars: reported, not asserted). The fast tests check compare_local on draws with a known mean."""
from __future__ import annotations

import numpy as np
import pytest

import renormpp as rp
from renormpp.diagnostics import local
from renormpp.experiments import runner
from renormpp.experiments.report import load_sweep, local_overlaps
from stat_bounds import z_bound


def _fit(D=2, P=24, N1=6):
    data = rp.datasets.synthetic(P=P, P_test=10, N0=16, D=D, teacher="linear", seed=1)
    return rp.theory.solve(data.X, data.Y, N1=N1, T=0.05, conv=dict(image_shape=(4, 4), patch=2))


def test_compare_local_finds_agreement_and_disagreement():
    """Draws scattered about the exact theory's local overlaps agree with it (|z| small, little of the departure
    missed) and not with the infinite width; draws about the infinite width say the opposite."""
    fit = _fit()
    D, n_p = fit.D, fit.n_patches
    rng = np.random.default_rng(0)
    noise = 1e-3
    for truth, near, far in ((fit.local_overlap, "exact", "infinite_width"),
                             (fit.refit("infinite_width").local_overlap, "infinite_width", "exact")):
        draws = truth + noise * rng.normal(size=(2, 400, D, n_p, D, n_p))
        ds = local.compare_local(draws, fit)
        assert ds.mc_mean.dims == ("output", "patch", "output_", "patch_")
        np.testing.assert_allclose(ds.mc_mean, truth, atol=5 * noise / np.sqrt(800))
        np.testing.assert_allclose(ds.mc_error, noise / np.sqrt(800), rtol=0.3)
        assert ds.attrs[f"agree_{near}"] > 0.9 and ds.attrs[f"maxz_{far}"] > 10
        assert ds.attrs[f"rel_{near}"] < ds.attrs[f"rel_{far}"]
        assert "misses" in local.summary(ds)
    assert ds.attrs["rel_infinite_width"] == pytest.approx(1.0)  # the infinite width misses all of the departure


def test_local_overlaps_plot_draws_departures_from_infinite_width():
    """rp.plots.local_overlaps: the sampled and predicted patch-pair matrices minus the infinite width, on one colour
    scale, and every entry against the theory, with the share each method misses in the legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fit = _fit()
    rng = np.random.default_rng(1)
    ds = local.compare_local(fit.local_overlap + 1e-3 * rng.normal(size=(2, 200) + fit.local_overlap.shape), fit)
    fig = rp.plots.local_overlaps(ds, outputs=(0, 1))
    sampled, predicted, scatter = fig.axes[:3]
    wide = fit.refit("infinite_width").local_overlap
    np.testing.assert_allclose(predicted.images[0].get_array(), (fit.local_overlap - wide)[0, :, 1, :])
    np.testing.assert_allclose(sampled.images[0].get_array(), (ds.mc_mean.values - wide)[0, :, 1, :])
    assert sampled.images[0].get_clim() == predicted.images[0].get_clim()
    assert "infinite-width misses 100%" in scatter.get_legend().get_texts()[-1].get_text()
    plt.close(fig)


def test_compare_local_refuses_draws_of_another_network():
    fit = _fit()
    with pytest.raises(ValueError, match=r"\(chains, draws, D, n_p, D, n_p\)"):
        local.compare_local(np.zeros((2, 10, 2, 4)), fit)
    with pytest.raises(ValueError, match="D = 1, n_p = 4 but the fit has D = 2, n_p = 4"):
        local.compare_local(np.zeros((2, 10, 1, 4, 1, 4)), fit)


#: (P, image side, patch side, C): alpha = P/C = 2, N0/P = 0.72, m^2/P = 0.18, n_p = 4
SIZES = ((50, 6, 3, 25), (200, 12, 6, 100))


def _sample(tmp_path, P, side, m, C):
    cfg = {"data": {"name": "synthetic", "P": P, "P_test": 500, "N0": side * side, "D": 2, "teacher": "linear",
                    "seed": 0},
           "model": {"architecture": "conv", "image_shape": side, "patch": m, "N1": [C], "T": 0.01},
           "sampler": {"kind": "kinetic", "num_samples": 2000},
           "run": {"out": str(tmp_path / f"P{P}"), "seeds": [0], "progress": False,
                   "target_error": {"eps_g": 0.008}}}
    runner.run(cfg)
    sw = load_sweep(tmp_path / f"P{P}")
    return sw.pooled[0], local_overlaps(sw)[0]


@pytest.mark.slow
def test_exact_theory_against_sampled_cnns_at_two_sizes(tmp_path):
    """The exact theory against sampled CNNs at two sizes. Each claim is judged by the bound that a family of seven
    exceeds with probability 1e-4 (stat_bounds, 4.34 error bars):

    * on every overlap, the exact theory is nearer than the infinite width by more than the bound;
    * eps_g's gap to the exact theory closes as the size grows, to below 0.75 of the small size's, by more than the
      bound.

    On eps_g itself both theories miss at these sizes, and the exact one is nearer by only a few error bars.
    Measured at seeds 0 and 1: by 2.9 and 2.7 at P = 50, and by 6.0 and 4.2 at P = 200. That is not asserted: with a margin
    of 2.7-2.9 error bars the old check (nearer, without errors) would fail on correct code about 3 times in 1000. Gap closing at
    seeds 0 and 1: 0.168 +- 0.009 to 0.048 +- 0.005, and 0.170 to 0.040, 9 error bars beyond the 0.75 bound.
    Overlaps' margins: 15.8 error bars or more. The local overlaps: the exact theory misses 34-36% of the sampled
    departure from infinite width at P = 50 and 16-18% at P = 200; `rel_exact < 0.5` has no error bar and stays a
    hand-set bound. A planted bug that put the infinite width in the exact theory's place would fail every overlap's
    margin (0 by construction); it was not run."""
    rows, gaps = [], []
    bound = z_bound(7)
    for P, side, m, C in SIZES:
        ds, loc = _sample(tmp_path, P, side, m, C)
        for q in ds.quantity.values:
            r = ds.sel(quantity=q)
            mc, err = float(r.mc_mean), float(r.mc_error)
            ex, wide = (float(r.prediction.sel(theory=t)) for t in ("exact", "infinite_width"))
            margin = (abs(mc - wide) - abs(mc - ex)) / err
            rows.append(f"P={P} C={C} {q}: MC {mc:.4g} ± {err:.2g}; exact {ex:.4g} "
                        f"(z {float(r.z.sel(theory='exact')):+.1f}); infinite width {wide:.4g} "
                        f"(z {float(r.z.sel(theory='infinite_width')):+.1f}); exact nearer by {margin:.1f} errors")
            if q != "eps_g":
                assert margin > bound, rows[-1]  # the exact theory is the nearer one
        eps = ds.sel(quantity="eps_g")
        exact = float(eps.prediction.sel(theory="exact"))
        gaps.append((abs(float(eps.mc_mean) / exact - 1), float(eps.mc_error) / exact))
        rows.append(f"P={P} C={C} local overlaps: {local.summary(loc)}")
        assert loc.attrs["rel_exact"] < 0.5, rows[-1]  # it predicts most of the sampled local structure
        assert bool(eps.reliable)
    print("\n".join(rows))
    (small, small_err), (large, large_err) = gaps
    closing = (0.75 * small - large) / np.hypot(0.75 * small_err, large_err)
    assert closing > bound, f"the exact theory's eps_g gap does not close with size: {gaps} ({closing:.1f} errors)"
