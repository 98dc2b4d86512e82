"""Langevin throughput and sampler efficiency (renormpp.infer.Langevin, MALA, NUTS).

Run:  .venv/bin/python benchmarks/sampler.py            (full run, about 9 min on 2 cores)
      .venv/bin/python benchmarks/sampler.py --quick    (smoke run at small sizes; target not judged)

[1] Throughput: Langevin (ULA) steps per second through numpyro's MCMC (inner_steps=100, observables
    recorded, nothing big stored) versus a bare jitted fori_loop of the core's ULA step (rp.mcmc.langevin)
    on the same potential. Medians of repeats run in turn, after one round that compiles. numpyro 0.22 recompiles its
    sampling loop on every MCMC.run: the compile seconds JAX reports (jax.monitoring) are subtracted and
    printed separately.
    Target: MCMC / bare >= 0.95, with divergence warnings on (issue 13).
[2] Efficiency: effective samples per second of eps_g and of the entries of v v^T / N1 for ULA at
    the paper's learning rate, MALA with a piloted step, and NUTS, each given the same wall-time
    budget that includes compilation, pilot, warmup and thermalization. Compared with
    rp.theory.solve at the end.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
from jax.flatten_util import ravel_pytree
from numpyro.infer import MCMC, NUTS
from numpyro.infer.initialization import init_to_sample, init_to_value
from numpyro.infer.util import initialize_model

import renormpp as rp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from theory_speed import machine_info, verdict  # noqa: E402

T, LAMBDA, ACT, INNER = 0.01, 1.0, "erf", 100
H_PAPER = rp.infer.paper_step_size(1e-3, T)  # the paper's epsilon = 1e-3 -> h = 1e-5
TARGET_RATIO = 0.95
MODEL = rp.models.one_hidden_layer


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def model_kwargs(N1):
    return dict(N1=N1, T=T, lambda0=LAMBDA, lambda1=LAMBDA, activation=ACT)


def langevin_mcmc(ds, step, adjust, n_draws=1, init_strategy=init_to_sample, warn_divergences=True):
    """MCMC of the Langevin kernel recording rp.observables.default every INNER steps."""
    kernel = rp.infer.Langevin(MODEL, step_size=step, adjust=adjust, inner_steps=INNER, init_strategy=init_strategy,
                               observables=rp.observables.default(ds.X_test, ds.Y_test, ACT),
                               warn_divergences=warn_divergences)
    return MCMC(kernel, num_warmup=0, num_samples=n_draws, num_chains=1, progress_bar=False)


def advance(mcmc, ds, N1, n_draws, extra_fields=()):
    """One more mcmc.run of n_draws draws, continuing from the last state if there is one."""
    key = jax.random.PRNGKey(0)
    if mcmc.last_state is not None:
        mcmc.post_warmup_state = mcmc.last_state
        key = mcmc.last_state.rng_key
    mcmc.num_samples = n_draws
    mcmc.run(key, ds.X, ds.Y, extra_fields=extra_fields, **model_kwargs(N1))
    return jax.block_until_ready(mcmc.get_samples())


COMPILE_CLOCK = {"s": 0.0}  # seconds JAX reports tracing, lowering and compiling (jax.monitoring)


def _count_compile(event, secs, **_):
    if event.startswith("/jax/core/compile/"):
        COMPILE_CLOCK["s"] += secs


jax.monitoring.register_event_duration_secs_listener(_count_compile)


def timed(fn, *args):
    t = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t, out


# ---------------------------------------------------------------------------------------------
# 1: throughput, MCMC + Langevin kernel versus a bare loop
# ---------------------------------------------------------------------------------------------
def bare_ula(ds, N1, h, n_steps):
    """A jitted fori_loop of n_steps ULA updates (the core's step, rp.mcmc.langevin) on the model's potential;
    returns run() (blocking)."""
    (init, _, _), potential_fn, _, _ = initialize_model(
        jax.random.PRNGKey(1), MODEL, model_args=(ds.X, ds.Y), model_kwargs=model_kwargs(N1), dynamic_args=False)
    z0, unravel = ravel_pytree(init)
    U = lambda z: potential_fn(unravel(z))  # noqa: E731
    kernel = rp.mcmc.langevin.build_kernel(adjust=False)

    def step(_, carry):
        state, key = carry
        key, sub = jax.random.split(key)
        return kernel(sub, state, U, h)[0], key

    loop = jax.jit(lambda state, key: jax.lax.fori_loop(0, n_steps, step, (state, key)))
    state = [(rp.mcmc.langevin.init(z0, U), jax.random.PRNGKey(2))]

    def run():
        state[0] = jax.block_until_ready(loop(*state[0]))

    return run


def chains_ula(ds, N1, h, n_draws):
    """rp.infer.Chains (the block driver of `renormpp run`) on the same kernel: compiled once, divergences checked
    on the host after every block (no callback in the loop); returns run() (blocking)."""
    kernel = rp.infer.Langevin(MODEL, step_size=h, inner_steps=INNER, warn_divergences=False,
                               observables=rp.observables.default(ds.X_test, ds.Y_test, ACT))
    chains = rp.infer.Chains(kernel, extra_fields=("diverging",))
    state = [chains.init(jax.random.PRNGKey(0), 0, ds.X, ds.Y, **model_kwargs(N1))]

    def run():
        state[0] = jax.block_until_ready(chains.run(state[0], n_draws)[0])

    return run


def bench_throughput(P, N0, N1, D, n_draws, repeats):
    """Wall and compile seconds of n_draws draws (n_draws * INNER steps) through MCMC, through rp.infer.Chains and of
    as many steps of the bare loop, timed in turn after one round that compiles; steps/s from medians of wall -
    compile (numpyro 0.22 recompiles its sampling loop on every MCMC.run, so every MCMC call has some); ratios to
    the bare loop are medians of the ratios within each round."""
    ds = rp.datasets.synthetic(P=P, P_test=1000, N0=N0, D=D, teacher="erf_1hl", seed=0)
    mcmc = langevin_mcmc(ds, H_PAPER, False)
    quiet = langevin_mcmc(ds, H_PAPER, False, warn_divergences=False)
    fns = dict(mcmc=lambda: advance(mcmc, ds, N1, n_draws), quiet=lambda: advance(quiet, ds, N1, n_draws),
               chains=chains_ula(ds, N1, H_PAPER, n_draws), bare=bare_ula(ds, N1, H_PAPER, n_draws * INNER))
    runs = {k: [] for k in fns}
    for i in range(1 + repeats):
        for k, fn in fns.items():
            c0 = COMPILE_CLOCK["s"]
            t = timed(fn)[0]
            if i:
                runs[k].append((t, COMPILE_CLOCK["s"] - c0))
    steps = n_draws * INNER
    med = {k: dict(wall=statistics.median(t for t, _ in v), compile=statistics.median(c for _, c in v),
                   net=statistics.median(t - c for t, c in v)) for k, v in runs.items()}
    rate = {k: steps / m["net"] for k, m in med.items()}

    def paired(k):  # the machine's speed drifts: ratios within each round, then their median
        return statistics.median((tb - cb) / (t - c) for (t, c), (tb, cb) in zip(runs[k], runs["bare"]))

    return rate | dict(steps=steps, med=med, ratio=paired("mcmc"), ratio_quiet=paired("quiet"),
                       ratio_chains=paired("chains"), ratio_wall=med["bare"]["wall"] / med["mcmc"]["wall"])


# ---------------------------------------------------------------------------------------------
# 2: efficiency, ULA / MALA / NUTS in a fixed wall-time budget
# ---------------------------------------------------------------------------------------------
def sample_for(mcmc, ds, N1, n, t0, budget, to_obs=lambda s: s, extra_fields=()):
    """Draw until `budget` seconds after t0: runs of n and 2n draws, whose time difference gives the fixed
    cost of a run (numpyro 0.22 recompiles on every MCMC.run), then runs sized from the last run's cost
    per draw to use the time left, until less than 5% of the budget is left. Returns the observables and
    extra fields, concatenated, and the number of runs."""
    obs, extra, times, sizes = [], [], [], [n, 2 * n]
    while sizes:
        size = sizes.pop(0)
        t, s = timed(advance, mcmc, ds, N1, size, extra_fields)
        times.append(t)
        obs.append(to_obs(s))
        extra.append(mcmc.get_extra_fields())
        if len(times) >= 2:
            per_run = min(max(2 * times[0] - times[1], 0.0), times[0])
            per_draw = max(t - per_run, 1e-3) / size
            left = budget - (time.perf_counter() - t0)
            if left > 0.05 * budget:  # 60% of what is left while that is much, so a slowdown cannot overrun far
                use = left if left < 0.25 * budget else 0.6 * left
                sizes.append(max(int((use - per_run) / per_draw), 1))
    cat = lambda *xs: np.concatenate([np.asarray(x) for x in xs])  # noqa: E731
    return jax.tree_util.tree_map(cat, *obs), jax.tree_util.tree_map(cat, *extra), len(times)


def run_ula(ds, N1, budget, n, **_):
    t0 = time.perf_counter()
    obs, _, runs = sample_for(langevin_mcmc(ds, H_PAPER, False), ds, N1, n, t0, budget)
    draws = len(obs["eps_g"])
    return dict(wall=time.perf_counter() - t0, obs=obs, steps=draws * INNER, note=f"h={H_PAPER:.0e}, {runs} runs")


def pilot_mala(ds, N1, h, t0, budget, draws=5, rounds=8, lo=0.5, hi=0.7):
    """Short MALA runs, each continuing from the last position, rescaling h by exp(3 (acc - 0.6))
    until the mean acceptance of a round is in [lo, hi] (or rounds or budget run out)."""
    z, history = None, []
    for _ in range(rounds):
        mcmc = langevin_mcmc(ds, h, True, init_strategy=init_to_sample if z is None else init_to_value(values=z))
        advance(mcmc, ds, N1, draws)
        acc, z = float(mcmc.last_state.mean_accept_prob), mcmc.last_state.z
        history.append((h, acc))
        if lo <= acc <= hi or time.perf_counter() - t0 > budget:
            break
        h *= float(np.exp(3.0 * (acc - 0.6)))
    return h, z, history, len(history) * draws * INNER


def run_mala(ds, N1, budget, n, h0, **_):
    t0 = time.perf_counter()
    h, z, history, pilot_steps = pilot_mala(ds, N1, h0, t0, 0.25 * budget)
    t_pilot = time.perf_counter() - t0
    mcmc = langevin_mcmc(ds, h, True, init_strategy=init_to_value(values=z))
    obs, _, runs = sample_for(mcmc, ds, N1, n, t0, budget)
    draws = len(obs["eps_g"])
    acc = float(mcmc.last_state.mean_accept_prob)  # mean over all draws of the last run
    pilot = ", ".join(f"{hh:.2e}->{a:.2f}" for hh, a in history)
    return dict(wall=time.perf_counter() - t0, obs=obs, steps=pilot_steps + draws * INNER, h=h, acc=acc,
                note=f"h={h:.2e}, acceptance {acc:.2f} (last run), {runs} runs; pilot {t_pilot:.0f} s, "
                     f"{pilot_steps} steps (h->acceptance: {pilot})")


def run_nuts(ds, N1, budget, n, nuts_warmup, **_):
    t0 = time.perf_counter()
    mcmc = MCMC(NUTS(MODEL), num_warmup=nuts_warmup, num_samples=n, num_chains=1, progress_bar=False)
    mcmc.warmup(jax.random.PRNGKey(0), ds.X, ds.Y, extra_fields=("num_steps",), collect_warmup=True,
                **model_kwargs(N1))
    warm_steps = int(np.sum(mcmc.get_extra_fields()["num_steps"]))
    t_warm = time.perf_counter() - t0
    obs_fn = rp.observables.default(ds.X_test, ds.Y_test, ACT)
    obs, extra, runs = sample_for(mcmc, ds, N1, n, t0, budget, lambda s: rp.observables.evaluate(obs_fn, s),
                                  extra_fields=("num_steps",))
    st = float(mcmc.last_state.adapt_state.step_size)
    return dict(wall=time.perf_counter() - t0, obs=obs, steps=warm_steps + int(np.sum(extra["num_steps"])),
                note=f"{nuts_warmup} warmup draws ({t_warm:.0f} s, {warm_steps} steps), step size {st:.3g}, "
                     f"median {np.median(extra['num_steps']):.0f} leapfrog steps per draw, {runs} runs")


def series(obs):
    """eps_g and the upper-triangular entries of v v^T / N1 as named 1-d arrays."""
    ov = np.asarray(obs["overlap"])
    D = ov.shape[-1]
    return {"eps_g": np.asarray(obs["eps_g"])} | {
        f"ov[{i},{j}]": ov[:, i, j] for i in range(D) for j in range(i, D)}


def ess(x):
    return float(az.ess(x[None])) if len(x) >= 8 else float("nan")


def summarize(run, burn):
    """ESS of every series on all draws and after discarding the first `burn` fraction; means with
    MCSE = std / sqrt(ESS) after the cut; split-Rhat of eps_g after the cut; eps_g by quarter."""
    s = series(run["obs"])
    n = len(s["eps_g"])
    cut = {k: v[int(burn * n):] for k, v in s.items()}
    ess_all = {k: ess(v) for k, v in s.items()}
    ess_cut = {k: ess(v) for k, v in cut.items()}
    ov_keys = [k for k in s if k != "eps_g"]
    e = cut["eps_g"]
    m = len(e) // 2
    return dict(
        draws=n, kept=len(e),
        ess_eps_all=ess_all["eps_g"], ess_ov_all=min(ess_all[k] for k in ov_keys),
        ess_eps=ess_cut["eps_g"], ess_ov=min(ess_cut[k] for k in ov_keys),
        mean_eps=e.mean(), mcse_eps=e.std() / np.sqrt(ess_cut["eps_g"]),
        mean_ov00=cut["ov[0,0]"].mean(), mcse_ov00=cut["ov[0,0]"].std() / np.sqrt(ess_cut["ov[0,0]"]),
        mean_ov=np.mean(np.asarray(run["obs"]["overlap"])[int(burn * n):], axis=0),
        rhat_eps=float(az.rhat(e[: 2 * m].reshape(2, m))) if m >= 4 else float("nan"),
        quarters=[q.mean() for q in np.array_split(s["eps_g"], 4)] if n >= 4 else [],
    )


def bench_efficiency(P, N0, N1, D, budget, burn, first_run, h0, nuts_warmup):
    ds = rp.datasets.synthetic(P=P, P_test=500, N0=N0, D=D, teacher="linear", seed=0)
    fit = rp.theory.solve(ds.X, ds.Y, N1=N1, T=T, lambda0=LAMBDA, lambda1=LAMBDA, activation=ACT)
    theory = dict(eps_g=fit.generalization_error(ds.X_test, ds.Y_test), overlap=fit.readout_overlap)
    runners = dict(ULA=run_ula, MALA=run_mala, NUTS=run_nuts)
    out = {}
    for name, runner in runners.items():
        r = runner(ds, N1, budget, n=first_run[name], h0=h0, nuts_warmup=nuts_warmup)
        out[name] = r | summarize(r, burn)
        print(f"    {name}: {out[name]['wall']:.0f} s, {out[name]['draws']} draws, {r['steps']} gradient steps; "
              f"{r['note']}", flush=True)
    return out, theory


def print_efficiency(res, theory, burn, D):
    n_ov = D * (D + 1) // 2
    print(f"\n    ESS over all draws | after discarding the first {burn:.0%} ('cut'); ESS/s = ESS(cut) / wall, "
          f"wall includes compile, pilot, warmup; min over the {n_ov} entries of v v^T/N1")
    hdr = (f"    {'sampler':7s} {'wall s':>6s} {'draws':>6s} {'steps':>8s} | {'ESS eps':>7s} {'ESS ov':>7s} | "
           f"{'ESS eps':>7s} {'ESS ov':>7s} {'ESS/s eps':>9s} {'ESS/s ov':>8s} {'Rhat':>5s} | "
           f"{'<eps_g> +- MCSE':>18s} {'<ov00> +- MCSE':>18s}")
    print(f"    {'':39s} {'all draws':^17s} | {'after cut':^53s}")
    print(hdr)
    for name, r in res.items():
        print(f"    {name:7s} {r['wall']:6.0f} {r['draws']:6d} {r['steps']:8d} | {r['ess_eps_all']:7.1f} "
              f"{r['ess_ov_all']:7.1f} | {r['ess_eps']:7.1f} {r['ess_ov']:7.1f} {r['ess_eps'] / r['wall']:9.3f} "
              f"{r['ess_ov'] / r['wall']:8.3f} {r['rhat_eps']:5.2f} | {r['mean_eps']:8.4f} +- {r['mcse_eps']:6.4f} "
              f"{r['mean_ov00']:8.4f} +- {r['mcse_ov00']:6.4f}")
    print(f"    {'theory':7s} {'':6s} {'':6s} {'':8s} | {'':15s} | {'':53s} | {theory['eps_g']:8.4f} {'':9s} "
          f"{theory['overlap'][0, 0]:8.4f}")
    print("\n    eps_g averaged over each quarter of the draws (a drift means not thermalized):")
    for name, r in res.items():
        print(f"    {name:7s} " + "  ".join(f"{q:.4f}" for q in r["quarters"]))
    np.set_printoptions(precision=4, suppress=True)
    print("\n    <v v^T / N1> after the cut, and theory Q*/lambda1:")
    for name, r in res.items():
        print(f"    {name:7s} " + str(r["mean_ov"]).replace("\n", "\n" + " " * 12))
    print(f"    {'theory':7s} " + str(theory["overlap"]).replace("\n", "\n" + " " * 12))


# ---------------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run at small sizes (target not judged)")
    ap.add_argument("--budget", type=float, help="wall seconds per sampler in [2] (default 120; quick 4)")
    ap.add_argument("--burn", type=float, default=0.3, help="thermalization cut, fraction of draws (0.3)")
    ap.add_argument("--skip", choices=("throughput", "efficiency"), help="leave one part out")
    a = ap.parse_args()
    q = a.quick
    judge = (lambda ok: None) if q else (lambda ok: ok)
    budget = a.budget or (4.0 if q else 120.0)
    # (P, N0, N1, D), draws per timed call, repeats
    thr_cases = [((200, 50, 100, 3), 2, 2)] if q else [((1000, 144, 1000, 10), 5, 9), ((1000, 784, 1000, 10), 2, 7)]
    eff_size = (200, 50, 100, 2) if q else (500, 100, 250, 3)
    first_run = dict(ULA=10, MALA=10, NUTS=5) if q else dict(ULA=50, MALA=50, NUTS=10)  # draws; then 2x, then fill
    nuts_warmup = 20 if q else 100

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip() or "?"
    print(machine_info())
    print(f"renormpp at commit {commit}; jax {jax.__version__} ({jax.default_backend()}, x64={jax.config.jax_enable_x64}), numpyro "
          f"{numpyro.__version__}, arviz {az.__version__}{'  (QUICK: small sizes)' if q else ''}\n")

    if a.skip != "throughput":
        print(f"[1] ULA steps/s, h={H_PAPER:.0e}, erf, T={T}, lambda=1, erf_1hl teacher: MCMC(Langevin(inner_steps="
              f"{INNER}, observables=default)) vs a bare jitted fori_loop")
        for (P, N0, N1, D), n_draws, reps in thr_cases:
            r = bench_throughput(P, N0, N1, D, n_draws, reps)
            ok = judge(r["ratio"] >= TARGET_RATIO)
            ok_quiet = judge(r["ratio_quiet"] >= TARGET_RATIO)
            m, b = r["med"]["mcmc"], r["med"]["bare"]
            print(f"    P={P} N0={N0} N1={N1} D={D}, {r['steps']} steps per call, medians of {reps}: "
                  f"MCMC {m['wall']:.2f} s (of which compile {m['compile']:.2f} s), bare {b['wall']:.2f} s "
                  f"(compile {b['compile']:.2f} s)")
            print(f"      steps/s without compile: MCMC {r['mcmc']:.1f}, bare {r['bare']:.1f}; ratio MCMC/bare (paired) "
                  f"{r['ratio']:.3f} (target >= {TARGET_RATIO}) [{verdict(ok)}]; with MCMC's per-call recompile "
                  f"{r['ratio_wall']:.3f}")
            print(f"      with warn_divergences=False (no host callback in the loop): MCMC {r['quiet']:.1f} steps/s, "
                  f"ratio {r['ratio_quiet']:.3f} [{verdict(ok_quiet)}]")
            print(f"      rp.infer.Chains (renormpp run's driver; divergences warned from the host after each block): "
                  f"{r['chains']:.1f} steps/s, ratio {r['ratio_chains']:.3f} "
                  f"[{verdict(judge(r['ratio_chains'] >= TARGET_RATIO))}]", flush=True)
        print()

    if a.skip != "efficiency":
        P, N0, N1, D = eff_size
        print(f"[2] efficiency at P={P} N0={N0} N1={N1} D={D}, erf, T={T}, lambda=1, linear teacher, 500 test points; "
              f"budget {budget:.0f} s per sampler")
        res, theory = bench_efficiency(P, N0, N1, D, budget, a.burn, first_run, h0=1e-4, nuts_warmup=nuts_warmup)
        print_efficiency(res, theory, a.burn, D)
    print("\nload average at end (1/5/15 min): " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
