"""Wall time to the paper's accuracy, per sampler (issue 7).

Run:  .venv/bin/python benchmarks/samplers.py --problem 1 --budget 120       (about 2 min per candidate)
      .venv/bin/python benchmarks/samplers.py --problem 2 --budget 300
      .venv/bin/python benchmarks/samplers.py --problem 4 --root ../shared/data/mnist --budget 400   (Fig. 1b's point)
      .venv/bin/python benchmarks/samplers.py --quick                        (smoke run, targets not judged)
      .venv/bin/python benchmarks/samplers.py --problem 1 --beside-load --only "kinetic on w, v integrated out"
                                                (the same beside load.py's 2-thread numpy job, started first)
      .venv/bin/python benchmarks/samplers.py --problem 1 --only NUTS "BlackJAX adjusted MCLMC" "BlackJAX LAPS" \
          "kinetic on w, v integrated out"      (the default sampler and the anchors side by side; BlackJAX 1.7.1:
                                                 pip install -e ".[bench]"; --seed 1 for the second seed)
      .venv/bin/python benchmarks/samplers.py --problem 1 --only "BlackJAX adjusted MCLMC, v integrated out" \
          "BlackJAX LAPS, v integrated out"      (the anchors on the default sampler's own target: w alone)

Problems (erf, T = 0.01, lambda0 = lambda1 = 1, synthetic data with 500 test points):
  1: (P, N0, N1, D) = (500, 100, 250, 3), linear teacher;   2: (1000, 144, 1000, 10), 1HL erf teacher;
  3: (500, 784, 250, 10) on MNIST (all digits, one-hot labels: anisotropic inputs), --root the MNIST folder;
  4: (1000, 784, 100, 2) on MNIST digits 0 and 1, 1000 test points: the paper's Fig. 1b point at alpha = 10.

Each candidate runs from the prior for a wall-time budget that includes compilation and warmup (two chains,
vectorized unless stated). Its recorded eps_g and v v^T/N1 are analysed as rp.diagnostics does (Gamma method,
thermalization cut by maximum ESS). The accuracy asked for is a relative error of 1% on eps_g and an
absolute error of 0.01 on every entry of v v^T/N1. Errors fall as 1/sqrt(draws), so the time to reach it is

    t = t_warmup + t_draw * max_q (cut_q + (n - cut_q) * (error_q / target_q)^2)

with n draws per chain, t_draw the wall time of one draw of all chains, cut_q the thermalization cut of quantity q
(every quantity is accurate once the one that needs the most draws is; until round 6 the largest cut of all was
combined with the largest error ratio, which charged one quantity's cut to another's error). Where
that extrapolates past the run, the run was too short for the error itself to be trusted when tau_int is
not resolved (flagged). Beside it, "first accurate and settled" (since issue 17's round 8) is the first n, checked
every 10 draws, at which the draws [0, n) have that accuracy and every quantity has settled (each with its own cut
on those n draws, tau_int resolved with >= 50 effective samples, chains that agree, no drift: renormpp run's stop
rule): the time a run that checks as it goes stops. The extrapolation charges the cut found on the whole run, and on
stationary chains the largest max-ESS cut among 56 quantities grows with the run (0.1-0.38 n on problem 2), so it
grows with the budget; the first-accurate time does not, and it asks for tau_int resolved at that time.
ULA at the paper's learning rate epsilon = 1e-3 (h = epsilon T = 1e-5) cannot
thermalize in any budget here. It is run instead at k = 30 and 10 times that step, and its time is k times
the time measured there: ULA discretizes the Langevin diffusion, whose relaxation and autocorrelation times
are fixed in Langevin time t = (updates) x h, so at the paper's step the same accuracy takes k times as many
updates, each of the same cost. The two k check the scaling (ULA's O(h) bias at k x the step changes the
means a little, not the time scales).
"""
from __future__ import annotations

import argparse
import os
from functools import partial
import sys
import time
import types
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import renormpp as rp
from renormpp.experiments import config as cfgmod
from renormpp.experiments import stages, theories

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from theory_speed import machine_info  # noqa: E402

PROBLEMS = {
    1: dict(P=500, N0=100, N1=250, D=3, teacher="linear"),
    2: dict(P=1000, N0=144, N1=1000, D=10, teacher="erf_1hl"),
    3: dict(P=500, N0=784, N1=250, D=10, data="mnist"),  # MNIST's anisotropic inputs (needs --root or RENORMPP_DATA)
    4: dict(P=1000, N0=784, N1=100, D=2, data="mnist", classes=[0, 1], P_test=1000),  # the paper's Fig. 1b, alpha = 10
}
T = 0.01
H_PAPER = rp.infer.paper_step_size(1e-3, T)
ULA_FACTORS = (30, 10)  # ULA is run at these multiples of the paper's step and extrapolated (see the docstring)


def candidates(budget):
    """name -> [sampler] table of a renormpp config."""
    mala = dict(kind="mala", step_size=1e-4, inner_steps=10, num_warmup=100)
    nuts = dict(kind="nuts", num_warmup=200)
    kinetic = dict(kind="kinetic", step_size=1e-4, inner_steps=10, num_warmup=200, v_sampling="joint")
    return {
        "kinetic Langevin (GHMC)": kinetic,
        "kinetic Langevin (GHMC) + RB": dict(kinetic, rao_blackwell=True),
        "kinetic Langevin (GHMC) + Gibbs on v": dict(kinetic, v_sampling="gibbs"),
        "kinetic + Gibbs on v, v frozen": dict(kinetic, v_sampling="gibbs", freeze_v=True),
        "kinetic + Gibbs on v, row mass": dict(kinetic, v_sampling="gibbs", mass="rows"),
        "kinetic + Gibbs on v frozen, row mass": dict(kinetic, v_sampling="gibbs", freeze_v=True, mass="rows"),
        "kinetic on w, v integrated out": dict(kinetic, v_sampling="integrated"),
        "kinetic on w, v integrated out, Neal's acceptance": dict(kinetic, v_sampling="integrated", accept_shift=0.05),
        "kinetic on w, v integrated out, fixed warmup": dict(kinetic, v_sampling="integrated", warmup="fixed"),
        "kinetic on w, v integrated out, per-chain adaptation": dict(kinetic, v_sampling="integrated",
                                                                     pooling="per_chain"),
        "kinetic on w, v integrated out, warmup 100": dict(kinetic, v_sampling="integrated", num_warmup=100,
                                                           warmup="fixed"),
        "kinetic on w, v integrated out, warmup 50": dict(kinetic, v_sampling="integrated", num_warmup=50,
                                                          warmup="fixed"),
        "MALA (adapted) + Gibbs on v": dict(mala, v_sampling="gibbs"),
        "MALA (adapted)": mala,
        "MALA (adapted) + RB": dict(mala, rao_blackwell=True),
        "MALA on w, v integrated out": dict(mala, v_sampling="integrated"),
        "NUTS": nuts,
        "NUTS + RB": dict(nuts, rao_blackwell=True),
        "NUTS on w, v integrated out": dict(nuts, v_sampling="integrated"),
    } | {f"kinetic, friction {g:g}, acceptance {acc:g}": dict(kinetic, friction=g, target_accept_prob=acc)
         for acc in (0.8, 0.95, 0.99) for g in (0.1, 1.0, 10.0)}  # the friction/acceptance scan (--only)


def config(problem, sampler, seed=0, root=None):
    prob = PROBLEMS[problem]
    if prob.get("data") == "mnist":
        data = {"name": "mnist", "classes": prob.get("classes", "all"), "P": prob["P"], "P_test": prob.get("P_test", 500),
                **({"root": root} if root else {})}
    else:
        data = {"name": "synthetic", "P": prob["P"], "P_test": 500, "N0": prob["N0"], "D": prob["D"],
                "teacher": prob["teacher"]}
    raw = {"data": data,
           "model": {"N1": [prob["N1"]], "T": T},
           "sampler": {"num_samples": 1, "num_chains": 2, **sampler},
           "run": {"out": "-", "seeds": [seed], "error_method": "gamma"}}
    return cfgmod.resolve(raw).points()[0]


def timed_run(cfg, data, budget, init_params=None, block=None):
    """Warmup, then blocks of draws until the budget is spent: (draws, t_warmup, t_draw, last state)."""
    t0 = time.perf_counter()
    chains, state = stages.start_chains(cfg, data, init_params)
    L = stages.MAX_BLOCK  # one compilation for every block, as renormpp run does
    run = lambda state, n: chains.run(state, n, L)  # noqa: E731
    W = cfg.sampler.num_warmup
    adaptive = stages.adaptive_warmup(cfg, chains, state)
    done = 0
    while done < W:  # as renormpp run does it: blocks of 10 draws while an adaptive warmup decides
        n = min(W - done, 50 if adaptive is None else stages.WARMUP_BLOCK)
        state, draws, stats = run(state, n)
        done += n
        if adaptive is not None:
            state = adaptive.update(state, draws, stats)
            W = stages.warmup_end(chains, state, W)
    if adaptive is not None:
        print("    adaptive warmup: " + "; ".join(adaptive.log))
    jax.block_until_ready(state)
    t_warm = time.perf_counter() - t0
    parts, n_draws, t1 = [], 0, time.perf_counter()
    block = block or 5
    while n_draws == 0 or time.perf_counter() - t0 < budget:  # at least one block after the warmup
        tb = time.perf_counter()
        state, draws, stats = run(state, block)
        parts.append((draws, stats))
        n_draws += block
        dt = time.perf_counter() - tb
        block = int(np.clip(5.0 / (dt / block), 1, L))  # about 5 s per block
    t_draw = (time.perf_counter() - t1) / n_draws
    draws = {k: np.concatenate([p[0][k] for p in parts], axis=1) for k in parts[0][0]}
    stats = {k: np.concatenate([p[1][k] for p in parts], axis=1) for k in parts[0][1]}
    return draws, stats, t_warm, t_draw, state


def _flat_model(cfg, data):
    """The model's log-density on one flat vector, the flattening's inverse, the chains' starts from the prior
    (initialize_model) and the per-draw observables, for the BlackJAX samplers: v and w sampled jointly, or, where
    the config's ``sampler.v_sampling`` is "integrated", w alone from the default sampler's target (v integrated out)
    with the observables averaged over v given w (``readout.rao_blackwell``), as the default sampler records them."""
    from jax.flatten_util import ravel_pytree
    from numpyro.infer.util import initialize_model

    from renormpp import observables, readout
    from renormpp.models import mlp

    X, Y = (np.asarray(a, np.float32) for a in (data.X, data.Y))
    keys = jax.random.split(jax.random.PRNGKey(cfg.run.seed), cfg.sampler.num_chains)
    info, potential, *_ = initialize_model(keys, mlp, model_args=(X, Y), model_kwargs=stages.model_kwargs(cfg))
    unravel = ravel_pytree(jax.tree_util.tree_map(lambda x: x[0], info[0]))[1]
    positions = jax.vmap(lambda z: ravel_pytree(z)[0])(info[0])
    test = tuple(np.asarray(a, np.float32) for a in (data.X_test, data.Y_test))
    if cfg.sampler.v_sampling == "integrated":
        m = cfg.model
        record = readout.rao_blackwell(X, Y, *test, T=m.T, lambda1=m.lambda1, activation=m.activation)
    else:
        record = observables.default(*test, cfg.model.activation)
    return (lambda x: -potential(unravel(x))), unravel, positions, lambda x: record(unravel(x))


#: draws per chain of one block of a BlackJAX sampler
BLOCK = 20


def _compiled(block, states, chains):
    """``block`` (states, keys, n) compiled for :data:`BLOCK` draws, as the warmup's last part: renormpp's chains
    compile their blocks in the warmup too."""
    return block.lower(states, jax.random.split(jax.random.PRNGKey(0), chains), BLOCK).compile()


def _blocks(block, states, key, chains, t0, budget):
    """Blocks of :data:`BLOCK` draws of every chain by the compiled ``block`` until ``budget`` seconds from t0 are
    spent (at least one): the draws (chains, n) per observable, the seconds per draw, the last states and
    acceptance."""
    parts, n_draws, t1, n = [], 0, time.perf_counter(), BLOCK
    while n_draws == 0 or time.perf_counter() - t0 < budget:
        key, sub = jax.random.split(key)
        states, (obs, acc) = jax.block_until_ready(block(states, jax.random.split(sub, chains)))
        parts.append(obs)
        n_draws += n
    t_draw = (time.perf_counter() - t1) / n_draws
    return {k: np.concatenate([np.asarray(p[k]) for p in parts], axis=1) for k in parts[0]}, t_draw, states, acc


def blackjax_run(cfg, data, budget, target_accept=0.9, pilot_steps=1000, tune_steps=1000):
    """BlackJAX 1.7's adjusted MCLMC (``adjusted_mclmc_dynamic``, random trajectory lengths, diagonal mass), two
    vectorized chains from the prior, its tuner started from an unadjusted MCLMC pilot's (L, step, mass) as the
    issue asks (its default start takes minutes here). Same protocol as :func:`timed_run`: warmup (pilot + tuning,
    compilation included), then blocks of draws until the budget; one draw per MH proposal."""
    import blackjax
    from blackjax.mcmc import adjusted_mclmc_dynamic as adj

    t0 = time.perf_counter()
    logdensity, _, positions, record = _flat_model(cfg, data)
    steps_fn = adj.make_random_trajectory_length_fn(True)
    adj_kernel = adj.build_kernel(integration_steps_fn=steps_fn)

    def adjusted(rng_key, state, logdensity_fn, step_size, inverse_mass_matrix, integration_steps_params):
        return adj_kernel(rng_key=rng_key, state=state, logdensity_fn=logdensity_fn, step_size=step_size,
                          inverse_mass_matrix=inverse_mass_matrix, integration_steps_params=integration_steps_params)

    @jax.jit
    @jax.vmap
    def warmup(x, key):
        k_init, k_pilot, k_adj, k_tune = jax.random.split(key, 4)
        state = blackjax.mcmc.mclmc.init(x, logdensity, k_init)
        state, pilot, _ = blackjax.mclmc_find_L_and_step_size(
            mclmc_kernel=blackjax.mcmc.mclmc.build_kernel(), num_steps=pilot_steps, state=state, rng_key=k_pilot,
            logdensity_fn=logdensity, diagonal_preconditioning=True)
        state = adj.init(state.position, logdensity, k_adj)
        state, params, _ = blackjax.adjusted_mclmc_find_L_and_step_size(
            mclmc_kernel=adjusted, logdensity_fn=logdensity, num_steps=tune_steps, state=state, rng_key=k_tune,
            target=target_accept, diagonal_preconditioning=True, params=pilot)
        return state, params

    chains = len(positions)
    key = jax.random.PRNGKey(cfg.run.seed + 1)
    states, params = jax.block_until_ready(warmup(positions, jax.random.split(key, chains)))

    @partial(jax.jit, static_argnums=2)
    def block(states, keys, n):
        def one(state, params, key):
            def step(st, k):
                st, inf = adjusted(k, st, logdensity, params.step_size, params.inverse_mass_matrix,
                                   (params.L / params.step_size,))
                return st, (record(st.position), inf.acceptance_rate)
            return jax.lax.scan(step, state, jax.random.split(key, n))
        return jax.vmap(one)(states, params, keys)

    block = _compiled(block, states, chains)
    t_warm = time.perf_counter() - t0
    print(f"    BlackJAX tuned: step {np.ravel(params.step_size)}, L {np.ravel(params.L)}")
    draws, t_draw, _, acc = _blocks(block, states, jax.random.fold_in(key, 1), chains, t0, budget)
    print(f"    BlackJAX acceptance of the last block {np.asarray(acc).mean(axis=1)}")
    return draws, t_warm, t_draw


def laps_run(cfg, data, budget, chains=16, burn_in_steps=2000, adapt_samples=50, steps_per_sample=15):
    """BlackJAX 1.7's LAPS (``blackjax.adaptation.laps``, arXiv:2601.16696), its phases run as ``laps`` runs them:
    ``chains`` chains from the prior burn in together by unadjusted isokinetic MCLMC (ensemble adaptation of the step,
    L and a diagonal mass, stopped early where the chains agree), then the Metropolis-adjusted MAMS kernel with
    ``steps_per_sample`` isokinetic steps per proposal, its step size bisected over ``adapt_samples`` proposals toward
    LAPS's acceptance (0.9 above 200 dimensions); the warmup is both, compilation included. Then every chain draws at
    the fixed step, in blocks until the budget, one draw per proposal, and the accuracy is that of the average over
    all chains and draws (the Gamma method over the chains, as for every sampler here). ``laps`` itself returns no
    mass matrix, so its pieces are called here in its order (laps_burn_in.initialize, run_eca with the burn-in's
    Adaptation, then with laps.Adaptation)."""
    from blackjax.adaptation import laps, laps_burn_in
    from blackjax.eca import run_eca
    from blackjax.mcmc.adjusted_mclmc import build_kernel
    from blackjax.mcmc.hmc import HMCState
    from blackjax.mcmc.integrators import generate_isokinetic_integrator, mclachlan_coefficients, omelyan_coefficients

    t0 = time.perf_counter()
    logdensity, unravel, positions, record = _flat_model(cfg, data)
    ndims = positions.shape[1]
    scale = 1.0 / np.sqrt(cfg.model.lambda0)  # the prior's scale (lambda0 = lambda1 in every problem here)
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("chains",))
    k_init, k_burn, k_adapt, k_draw = jax.random.split(jax.random.PRNGKey(cfg.run.seed), 4)
    state = laps_burn_in.initialize(k_init, logdensity, True, lambda k: scale * jax.random.normal(k, (ndims,)),
                                    chains, mesh, None)
    burn = laps_burn_in.Adaptation(ndims, microcanonical=True, alpha=1.9, bias_type=3,
                                   save_num=int(round(0.2 * burn_in_steps)), C=0.1, r_end=0.01)
    state, tuned, info = run_eca(k_burn, state, laps_burn_in.build_kernel(logdensity, ndims, True), burn,
                                 burn_in_steps, chains, mesh, early_stop=True)
    high = ndims > 200
    coefficients, target = (omelyan_coefficients, 0.9) if high else (mclachlan_coefficients, 0.7)
    mass = tuned.inverse_mass_matrix
    built = build_kernel(integrator=generate_isokinetic_integrator(coefficients))

    def kernel(key, st, adap):
        return built(rng_key=key, state=st, logdensity_fn=logdensity, step_size=adap.step_size,
                     integration_steps_params=(adap.steps_per_sample,), inverse_mass_matrix=mass,
                     L_proposal_factor=1.25)

    tuned = tuned._replace(step_size=(tuned.step_size / jnp.sqrt(jnp.average(mass))).item())
    state = HMCState(state.position, state.logdensity, state.logdensity_grad)
    adapt = laps.Adaptation(tuned, adapt_samples, steps_per_sample, target)
    state, adapted, _ = run_eca(k_adapt, state, kernel, adapt, adapt_samples, chains, mesh)

    @partial(jax.jit, static_argnums=2)
    def block(states, keys, n):
        def one(st, key):
            def step(s, k):
                s, inf = kernel(k, s, adapted)
                return s, (record(s.position), inf.acceptance_rate)
            return jax.lax.scan(step, st, jax.random.split(key, n))
        return jax.vmap(one)(states, keys)

    block = _compiled(block, state, chains)
    t_warm = time.perf_counter() - t0
    burned = len(np.asarray(jax.tree_util.tree_leaves(info)[0]))  # the steps run before the early stop
    print(f"    LAPS: {chains} chains, burn-in {burned} unadjusted steps, step {float(adapted.step_size):.4g}, "
          f"{steps_per_sample} steps per proposal, {ndims} dimensions")
    draws, t_draw, _, acc = _blocks(block, state, k_draw, chains, t0, budget)
    print(f"    LAPS acceptance of the last block {float(np.asarray(acc).mean()):.2f}")
    return draws, t_warm, t_draw


#: the BlackJAX anchors, run where --only names them: on the joint posterior of (v, w), and on the default sampler's
#: own target, w with v integrated out (what each gains from the target rather than from its kernel)
BLACKJAX = {"BlackJAX adjusted MCLMC": (blackjax_run, "joint"), "BlackJAX LAPS": (laps_run, "joint"),
            "BlackJAX adjusted MCLMC, v integrated out": (blackjax_run, "integrated"),
            "BlackJAX LAPS, v integrated out": (laps_run, "integrated")}

#: the accuracy the targets ask for: 1% on eps_g (relative), 0.01 on every overlap entry
TARGET = types.SimpleNamespace(eps_g=0.01, overlap=0.01)


def first_accurate(draws, every=10):
    """The first n (a multiple of ``every``, or of n/150 on long runs) at which the draws [0, n) of every chain have
    the target accuracy and every quantity has settled (renormpp run's stop rule, :func:`stages.accuracy`: its own
    max-ESS cut on those n draws, tau_int resolved with >= 50 effective samples, chains that agree, no drift), or
    None: the time a run that checked as it went would have stopped. Unlike the extrapolation it needs no cut from
    draws the run had not made yet: on stationary chains the largest max-ESS cut of 56 quantities grows with the
    length of the run (0.1-0.38 n on problem 2), so the extrapolated time grows with the budget."""
    N = draws["eps_g"].shape[1]
    every = max(every, N // 150)
    for n in range(2 * every, N + 1, every):
        if stages.accuracy({k: v[:, :n] for k, v in draws.items()}, TARGET, "gamma")[0]:
            return n
    return None


def accuracy_time(draws, t_warm, t_draw):
    """Time to the target accuracy and the analysis behind it: the extrapolation (module docstring) and, in
    ``info["t_first"]``, the first time the run had the accuracy with every quantity settled (:func:`first_accurate`;
    NaN if never, then ``info["t_run"]`` is a lower bound)."""
    eps = draws["eps_g"]
    series = rp.diagnostics.scalar_series(draws)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rp.diagnostics.ShortRunWarning)
        est = {k: rp.diagnostics.gamma_method(v) for k, v in series.items()}
    target = {k: (TARGET.eps_g * abs(e.mean) if k == "eps_g" else TARGET.overlap) for k, e in est.items()}
    ratio = {k: (est[k].error / target[k]) ** 2 for k in est}
    n = eps.shape[1]
    need = {k: e.cut + (n - e.cut) * ratio[k] for k, e in est.items()}  # draws for quantity k: its cut, then errors
    worst = max(need, key=need.get)  # all quantities are accurate once the one that needs the most draws is
    cut = max(e.cut for e in est.values())
    t = t_warm + t_draw * need[worst]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rp.diagnostics.ShortRunWarning)
        settled = {k: rp.diagnostics.converged(est[k], series[k], family=len(est)) for k in est}  # tau, chains, drift
        rhat = np.nanmax([rp.diagnostics.rhat(series[k], cut=est[k].cut) for k in est])
    n_first = first_accurate(draws)
    t_first = t_warm + t_draw * n_first if n_first is not None else float("nan")
    return t, dict(est=est, worst=worst, cut=cut, n=n, reliable=all(settled.values()), rhat=rhat, n_first=n_first,
                   t_first=t_first, t_run=t_warm + t_draw * n)


def save(folder, name, draws, t_warm, t_draw, seed):
    if folder:
        os.makedirs(folder, exist_ok=True)
        slug = "".join(c if c.isalnum() else "_" for c in name)
        np.savez(os.path.join(folder, f"{slug}_seed{seed}.npz"), t_warm=t_warm, t_draw=t_draw, **draws)


def report(name, t_need, info, t_warm, t_draw, theory):
    e = info["est"]["eps_g"]
    w = info["est"][info["worst"]]
    flag = "" if info["reliable"] else "  (not settled: tau_int unresolved, chains apart or a drift: lower bound)"
    print(f"{name:32s} {t_need:10.0f} s   eps_g {e.mean:.5f} +- {e.error:.5f} (tau {e.tau_int:6.1f})   "
          f"worst {info['worst']} tau {w.tau_int:6.1f} cut {w.cut}   n={info['n']} largest cut={info['cut']} warmup {t_warm:.0f} s, "
          f"{1e3 * t_draw:.1f} ms/draw, worst R-hat {info['rhat']:.3f}{flag}   theory eps_g {theory:.5f}")
    print(f"    first accurate and settled: " + (f"{info['t_first']:.0f} s (after {info['n_first']} draws per chain)"
                                                  if info["n_first"] else f"never in the run (>= {info['t_run']:.0f} s)"))


def _beside_load():
    """Start load.py's competing job (1000 x 1000 matrix products, OPENBLAS_NUM_THREADS=2) for as long as this
    process lives; the sampler then shares the cores as it would beside a user's other work."""
    import atexit
    import subprocess

    from load import COMPETITOR

    comp = subprocess.Popen([sys.executable, "-c", COMPETITOR.format(seconds=86400)],
                            env={**os.environ, "OPENBLAS_NUM_THREADS": "2"})
    atexit.register(lambda: (comp.kill(), comp.wait()))
    time.sleep(2)
    print(f"beside a 2-thread numpy job (pid {comp.pid})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", type=int, default=1, choices=sorted(PROBLEMS))
    ap.add_argument("--budget", type=float, default=120.0, help="wall seconds per candidate")
    ap.add_argument("--ula-budget", type=float, help="wall seconds per ULA run (default: --budget)")
    ap.add_argument("--ula-factors", type=int, nargs="+", default=list(ULA_FACTORS),
                    help="run ULA at these multiples of the paper's step (default: %(default)s)")
    ap.add_argument("--only", nargs="*", help="run only these candidates (names as printed)")
    ap.add_argument("--root", help="problems 3 and 4: the folder with MNIST's IDX files")
    ap.add_argument("--seed", type=int, default=0, help="the chains' seed (run.seeds; the data stay the same)")
    ap.add_argument("--save", help="a folder: each candidate's recorded draws and timings go there (.npz), for analysis")
    ap.add_argument("--beside-load", action="store_true",
                    help="run every candidate beside load.py's competing 2-thread numpy job (started 2 s before)")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.beside_load:
        _beside_load()
    if args.quick:
        PROBLEMS[args.problem] = dict(P=60, N0=10, N1=20, D=2, teacher="linear")
        args.budget = 10.0
    print(machine_info())
    prob = PROBLEMS[args.problem]
    print(f"problem {args.problem}: {prob}, T={T}, erf, budget {args.budget:.0f} s per candidate\n")
    cfg0 = config(args.problem, {"kind": "nuts"}, root=args.root)
    data = stages.load_data(cfg0.data)
    fit = theories.solve_theory(cfg0.model, data)
    theory = fit.refit("exact").generalization_error(data.X_test, data.Y_test)
    results, nuts_state = {}, None
    for name, sampler in candidates(args.budget).items():
        if args.only and name not in args.only:
            continue
        cfg = config(args.problem, sampler, seed=args.seed, root=args.root)
        draws, stats, t_warm, t_draw, state = timed_run(cfg, data, args.budget)
        t_need, info = accuracy_time(draws, t_warm, t_draw)
        results[name] = (t_need, info)
        report(name, t_need, info, t_warm, t_draw, theory)
        save(args.save, name, draws, t_warm, t_draw, args.seed)
        if hasattr(state, "step_size"):
            print(f"    adapted step {np.ravel(state.step_size)}, mean acceptance {np.ravel(state.mean_accept_prob)}")
        if name == "NUTS":
            nuts_state = state

    for name, (run, target) in BLACKJAX.items():  # an optional dependency: pip install -e ".[bench]"
        if args.only and name in args.only:
            cfg = config(args.problem, {"kind": "nuts", "v_sampling": target}, seed=args.seed, root=args.root)
            draws, t_warm, t_draw = run(cfg, data, args.budget)
            t_need, info = accuracy_time(draws, t_warm, t_draw)
            results[name] = (t_need, info)
            report(name, t_need, info, t_warm, t_draw, theory)
            save(args.save, name, draws, t_warm, t_draw, args.seed)

    # the paper's ULA: measured at k x its step, where it thermalizes and its tau_int is resolved in the budget;
    # Langevin times scale as 1/h, so at the paper's step it needs k times as many updates of the same cost
    if not args.only or "ULA" in args.only:
        estimates = []
        for k in args.ula_factors:
            ula = config(args.problem, dict(kind="ula", step_size=k * H_PAPER, inner_steps=100, num_warmup=0),
                         seed=args.seed, root=args.root)
            draws, _, t_warm, t_draw, _ = timed_run(ula, data, args.ula_budget or args.budget)
            t_k, info = accuracy_time(draws, 0.0, t_draw)  # compilation (t_warm) is not scaled
            report(f"ULA at {k} x the paper's step", t_k, info, t_warm, t_draw, theory)
            save(args.save, f"ULA at {k}", draws, t_warm, t_draw, args.seed)
            estimates.append((k, k * t_k, info["reliable"], k * info["t_first"]))
            print(f"    -> the paper's ULA (epsilon = 1e-3): {k} x {t_k:.0f} s = {k * t_k:.0f} s; first accurate and "
                  f"settled: {k} x {info['t_first']:.0f} s = {k * info['t_first']:.0f} s")
        k, t_need, reliable, t_first = max(estimates, key=lambda e: (e[2], e[1]))  # the resolved one (larger if both)
        results["ULA (paper)"] = (t_need, dict(reliable=reliable, t_first=t_first))
        print(f"  ULA, paper epsilon=1e-3: {t_need:.0f} s (first accurate and settled: {t_first:.0f} s), extrapolated "
              f"from k = {k}" + ("" if reliable else "  (tau_int not resolved: lower bound)"))
    if "ULA (paper)" in results:
        base, base_first = results["ULA (paper)"][0], results["ULA (paper)"][1]["t_first"]
        print("\nspeed-up over the paper's ULA (time to the same accuracy: extrapolated; first accurate and settled):")
        for name, (t, info) in results.items():
            print(f"  {name:32s} {base / t:10.1f}x {base_first / info['t_first']:10.1f}x"
                  + (f"   {results['NUTS'][0] / t:5.2f}x vs NUTS" if "NUTS" in results else ""))


if __name__ == "__main__":
    main()
