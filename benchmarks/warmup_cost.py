"""What the default sampler's warmup costs, phase by phase, in seconds and in gradient evaluations.

Run:  .venv/bin/python benchmarks/warmup_cost.py                  (problem 1 of samplers.py, about 30 s)
      .venv/bin/python benchmarks/warmup_cost.py --seed 1 --draws 100
      .venv/bin/python benchmarks/warmup_cost.py --quick          (a tiny problem, a few seconds)

The chains start, warm up in blocks of 10 draws while the adaptive warmup decides (as ``renormpp run`` does), then
draw ``--draws`` draws after it. Printed per phase: wall seconds, draws, and gradient evaluations of the potential
summed over the chains, counted as they run (:func:`gradient_counter`: a host callback in the potential's derivative
rule, so every evaluation the compiled loops make is seen, and nothing else). A warmup draw and a sampling draw make
the same ``inner_steps`` updates; the warmup's extra cost is the chains' start, the first block's compilation, the
adaptation's host-side checks between blocks, and the number of its draws, which the adaptive warmup's log explains.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from renormpp.experiments import stages
from renormpp.infer import binding

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import samplers  # noqa: E402
from theory_speed import machine_info  # noqa: E402


@contextlib.contextmanager
def gradient_counter():
    """Within the block, every gradient (or Hessian-vector product) of a bound model's potential
    (:class:`renormpp.infer.binding.Bound`) that any compiled sampler evaluates adds one to the yielded list's single
    entry (per chain: a callback in a vmapped function runs once per element). Values and gradients are unchanged."""
    count = [0]

    def bump(_):
        count[0] += 1

    original = binding.Bound.potential

    def potential(self, model_args, model_kwargs):
        energy = original(self, model_args, model_kwargs)

        @jax.custom_jvp
        def counted(x):
            return energy(x)

        @counted.defjvp
        def derivative(primals, tangents):  # reverse mode transposes it: one call per gradient, and per HVP
            (x,), (t,) = primals, tangents
            value, grad = jax.value_and_grad(energy)(x)
            jax.debug.callback(bump, grad[..., :1])
            return value, jnp.vdot(grad, t)

        return counted

    binding.Bound.potential = potential
    try:
        yield count
    finally:
        binding.Bound.potential = original


def profile(cfg, data, draws: int = 50) -> dict:
    """Start, warmup and ``draws`` sampling draws of the config ``cfg``'s chains, each phase's wall seconds, draws and
    gradient evaluations (summed over the chains), and the adaptive warmup's log."""
    phases = {}
    with gradient_counter() as count:
        t0 = time.perf_counter()
        chains, state = stages.start_chains(cfg, data)
        jax.block_until_ready(state)
        phases["start"] = dict(seconds=time.perf_counter() - t0, draws=0, gradients=count[0])
        run = lambda state, n: chains.run(state, n, stages.MAX_BLOCK)  # noqa: E731  one compilation, as renormpp run
        adaptive, W, done, g0 = stages.adaptive_warmup(cfg, chains, state), cfg.sampler.num_warmup, 0, count[0]
        t1 = time.perf_counter()
        first, checks = None, 0.0
        while done < W:
            n = min(W - done, stages.WARMUP_BLOCK if adaptive is not None else 50)
            state, block, stats = run(state, n)
            jax.block_until_ready(state)
            first = first or time.perf_counter() - t1
            done += n
            if adaptive is not None:
                tc = time.perf_counter()
                state = adaptive.update(state, block, stats)
                W = stages.warmup_end(chains, state, W)
                checks += time.perf_counter() - tc
        phases["warmup"] = dict(seconds=time.perf_counter() - t1, draws=done, gradients=count[0] - g0,
                                first_block=first, checks=checks)
        g1, t2 = count[0], time.perf_counter()
        state, _, _ = run(state, draws)
        jax.block_until_ready(state)
        phases["sampling"] = dict(seconds=time.perf_counter() - t2, draws=draws, gradients=count[0] - g1)
    phases["chains"] = cfg.sampler.num_chains
    phases["log"] = list(adaptive.log) if adaptive is not None else []
    return phases


def per_draw(phase: dict, chains: int) -> float:
    """Gradient evaluations per draw of one chain in a phase."""
    return phase["gradients"] / (phase["draws"] * chains)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", type=int, default=1, choices=sorted(samplers.PROBLEMS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--draws", type=int, default=50, help="sampling draws after the warmup (default: %(default)s)")
    ap.add_argument("--quick", action="store_true", help="a tiny problem (P = 60, N0 = 10, N1 = 20, D = 2)")
    args = ap.parse_args()
    if args.quick:
        samplers.PROBLEMS[args.problem] = dict(P=60, N0=10, N1=20, D=2, teacher="linear")
    print(machine_info())
    sampler = samplers.candidates(0)["kinetic on w, v integrated out"]
    cfg = samplers.config(args.problem, sampler, seed=args.seed)
    print(f"problem {args.problem}: {samplers.PROBLEMS[args.problem]}, the default sampler {sampler}, "
          f"seed {args.seed}\n")
    p = profile(cfg, stages.load_data(cfg.data), args.draws)
    c = p["chains"]
    sample_draw = p["sampling"]["seconds"] / p["sampling"]["draws"]
    w = p["warmup"]
    print(f"start: {p['start']['seconds']:.2f} s, {p['start']['gradients']} gradient evaluations")
    print(f"warmup: {w['draws']} draws in {w['seconds']:.2f} s ({1e3 * w['seconds'] / w['draws']:.0f} ms per draw; "
          f"its first block of {stages.WARMUP_BLOCK}, compilation included, {w['first_block']:.2f} s, the other "
          f"blocks {1e3 * (w['seconds'] - w['first_block']) / max(w['draws'] - stages.WARMUP_BLOCK, 1):.0f} ms per "
          f"draw), {per_draw(w, c):.2f} gradient evaluations per draw and chain")
    print(f"sampling: {p['sampling']['draws']} draws in {p['sampling']['seconds']:.2f} s "
          f"({1e3 * sample_draw:.0f} ms per draw), {per_draw(p['sampling'], c):.2f} gradient evaluations per draw "
          f"and chain")
    total = p["start"]["seconds"] + w["seconds"]
    print(f"\nwarmup with the start: {total:.2f} s = {total / sample_draw:.0f} sampling draws; of it the start and "
          f"compilation {p['start']['seconds'] + w['first_block'] - stages.WARMUP_BLOCK * sample_draw:.2f} s, the "
          f"adaptive warmup's checks {w['checks']:.2f} s, the draws {w['draws'] * sample_draw:.2f} s at the sampling "
          f"rate")
    print(f"gradient evaluations per warmup draw / per sampling draw: "
          f"{(p['start']['gradients'] + w['gradients']) / (w['draws'] * c) / per_draw(p['sampling'], c):.3f} "
          f"(the start's included)")
    print("adaptive warmup: " + "; ".join(p["log"]))


if __name__ == "__main__":
    main()
