"""The hard points of the paper, sampled from several kinds of start (issue 34): does each settle, and do the kinds agree?

Run:  .venv/bin/python benchmarks/hard_points.py                          (fig1a-alpha10: up to 15 min)
      .venv/bin/python benchmarks/hard_points.py --points problem1 mnist-alpha10 --root ../shared/data/mnist
      .venv/bin/python benchmarks/hard_points.py --starts prior scaled --max-seconds 900 --chains-per-kind 1
      .venv/bin/python benchmarks/hard_points.py --sampler accept_shift=0.05 --out runs/hard-points-neal
      .venv/bin/python benchmarks/hard_points.py --points fig1c-D4-alpha10 --root DIR   (DIR holds cifar-10-batches-py/)

Each point is one `renormpp run` (the default sampler: kinetic Langevin, v integrated out, adaptive warmup) with
`run.starts` = the kinds of start (renormpp.infer.starts), `run.target_error` at the paper's accuracy (1% on eps_g,
0.01 on every overlap) and `run.max_seconds`. It prints, per point: the wall time and why sampling stopped, whether
every quantity settled and whether the kinds of start agree, eps_g +- error per kind of start (Gamma method, each
kind's chains together), eps_g of every chain per block of 1000 draws (chains that hold their own level sit in
different regions of the posterior), and the pooled eps_g and overlaps against the exact theory (Delta =
MC/theory - 1, z), and the states the chains hold with the transitions between them (rp.diagnostics.states).
Resumable: the runs live in OUT/NAME (default runs/hard-points); a finished point is read back, not rerun.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from theory_speed import machine_info  # noqa: E402

_MODEL = {"T": 0.01, "lambda0": 1.0, "lambda1": 1.0, "activation": "erf"}
POINTS = {
    # Fig. 1a at the paper's size, alpha = P/N1 = 10: the point of issue 34 that did not thermalize in 10 minutes
    "fig1a-alpha10": ({"name": "synthetic", "N0": 144, "D": 2, "teacher": "linear", "P": 1000, "P_test": 1000}, 100),
    # problem 1 of benchmarks/samplers.py
    "problem1": ({"name": "synthetic", "N0": 100, "D": 3, "teacher": "linear", "P": 500, "P_test": 500}, 250),
    # MNIST (0, 1) at P = 200, alpha = 10 (issue 32's gap; needs --root or RENORMPP_DATA)
    "mnist-alpha10": ({"name": "mnist", "classes": [0, 1], "P": 200, "P_test": 1000}, 20),
    # Fig. 1b's first width at the paper's size: MNIST (0, 1), D = 2, P = 1000, alpha = 10 (needs --root)
    "fig1b-alpha10": ({"name": "mnist", "classes": [0, 1], "P": 1000, "P_test": 1000, "preprocessing": "supplement"},
                      100),
    # the same at D = 3 (classes 1, 2, 3): the kinds of start agree on eps_g and hold different overlaps (stop 42)
    "fig1b-D3-alpha10": ({"name": "mnist", "classes": [1, 2, 3], "P": 1000, "P_test": 1000,
                          "preprocessing": "supplement"}, 100),
    # the widths of Fig. 1c and 1d whose kinds of start disagreed after 900 s (docs/figures.md, issue 45 item 5);
    # grayscale CIFAR-10 at 28 x 28 (needs --root: the folder that holds cifar-10-batches-py/)
    "fig1c-D2-alpha4": ({"name": "cifar10", "classes": ["cats", "horses"], "P": 1000, "P_test": 1000, "size": 28}, 250),
    "fig1c-D4-alpha10": ({"name": "cifar10", "classes": ["cars", "birds", "cats", "deers"], "P": 1000,
                          "P_test": 1000, "size": 28}, 100),
    "fig1d-D10-alpha10": ({"name": "cifar10", "classes": "all", "P": 1000, "P_test": 1000, "size": 28}, 100),
}


def config(name: str, out: Path, kinds, chains_per_kind: int, max_seconds: float, root=None,
           sampler: dict | None = None) -> dict:
    """The `renormpp run` config of point ``name``; ``sampler``: options of the sampler table beside the defaults."""
    data, N1 = POINTS[name]
    data = {**data, "seed": 0, **({"root": str(root)} if root and data["name"] != "synthetic" else {})}
    return {"data": data, "model": {"N1": [N1], **_MODEL},
            "sampler": {"kind": "kinetic", "num_samples": 200_000, "num_chains": chains_per_kind * len(kinds),
                        **(sampler or {})},
            "run": {"out": str(out / name), "starts": list(kinds), "target_error": {"eps_g": 0.01, "overlap": 0.01},
                    "max_seconds": float(max_seconds), "kernel_diagnosis": False, "seeds": [0]}}


def data_root(root, name: str):
    """The data folder of data set ``name`` under ``root`` (../shared/data or its mnist/ folder; CIFAR-10's batches)."""
    if not root or name == "synthetic":
        return root
    root = Path(root)
    if name == "mnist":
        return root if root.name == "mnist" else root / "mnist"
    return root.parent if root.name == "mnist" else root


def by_kind(folder: Path) -> list[str]:
    """eps_g +- error of each kind of start's chains (after the point's thermalization cut)."""
    import arviz as az

    from renormpp import mcstats

    dt = az.from_netcdf(folder / "observables.nc")
    eps = np.asarray(dt.posterior.eps_g.values)
    kinds = [str(k) for k in dt.posterior.coords["start"].values] if "start" in dt.posterior.coords else \
        ["prior"] * eps.shape[0]
    cut = mcstats.error_of_mean(eps).cut
    out = []
    for k in dict.fromkeys(kinds):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            e = mcstats.error_of_mean(eps[[c for c, g in enumerate(kinds) if g == k]], cut=cut)
        out.append(f"{k} {e.mean:.5f} +- {e.error:.5f}")
    return out


def blocks(folder: Path, size: int = 1000) -> list[str]:
    """eps_g of every chain per block of ``size`` recorded draws: chains that hold their own level for several
    blocks sit in different regions of the posterior, whatever their error bars say."""
    import arviz as az

    post = az.from_netcdf(folder / "observables.nc").posterior
    eps = np.asarray(post.eps_g.values)
    kinds = [str(k) for k in post.coords["start"].values] if "start" in post.coords else ["prior"] * eps.shape[0]
    n = eps.shape[1] // size
    return [f"chain {c} ({kinds[c]}): " + " ".join(f"{eps[c, i * size:(i + 1) * size].mean():.4f}" for i in range(n))
            for c in range(eps.shape[0])]


def states(folder: Path):
    """The metastable states of the point's chains (rp.diagnostics.states, after the cut of eps_g): which regions
    they hold and how often they move between them."""
    import arviz as az

    from renormpp import diagnostics

    post = az.from_netcdf(folder / "observables.nc").posterior
    draws = {"eps_g": np.asarray(post.eps_g.values), "overlap": np.asarray(post.overlap.values)}
    return diagnostics.states(diagnostics.scalar_series(draws), cut=diagnostics.thermalization_cut(draws["eps_g"]))


def report(name: str, folder: Path, seconds: float) -> None:
    import xarray as xr

    res = json.loads((folder / "result.json").read_text())
    ds = xr.open_dataset(folder / "comparison.nc").sel(theory="exact")
    settled = bool(ds.settled.all()) and bool(ds.reliable.all())
    print(f"\n## {name}: N1 = {res['N1']}, {res['chains']} chains x {res['draws']} draws, sampling "
          f"{res['sampling_seconds']:.0f} s (this call {seconds:.0f} s), stopped: {res['stopped']}")
    print(f"settled (every quantity, error bars hold): {settled}; starts {'+'.join(res.get('starts', ['prior']))} "
          f"agree: {res.get('starts_agree', True)}")
    print("eps_g per kind of start: " + "; ".join(by_kind(folder)))
    print("eps_g per chain, per block of 1000 draws:\n  " + "\n  ".join(blocks(folder)))
    print(f"states of the chains:\n{states(folder)}")
    print("| quantity | MC | exact | Delta | z | settled |\n|---|---|---|---|---|---|")
    for q in ds.quantity.values:
        r = ds.sel(quantity=q)
        print(f"| {q} | {float(r.mc_mean):.5g} +- {float(r.mc_error):.2g} | {float(r.prediction):.5g} | "
              f"{float(r.mc_mean) / float(r.prediction) - 1:+.1%} | {float(r.z):+.1f} | {bool(r.settled)} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", nargs="+", default=["fig1a-alpha10"], choices=list(POINTS))
    ap.add_argument("--starts", nargs="+", default=["prior", "scaled"])
    ap.add_argument("--chains-per-kind", type=int, default=1)
    ap.add_argument("--max-seconds", type=float, default=900.0)
    ap.add_argument("--out", type=Path, default=Path("runs/hard-points"))
    ap.add_argument("--root", default=os.environ.get("RENORMPP_DATA"))
    ap.add_argument("--sampler", nargs="*", default=[], metavar="KEY=VALUE",
                    help="options of the sampler table, e.g. accept_shift=0.05 friction=0.5 (values read as TOML)")
    args = ap.parse_args()
    import tomllib

    sampler = {k: tomllib.loads(f"x = {v}")["x"] for k, v in (o.split("=", 1) for o in args.sampler)}
    from renormpp.experiments import config as config_mod
    from renormpp.experiments import runner

    print(machine_info())
    for name in args.points:
        cfg = config(name, args.out, args.starts, args.chains_per_kind, args.max_seconds, sampler=sampler,
                     root=data_root(args.root, POINTS[name][0]["name"]))
        t0 = time.perf_counter()
        runner.run(config_mod.resolve(cfg))
        folder = next(Path(cfg["run"]["out"], "points").iterdir())
        report(name, folder, time.perf_counter() - t0)


if __name__ == "__main__":
    main()
