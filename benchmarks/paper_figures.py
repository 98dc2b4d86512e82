"""Wall time of ``renormpp paper FIGURE`` for every figure, in the order of the paper, into one output folder (so
that figures sharing a sweep share it, as a user running them all would).

    python benchmarks/paper_figures.py [--size quick] [--out renormpp-paper-quick] [--only fig1a fig2]

Prints one line per figure (seconds, the figure's folder) and a Markdown table for benchmarks/README.md. Needs the
MNIST and CIFAR-10 files for all figures but fig1a and sm-mc ($RENORMPP_DATA).
"""
from __future__ import annotations

import argparse
import platform
import subprocess
import time

from renormpp.experiments import paper


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="quick", choices=paper.SIZES)
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", nargs="*", default=list(paper.FIGURES))
    args = ap.parse_args()
    out = args.out or str(paper.default_out(args.size))
    rows = []
    for name in args.only:
        start = time.perf_counter()
        folder = paper.make(name, args.size, out, progress=False)
        seconds = time.perf_counter() - start
        rows.append((name, seconds))
        print(f"{name}: {seconds:.0f} s -> {folder}", flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"\nsize {args.size}, commit {commit}, {platform.processor() or platform.machine()}, "
          f"{__import__('os').cpu_count()} cores\n\n| figure | wall time (s) |\n|---|---|")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.0f} |")


if __name__ == "__main__":
    main()
