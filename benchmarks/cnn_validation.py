"""The CNN's theory against sampled finite CNNs (issue 33, item 4): Delta and z at two sizes, D = 1 and 2, synthetic
images and MNIST, with the local order parameter.

Run:  .venv/bin/python benchmarks/cnn_validation.py [--root DATA]   (about 15 min on 2 cores; resumable:
      runs/cnn-validation/; with --root, MNIST (0, 1) too)
      .venv/bin/python benchmarks/cnn_validation.py --quick           (smoke run at small sizes)

Each series is a `renormpp run` sweep of the "conv" architecture with the default sampler (kinetic Langevin on the
filters, the readout integrated out, Rao-Blackwellized observables and local overlaps), stopping at 0.4% on eps_g:

* synthetic images, a linear teacher, D = 1 and D = 2, at two sizes in the proportional scaling (N0/P = 0.64,
  m^2/P = 0.16 and n_p = 4 fixed): P = 100 (8 x 8 images, 4 x 4 patches) and P = 400 (16 x 16, 8 x 8), each at
  alpha = P/C = 10, 2, 0.5;
* with --root: MNIST (0, 1), D = 2, P = 200, 7 x 7 patches (n_p = 16), C = 20, 100, 400 (the CNN series of
  `renormpp paper cnn --size quick`).

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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--root", default=None, help="the folder of the MNIST files (RENORMPP_DATA is set to it)")
    args = ap.parse_args()
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
