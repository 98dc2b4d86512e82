"""The CNN's theory against sampled finite CNNs (issue 33, item 4): Delta and z at two sizes, D = 1 and 2, synthetic
images and MNIST, with the local order parameter.

Run:  .venv/bin/python studies/cnn_validation.py [--root DATA]   (about 15 min on 2 cores; resumable:
      runs/cnn-validation/; with --root, MNIST (0, 1) too)
      .venv/bin/python studies/cnn_validation.py --quick           (smoke run at small sizes)

Each series is a `renormpp run` sweep of the "conv" architecture with the default sampler (kinetic Langevin on the
filters, the readout integrated out, Rao-Blackwellized observables and local overlaps), stopping at 0.4% on eps_g:

* synthetic images, a linear teacher, D = 1 and D = 2, at two sizes in the proportional scaling (N0/P = 0.64,
  m^2/P = 0.16 and n_p = 4 fixed): P = 100 (8 x 8 images, 4 x 4 patches) and P = 400 (16 x 16, 8 x 8), each at
  alpha = P/C = 10, 2, 0.5;
* with --root: MNIST (0, 1), D = 2, P = 200, 7 x 7 patches (n_p = 16), C = 20, 100, 400 (the CNN series of
  `renormpp paper cnn --size quick`).

With --nuts: NumPyro's NUTS (on the filters, the readout integrated out: rp.models.cnn(..., integrate_v=True); 2
chains of 600 draws after 300 of warmup), Rao-Blackwellized eps_g, at the P = 100 points at alpha = 2, D = 1 and 2:
an independent sampler for the small size (at alpha = 10 NUTS took over 13 minutes for one point on a loaded machine).

Printed per point and quantity: MC +- error, the exact theory and the infinite width with Delta = MC/theory - 1 and z;
per point: the local overlaps over patch pairs (the share of the sampled departure from infinite width that each
theory misses, max |z|, the share of entries within 3 sigma).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
from theory_speed import machine_info  # noqa: E402

from renormpp.diagnostics import local  # noqa: E402
from renormpp.experiments import runner  # noqa: E402
from renormpp.experiments.report import load_sweep, local_overlaps  # noqa: E402

OUT = Path("runs/cnn-validation")


def series(quick: bool, root):
    """{name: (data table, model table)} of every sweep."""
    sizes = ((40, 4, 2),) if quick else ((100, 8, 4), (400, 16, 8))
    out = {}
    for P, side, m in sizes:
        for D in (1, 2):
            out[f"synthetic-D{D}-P{P}"] = (
                {"name": "synthetic", "P": P, "P_test": 500, "N0": side * side, "D": D, "teacher": "linear", "seed": 0},
                {"image_shape": side, "patch": m, "N1": sorted({max(2, round(P / a)) for a in (10, 2, 0.5)})})
    if root is not None:
        P = 40 if quick else 200
        out[f"mnist-D2-P{P}"] = ({"name": "mnist", "classes": [0, 1], "P": P, "P_test": 1000, "seed": 0},
                                 {"image_shape": 28, "patch": 7, "N1": [round(P / a) for a in (10, 2, 0.5)]})
    return out


def run(name, data, model, quick):
    cfg = {"data": data, "model": {"architecture": "conv", "T": 0.01, **model},
           "sampler": {"kind": "kinetic", "num_samples": 200 if quick else 4000},
           "run": {"out": str(OUT / name), "seeds": [0], "progress": False, "target_error": {"eps_g": 0.004}}}
    t = time.perf_counter()
    runner.run(cfg)
    return load_sweep(OUT / name), time.perf_counter() - t


def nuts(quick: bool):
    """NUTS on the small size's points: eps_g (Rao-Blackwellized) against the theory and the default sampler."""
    import jax
    import numpy as np
    from numpyro.infer import MCMC, NUTS

    import renormpp as rp
    from renormpp import readout
    from renormpp.mcstats import error_of_mean
    from renormpp.network import conv_hidden

    print("| series | C | alpha | sampler | eps_g | exact: Delta, z | infinite width: Delta, z | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (data_cfg, model) in series(quick, None).items():
        if data_cfg["P"] != (40 if quick else 100):
            continue
        sw = load_sweep(OUT / name)
        d = sw.data
        X, Y = np.asarray(d.X, np.float32), np.asarray(d.Y, np.float32)
        for ds in sw.pooled:
            C = int(ds.attrs["N1"])
            if d.X.shape[0] / C != 2:
                continue
            kw = dict(N1=C, image_shape=model["image_shape"], patch=model["patch"], activation="erf", T=0.01,
                      lambda0=1.0, lambda1=1.0, integrate_v=True)
            t = time.perf_counter()
            mcmc = MCMC(NUTS(rp.models.cnn), num_warmup=100 if quick else 300, num_samples=100 if quick else 600,
                        num_chains=2, chain_method="sequential", progress_bar=False)
            mcmc.run(jax.random.PRNGKey(0), X, Y, **kw)
            fn = readout.rao_blackwell(X, Y, np.asarray(d.X_test, np.float32), np.asarray(d.Y_test, np.float32),
                                       T=0.01, lambda1=1.0, features=conv_hidden)
            samples = {"w": mcmc.get_samples(group_by_chain=True)["w"]}
            eps = rp.observables.evaluate(lambda p: fn(p)["eps_g"], samples, batch_dims=2)
            est = error_of_mean(np.asarray(eps, np.float64))
            seconds = time.perf_counter() - t
            r = ds.sel(quantity="eps_g")
            for label, mean, err, secs in (("default", float(r.mc_mean), float(r.mc_error), None),
                                           ("NUTS", est.mean, est.error, seconds)):
                cells = []
                for th in ("exact", "infinite_width"):
                    pred = float(r.prediction.sel(theory=th))
                    cells.append(f"{mean / pred - 1:+.1%}, {(mean - pred) / err:+.1f}")
                print(f"| {name} | {C} | {d.X.shape[0] / C:.3g} | {label} | {mean:.4g} ± {err:.2g} | "
                      + " | ".join(cells) + f" | {'' if secs is None else f'{secs:.0f}'} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--root", default=None, help="the folder of the MNIST files (RENORMPP_DATA is set to it)")
    ap.add_argument("--nuts", action="store_true", help="only NUTS on the small size's points (after a run)")
    args = ap.parse_args()
    if args.nuts:
        warnings.filterwarnings("ignore")
        print(machine_info())
        return nuts(args.quick)
    if args.root is not None:
        os.environ["RENORMPP_DATA"] = str(Path(args.root).resolve().parent if Path(args.root).name == "mnist"
                                          else Path(args.root).resolve())
    warnings.filterwarnings("ignore")
    print(machine_info())
    print("| series | C | alpha | quantity | MC | exact | Delta, z | infinite width | Delta, z |")
    print("|---|---|---|---|---|---|---|---|---|")
    notes = []
    for name, (data, model) in series(args.quick, args.root).items():
        sw, seconds = run(name, data, model, args.quick)
        P = sw.data.X.shape[0]
        for ds, loc in zip(sw.pooled, local_overlaps(sw)):
            C = ds.attrs["N1"]
            for q in ds.quantity.values:
                r = ds.sel(quantity=q)
                mc, err = float(r.mc_mean), float(r.mc_error)
                cells = []
                for t in ("exact", "infinite_width"):
                    pred = float(r.prediction.sel(theory=t))
                    delta = f"{mc / pred - 1:+.1%}" if pred else "–"
                    cells += [f"{pred:.4g}", f"{delta}, {float(r.z.sel(theory=t)):+.1f}"]
                flag = "" if bool(r.reliable) else " (error bar does not hold)"
                print(f"| {name} | {C} | {P / C:.3g} | {q} | {mc:.4g} ± {err:.2g}{flag} | " + " | ".join(cells) + " |")
            notes.append(f"{name}, C = {C}: local overlaps: {local.summary(loc)}")
        notes.append(f"{name}: {seconds:.0f} s (sampling and comparison; 0 s where read back)")
    print()
    print("\n".join(f"* {n}" for n in notes))


if __name__ == "__main__":
    main()
