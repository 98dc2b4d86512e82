"""The ``renormpp`` command line.

* ``renormpp run CONFIG.toml`` runs a sweep (``renormpp run OUTDIR`` resumes one);
* ``renormpp demo`` runs the built-in sweep on a synthetic teacher (theory and sampling, a few minutes);
* ``renormpp report OUTDIR`` rewrites the report of a sweep from its finished points;
* ``renormpp paper FIGURE`` runs (or resumes) the sweeps of a figure of the paper and draws it;
* ``renormpp validity-map`` samples (or resumes) the validity map and writes where each theory holds;
* ``renormpp data fetch NAME`` downloads MNIST or CIFAR-10 (checked by MD5) where the loaders look for them.
"""
from __future__ import annotations

import argparse
import sys

DESCRIPTION = """\
Finite Bayesian networks sampled with NumPyro, against their proportional-limit theory.

  renormpp run CONFIG.toml   run a sweep over N1 (renormpp run OUTDIR resumes or extends one)
  renormpp demo              the built-in sweep on a synthetic teacher (2-3.5 minutes on a 2-core machine)
  renormpp report OUTDIR     rewrite the report of a sweep from its finished points
  renormpp paper FIGURE      a figure of the paper (fig1a ... fig4): its sweeps run or resumed, then drawn
  renormpp validity-map      where each theory holds within 1% and 5%: a grid of sampled networks (resumable)
  renormpp data fetch NAME   download mnist, cifar10 or all (checked by MD5), which the paper's figures need"""

EXIT_CODES = """\
exit status:
  0    done
  1    some points failed (the others are in the report)
  2    a bad config, command line or data set, or an output folder that cannot be written or is in use
  130  stopped by Ctrl-C (the last finished block of draws was saved: run the same command to resume)
  143  stopped by SIGTERM (progress saved: run the same command to resume)"""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("renormpp")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0+unknown"


def _parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(prog="renormpp", description=DESCRIPTION, epilog=EXIT_CODES, formatter_class=fmt)
    parser.add_argument("--version", action="version", version=f"renormpp {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = sub.add_parser("run", help="run or resume a sweep from a TOML config (or an output folder)",
                         description="Run or resume a sweep from a TOML config, or resume the sweep in an output "
                                     "folder.", epilog=EXIT_CODES, formatter_class=fmt)
    run.add_argument("config", help="a TOML config file, or the output folder of an earlier run to resume it")
    demo = sub.add_parser("demo", help="the built-in sweep: theory and sampling over N1 on a synthetic teacher",
                          description="The built-in sweep: theory and sampled finite networks at four widths N1 "
                                      "on a synthetic teacher (1000 draws per chain each; 2-3.5 minutes on a "
                                      "2-core machine; its wall time is recorded in timing.json).",
                          epilog=EXIT_CODES, formatter_class=fmt)
    demo.add_argument("--out", help="output folder (default: renormpp-demo, or renormpp-demo-smoke for --size smoke)")
    demo.add_argument("--size", choices=("full", "smoke"), default="full",
                      help="full (default) or smoke: two widths and a tenth of the draws, under a minute, to check "
                           "an installation")
    demo.add_argument("--print-config", action="store_true", help="print the demo's config (a starting point for "
                                                                  "your own) and exit")
    from .experiments.paper import NAMES, SIZES

    paper = sub.add_parser("paper", help="a figure of the paper: its sweeps run (or resumed), then drawn",
                           description="A figure of the paper from its sweeps (each a renormpp run config; run again "
                                       "to resume): PNG and PDF, data.csv, theory.csv and summary.md in OUT/FIGURE.",
                           epilog=EXIT_CODES, formatter_class=fmt)
    paper.add_argument("figure", help=f"one of {', '.join(NAMES)}, or all (every figure of the kernel-shape paper in "
                                      "turn, sweeps shared; cnn, the convolutional figure, only by name)")
    paper.add_argument("--size", default="quick", help=f"one of {', '.join(SIZES)} (default: %(default)s; quick: "
                                                       "minutes on 2 cores, full: the paper's sizes)")
    paper.add_argument("--out", help="output folder (default: renormpp-paper-SIZE; figures sharing a sweep share it)")
    paper.add_argument("--print-config", action="store_true", help="print the figure's renormpp run configs and exit")
    paper.add_argument("--series", help="with --print-config: print this series' config only")
    paper.add_argument("--max-seconds", type=float, default=None,
                       help="cap each width's sampling at this many seconds (run.max_seconds; a resumed figure may "
                            "change it; a width stopped unsettled is drawn hollow)")
    from .experiments.validity import SIZES as MAP_SIZES

    vmap = sub.add_parser("validity-map", help="where each theory holds within 1%% and 5%%: the validity map's "
                                               "sweeps run (or resumed), then judged",
                          description="The validity map: finite networks sampled over a grid of alpha = P/N1 and "
                                      "N0/P (linear and erf teachers, erf and ReLU networks) and, at the full size, "
                                      "MNIST (0, 1) at P = 200 and 1000 and randomly projected MNIST at N0 = 12^2 and "
                                      "28^2; each point judged against every theory and the adaptive-kernel theory, "
                                      "with the hidden-kernel diagnosis. Writes validity.md, validity.csv and the "
                                      "figures in OUT; run again to resume (the full size takes hours on 2 cores).",
                          epilog=EXIT_CODES, formatter_class=fmt)
    vmap.add_argument("--size", default="full", choices=MAP_SIZES,
                      help="full (default: the map at P = 200 and the real data; hours), quick (a 2 x 2 grid at "
                           "P = 40, minutes) or smoke (one point, seconds)")
    vmap.add_argument("--out", help="output folder (default: renormpp-validity-SIZE)")
    vmap.add_argument("--series", nargs="+", help="sample only these series (their names: --print-config)")
    vmap.add_argument("--report-only", action="store_true", help="sample nothing: write the tables and figures "
                                                                 "from the points finished so far")
    vmap.add_argument("--skip-beyond", "--skip-adaptive", action="store_true", dest="skip_beyond",
                      help="with --report-only: leave out the adaptive and the shared-field theories where they are "
                           "not solved yet (minutes a point)")
    vmap.add_argument("--print-config", action="store_true", help="print the map's renormpp run configs and exit")
    for p in (run, demo, paper, vmap):
        if p is run:
            p.add_argument("--out", help="output folder (overrides run.out)")
        p.add_argument("--executor", choices=("inprocess", "process", "ray"), help="where the points run")
        p.add_argument("--workers", type=int, help="process executor: worker processes")
        p.add_argument("--address", help="ray executor: the cluster address (default: start a local Ray)")
        p.add_argument("--no-progress", action="store_true", help="no progress bars")
    rep = sub.add_parser("report", help="rewrite the report of a sweep from its finished points",
                         description="Rewrite the report of a sweep from its finished points.", epilog=EXIT_CODES,
                         formatter_class=fmt)
    rep.add_argument("outdir", help="the output folder of a run")
    data = sub.add_parser("data", help="fetch the data sets the paper's figures need (MNIST, CIFAR-10)",
                          description="Fetch the data sets the paper's figures need.")
    fetch = data.add_subparsers(dest="action", metavar="ACTION", required=True).add_parser(
        "fetch", help="download a data set (checked by MD5) where the loaders look for it",
        description="Download MNIST (4 files, 11 MB) or CIFAR-10 (python version, 163 MB, extracted), each checked "
                    "by MD5, unless already there. Exit status 2 when the download fails; the message says how to "
                    "get the files by hand.")
    fetch.add_argument("name", choices=("mnist", "cifar10", "all"))
    fetch.add_argument("--root", help="the data folder (default: $RENORMPP_DATA, else ~/.cache/renormpp)")
    return parser


def _fetch(name: str, root) -> int:
    from . import datasets

    for n in ("mnist", "cifar10") if name == "all" else (name,):
        try:
            print(f"{n}: {datasets.fetch(n, root)}")
        except (OSError, ValueError) as err:  # ConnectionError, a failed checksum, a folder that cannot be written
            print(f"renormpp data fetch: {err}", file=sys.stderr)
            return 2
    return 0


def _validity_map(args) -> int:
    from .experiments import validity

    out = args.out if args.out is not None else validity.default_out(args.size)
    if args.print_config:
        from .experiments import dumps

        for name, cfg in validity.configs(args.size, out).items():
            print(f"# ---- series {name}: renormpp run config\n{dumps(cfg)}", end="")
        return 0
    if args.report_only:
        folder = validity.write(out, args.size, beyond=not args.skip_beyond)
    else:
        folder = validity.run(args.size, out, executor=args.executor, workers=args.workers, address=args.address,
                              progress=False if args.no_progress else None, only=args.series)
    print(f"\n{(folder / 'validity.md').read_text()}\nwrote {folder / 'validity.md'} and the figures beside it")
    return 0


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "data":
        return _fetch(args.name, args.root)
    from . import experiments
    from .experiments import demo

    try:
        if args.command == "report":
            print(f"wrote {experiments.report(args.outdir)}")
            return 0
        if args.command == "paper":
            from .experiments import paper

            names = paper.ALL if args.figure == "all" else [args.figure]
            for name in names:
                if args.print_config:
                    print(paper.print_configs(name, args.size, args.out, series=args.series,
                                              max_seconds=args.max_seconds), end="")
                    continue
                folder = paper.make(name, args.size, args.out, executor=args.executor, workers=args.workers,
                                    address=args.address, progress=False if args.no_progress else None,
                                    max_seconds=args.max_seconds)
                print(f"\n{(folder / 'summary.md').read_text()}\nwrote {folder}")
            return 0
        if args.command == "validity-map":
            return _validity_map(args)
        if args.command == "demo" and args.print_config:
            print(experiments.dumps(demo.SIZES[args.size]), end="")
            return 0
        options = dict(out=args.out, executor=args.executor, workers=args.workers, address=args.address,
                       progress=False if args.no_progress else None)
        outdir = (demo.run(args.size, **options) if args.command == "demo" else
                  experiments.run(args.config, **options))
        print(f"\n{(outdir / 'report.md').read_text()}\nwrote {outdir / 'report.md'} and the figures beside it")
        return 0
    except (experiments.ConfigError, experiments.FolderInUse, FileNotFoundError, ImportError) as err:
        print(f"renormpp {args.command}: {err}", file=sys.stderr)
        return 2
    except experiments.Interrupted as err:
        print(f"renormpp {args.command}: {err}", file=sys.stderr)
        return 143
    except experiments.SweepError as err:
        print(f"renormpp {args.command}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"renormpp {args.command}: interrupted; the last finished block of draws was saved. Run the same "
              "command again to resume.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
