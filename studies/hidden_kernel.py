"""The posterior's hidden kernel (issue 32): what it costs to measure, and what it says where the theory fails.

Run:  .venv/bin/python studies/hidden_kernel.py --root ../shared/data/mnist [--out hidden-kernel]   (~15 min)

1. Cost: one MNIST (0, 1) point (P = 200, P_test = 1000, N1 = 20 and 400, erf, T = 0.01, default sampler, two
   chains) with ``run.kernel_diagnosis`` off and on, the same seed: blocks of 300 draws of each, alternating, five
   times: the median seconds and their ratio (issue 32's budget: at most +20%), and the draws identical.
2. Where the theory holds: NUTS on a linear network (P = 30, N0 = 40, D = 2, T = 0.05, N1 = 10), the measured r_k
   against the theory's (Eq. (H2) of renormpp.theory.hidden), and the sampled eps_g against the theory and the two
   oracles (the theory with the measured K_post; with K + K_post - K_post(theory)).
3. Where it fails: MNIST (0, 1), P = 200, N1 = 20, 100, 400 through ``renormpp run`` (stop on accuracy, at most 6
   minutes a point): the kernel verdict, the alignment, the oracle's eps_g against the sampled and the theory's.
   Reads an existing run folder with --mnist-run.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
from theory_speed import machine_info  # noqa: E402


def mnist_config(out, N1s, root, *, num_samples=20000, stop=True, kernel=True) -> dict:
    return {"data": {"name": "mnist", "classes": [0, 1], "P": 200, "P_test": 1000, "seed": 0,
                     **({"root": str(root)} if root else {})},
            "model": {"N1": list(N1s), "T": 0.01},
            "sampler": {"num_samples": num_samples, "num_chains": 2},
            "run": {"out": str(out), "kernel_diagnosis": kernel, "progress": False,
                    **({"max_seconds": 360, "target_error": {"eps_g": 0.005, "overlap": 0.01}} if stop else {})}}


def cost(out: Path, root, repeats: int = 5, draws: int = 300) -> None:
    """Blocks of ``draws`` draws of the point's chains without and with the kernel's Accumulator, alternating,
    ``repeats`` times each after a compiling block: medians and their ratio (the draws are the same)."""
    import time as _time

    from renormpp import experiments as ex
    from renormpp.experiments import stages

    print("## 1. Cost of the diagnosis (seconds per block of draws, medians of alternating blocks)\n")
    print(f"| N1 | thin | off (s / {draws} draws) | on (s / {draws} draws) | on / off | draws identical |\n"
          "|---|---|---|---|---|---|")
    for N1 in (20, 400):
        cfgs = {on: ex.config.resolve(mnist_config(out / "cost", [N1], root, stop=False, kernel=on)).points()[0]
                for on in (False, True)}
        data = stages.load_data(cfgs[True].data)
        runs = {on: stages.start_chains(cfgs[on], data) for on in (False, True)}
        states = {on: runs[on][0].run(runs[on][1], draws)[0] for on in (False, True)}  # compile, warm
        times, eps = {False: [], True: []}, {}
        for _ in range(repeats):
            for on in (False, True):
                t0 = _time.perf_counter()
                states[on], d, _ = runs[on][0].run(states[on], draws)
                times[on].append(_time.perf_counter() - t0)
                eps[on] = d["eps_g"]
        off, on = np.median(times[False]), np.median(times[True])
        print(f"| {N1} | {runs[True][0].accumulate.thin} | {off:.2f} | {on:.2f} | {on / off:.3f} | "
              f"{bool(np.array_equal(eps[False], eps[True]))} |")
    print()


def linear() -> None:
    import jax
    from numpyro.infer import MCMC, NUTS

    import renormpp as rp
    from renormpp.diagnostics import kernel as dk
    from renormpp.theory import hidden as ht

    rng = np.random.default_rng(2)
    P, N0, N1, D, T = 30, 40, 10, 2, 0.05
    X, W = rng.normal(size=(P, N0)), rng.normal(size=(N0, D))
    Y = X @ W / np.sqrt(N0)
    X0 = rng.normal(size=(40, N0))
    Y0 = X0 @ W / np.sqrt(N0)
    t0 = time.perf_counter()
    mcmc = MCMC(NUTS(rp.models.mlp), num_warmup=400, num_samples=1000, num_chains=2, chain_method="sequential",
                progress_bar=False)
    f32 = lambda a: np.asarray(a, np.float32)  # noqa: E731
    mcmc.run(jax.random.PRNGKey(0), f32(X), f32(Y), N1=N1, T=T, activation="linear", integrate_v=True)
    samples = mcmc.get_samples(group_by_chain=True)
    hk = dk.measure(samples, X, X0, "linear")
    fit = rp.theory.solve(X, Y, N1=N1, T=T, activation="linear", method="exact")
    d = dk.diagnose(hk, fit, X0, Y0, n=6)
    rb = rp.readout.rao_blackwell(f32(X), f32(Y), f32(X0), f32(Y0), T=T, lambda1=1.0, activation="linear")
    e = np.asarray(rp.observables.evaluate(rb, samples, batch_dims=2)["eps_g"])
    err = rp.diagnostics.gamma_method(e).error
    gp = ht.with_kernel(hk.train, Y, N1=N1, T=T, K_cross=hk.cross, k_test=hk.test, Y_test=Y0,
                        method="infinite_width").eps_g
    print(f"## 2. A linear network, where the theory holds (NUTS, {time.perf_counter() - t0:.0f} s)\n")
    print(f"P={P}, N0={N0}, N1={N1}, D={D}, T={T}, 2 x 1000 draws.\n\n{d.table()}\n\n{d.verdict()}\n")
    print("| eps_g | value | Delta against sampled |\n|---|---|---|")
    for name, v in (("sampled (Rao-Blackwellized)", e.mean()), ("exact theory (K)", d.theory_eps_g),
                    ("oracle: theory with K_post", d.oracle_eps_g),
                    ("matched oracle: theory with K + K_post - K_post(theory)", d.matched_eps_g),
                    ("GP with K_post, Q = 1", gp)):
        print(f"| {name} | {v:.4f} | {v / e.mean() - 1:+.1%} |")
    print(f"\n(sampled error ±{err:.4f}; alignment K {d.alignment:.3f}, K_post {d.alignment_post:.3f} ± "
          f"{d.alignment_err:.3f}, theory {d.alignment_theory:.3f})\n")


def mnist(out: Path, root, run_folder) -> None:
    from renormpp import experiments as ex

    folder = Path(run_folder) if run_folder else ex.run(mnist_config(out / "mnist", (20, 100, 400), root))
    print("## 3. MNIST (0, 1), P = 200, where the theory fails at large alpha\n")
    print("| N1 (alpha) | sampled eps_g | exact theory | oracle (theory with K_post) | kernel verdict | alignment K "
          "-> K_post (theory) | top eigenvalues of lambda0 <w^T w>/N1 |\n|---|---|---|---|---|---|---|")
    for point in sorted((folder / "points").glob("N1=*_seed=0"), key=lambda p: int(p.name[3:].split("_")[0])):
        r = json.loads((point / "result.json").read_text())
        k = json.loads((point / "kernel.json").read_text())
        print(f"| {r['N1']} ({200 / r['N1']:.3g}) | {r['eps_g']:.5f} ± {r['eps_g_error']:.5f} | "
              f"{k['theory_eps_g']:.5f} | {k['oracle_eps_g']:.5f} ± {k['oracle_err']:.5f} | {k['verdict']} | "
              f"{k['alignment']:.3f} -> {k['alignment_post']:.3f} ± {k['alignment_err']:.3f} "
              f"({k['alignment_theory']:.3f}) | {', '.join(f'{g:.2f}' for g in k['first_layer'][:4])} |")
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", help="folder with MNIST's IDX files (default: $RENORMPP_DATA)")
    ap.add_argument("--out", default="hidden-kernel")
    ap.add_argument("--mnist-run", help="an existing renormpp run folder of part 3 to read instead of running it")
    ap.add_argument("--parts", default="123")
    args = ap.parse_args()
    out = Path(args.out)
    print(machine_info(), "\n")
    if "1" in args.parts:
        cost(out, args.root)
    if "2" in args.parts:
        linear()
    if "3" in args.parts:
        mnist(out, args.root, args.mnist_run)


if __name__ == "__main__":
    main()
