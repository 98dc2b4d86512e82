"""MNIST D = 3 at alpha = 10 with the reflection move between specialist states (renormpp.infer.StateSwaps).

Run:  .venv/bin/python benchmarks/state_swaps.py --root ../shared/data/mnist            (default cap 60 min)
      .venv/bin/python benchmarks/state_swaps.py --minutes 28 --out runs/state-swaps    (resumes where it stopped)
      .venv/bin/python benchmarks/state_swaps.py --report                               (the tables of a saved run)
      .venv/bin/python benchmarks/state_swaps.py --quick                                (smoke run: P = 200, N1 = 20)

The point of Fig. 1b: MNIST (1, 2, 3), P = 1000, P_test = 1000, seed 0 (the data of `renormpp paper fig1b --size
full`), N1 = 100, T = 0.01, lambda0 = lambda1 = 1; w's marginal (v integrated out) sampled by the default kernel
(spec.kernel(): kinetic Langevin, pooled adaptation) inside StateSwaps, with a reflection between two class-contrast
directions (class_contrasts: 6 directions, 15 reflections) of the neuron of largest |w.n| attempted before every
draw. Chains of two kinds of start, `--chains` each: from the prior (specialist-free) and planted (neurons 0, 1, 2 set
to the three contrast templates at the prior's norm sqrt(N0), the rest from the prior).

Between blocks of `--block` draws the run saves its state and series under OUT (resumable; the wall cap is checked
between blocks) and scores every reflection at each chain's current weights (log_ratios: the log acceptance of the
move of the 1, 2 or 3 most aligned neurons, 1 random neuron, or every neuron, along each of the 15 normals). It
reports: the acceptance of the move in the run; the survey of which moves a state accepts; the states
(rp.diagnostics.states of eps_g and the readout overlaps) with their weights and transitions; eps_g per state, per
kind of start and pooled, against the exact theory; and the log-likelihood of each kind of start (the planted-start
test of Piccioli, Troiani, Zdeborova, arXiv:2306.02729: where the planted chains hold a state of higher likelihood
than the specialist-free chains ever reach, the specialist-free chains have not equilibrated).
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from theory_speed import machine_info  # noqa: E402

T = 0.01
SURVEY = (("aligned", 1), ("aligned", 2), ("aligned", 3), ("random", 1), ("all", 0))


def setup(args):
    import renormpp as rp

    root = args.root if args.root is None or str(args.root).rstrip("/").endswith("mnist") else \
        os.path.join(args.root, "mnist")
    P, N1 = (200, 20) if args.quick else (1000, 100)
    data = rp.datasets.mnist(classes=(1, 2, 3), P=P, P_test=1000, root=root, seed=0)
    spec = rp.Spec(data, N1=N1, T=T)
    return spec, rp.infer.class_contrasts(spec.X, spec.Y)


def starts(spec, U, chains, seed):
    """(2 chains, N1, N0) initial w: prior draws, then planted (neurons 0..2 on the pair templates)."""
    rng = np.random.default_rng(seed)
    N0 = spec.X.shape[1]
    w = rng.standard_normal((2 * chains, spec.N1, N0))
    for c in range(chains, 2 * chains):
        w[c, :U.shape[0] // 2] = U[::2] * np.sqrt(N0)  # the + sign of each pair (1v2, 1v3, 2v3)
    return w.astype(np.float32)


def potential_of(spec):
    """U(w) of w's marginal posterior (prior included), as the kernel's model defines it."""
    import jax
    from numpyro.infer.util import potential_energy

    def U(W):
        return potential_energy(spec.marginal_model, (), {}, {"w": W})
    return jax.jit(U)


def log_likelihood(spec, W):
    """log p(Y | w) of the marginal (v integrated out), per chain: -U minus the log prior."""
    import jax.numpy as jnp

    U = potential_of(spec)
    return np.array([-float(U(jnp.asarray(w))) + 0.5 * float(np.sum(np.asarray(w, float) ** 2))
                     + 0.5 * w.size * np.log(2 * np.pi) for w in W])


def survey(spec, W, normals):
    """Per selection of SURVEY: the log acceptance ratios (chain, normal) at weights W (chain, N1, N0)."""
    import jax

    from renormpp.infer.swaps import log_ratios

    U = potential_of(spec)
    out = {}
    for sel, k in SURVEY:
        out[f"{sel}{k or ''}"] = np.stack([log_ratios(U, w, normals, selection=sel, k=max(k, 1),
                                                      rng_key=jax.random.PRNGKey(c)) for c, w in enumerate(W)])
    return out


def learned_directions(spec, W, top=3):
    """The unit weight vectors of each chain's ``top`` neurons of largest readout energy (studies/specialist_states.py),
    (chain * top, N0), and the chain each came from."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "studies"))
    from specialist_states import neurons

    dirs, owner = [], []
    for c, w in enumerate(np.asarray(W, np.float64)):
        energy = neurons(w, spec.X, spec.Y)[0]
        for i in np.argsort(-energy)[:top]:
            dirs.append(w[i] / np.linalg.norm(w[i]))
            owner.append(c)
    return np.stack(dirs), np.array(owner)


def survey_learned(spec, W):
    """Per chain and k = 1, 2, 3: the largest log acceptance ratio of the "aligned" reflection between two learned
    specialist directions of different chains (:func:`learned_directions`), the pair it is, and the share of such
    pairs whose move is accepted with probability above 1e-3."""
    from renormpp.infer.swaps import log_ratios

    U = potential_of(spec)
    dirs, owner = learned_directions(spec, W)
    pairs = [(a, b) for a in range(len(dirs)) for b in range(a + 1, len(dirs)) if owner[a] != owner[b]]
    normals = np.stack([(dirs[a] - dirs[b]) / np.linalg.norm(dirs[a] - dirs[b]) for a, b in pairs])
    rows = []
    for c, w in enumerate(W):
        for k in (1, 2, 3):
            r = log_ratios(U, w, normals, selection="aligned", k=k)
            j = int(np.argmax(r))
            rows.append((c, k, float(r[j]), pairs[j], float(np.mean(r > np.log(1e-3)))))
    return rows


def run(args, out: Path):
    import jax

    import renormpp as rp
    from renormpp.infer import Chains, StateSwaps

    spec, U = setup(args)
    if args.directions != "contrasts":
        U = learned_directions(spec, np.load(args.directions))[0]
    kernel = StateSwaps(spec.kernel(), U, every=args.every, neurons=args.neurons, k=args.k)
    C = 2 * args.chains
    chains = Chains(kernel, num_chains=C, extra_fields=("swap_accept_prob", "potential_energy"))
    state = chains.init(jax.random.PRNGKey(args.seed), args.warmup,
                        init_params={"w": starts(spec, U, args.chains, args.seed)})
    saved = out / "state.pkl"
    series = {}
    if saved.exists():
        with open(saved, "rb") as f:
            state, series = pickle.load(f)
        print(f"resumed at {series['eps_g'].shape[1]} draws per chain", flush=True)
    t0, cap = time.time(), 60 * args.minutes
    while time.time() - t0 < cap and series.get("eps_g", np.zeros((C, 0))).shape[1] < args.warmup + args.draws:
        tb = time.time()
        state, draws, stats = chains.run(state, args.block)
        new = dict(eps_g=np.asarray(draws["eps_g"]), overlap=np.asarray(draws["overlap"]),
                   U=np.asarray(stats["potential_energy"]), swap=np.asarray(stats["swap_accept_prob"]))
        series = {k: np.concatenate([series[k], v], axis=1) if k in series else v for k, v in new.items()}
        W = np.asarray(state.z["w"])
        scores = survey(spec, W, kernel.normals)
        row = {"draws": int(series["eps_g"].shape[1]), "seconds": time.time() - tb,
               "swaps_accepted": np.asarray(state.swaps_accepted).tolist(),
               "swaps_tried": np.asarray(state.swaps_tried).tolist(),
               "log_likelihood": log_likelihood(spec, W).tolist(),
               "survey_max": {k: v.max(axis=1).tolist() for k, v in scores.items()},
               "survey_accept": {k: np.mean(np.exp(np.minimum(v, 0)), axis=1).tolist() for k, v in scores.items()}}
        with open(out / "blocks.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        with open(saved, "wb") as f:
            pickle.dump((jax.device_get(state), series), f)
        np.save(out / "w_last.npy", W)
        print(f"{row['draws']} draws, {row['seconds']:.0f} s; swaps {row['swaps_accepted']}/{row['swaps_tried']}; "
              f"eps_g last block {np.round(new['eps_g'].mean(axis=1), 4).tolist()}", flush=True)
    return spec


def report(args, out: Path, spec=None):
    import renormpp as rp
    from renormpp.mcstats import errors

    if spec is None:
        spec, _ = setup(args)
    with open(out / "state.pkl", "rb") as f:
        _, series = pickle.load(f)
    blocks = [json.loads(x) for x in open(out / "blocks.jsonl")]
    C, n = series["eps_g"].shape
    kinds = ["prior"] * (C // 2) + ["planted"] * (C // 2)
    cut = min(args.warmup, n - 1)
    last = blocks[-1]
    print(f"\n## MNIST (1, 2, 3), P = {spec.P}, N1 = {spec.N1}: {C} chains x {n} draws ({args.warmup} warmup), "
          f"{sum(b['seconds'] for b in blocks):.0f} s of sampling\n")
    acc, tried = np.array(last["swaps_accepted"]), np.array(last["swaps_tried"])
    print("| chain | start | moves accepted / tried | log-likelihood at the end | eps_g after the warmup |\n"
          "|---|---|---|---|---|")
    for c in range(C):
        e = errors.error_of_mean(series["eps_g"][c:c + 1, cut:], cut=0)
        print(f"| {c} | {kinds[c]} | {acc[c]} / {tried[c]} | {last['log_likelihood'][c]:.1f} | "
              f"{e.mean:.5f} ± {e.error:.5f} |")
    print("\nSurvey at the last block: per selection, the largest log acceptance ratio over the 15 reflections and the "
          "mean acceptance over them, per chain\n\n| move | " + " | ".join(f"chain {c}" for c in range(C))
          + " |\n" + "|---" * (C + 1) + "|")
    for k in last["survey_max"]:
        print(f"| {k} | " + " | ".join(f"{m:.0f} ({a:.2g})" for m, a in zip(last["survey_max"][k],
                                                                               last["survey_accept"][k])) + " |")
    iu = np.triu_indices(3)
    q = {"eps_g": series["eps_g"][:, cut:]}
    for a, b in zip(*iu):
        q[f"overlap[{a},{b}]"] = series["overlap"][:, cut:, a, b]
    st = rp.diagnostics.states(q)
    print("\n" + str(st))
    try:
        from renormpp import theory

        th, _ = theory.fit_or_reason(spec.theory(), "exact")
        eps_theory = float(th.generalization_error(spec.X_test, spec.Y_test))
    except Exception as err:  # the report's tables do not depend on it
        print(f"(the exact theory failed: {err})")
        eps_theory = float("nan")
    print(f"\neps_g per state (blocks of {st.block} draws; error: spread of the state's block means / sqrt(blocks)), "
          f"exact theory {eps_theory:.4f}\n\n| state | blocks | eps_g |\n|---|---|---|")
    K = st.labels.shape[1]
    bm = q["eps_g"][:, :K * st.block].reshape(C, K, st.block).mean(axis=2)
    for s in range(st.count):
        x = bm[st.labels == s]
        err = x.std(ddof=1) / np.sqrt(len(x)) if len(x) > 1 else float("nan")
        print(f"| {s} | {len(x)} | {x.mean():.5f} ± {err:.5f} |")
    for kind in ("prior", "planted"):
        sel = [c for c in range(C) if kinds[c] == kind]
        e = errors.error_of_mean(q["eps_g"][sel], cut=0)
        print(f"| {kind} starts, pooled | | {e.mean:.5f} ± {e.error:.5f} |")
    e = errors.error_of_mean(q["eps_g"], cut=0)
    print(f"| all chains, pooled | | {e.mean:.5f} ± {e.error:.5f} |")
    ll = np.array(last["log_likelihood"])
    print(f"\nlog-likelihood at the end: prior starts {np.round(ll[:C // 2], 1).tolist()}, planted "
          f"{np.round(ll[C // 2:], 1).tolist()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.environ.get("RENORMPP_DATA", "/work/shared/data/mnist"))
    ap.add_argument("--out", default="runs/state-swaps")
    ap.add_argument("--minutes", type=float, default=60.0, help="wall-time cap of the sampling (checked per block)")
    ap.add_argument("--chains", type=int, default=2, help="chains per kind of start (prior, planted)")
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--draws", type=int, default=20000, help="draws after the warmup, at most")
    ap.add_argument("--block", type=int, default=200)
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--neurons", default="aligned")
    ap.add_argument("--k", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="P = 200, N1 = 20, a few blocks: a smoke run")
    ap.add_argument("--report", action="store_true", help="only print the tables of the saved run")
    ap.add_argument("--directions", default="contrasts",
                    help="'contrasts' (class_contrasts) or a .npy of weights (chains, N1, N0), e.g. OUT/w_last.npy of "
                         "a run: the unit vectors of each chain's three neurons of largest readout energy")
    ap.add_argument("--survey-learned", metavar="NPY",
                    help="only score the reflections between the learned specialists of the chains in NPY "
                         "(chains, N1, N0), at each of them")
    args = ap.parse_args()
    if args.quick:
        args.warmup, args.draws, args.block = 50, 100, 50
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(machine_info(), flush=True)
    if args.survey_learned:
        spec, _ = setup(args)
        W = np.load(args.survey_learned)
        print("\n| chain | neurons moved (k) | best log acceptance | pair (directions: chain*3 + rank) | "
              "share of pairs accepted > 1e-3 |\n|---|---|---|---|---|")
        for c, k, best, pair, share in survey_learned(spec, W):
            print(f"| {c} | {k} | {best:.1f} | {pair} | {share:.3f} |")
        return
    spec = None if args.report else run(args, out)
    report(args, out, spec)


if __name__ == "__main__":
    main()
