"""How many specialist neurons a sampled network on MNIST (0, 1) has, at loads alpha = P/N1 from 1 to 10.

Each point (P, N1): w's marginal (v integrated out) sampled with the default kernel (``rp.Spec(...).kernel()`` on
``spec.marginal_model``, two vectorized chains, one from a prior draw and one from a prior draw at half its scale),
capped in wall time (``--max-seconds``, ``--max-seconds-large`` for P = 1000). The thinned draws of w (at most
``--keep`` per chain, float32) and the Rao-Blackwellized eps_g of each are written, as soon as the point ends, to
``{out}/network_P{P}_N1{N1}.npz`` (keys ``w`` (chains, draws, N1, N0), ``eps_g`` (chains, draws), ``seconds``); a
rerun reads them back instead of sampling. Each point's draws then go through
:func:`renormpp.diagnostics.specialists` (the per-neuron readout energy, alignment with the label contrast and
score; the count k of specialists per draw; their share of the readout energy; whether they stay the same neurons
along a chain). Writes ``specialist_count.json`` and ``specialist_count.png`` (the score histogram of each point on
a log scale, with the threshold; the distribution of k per point) into ``--out``.

Run:  .venv/bin/python studies/specialist_count.py --root /work/shared/data/mnist
      (P = 200 at N1 = 200, 100, 50, 20 and P = 1000 at N1 = 250, 100: about 2 min per P = 200 point and 8 min per
      P = 1000 point on 2 cores; ``--points 200:20 1000:500`` picks points; ``--quick``: P = 40 smoke run)
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

import renormpp as rp

T = 0.01
POINTS = ((200, 200), (200, 100), (200, 50), (200, 20), (1000, 250), (1000, 100))
#: the sampled eps_g of long runs (MNIST (0, 1), T = 0.01, P_test = 1000), to check that the chains are in place
KNOWN_EPS_G = {(200, 400): 0.07542, (200, 200): 0.05662, (200, 100): 0.02946, (200, 50): 0.01552,
               (200, 20): 0.01019, (1000, 100): 0.004452, (1000, 250): 0.009404, (1000, 500): 0.017716}


def rb_eps_g(d, w):
    """The Rao-Blackwellized eps_g of each draw of w (chains, draws, N1, N0): v integrated out given w."""
    from renormpp import observables, readout

    rb = readout.rao_blackwell(d.X, d.Y, d.X_test, d.Y_test, T=T, lambda1=1.0, activation="erf")
    out = [np.asarray(observables.evaluate(rb, {"w": w[:, i:i + 10].astype(np.float32)}, batch_dims=2)["eps_g"])
           for i in range(0, w.shape[1], 10)]
    return np.concatenate(out, axis=1)


#: the guessed seconds of one draw (two vectorized chains) at P = N1 = 200 on 2 busy cores; it scales as P N1
SECONDS_PER_DRAW = 0.2


def sample(d, N1, *, max_seconds, keep, warmup_share, seed):
    """Draws of w (chains, draws, N1, N0) of the default kernel, at most ``keep`` per chain, within about
    ``max_seconds``: the kernel's own steps (``kernel.init``, then ``kernel.sample`` jitted once) in a Python loop
    that reads the clock. The warmup's length is set at the start from a guess of a draw's time
    (:data:`SECONDS_PER_DRAW`), corrected once from the first timed draws (a restart of the warmup from where it
    stands) where the guess was off by more than a factor 3; the draws after it are kept every ``thin`` draws, and
    ``thin`` doubles (every other kept draw dropped) whenever more than ``keep`` are kept; the draws after the warmup
    take at least ``1 - warmup_share`` of ``max_seconds``, even where the warmup took longer than planned. Returns the draws, the
    thinning, the warmup's length and the seconds spent."""
    import jax

    spec = rp.Spec(d, N1=N1, T=T)
    kernel = spec.kernel(observables=None)  # record w itself
    w0 = np.random.default_rng(seed).standard_normal((2, N1, d.X.shape[1])).astype(np.float32)
    w0[1] *= 0.5  # the second chain starts from a prior draw at half its scale
    keys = jax.random.split(jax.random.PRNGKey(seed), 2)
    t0 = time.perf_counter()
    guess = 0.005 + SECONDS_PER_DRAW * d.X.shape[0] * N1 / 200**2
    warmup = max(100, int(warmup_share * max_seconds / guess))
    state = kernel.init(keys, warmup, {"w": w0}, (), {})
    step = jax.jit(lambda s: kernel.sample(s, (), {}))
    for _ in range(2):  # two compilations: the initial state's types are weak, the next ones' not
        state = jax.block_until_ready(step(state))
    t = time.perf_counter()
    for _ in range(10):
        state = step(state)
    jax.block_until_ready(state)
    per_draw = (time.perf_counter() - t) / 10
    done = 12
    if not 1 / 3 < per_draw / guess < 3:
        warmup = max(100, int(warmup_share * (max_seconds - (time.perf_counter() - t0)) / per_draw))
        state = kernel.init(keys, warmup, {"w": state.z["w"]}, (), {})
        step = jax.jit(lambda s: kernel.sample(s, (), {}))
        done = 0  # (this warmup's draws begin again; its two compilations come with its first draws)
    for _ in range(warmup - done):
        state = step(state)
    jax.block_until_ready(state)
    left = max_seconds - (time.perf_counter() - t0)
    thin = max(1, int(max(left, (1 - warmup_share) * max_seconds) / per_draw / keep))
    print(f"  N1 = {N1}: {per_draw * 1e3:.0f} ms per draw (guess {guess * 1e3:.0f} ms); warmup {warmup} draws "
          f"({time.perf_counter() - t0:.0f} s), then thinning {thin}", flush=True)
    kept, n = [], 0
    end = max(t0 + max_seconds, time.perf_counter() + (1 - warmup_share) * max_seconds)  # a slow warmup: still draws
    while time.perf_counter() < end or len(kept) < 2:
        state = step(state)
        n += 1
        if n % thin == 0:
            kept.append(np.asarray(state.z["w"], dtype=np.float32))
            if len(kept) > keep:
                kept, thin = kept[1::2], 2 * thin
    return np.stack(kept, axis=1), thin, warmup, time.perf_counter() - t0


def point(d, P, N1, args, out):
    """The saved draws of one point, sampled first where they are missing."""
    path = out / f"network_P{P}_N1{N1}.npz"
    if path.exists():
        z = np.load(path)
        return z["w"], z["eps_g"], float(z["seconds"]), int(z["thin"]) if "thin" in z else None
    cap = args.max_seconds if P <= 200 else args.max_seconds_large
    w, thin, warmup, seconds = sample(d, N1, max_seconds=cap, keep=args.keep, warmup_share=args.warmup_share,
                                      seed=args.seed)
    eps = rb_eps_g(d, w)
    np.savez(path, w=w.astype(np.float32), eps_g=eps, seconds=seconds, thin=thin, warmup=warmup)
    return w, eps, seconds, thin


def summarize(res, eps, P, N1, seconds, thin):
    known = KNOWN_EPS_G.get((P, N1))
    half = eps.shape[1] // 2
    return dict(P=P, N1=N1, alpha=P / N1, seconds=seconds, thin=thin, chains=int(eps.shape[0]),
                draws=int(eps.shape[1]), eps_g=float(eps[:, half:].mean()),
                eps_g_chains=eps[:, half:].mean(axis=1).tolist(), eps_g_known=known,
                k_fractions=res.k_fractions.tolist(), k_fractions_chain=res.k_fractions_chain.tolist(),
                k_mean=float(res.k.mean()), top_scores=res.top_scores.tolist(),
                specialist_share=float(res.specialist_share), persistence=float(res.persistence),
                bulk_score_q99=float(np.quantile(res.score, 0.99)), threshold=float(res.threshold))


def figure(results, scores, path, threshold):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(results)
    fig, axes = plt.subplots(2, n, figsize=(2.8 * n, 5.2), layout="constrained", squeeze=False)
    for j, r in enumerate(results):
        s = scores[j].ravel()
        bins = np.logspace(np.log10(max(s.min(), 1e-6)), np.log10(s.max() * 1.01), 50)
        ax = axes[0, j]
        ax.hist(s, bins=bins, color="C0")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.axvline(threshold, color="k", ls="--", lw=1)
        ax.set_title(f"P={r['P']}, N1={r['N1']} (alpha={r['alpha']:g})", fontsize="small")
        ax.set_xlabel("score N1 (e_i/sum e) a_i")
        ax = axes[1, j]
        f = np.asarray(r["k_fractions"])
        ax.bar(np.arange(len(f)), f, color="C1")
        ax.set_xlabel("k (specialists per draw)")
        ax.set_ylim(0, 1)
    axes[0, 0].set_ylabel("neurons x draws")
    axes[1, 0].set_ylabel("fraction of draws")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", help="the MNIST folder (default: the loaders' rules, RENORMPP_DATA)")
    ap.add_argument("--out", default="runs/specialists")
    ap.add_argument("--points", nargs="*", help="P:N1 pairs (default: the six of the study)")
    ap.add_argument("--max-seconds", type=float, default=120.0, help="wall-time cap of a P = 200 point")
    ap.add_argument("--max-seconds-large", type=float, default=480.0, help="wall-time cap of a P = 1000 point")
    ap.add_argument("--keep", type=int, default=100, help="draws of w kept per chain (at most)")
    ap.add_argument("--warmup-share", type=float, default=0.4, help="share of a point's time spent in warmup")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sample-only", action="store_true", help="sample and save the points, no analysis")
    ap.add_argument("--quick", action="store_true", help="P = 40, N1 = 4 and 20, a few seconds: a smoke run")
    args = ap.parse_args(argv)
    points = [tuple(int(x) for x in p.split(":")) for p in args.points] if args.points else list(POINTS)
    if args.quick:
        points, args.max_seconds, args.keep = [(40, 4), (40, 20)], 15.0, 20
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = {}
    results, scores = [], []
    for P, N1 in points:
        if P not in data:
            data[P] = rp.datasets.mnist(classes=(0, 1), P=P, P_test=100 if args.quick else 1000, root=args.root,
                                        seed=0)
        d = data[P]
        w, eps, seconds, thin = point(d, P, N1, args, out)
        if args.sample_only:
            print(f"P = {P}, N1 = {N1}: {w.shape[0]} x {w.shape[1]} draws (thin {thin}), {seconds:.0f} s; eps_g "
                  f"second half {eps[:, eps.shape[1] // 2:].mean():.5g} (long runs: {KNOWN_EPS_G.get((P, N1))})",
                  flush=True)
            continue
        res = rp.diagnostics.specialists(w.astype(np.float64), d.X, d.Y, T=T)
        results.append(r := summarize(res, eps, P, N1, seconds, thin))
        scores.append(res.score)
        known = "" if r["eps_g_known"] is None else f" (long runs: {r['eps_g_known']:.5g})"
        print(f"P = {P}, N1 = {N1} (alpha = {P / N1:g}): {r['chains']} x {r['draws']} draws (thin {thin}), "
              f"{seconds:.0f} s; eps_g second half {r['eps_g']:.5g} per chain "
              f"{np.round(r['eps_g_chains'], 5).tolist()}{known}", flush=True)
        print(f"  k: mean {r['k_mean']:.2f}, fractions {np.round(r['k_fractions'], 3).tolist()}, per chain "
              f"{np.round(r['k_fractions_chain'], 3).tolist()}; top scores {np.round(r['top_scores'], 2).tolist()}; "
              f"specialists' energy share {r['specialist_share']:.3f}; persistence {r['persistence']:.3f}",
              flush=True)
    (out / "specialist_count.json").write_text(json.dumps(results, indent=1))
    if results:
        figure(results, scores, out / "specialist_count.png", rp.diagnostics.SPECIALIST_THRESHOLD)
    print(f"wrote {out / 'specialist_count.json'} and {out / 'specialist_count.png'}")
    if math.isnan(sum(r["eps_g"] for r in results)):
        raise SystemExit("a point's eps_g is NaN")


if __name__ == "__main__":
    main()
