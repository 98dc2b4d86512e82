"""The stages of a point: the data, the theory, the sampling (checkpointed blocks of draws) and the outputs.

Each stage reads a :class:`~renormpp.experiments.config.PointConfig` and what the stages before it made;
:mod:`.point` runs them in order, and :mod:`.report` reuses the data and theory stages.
"""
from __future__ import annotations

import contextlib
import os
import platform
import time
import warnings
from typing import NamedTuple

import numpy as np

from .. import diagnostics, theory
from . import config as config_mod
from .signals import STOP, Interrupted
from .store import PointStore


# ---- data ------------------------------------------------------------------------------------------------------
def load_data(data_cfg):
    """The data set of a config's ``[data]`` table; loader errors become ConfigErrors naming the table."""
    try:
        return config_mod.LOADERS[data_cfg.name](**config_mod.loader_options(data_cfg))
    except (ValueError, TypeError) as err:
        raise config_mod.ConfigError(f"[data] name = {data_cfg.name!r}: {err}") from err


def versions() -> dict:
    """The package versions and the machine, for ``versions.json``."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "platform": platform.platform(), "machine": platform.machine(),
           "cpu_count": os.cpu_count()}
    for pkg in ("renormpp", "numpy", "scipy", "jax", "jaxlib", "numpyro", "arviz", "xarray", "matplotlib"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


# ---- theory ------------------------------------------------------------------------------------------------------
def solve_theory(model, data):
    """The kernel eigendecomposition of the data at the point's width (``infinite_width``: the other methods are
    refits of it, :func:`renormpp.diagnostics.theory_fit`)."""
    return theory.solve(data.X, data.Y, N1=model.N1, T=model.T, lambda0=model.lambda0, lambda1=model.lambda1,
                        activation=model.activation, method="infinite_width", depth=model.depth)


def theory_results(fit, data) -> dict:
    """Every theory method at ``fit``'s N1 as plain numbers (for ``theory.json``)."""
    out = {}
    for method in theory.METHODS:
        th = diagnostics.theory_fit(fit, method)
        if th is None:
            out[method] = {"applies": False}
            continue
        out[method] = dict(applies=True, Q=th.Q.tolist(), readout_overlap=th.readout_overlap.tolist(),
                           eps_g=float(th.generalization_error(data.X_test, data.Y_test)), converged=bool(th.converged),
                           grad_norm=float(th.grad_norm), action=float(th.action), n_iter=int(th.n_iter))
    return out


# ---- sampling ------------------------------------------------------------------------------------------------------
#: the sampler statistics recorded per draw, by kind
STAT_FIELDS = {"ula": ("diverging",), "mala": ("accept_prob", "diverging", "step_size"),
               "kinetic": ("accept_prob", "diverging", "step_size"), "nuts": ("accept_prob", "diverging", "num_steps")}


def model_kwargs(p) -> dict:
    m = p.model
    return dict(N1=m.N1, depth=m.depth, activation=m.activation, T=m.T,
                lambdas=(m.lambda0,) * m.depth + (m.lambda1,), integrate_v=p.sampler.v_sampling == "integrated")


def make_kernel(p, data):
    """The NumPyro kernel of a point's ``[sampler]``, recording its observables (the kernel's own path: the
    Langevin kernels' ``observables``, or :class:`renormpp.infer.Observed` around NUTS)."""
    from numpyro.infer import NUTS

    from .. import observables, readout
    from ..infer import KineticLangevin, Langevin, Observed
    from ..models import mlp
    from ..network import layer_sites

    s, m = p.sampler, p.model
    train, test = _float32(data.X, data.Y), _float32(data.X_test, data.Y_test)
    if s.rao_blackwell:
        record = readout.rao_blackwell(*train, *test, T=m.T, lambda1=m.lambda1, activation=m.activation)
    else:
        record = observables.default(*test, m.activation)
    if s.kind == "nuts":
        return Observed(NUTS(mlp, target_accept_prob=s.target_accept_prob,
                             max_tree_depth=s.max_tree_depth, dense_mass=s.dense_mass), record)
    gibbs = (readout.gibbs_fn(*train, T=m.T, lambda1=m.lambda1, activation=m.activation)
             if s.v_sampling == "gibbs" else None)
    common = dict(step_size=s.step_size, inner_steps=s.inner_steps, observables=record, gibbs_fn=gibbs,
                  warn_divergences=False,  # checked on the host after every block (renormpp.infer.Chains)
                  pooled_adaptation=getattr(s, "adaptation", "per_chain") == "pooled")
    if s.kind == "kinetic":
        first_layer = layer_sites(m.depth)[0]
        return KineticLangevin(mlp, friction=s.friction, adapt_step_size=s.adapt_step_size,
                               target_accept_prob=s.target_accept_prob,
                               row_mass=first_layer if s.mass == "rows" else None,
                               freeze_gibbs_sites=s.freeze_v, accept_shift=s.accept_shift,
                               **common)
    mala = s.kind == "mala"
    return Langevin(mlp, adjust=mala, adapt_step_size=mala and s.adapt_step_size,
                    target_accept_prob=s.target_accept_prob if mala else None, **common)


def _float32(*arrays):
    return tuple(np.asarray(a, dtype=np.float32) for a in arrays)


def start_chains(p, data, init_params=None):
    """``(chains, state)``: the point's :class:`renormpp.infer.Chains` and the initial state of every chain."""
    import jax

    from ..infer import Chains

    s = p.sampler
    chains = Chains(make_kernel(p, data), num_chains=s.num_chains, chain_method=s.chain_method,
                    extra_fields=STAT_FIELDS[s.kind], blas_threads=p.run.blas_threads or None)
    state = chains.init(jax.random.PRNGKey(p.run.seed), s.num_warmup, *_float32(data.X, data.Y),
                        init_params=init_params, **model_kwargs(p))
    return chains, state


def describe(chains, state) -> str:
    """The sampler and its (adapted) step, for the point's comparison and the report."""
    kernel = chains.kernel
    if hasattr(kernel, "describe"):
        return kernel.describe(state)
    step = getattr(getattr(state, "adapt_state", None), "step_size", None)
    inner = getattr(kernel, "kernel", kernel)
    return type(inner).__name__ + (f", adapted step_size={float(np.mean(np.asarray(step))):.3g}" if step is not None
                                   else "")


class Sampled(NamedTuple):
    """What the sampling stage returns: the observables ``{"eps_g": (chain, draw), "overlap": (chain, draw, D, D)}``,
    the sampler statistics, the wall time (summed over resumptions), the sampler's description, the warnings
    it gave (also over resumptions), why sampling stopped, the warmup draws made (fewer than ``num_warmup`` where an
    adaptive warmup ended early) and what the adaptive warmup decided (:attr:`~renormpp.experiments.warmup.AdaptiveWarmup.log`)."""

    draws: dict
    stats: dict
    seconds: float
    sampler: str
    notes: list
    stopped: str = "num_samples"
    warmup: int = 0
    warmup_log: tuple = ()


MAX_BLOCK = 1000  # iterations per compiled block of the sampling stage (a block takes at most run.chunk_seconds)


def sample(p, data, store: PointStore, *, progress: bool = True, label: str = "") -> Sampled:
    """Warmup and sampling in blocks of draws, checkpointed to ``store`` (every ``run.checkpoint_every`` seconds,
    after the warmup, and on SIGTERM). The sampler's warnings are shown and kept (``sampling_notes.json``).

    The chains carry their random keys in their state, so where the blocks begin does not change the draws: a
    resumed point gives the draws of an uninterrupted one.
    """
    from .progress import bar as progress_bar

    s, r = p.sampler, p.run
    notes = store.read_json("sampling_notes.json", default=[])
    with _noted(notes):
        chains, state = start_chains(p, data)
    ck = store.checkpoint(template=state)
    W, total = s.num_warmup, s.num_samples
    adaptive = adaptive_warmup(p, chains, ck.state, history=ck.joined(warmup=True))
    W = warmup_end(ck.state, W)
    stopped = "num_samples"
    bar = progress_bar(total=W + total, initial=ck.warm + ck.n, desc=f"{label} warmup+sampling", unit="it",
                       disable=not progress, leave=False)
    block, probes = 10, 2  # two short blocks time an iteration; then blocks of about chunk_seconds
    length = max(min(max(W, total), MAX_BLOCK), block)  # every block runs in one compilation of this length
    check = next_check(ck.n)  # the draw count at which stop on accuracy looks next
    try:
        while ck.warm + ck.n < W + total:
            warmup = ck.warm < W
            n = min(block, (W - ck.warm) if warmup else (total - ck.n))
            if not warmup and r.target_error is not None:
                n = min(n, check - ck.n)  # blocks end on the check grid: where a run stops is the same on any machine
            t0 = time.perf_counter()
            with _noted(notes):
                state, draws, stats = chains.run(ck.state, n, length)
            dt = time.perf_counter() - t0
            if warmup and adaptive is not None:
                state = adaptive.update(state, draws, stats)
                W = warmup_end(state, W)
                bar.total = W + total
            ck.state, ck.seconds = state, ck.seconds + dt
            if warmup:
                ck.warm += n
                ck.add(draws, stats, warmup=True)
            else:
                ck.n += n
                ck.add(draws, stats)
            if "accept_prob" in stats:
                bar.set_postfix_str(f"acc. {np.mean(stats['accept_prob']):.2f}")
            probes -= 1
            if probes <= 0:  # blocks of about chunk_seconds, from the last block's time per draw
                block = int(np.clip(r.chunk_seconds / (dt / n), 1, length))
            if adaptive is not None and ck.warm < W:
                block = min(block, WARMUP_BLOCK)  # the adaptive warmup decides between blocks
            end_of_warmup = warmup and ck.warm == W
            if not warmup and ck.n < total:
                stopped, errors = _early_stop(ck, r, check)
                check = next_check(ck.n) if ck.n >= check else check
                total = ck.n if stopped else total
                if errors:  # what stop on accuracy waits for, on the progress bar
                    bar.set_postfix_str(f"acc. {np.mean(stats['accept_prob']):.2f}, eps_g err "
                                        f"{100 * errors['eps_g']:.2f}%, overlap err {errors['overlap']:.4f}, "
                                        f"R-hat {errors['rhat']:.3f}" if "accept_prob" in stats else
                                        f"eps_g err {100 * errors['eps_g']:.2f}%, R-hat {errors['rhat']:.3f}")
            bar.total = W + total
            bar.update(n)
            if STOP.is_set() or end_of_warmup or time.monotonic() - ck.saved_at >= r.checkpoint_every or ck.n == total:
                ck.save()
                store.write_json("sampling_notes.json", notes)
            if STOP.is_set() and ck.n < total:
                raise Interrupted(f"stopped after {ck.warm} warmup iterations and {ck.n} of {total} draws; "
                                  f"progress saved in {ck.path}")
    except KeyboardInterrupt:
        ck.save()  # the last finished block; the one in flight is lost
        store.write_json("sampling_notes.json", notes)
        raise
    finally:
        bar.close()
    draws, stats = ck.joined()
    sampler = describe(chains, ck.state)
    if adaptive is not None:
        sampler += f"; adaptive warmup: {W} of at most {s.num_warmup} draws"
    return Sampled(draws, stats, ck.seconds, sampler, notes, stopped or "num_samples", ck.warm,
                   tuple(adaptive.log) if adaptive is not None else ())


WARMUP_BLOCK = 10  # draws per block while an adaptive warmup runs (renormpp.experiments.warmup)


def adaptive_warmup(p, chains, state, history=None):
    """The point's :class:`~renormpp.experiments.warmup.AdaptiveWarmup` for the chains' ``state`` (``history``: the
    warmup's draws and statistics before a resumption), or None (a fixed warmup, or a kernel without one: NUTS)."""
    from .warmup import AdaptiveWarmup

    s = p.sampler
    if getattr(s, "warmup", "fixed") != "adaptive" or s.num_warmup == 0 or not hasattr(state, "adaptation"):
        return None
    pooled = chains.kernel.pools_adaptation and chains.chain_method == "vectorized"
    return AdaptiveWarmup(s.num_warmup, chains.kernel.adapts_mass, pooled_chains=chains.num_chains if pooled else 1,
                          history=history)


def warmup_end(state, num_warmup: int) -> int:
    """The draw at which the warmup of ``state`` ends: its schedule's end (moved by an adaptive warmup), or
    ``num_warmup`` for kernels without one (NUTS)."""
    adaptation = getattr(state, "adaptation", None)
    if adaptation is None:
        return num_warmup
    return int(np.asarray(adaptation.schedule).reshape(-1, 3)[0, 2])


def next_check(n: int) -> int:
    """The first draw count after ``n`` on the grid where stop on accuracy is checked: 10, 20, ..., then about 10%
    apart (multiples of 10). The grid is fixed, so a seed stops at the same draw on any machine and after any
    resumption; its checks cost about ten full passes over the draws in all, not one per block."""
    g = 10
    while g <= n:
        g = max(g + 10, int(np.ceil(g * 1.1 / 10)) * 10)
    return g


def _early_stop(ck, r, check: int) -> tuple[str, dict]:
    """Why sampling may stop before ``num_samples``: "max_seconds" (the budget is spent), "target_error" (every
    error of :func:`accuracy` is reached and every quantity has settled, judged where the draws reach ``check``, a
    point of :func:`next_check`'s grid), or "" (go on); and the errors of :func:`accuracy` where they were judged."""
    if r.max_seconds is not None and ck.seconds >= r.max_seconds:
        return "max_seconds", {}
    if r.target_error is None or ck.n < check:
        return "", {}
    reached, errors = accuracy(ck.joined()[0], r.target_error, r.error_method)
    return ("target_error" if reached else ""), errors


def accuracy(draws: dict, target, method: str = "gamma") -> tuple[bool, dict]:
    """``(reached, errors)``: whether the means of ``draws`` have the errors ``target`` asks for (``eps_g`` relative,
    ``overlap`` absolute on every entry, each estimate :func:`~renormpp.diagnostics.converged` among them all: enough
    independent samples after the thermalization cut, chains that agree and no drift), and the errors achieved
    (``eps_g`` relative, ``overlap`` the largest, ``rhat`` the largest R-hat, shown only). Every overlap entry is
    judged even where only ``eps_g`` has a target: a slow mode shows in some quantities before others, and eps_g alone
    can look settled while they still move."""
    series = list(diagnostics.scalar_series(draws).values())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short series are expected early on: they count as not reached
        est = [diagnostics.error_of_mean(x, method=method) for x in series]
        rhats = [diagnostics.rhat(x, cut=e.cut) for e, x in zip(est, series)]
        settled = all(diagnostics.converged(e, x, family=len(series)) for e, x in zip(est, series))
        worst_rhat = float(np.nanmax(rhats)) if np.isfinite(rhats).any() else np.nan
    eps, ov = est[0], est[1:]
    rel = eps.error / abs(eps.mean) if eps.mean else np.inf
    errors = {"eps_g": float(rel), "overlap": float(max(e.error for e in ov)), "rhat": worst_rhat}
    reached = settled and (target.eps_g is None or rel <= target.eps_g) and (
        target.overlap is None or errors["overlap"] <= target.overlap)
    return bool(reached), errors


@contextlib.contextmanager
def _noted(notes: list):
    """Show the warnings raised inside, and add their messages to ``notes`` (once each)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        if str(w.message) not in notes:
            notes.append(str(w.message))
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


# ---- outputs -------------------------------------------------------------------------------------------------------
def to_datatree(draws: dict, stats: dict, class_names=None):
    """The draws and statistics as an ArviZ DataTree with named dims (:func:`renormpp.diagnostics.to_datatree`)."""
    D = draws["overlap"].shape[-1]
    names = list(class_names) if class_names is not None and len(class_names) == D else list(range(D))
    return diagnostics.to_datatree(draws, sample_stats=stats, coords={"output": names, "output_": names})


def comparison_markdown(ds) -> str:
    """The :func:`~renormpp.diagnostics.compare` table as markdown: MC mean +- error, and each theory's prediction
    with its verdict (agrees, or deviates by Delta at z)."""
    methods = list(ds.theory.values)
    head = "| quantity | MC | " + " | ".join(f"{t} | verdict" for t in methods) + " |"
    lines = [head, "|" + "---|" * (2 + 2 * len(methods))]
    for q in ds.quantity.values:
        row = ds.sel(quantity=q)
        cells = []
        for t in methods:
            pred = float(row.prediction.sel(theory=t))
            cells.append(f"{pred:.5g} | {row.verdict.sel(theory=t).item()}" if np.isfinite(pred) else
                         f"– | does not apply: {diagnostics.does_not_apply(ds, t)}")
        flag = "" if bool(row.reliable) else " (error bar does not hold)"
        if "drifting" in row and bool(row.drifting):
            flag += f" (still drifting: Geweke z = {float(row.drift_z):+.1f})"
        if "chains_apart" in row and bool(row.chains_apart):
            flag += f" (chains disagree: p = {float(row.chains_p):.1g}, R-hat = {float(row.rhat):.3f})"
        lines.append(f"| {q} | {float(row.mc_mean):.5g} ± {float(row.mc_error):.2g}{flag} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def save_figures(folder, ds, draws, dt, class_names) -> None:
    import matplotlib.pyplot as plt

    from .. import plots

    for name, make in (("overlaps.png", lambda: plots.overlap_heatmaps(ds, class_names=class_names)),
                       ("mc_analysis.png", lambda: plots.mc_analysis(draws["eps_g"])),
                       ("trace.png", lambda: plots.trace(dt, var_names=["eps_g"]))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", diagnostics.ShortRunWarning)  # already listed in comparison.md
            fig = make()
        fig = getattr(fig, "figure", fig)
        fig.savefig(folder / name, dpi=110)
        plt.close(fig)


def write_outputs(p, store: PointStore, fit, data, sampled: Sampled, label: str) -> dict:
    """``observables.nc``, the comparison with the theory (csv, md, nc), the figures; returns the point's result,
    whose ``status`` is ``"failed"`` where the sampler failed (:func:`renormpp.diagnostics.sampler_health`)."""
    folder, draws, stats = store.folder, sampled.draws, sampled.stats
    dt = to_datatree(draws, stats, data.class_names)
    dt.to_netcdf(folder / "observables.nc")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = diagnostics.compare(dt, fit, data.X_test, data.Y_test, method=p.run.error_method, sampler=sampled.sampler)
    ds.to_netcdf(folder / "comparison.nc")
    ds.drop_vars(["a", "b"]).to_dataframe().to_csv(folder / "comparison.csv")
    notes = list(dict.fromkeys(sampled.notes + [str(w.message) for w in caught]))
    ok = bool(ds.attrs["sampler_ok"])
    md = f"# {label}\n\n```\n{ds.attrs['summary']}\n```\n\n{comparison_markdown(ds)}\n"
    if notes:
        md += "\n## Warnings\n\n" + "\n".join(f"* {n}" for n in notes) + "\n"
    store.write("comparison.md", md)
    save_figures(folder, ds, draws, dt, data.class_names)
    e = ds.sel(quantity="eps_g")
    return dict(
        N1=p.model.N1, seed=p.run.seed, status="ok" if ok else "failed", problems=ds.attrs["sampler_problems"],
        sampler=sampled.sampler, draws=int(draws["eps_g"].shape[1]), chains=int(draws["eps_g"].shape[0]),
        stopped=sampled.stopped, warmup_draws=sampled.warmup, warmup_log=list(sampled.warmup_log),
        sampling_seconds=sampled.seconds, divergences=int(np.sum(stats["diverging"])),
        accept_prob=float(np.mean(stats["accept_prob"])) if "accept_prob" in stats else None,
        eps_g=float(e.mc_mean), eps_g_error=float(e.mc_error),
        eps_g_theory={t: float(e.prediction.sel(theory=t)) for t in theory.METHODS},
        verdict={t: e.verdict.sel(theory=t).item() for t in theory.METHODS},
        reliable=bool(ds.reliable.all()), summary=ds.attrs["summary"], warnings=notes,
    )

