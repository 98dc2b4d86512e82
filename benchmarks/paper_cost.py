"""What the whole paper costs at its full size on this machine (issue 34, item 3): the default sampler's seconds per
draw at every series and width of ``renormpp paper all --size full``, and the hours that N draws per width take.

Run:  .venv/bin/python benchmarks/paper_cost.py --root DATA            (about 15 minutes on 2 cores)
      .venv/bin/python benchmarks/paper_cost.py --root DATA --series mnist-D2 --N1 1000 --draws 5

DATA holds mnist/ (the IDX files) and cifar-10-batches-py/ (for ../shared/data: python
../shared/data/cifar10/to_batches.py DATA, and the mnist folder copied or linked beside it).

Each width is built as ``renormpp run`` builds it (the point's data, its sampler and its observables: the default
kinetic Langevin, v integrated out, two chains vectorized, 10 updates per draw, the hidden kernel's accumulator where
the point measures it) and timed over one block of ``--draws`` draws after the warmup, after a block that compiles
it (a warmup draw costs up to 40% more: the adaptation). The total is the sum over the series' widths (each series once, as ``paper
all`` shares them) of the seconds for ``--per-width`` draws (2000 by default: the order of what the settled widths
of Fig. 1b needed, 430-2811 draws) plus the warmup's 200.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from theory_speed import machine_info  # noqa: E402


#: the figures of the kernel-shape paper that issue 34 asks for at full size (fig3, fig4: the baselines' figures)
FIGURES = ("fig1a", "fig1b", "fig1c", "fig1d", "fig2", "sm-overlaps", "sm-mc")


def series_configs(size: str = "full") -> dict[str, dict]:
    """Every series of the paper's figures at ``size`` once (``paper all`` runs a shared series once)."""
    from renormpp.experiments import paper

    out = {}
    for name in FIGURES:
        out.update(paper.configs(name, size, out="/tmp/paper-cost-unused"))
    return out


def seconds_per_draw(raw: dict, N1: int, draws: int, num_chains: int | None = None, warmup: bool = False) -> float:
    """The seconds per draw (of all chains) of width ``N1``: one block of ``draws`` draws after the warmup (with
    ``warmup``: inside it, the adaptation included), after a block of two draws that compiles it; ``num_chains``: in
    place of the config's (2)."""
    from renormpp.experiments import config, stages

    chains = {} if num_chains is None else {"num_chains": int(num_chains)}
    raw = {**raw, "model": {**raw["model"], "N1": [N1]},
           "sampler": {**raw.get("sampler", {}), "num_warmup": 200 if warmup else 1, **chains},
           "run": {**raw["run"], "seeds": [0]}}
    point = config.resolve(raw).points()[0]
    data = stages.load_data(point.data, point.model)
    chains, state = stages.start_chains(point, data)
    state, *_ = chains.run(state, 2, draws)  # compiles the block (and passes the warmup's end and its noise check)
    t0 = time.perf_counter()
    chains.run(state, draws, draws)  # returns host arrays: the draws are done
    return (time.perf_counter() - t0) / draws


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", help="the data folder (RENORMPP_DATA): mnist/ and cifar10/ below it")
    ap.add_argument("--series", nargs="*", help="only these series (default: all)")
    ap.add_argument("--N1", nargs="*", type=int, help="only these widths (default: every width of a series)")
    ap.add_argument("--draws", type=int, default=3, help="timed draws per width (median)")
    ap.add_argument("--per-width", type=int, default=2000, help="draws per width in the total")
    a = ap.parse_args(argv)
    if a.root:
        os.environ["RENORMPP_DATA"] = a.root
    print(machine_info())
    rows, total = [], 0.0
    for name, raw in series_configs().items():
        if a.series and name not in a.series:
            continue
        for N1 in raw["model"]["N1"]:
            if a.N1 and N1 not in a.N1:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    s = seconds_per_draw(raw, N1, a.draws)
                except Exception as e:  # noqa: BLE001 (a missing data set: say so and go on)
                    print(f"{name} N1={N1}: not measured ({type(e).__name__}: {str(e)[:120]})", flush=True)
                    continue
            hours = s * (a.per_width + 200) / 3600
            total += hours
            rows.append((name, N1, s, hours))
            print(f"{name} N1={N1}: {1000 * s:.0f} ms/draw, {hours:.2f} h for {a.per_width} draws + warmup",
                  flush=True)
    print(f"\n| series | N1 | ms per draw | h for {a.per_width} draws + 200 warmup |\n|---|---|---|---|")
    for name, N1, s, hours in rows:
        print(f"| {name} | {N1} | {1000 * s:.0f} | {hours:.2f} |")
    print(f"\ntotal: {total:.1f} h on this machine for {len(rows)} widths")


if __name__ == "__main__":
    main()
