"""The GPU check (issue 45, item 4): what a user's GPU does with the paper's hardest points, in at most 8 minutes.

1. **Precision**: the potential's rounding noise at the end of Fig. 1a's alpha = 10 warmup (linear teacher, P = 1000,
   N1 = 100), as the sampler's own check measures it (:meth:`renormpp.infer.KineticLangevin.potential_noise`). On a
   GPU whose float32 products ran at TF32 it was 0.7-1.4 (the chains froze); at full float32 precision it is ~1e-3.
   Above :data:`renormpp.infer.alerts.NOISE_BOUND` (0.25) the check fails.
2. **Speed**: seconds per draw at every width of Fig. 1's mnist-D2 and linear-D2 (P = 1000, N1 = 100 ... 2000), with 2
   and 32 chains in one program, and chain-draws per second; the whole paper projected from these costs (each series
   priced at the measured width of its family: the 784-pixel images at mnist-D2's, the synthetic data at
   linear-D2's; between widths linearly in N1, beyond the widest in proportion to N1) for 4000 chain-draws per width
   after a warmup of 200 draws per chain, with 2 and with 32 chains.
3. **Accuracy**: Fig. 1b's alpha = 10 point (MNIST (0, 1), P = 1000, N1 = 100) run as ``renormpp paper fig1b --size
   full`` runs it, until the paper's accuracy (1% on eps_g, 0.01 on the overlaps) or ``--accuracy-seconds``: wall
   time, draws, eps_g with its error, whether the kinds of start agree.

Run (``--root``: the data folder with mnist/ below it; without MNIST part 3 and mnist-D2 are skipped, with the reason):

    python benchmarks/gpu_check.py --root DATA --out gpu-check            # the check, on the GPU
    python benchmarks/gpu_check.py --size smoke --out /tmp/gpu-check      # P = 40: the pipeline in a minute on CPU

It writes ``gpu_check.json`` and ``gpu_check.md`` (the tables) to ``--out`` and prints the tables.
``benchmarks/README.md`` records what it measured, with the device. Offline machines: ``make wheelhouse`` (README,
"On a GPU").
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paper_cost import seconds_per_draw, series_configs  # noqa: E402
from theory_speed import machine_info  # noqa: E402

#: the series whose every width is timed, and the series that price the rest of the paper (by their data's family)
TIMED = ("linear-D2", "mnist-D2")
#: per size: the chain counts, timed draws per width, the accuracy run's cap (s)
SIZES = {"full": dict(chains=(2, 32), draws=10, accuracy_seconds=240.0, budget=480.0),
         "smoke": dict(chains=(2, 4), draws=2, accuracy_seconds=15.0, budget=600.0)}
#: seconds kept for part 3 beyond its sampling cap (its start, compilation and report)
ACCURACY_OVERHEAD = 90.0
#: XLA's flag that the check sets unless told otherwise (``--autotune``): with XLA's autotuning each width's start and
#: compilation took ~70 s on an H100; without it 13-25 s on an H200 (benchmarks/README.md, "gpu_profile.py")
NO_AUTOTUNE = "--xla_gpu_autotune_level=0"
#: the projection's work per width: chain-draws after the warmup (2 chains x 2000 draws), warmup draws per chain
CHAIN_DRAWS, WARMUP = 4000, 200


def series(size: str) -> dict[str, dict]:
    """The ``renormpp run`` configs of every series of the paper at ``size`` (``paper all``), by name."""
    return series_configs(size)


def noise_at_warmup_end(raw: dict, N1: int) -> dict:
    """The potential's rounding noise per chain after the warmup of width ``N1`` of ``raw`` (one block)."""
    from renormpp.experiments import config, stages

    raw = {**raw, "model": {**raw["model"], "N1": [N1]}, "run": {**raw["run"], "seeds": [0]}}
    point = config.resolve(raw).points()[0]
    data = stages.load_data(point.data, point.model)
    chains, state = stages.start_chains(point, data)
    warm = point.sampler.num_warmup
    t0 = time.perf_counter()
    state, _, stats = chains.run(state, warm + 1)  # the warmup and the first draw after it
    noise = chains.sampler.potential_noise(state, stages._float32(data.X, data.Y), stages.model_kwargs(point))
    return dict(N1=N1, warmup=warm, seconds=time.perf_counter() - t0, noise=[float(x) for x in noise],
                step_size=float(np.max(np.asarray(state.step_size))))


def timings(configs: dict, chains: tuple, draws: int, deadline: float = math.inf) -> list[dict]:
    """Seconds per draw at every width of the :data:`TIMED` series, per chain count; a row begun after
    ``deadline`` (``time.perf_counter()``) is not measured and says so (on an H100 each width's start and
    compilation took ~70 s: the check keeps its time budget and still runs part 3)."""
    rows, why = [], dict.fromkeys(TIMED)
    widths = sorted({int(N1) for name in TIMED for N1 in configs[name]["model"]["N1"]})
    for N1 in widths:  # the narrow widths of both series first: a budget cut leaves the wide ones
        for name in TIMED:
            raw = configs[name]
            if N1 not in raw["model"]["N1"]:
                continue
            for c in chains:
                row = dict(series=name, N1=int(N1), chains=int(c))
                try:
                    if why[name] is not None:
                        raise RuntimeError(why[name])
                    if time.perf_counter() > deadline:
                        row.update(skipped="over the check's time budget (--budget)")
                        rows.append(row)
                        print(_row(row), flush=True)
                        continue
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        s = seconds_per_draw(raw, N1, draws, num_chains=c)
                    row.update(ms_per_draw=1e3 * s, chain_draws_per_s=c / s)
                except Exception as e:  # noqa: BLE001 (a missing data set: said once, and the check goes on)
                    why[name] = why[name] or f"{type(e).__name__}: {str(e)[:160]}"
                    row.update(skipped=why[name])
                rows.append(row)
                print(_row(row), flush=True)
    return rows


def _row(r: dict) -> str:
    if "skipped" in r:
        return f"| {r['series']} | {r['N1']} | {r['chains']} | not measured: {r['skipped']} | |"
    return f"| {r['series']} | {r['N1']} | {r['chains']} | {r['ms_per_draw']:.1f} | {r['chain_draws_per_s']:.1f} |"


def _family(raw: dict) -> str:
    return "linear-D2" if raw["data"]["name"] == "synthetic" else "mnist-D2"


def cost(rows: list[dict], family: str, chains: int, N1: int) -> float | None:
    """Seconds per draw of ``chains`` chains at width ``N1``, from the measured widths of ``family``: linear in N1
    between them, in proportion to N1 beyond them (None where the family was not measured)."""
    pts = sorted((r["N1"], r["ms_per_draw"] / 1e3) for r in rows
                 if r["series"] == family and r["chains"] == chains and "ms_per_draw" in r)
    if not pts:
        return None
    xs, ys = zip(*pts)
    if N1 <= xs[0]:
        return ys[0] * (N1 / xs[0] if N1 < xs[0] and len(xs) == 1 else 1.0)
    if N1 >= xs[-1]:
        return ys[-1] * N1 / xs[-1]
    i = next(i for i in range(1, len(xs)) if N1 <= xs[i])
    return ys[i - 1] + (ys[i] - ys[i - 1]) * (N1 - xs[i - 1]) / (xs[i] - xs[i - 1])


def projection(configs: dict, rows: list[dict], chains: tuple) -> dict:
    """Hours for the whole paper (every series' widths once) per chain count: :data:`CHAIN_DRAWS` chain-draws per
    width plus :data:`WARMUP` warmup draws per chain; None where a family was not measured."""
    out = {}
    for c in chains:
        hours = 0.0
        for raw in configs.values():
            for N1 in raw["model"]["N1"]:
                s = cost(rows, _family(raw), c, int(N1))
                if s is None:
                    hours = None
                    break
                hours += s * (CHAIN_DRAWS / c + WARMUP) / 3600
            if hours is None:
                break
        out[c] = hours
    return out


def accuracy_run(raw: dict, N1: int, seconds: float, num_chains: int, out: Path) -> dict:
    """Width ``N1`` of ``raw`` run by ``renormpp run`` until the paper's accuracy or ``seconds`` of sampling."""
    from renormpp.experiments import paper, run

    cfg = {**raw, "model": {**raw["model"], "N1": [N1]},
           "sampler": {**raw["sampler"], "num_chains": num_chains},
           "run": {**raw["run"], "out": str(out), "seeds": [0], "progress": False, "max_seconds": float(seconds),
                   "target_error": dict(paper.TARGET_ERROR)}}
    cfg["sampler"].setdefault("num_samples", 200_000)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        folder = run(cfg, progress=False)
    wall = time.perf_counter() - t0
    result = json.loads(next(Path(folder).glob("points/*/result.json")).read_text())
    return dict(N1=N1, chains=num_chains, wall_seconds=wall, sampling_seconds=result["sampling_seconds"],
                draws=result["draws"], stopped=result["stopped"], eps_g=result["eps_g"],
                eps_g_error=result["eps_g_error"], starts_agree=result["starts_agree"], status=result["status"])


def device() -> str:
    import jax

    d = jax.devices()[0]
    return f"{d.platform}: {d.device_kind} (jax {jax.__version__}, {jax.device_count()} device(s))"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=tuple(SIZES), default="full", help="full: P = 1000 (the GPU); smoke: P = 40")
    ap.add_argument("--root", help="the data folder (RENORMPP_DATA): mnist/ below it")
    ap.add_argument("--out", default="gpu-check", help="where gpu_check.json and gpu_check.md go")
    ap.add_argument("--chains", type=int, nargs="+", help="chain counts to time (default: 2 32; smoke: 2 4)")
    ap.add_argument("--draws", type=int, help="timed draws per width and chain count")
    ap.add_argument("--accuracy-seconds", type=float, help="the accuracy run's sampling cap")
    ap.add_argument("--accuracy-chains", type=int, default=2, help="chains of the accuracy run")
    ap.add_argument("--budget", type=float, help="seconds for the whole check (default: 480; smoke: 600): the "
                    "timings stop where part 3 would no longer fit")
    ap.add_argument("--autotune", action="store_true", help="keep XLA's autotuning of GPU kernels (default: off, "
                    "XLA_FLAGS=--xla_gpu_autotune_level=0, unless XLA_FLAGS already sets a level)")
    a = ap.parse_args(argv)
    if not a.autotune and "xla_gpu_autotune_level" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + NO_AUTOTUNE).strip()
    if a.root:
        os.environ["RENORMPP_DATA"] = a.root
    opts = SIZES[a.size]
    chains = tuple(a.chains or opts["chains"])
    draws, cap = a.draws or opts["draws"], a.accuracy_seconds or opts["accuracy_seconds"]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    configs = series(a.size)
    report = dict(size=a.size, device=device(), host=machine_info(), chains=list(chains), draws=draws,
                  xla_flags=os.environ.get("XLA_FLAGS", ""))
    print(report["device"], "\n" + report["host"], flush=True)
    t_all = time.perf_counter()

    from renormpp.infer.alerts import NOISE_BOUND

    fig1a = configs["linear-D2"]
    N1_a10 = max(2, round(fig1a["data"]["P"] / 10))
    report["noise"] = noise_at_warmup_end(fig1a, N1_a10)
    report["noise"]["ok"] = max(report["noise"]["noise"]) <= NOISE_BOUND
    print(f"\n1. rounding noise at the warmup's end, Fig. 1a alpha = 10 (N1 = {N1_a10}): "
          f"{', '.join(f'{x:.3g}' for x in report['noise']['noise'])} per chain (bound {NOISE_BOUND}): "
          f"{'ok' if report['noise']['ok'] else 'TOO LARGE: the chains weigh noise'}", flush=True)

    print("\n2. seconds per draw\n\n| series | N1 | chains | ms per draw (all chains) | chain-draws per s |\n"
          "|---|---:|---:|---:|---:|", flush=True)
    budget = a.budget or opts["budget"]
    report["timings"] = timings(configs, chains, draws, deadline=t_all + budget - cap - ACCURACY_OVERHEAD)
    report["paper_hours"] = projection(configs, report["timings"], chains)
    for c, h in report["paper_hours"].items():
        print(f"the whole paper ({len(configs)} series), {c} chains: "
              f"{'not projected (a family was not measured)' if h is None else f'{h:.2f} h projected'}", flush=True)

    mnist = configs["mnist-D2"]
    N1_b10 = max(2, round(mnist["data"]["P"] / 10))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            report["accuracy"] = accuracy_run(mnist, N1_b10, cap, a.accuracy_chains, Path(tmp) / "fig1b")
        r = report["accuracy"]
        print(f"\n3. Fig. 1b alpha = 10 (N1 = {N1_b10}), {r['chains']} chains: stopped by {r['stopped']} after "
              f"{r['sampling_seconds']:.0f} s of sampling ({r['wall_seconds']:.0f} s in all), {r['draws']} draws, "
              f"eps_g = {r['eps_g']:.4g} +- {r['eps_g_error']:.2g}, starts agree: {r['starts_agree']}", flush=True)
    except Exception as e:  # noqa: BLE001 (no MNIST here: said)
        report["accuracy"] = dict(skipped=f"{type(e).__name__}: {str(e)[:160]}")
        print(f"\n3. Fig. 1b alpha = 10: not run ({report['accuracy']['skipped']})", flush=True)
    report["seconds"] = time.perf_counter() - t_all
    print(f"\nthe check took {report['seconds']:.0f} s", flush=True)
    (out / "gpu_check.json").write_text(json.dumps(report, indent=1, default=_finite))
    (out / "gpu_check.md").write_text(markdown(report))
    return report


def _finite(x):
    return None if isinstance(x, float) and not math.isfinite(x) else str(x)


def markdown(r: dict) -> str:
    """The check's tables, as benchmarks/README.md records them."""
    n = r["noise"]
    lines = [f"GPU check ({r['size']} size) on {r['device']}; host: {r['host']}", "",
             f"* rounding noise at the warmup's end, Fig. 1a alpha = 10 (N1 = {n['N1']}): "
             f"{', '.join(f'{x:.3g}' for x in n['noise'])} ({'ok' if n['ok'] else 'too large'})", "",
             "| series | N1 | chains | ms per draw (all chains) | chain-draws per s |", "|---|---:|---:|---:|---:|",
             *(_row(x) for x in r["timings"]), ""]
    lines += [f"* the whole paper, {c} chains: " + ("not projected" if h is None else f"{h:.2f} h projected")
              for c, h in r["paper_hours"].items()]
    acc = r["accuracy"]
    lines.append("* Fig. 1b alpha = 10: " + (f"not run ({acc['skipped']})" if "skipped" in acc else
                 f"{acc['chains']} chains, stopped by {acc['stopped']} after {acc['sampling_seconds']:.0f} s of "
                 f"sampling ({acc['wall_seconds']:.0f} s in all), {acc['draws']} draws, eps_g = {acc['eps_g']:.4g} "
                 f"+- {acc['eps_g_error']:.2g}, starts agree: {acc['starts_agree']}"))
    lines.append(f"* the check took {r['seconds']:.0f} s")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
