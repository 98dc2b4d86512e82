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
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .. import architectures, diagnostics
from . import config as config_mod
from .samplers import SAMPLERS, Parts
from .signals import STOP, Interrupted
from .store import PointStore


# ---- data ------------------------------------------------------------------------------------------------------
def load_data(data_cfg, model=None):
    """The data set of a config's ``[data]`` table; loader errors become ConfigErrors naming the table. With the
    ``[model]`` table, inputs its architecture cannot take (a convolutional network's images of another shape) are a
    ConfigError too."""
    try:
        data = config_mod.LOADERS[data_cfg.name](**config_mod.loader_options(data_cfg))
    except (ValueError, TypeError) as err:
        raise config_mod.ConfigError(f"[data] name = {data_cfg.name!r}: {err}") from err
    if model is not None:
        try:
            architecture(model).check_inputs(data.X.shape[1], **model.options())
        except ValueError as err:
            raise config_mod.ConfigError(f"[data] name = {data_cfg.name!r} gives inputs of N0 = {data.X.shape[1]} "
                                         f"features, which model.architecture = {model.architecture!r} with "
                                         f"{_described(model.options())} cannot take: {err}") from err
    return data


def _described(options: dict) -> str:
    return ", ".join(f"model.{k} = {v!r}" for k, v in options.items()) or "its defaults"


def _cpu_name() -> str:
    """The processor's model name (Linux: /proc/cpuinfo), else what :func:`platform.processor` says."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        return platform.processor()


def versions() -> dict:
    """The package versions and the machine, for ``versions.json``."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "platform": platform.platform(), "machine": platform.machine(),
           "cpu": _cpu_name(), "cpu_count": os.cpu_count()}
    for pkg in ("renormpp", "numpy", "scipy", "jax", "jaxlib", "numpyro", "arviz", "xarray", "matplotlib"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


# ---- sampling ------------------------------------------------------------------------------------------------------
def architecture(model):
    """The :class:`~renormpp.architectures.Architecture` record of a ``[model]`` table."""
    return architectures.get_architecture(model.architecture)


def model_kwargs(point) -> dict:
    """The arguments of the point's NumPyro model (its architecture's ``model_kwargs``)."""
    m = point.model
    return architecture(m).model_kwargs(N1=m.N1, T=m.T, lambda0=m.lambda0, lambda1=m.lambda1,
                                        activation=m.activation,
                                        integrate_v=point.sampler.v_sampling == "integrated", **m.options())


def sampler_parts(point, data) -> Parts:
    """What the model and the data give a sampler's builder (:class:`~renormpp.experiments.samplers.Parts`): the
    NumPyro model, the observables recorded per draw (Rao-Blackwellized with ``rao_blackwell``), the exact Gibbs draw
    of v (with ``v_sampling = "gibbs"``) and the first layer's weight site."""
    from .. import observables, readout

    s, m = point.sampler, point.model
    arch = architecture(m)
    train, test = _float32(data.X, data.Y), _float32(data.X_test, data.Y_test)
    if s.rao_blackwell:
        record = readout.rao_blackwell(*train, *test, T=m.T, lambda1=m.lambda1, activation=m.activation,
                                       features=arch.features, patches=arch.patches(**m.options()))
    else:
        record = observables.default(*test, m.activation, arch.features, arch.patches(**m.options()))
    if measures_kernel(point):  # the weights go on to the kernel's Accumulator (kernel_accumulator)
        record = observables.with_hidden(record)
    gibbs = (readout.gibbs_fn(*train, T=m.T, lambda1=m.lambda1, activation=m.activation, features=arch.features)
             if s.v_sampling == "gibbs" else None)
    return Parts(arch.model, record, gibbs, arch.first_layer(**m.options()))


def make_sampler(point, data):
    """The NumPyro sampler (an ``MCMCKernel``) of a point's ``[sampler]``, recording its observables: the builder of
    its kind's record (:data:`renormpp.experiments.samplers.SAMPLERS`)."""
    return SAMPLERS[point.sampler.kind].build(point.sampler, sampler_parts(point, data))


#: cells of the streamed hidden kernel (:class:`renormpp.diagnostics.kernel.Segments`): its error bars are
#: jackknifed over them
KERNEL_CELLS = 16


def measures_kernel(point) -> bool:
    """Whether the point measures the posterior's hidden kernel: ``run.kernel_diagnosis``, for an architecture whose
    hidden kernel the theory predicts (its record's ``kernel_diagnosis``: the fully connected network)."""
    return bool(point.run.kernel_diagnosis and architecture(point.model).kernel_diagnosis)


def kernel_accumulator(point, data):
    """The :class:`renormpp.infer.Accumulator` of the posterior's hidden kernel (``run.kernel_diagnosis``), or None:
    the summands of :func:`renormpp.observables.hidden_sums`, at every ``thin``-th draw, ``thin`` chosen so that
    they cost about a tenth of the sampler's own work per draw (a gradient over the training set per step)."""
    from .. import observables
    from ..infer import Accumulator

    if not measures_kernel(point):
        return None
    m, arch = point.model, architecture(point.model)
    (P, N0), P0 = data.X.shape, data.X_test.shape[0]
    n, steps = m.N1, max(1, getattr(point.sampler, "inner_steps", 1) or 1)
    summand = P * (P + P0) * n + n * N0**2 + (P + P0) * N0 * n
    thin = max(1, int(np.ceil(summand / (0.1 * 3 * P * N0 * n * steps))))
    fn = observables.hidden_sums(*_float32(data.X, data.X_test), m.activation, arch.features,
                                 arch.first_layer(**m.options()))
    return Accumulator(fn, observables.HIDDEN, thin, pieces=KERNEL_CELLS + 1)


def kernel_segments(point, data, sums: dict):
    """The :class:`renormpp.diagnostics.kernel.Segments` of a point, from a checkpoint's ``sums``: at most
    :data:`KERNEL_CELLS` cells."""
    from ..diagnostics.kernel import Segments

    return Segments.from_arrays(sums, max_cells=KERNEL_CELLS)


def _float32(*arrays):
    return tuple(np.asarray(a, dtype=np.float32) for a in arrays)


def compilation_cache(setting: str = "auto") -> str | None:
    """Keep compiled programs between runs in JAX's persistent compilation cache (``run.compilation_cache``): the
    folder it uses now, or None.

    ``"auto"``: the user's cache folder, ``$XDG_CACHE_HOME/renormpp/jax`` (else ``~/.cache/renormpp/jax``), unless
    JAX already has one (``JAX_COMPILATION_CACHE_DIR`` or ``jax.config``), which is kept; a folder: that one, unless
    JAX already has one; ``"off"``: nothing is set. JAX keeps the programs that took at least
    ``jax_persistent_cache_min_compile_time_secs`` (1 s) to compile: a point's blocks of draws and its start."""
    import jax

    current = jax.config.jax_compilation_cache_dir
    if setting == "off" or current:
        return current or None
    folder = Path(setting).expanduser() if setting != "auto" else \
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "renormpp" / "jax"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OSError(f"run.compilation_cache: cannot create {folder} ({err}); give a writable folder, or 'off'") \
            from err
    jax.config.update("jax_compilation_cache_dir", str(folder))
    return str(folder)


def start_chains(point, data, init_params=None):
    """``(chains, state)``: the point's :class:`renormpp.infer.Chains` and the initial state of every chain."""
    import jax

    from ..infer import Chains, starts

    s = point.sampler
    chains = Chains(make_sampler(point, data), num_chains=s.num_chains, chain_method=s.chain_method,
                    extra_fields=SAMPLERS[s.kind].stats, blas_threads=point.run.blas_threads or None,
                    accumulate=kernel_accumulator(point, data))
    key, args, kwargs = jax.random.PRNGKey(point.run.seed), _float32(data.X, data.Y), model_kwargs(point)
    kinds = point.starts()
    if init_params is None and set(kinds) != {"prior"}:  # all from the prior: the sampler's own draws, as before
        init_params = starts.positions(jax.random.fold_in(key, 1), architecture(point.model).model, kinds, args,
                                       kwargs, scale=s.init_scale, steps=s.init_steps)
    state = chains.init(key, s.num_warmup, *args, init_params=init_params, **kwargs)
    return chains, state


class Sampled(NamedTuple):
    """What the sampling stage returns: the observables ``{"eps_g": (chain, draw), "overlap": (chain, draw, D, D)}``,
    the sampler statistics, the wall time (summed over resumptions), the sampler's description, the warnings
    it gave (also over resumptions), why sampling stopped, the warmup draws made (fewer than ``num_warmup`` where an
    adaptive warmup ended early), what the adaptive warmup decided (:attr:`renormpp.infer.AdaptiveWarmup.log`) and the
    streamed sums of the hidden kernel (:class:`renormpp.diagnostics.kernel.Segments`; None without
    ``run.kernel_diagnosis``)."""

    draws: dict
    stats: dict
    seconds: float
    sampler: str
    notes: list
    stopped: str = "num_samples"
    warmup_draws: int = 0
    warmup_log: tuple = ()
    kernel: object = None


MAX_BLOCK = 1000  # iterations per compiled block of the sampling stage (a block takes at most run.chunk_seconds)
WARMUP_BLOCK = 10  # draws per block while an adaptive warmup runs (renormpp.infer.warmup)


#: the fewest draws per chain a comparison judges (the error of the mean needs four)
MIN_DRAWS = 4


def sample(point, data, store: PointStore, *, progress: bool = True, label: str = "") -> Sampled:
    """Warmup and sampling in blocks of draws (:class:`Blocks`), checkpointed to ``store`` (every
    ``run.checkpoint_every`` seconds, after the warmup, and on SIGTERM). The sampler's warnings are shown and kept
    (``sampling_notes.json``).

    The chains carry their random keys in their state, so where the blocks begin does not change the draws: a
    resumed point gives the draws of an uninterrupted one.
    """
    from ..progress import bar as progress_bar

    s, r = point.sampler, point.run
    notes = store.read_json("sampling_notes.json", default=[])
    with _noted(notes):
        chains, state = start_chains(point, data)
    ck = store.checkpoint(template=state)
    segments = kernel_segments(point, data, ck.sums) if chains.accumulate is not None else None
    adaptive = adaptive_warmup(point, chains, ck.state, history=ck.joined(warmup=True))
    blocks = Blocks.start(ck, warmup_end(chains, ck.state, s.num_warmup), s.num_samples)
    bar = progress_bar(total=blocks.W + blocks.total, initial=ck.warm + ck.n, desc=f"{label} warmup+sampling",
                       unit="it", disable=not progress, leave=False)
    stopped = "num_samples"
    try:
        while not blocks.done(ck):
            n, warming = blocks.next(ck, r.target_error)
            grid = {"summing": not warming}  # the warmup's draws are not summed (their sums would be dropped)
            if segments is not None and not warming:  # the block's draws on the grid of the kernel's cells
                segments.coarsen(segments.cell_for(ck.n + n))
                grid = dict(offset=ck.n, cell=segments.cell)
            with _noted(notes):
                state, draws, stats, dt = _timed(chains, ck.state, n, blocks.length, **grid)
            if warming and adaptive is not None:
                state = adaptive.update(state, draws, stats)
                blocks.W = warmup_end(chains, state, blocks.W)
                bar.total = blocks.W + blocks.total
            _keep(ck, state, dt, n, warming, draws, stats)
            if segments is not None and not warming:
                for j, (first, stop, count) in enumerate(chains.pieces()):
                    segments.add({k: v[j] for k, v in chains.sums.items()}, count * s.num_chains,
                                 first, stop)
                ck.sums = segments.arrays()
            if "accept_prob" in stats:
                bar.set_postfix_str(_postfix(stats))
            blocks.resize(dt / n, r.chunk_seconds, adaptive is not None and ck.warm < blocks.W)
            end_of_warmup = warming and ck.warm == blocks.W
            if not warming and ck.n < blocks.total:
                stopped, errors = blocks.judge(ck, r, point.starts())
                if errors:  # what stop on accuracy waits for, on the progress bar
                    bar.set_postfix_str(_postfix(stats, errors))
            bar.total = blocks.W + blocks.total
            bar.update(n)
            if _checkpoint_due(ck, r, end_of_warmup, blocks.total):
                _save(ck, store, notes)
            if STOP.is_set() and ck.n < blocks.total:
                raise Interrupted(f"stopped after {ck.warm} warmup iterations and {ck.n} of {blocks.total} draws; "
                                  f"progress saved in {ck.path}")
    except KeyboardInterrupt:
        _save(ck, store, notes)  # the last finished block; the one in flight is lost
        raise
    finally:
        bar.close()
    draws, stats = ck.joined()
    described = diagnostics.describe_sampler(chains.sampler, ck.state)
    if adaptive is not None:
        described += f"; adaptive warmup: {blocks.W} of at most {s.num_warmup} draws"
    return Sampled(draws, stats, ck.seconds, described, notes, stopped or "num_samples", ck.warm,
                   tuple(adaptive.log) if adaptive is not None else (), segments)


@dataclass
class Blocks:
    """How the sampling stage cuts the warmup and the draws into blocks.

    ``W``: the draw at which the warmup ends (an adaptive warmup moves it); ``total``: the draws to record (fewer
    once stop on accuracy has decided); ``length``: the one compiled block length (every block runs in it);
    ``size``: the next block's draws (two short probe blocks of :data:`WARMUP_BLOCK` time an iteration, then blocks
    of about ``run.chunk_seconds``, :meth:`resize`); ``check``: the next draw count on the fixed grid of
    :func:`next_check` where stop on accuracy judges (:meth:`judge`); sampling blocks end on it.
    """

    W: int
    total: int
    length: int
    check: int
    size: int = WARMUP_BLOCK
    probes: int = 2

    @classmethod
    def start(cls, ck, W: int, total: int) -> "Blocks":
        """The blocks from checkpoint ``ck`` on (a fresh one, or a resumed point's)."""
        return cls(W, total, length=max(min(max(W, total), MAX_BLOCK), WARMUP_BLOCK), check=next_check(ck.n))

    def done(self, ck) -> bool:
        return ck.warm + ck.n >= self.W + self.total

    def next(self, ck, target_error) -> tuple[int, bool]:
        """``(n, warming)``: the next block's draws, and whether they are warmup draws. With a target error, sampling
        blocks end on the check grid: where a run stops is the same on any machine."""
        warming = ck.warm < self.W
        n = min(self.size, (self.W - ck.warm) if warming else (self.total - ck.n))
        if not warming and target_error is not None:
            n = min(n, self.check - ck.n)
        return n, warming

    def resize(self, seconds_per_draw: float, chunk_seconds: float, adaptive_warming: bool) -> None:
        """After a block: blocks of about ``chunk_seconds`` once the probes are done, from the last block's time per
        draw; at most :data:`WARMUP_BLOCK` while an adaptive warmup still decides (between blocks)."""
        self.probes -= 1
        if self.probes <= 0:
            self.size = int(np.clip(chunk_seconds / seconds_per_draw, 1, self.length))
        if adaptive_warming:
            self.size = min(self.size, WARMUP_BLOCK)

    def judge(self, ck, r, starts=None) -> tuple[str, dict]:
        """Stop on accuracy or time (:func:`_early_stop`) after a sampling block: why sampling stops ("" to go on)
        and the errors judged; moves the check grid on, and ``total`` to the draws made where it stops. ``starts``:
        the kind of start of each chain (chains of different kinds must agree)."""
        stopped, errors = _early_stop(ck, r, self.check, starts)
        self.check = next_check(ck.n) if ck.n >= self.check else self.check
        self.total = ck.n if stopped else self.total
        return stopped, errors


def _timed(chains, state, n: int, length: int, **grid):
    """``(state, draws, stats, seconds)``: a block of ``n`` draws and its wall time (``grid``: where its draws lie
    on the grid of accumulated sums, :meth:`renormpp.infer.Chains.run`)."""
    t0 = time.perf_counter()
    state, draws, stats = chains.run(state, n, length, **grid)
    return state, draws, stats, time.perf_counter() - t0


def _keep(ck, state, seconds: float, n: int, warming: bool, draws: dict, stats: dict) -> None:
    """Add a block to the checkpoint: the state, the time, the draws (as warmup draws while ``warming``)."""
    ck.state, ck.seconds = state, ck.seconds + seconds
    if warming:
        ck.warm += n
    else:
        ck.n += n
    ck.add(draws, stats, warmup=warming)


def _postfix(stats: dict, errors: dict | None = None) -> str:
    """The progress bar's text: the block's acceptance, and the errors stop on accuracy waits for."""
    acc = f"acc. {np.mean(stats['accept_prob']):.2f}" if "accept_prob" in stats else ""
    if not errors:
        return acc
    if acc:
        return f"{acc}, eps_g err {100 * errors['eps_g']:.2f}%, overlap err {errors['overlap']:.4f}, " \
               f"R-hat {errors['rhat']:.3f}"
    return f"eps_g err {100 * errors['eps_g']:.2f}%, R-hat {errors['rhat']:.3f}"


def _checkpoint_due(ck, r, end_of_warmup: bool, total: int) -> bool:
    """Save after a block on SIGTERM, at the warmup's end, every ``run.checkpoint_every`` seconds and at the last
    draw."""
    return STOP.is_set() or end_of_warmup or time.monotonic() - ck.saved_at >= r.checkpoint_every or ck.n == total


def _save(ck, store: PointStore, notes: list) -> None:
    ck.save()
    store.write_json("sampling_notes.json", notes)


def adaptive_warmup(point, chains, state, history=None):
    """The point's :class:`renormpp.infer.AdaptiveWarmup` for the chains' ``state`` (``history``: the warmup's draws
    and statistics before a resumption), or None (a fixed warmup, or a sampler without a schedule: NUTS)."""
    from ..infer import AdaptiveWarmup, adapts_warmup

    s = point.sampler
    if not s.warmup_adapts() or s.num_warmup == 0 or not adapts_warmup(chains.sampler):
        return None
    return AdaptiveWarmup.of(chains, s.num_warmup, history=history)


def warmup_end(chains, state, num_warmup: int) -> int:
    """The draw at which the warmup of the chains' ``state`` ends: its schedule's end (moved by an adaptive warmup),
    or ``num_warmup`` for samplers without one (NUTS)."""
    from ..infer import adapts_warmup

    return chains.sampler.schedule(state)[2] if adapts_warmup(chains.sampler) else num_warmup


def next_check(n: int) -> int:
    """The first draw count after ``n`` on the grid where stop on accuracy is checked: 10, 20, ..., then about 10%
    apart (multiples of 10). The grid is fixed, so a seed stops at the same draw on any machine and after any
    resumption; its checks cost about ten full passes over the draws in all, not one per block."""
    g = 10
    while g <= n:
        g = max(g + 10, int(np.ceil(g * 1.1 / 10)) * 10)
    return g


def _early_stop(ck, r, check: int, starts=None) -> tuple[str, dict]:
    """Why sampling may stop before ``num_samples``: "max_seconds" (the budget is spent, and the :data:`MIN_DRAWS`
    that a comparison needs are taken: a warmup that spent it is followed by them), "target_error" (every
    error of :func:`accuracy` is reached and every quantity has settled, judged where the draws reach ``check``, a
    point of :func:`next_check`'s grid), or "" (go on); and the errors of :func:`accuracy` where they were judged."""
    if r.max_seconds is not None and ck.seconds >= r.max_seconds and ck.n >= MIN_DRAWS:
        return "max_seconds", {}
    if r.target_error is None or ck.n < check:
        return "", {}
    reached, errors = accuracy(ck.joined()[0], r.target_error, r.error_method, starts)
    return ("target_error" if reached else ""), errors


def accuracy(draws: dict, target, method: str = "gamma", starts=None) -> tuple[bool, dict]:
    """``(reached, errors)``: whether the means of ``draws`` have the errors ``target`` asks for (``eps_g`` relative,
    ``overlap`` absolute on every entry, each estimate :func:`~renormpp.diagnostics.converged` among them all: enough
    independent samples after the thermalization cut, chains that agree and no drift), and the errors achieved
    (``eps_g`` relative, ``overlap`` the largest, ``rhat`` the largest R-hat, shown only). Every overlap entry is
    judged even where only ``eps_g`` has a target: a slow mode shows in some quantities before others, and eps_g alone
    can look settled while they still move. ``starts``: the kind of start of each chain; chains of different kinds
    must agree too (never settled where they do not)."""
    series = list(diagnostics.scalar_series(draws).values())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short series are expected early on: they count as not reached
        est = [diagnostics.error_of_mean(x, method=method) for x in series]
        rhats = [diagnostics.rhat(x, cut=e.cut) for e, x in zip(est, series)]
        settled = all(diagnostics.converged(e, x, family=len(series), groups=starts) for e, x in zip(est, series))
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
def to_datatree(draws: dict, stats: dict, class_names=None, starts=None):
    """The draws and statistics as an ArviZ DataTree with named dims (:func:`renormpp.diagnostics.to_datatree`);
    ``starts``, the kind of start of each chain, as the coordinate ``start`` along ``chain``."""
    D = draws["overlap"].shape[-1]
    names = list(class_names) if class_names is not None and len(class_names) == D else list(range(D))
    dt = diagnostics.to_datatree(draws, sample_stats=stats, coords={"output": names, "output_": names})
    if starts is not None:
        dt["posterior"] = dt["posterior"].to_dataset().assign_coords(start=("chain", list(starts)))
    return dt


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
            same = [u for u in methods[:methods.index(t)] if float(row.prediction.sel(theory=u)) == pred]
            cells.append("– | does not apply (below)" if not np.isfinite(pred) else f"= {same[0]} | = {same[0]}"
                         if same and q != "eps_g" else f"{pred:.5g} | {row.verdict.sel(theory=t).item()}")
        flag = "" if bool(row.reliable) else " (error bar does not hold)"
        if "drifting" in row and bool(row.drifting):
            flag += f" (still drifting: Geweke z = {float(row.drift_z):+.1f})"
        if "chains_apart" in row and bool(row.chains_apart):
            flag += f" (chains disagree: p = {float(row.chains_p):.1g}, R-hat = {float(row.rhat):.3f})"
        lines.append(f"| {q} | {float(row.mc_mean):.5g} ± {float(row.mc_error):.2g}{flag} | " + " | ".join(cells) + " |")
    absent = [t for t in methods if not np.isfinite(ds.prediction.sel(theory=t)).any()]
    lines += [""] + [f"{t} does not apply: {diagnostics.does_not_apply(ds, t)}." for t in absent] if absent else []
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
        plots.save(fig, folder / name)
        plt.close(fig)


def write_outputs(point, store: PointStore, fit, data, sampled: Sampled, label: str, beyond=()) -> dict:
    """``observables.nc``, the comparison with the theory (csv, md, nc), the figures; returns the point's result,
    whose ``status`` is ``"failed"`` where the sampler failed (:func:`renormpp.diagnostics.sampler_health`).
    ``beyond``: the fits of the theories beyond kernel renormalization (:func:`.theories.beyond_fits`), compared too."""
    folder, draws, stats = store.folder, sampled.draws, sampled.stats
    dt = to_datatree(draws, stats, data.class_names, point.starts())
    dt.to_netcdf(folder / "observables.nc")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = diagnostics.compare(dt, [fit, *beyond], data.X_test, data.Y_test, error=point.run.error_method,
                                 sampler=sampled.sampler)
    ds.to_netcdf(folder / "comparison.nc")
    ds.drop_vars(["a", "b"]).to_dataframe().to_csv(folder / "comparison.csv")
    notes = list(dict.fromkeys(sampled.notes + [str(w.message) for w in caught]))
    ok = bool(ds.attrs["sampler_ok"])
    md = f"# {label}\n\n```\n{ds.attrs['summary']}\n```\n\n{comparison_markdown(ds)}\n"
    if notes:
        md += "\n## Warnings\n\n" + "\n".join(f"* {n}" for n in notes) + "\n"
    found = metastable_states(draws)
    if found is not None and found.count > 1:
        md += ("\n## States\n\nThe chains' blocks of draws fall into separate regions (`rp.diagnostics.states`):"
               f"\n\n{found}\n")
    kernel, kernel_md = kernel_outputs(store, fit, data, sampled)
    store.write("comparison.md", md + kernel_md)
    save_figures(folder, ds, draws, dt, data.class_names)
    e = ds.sel(quantity="eps_g")
    return dict(
        N1=point.model.N1, seed=point.run.seed, status="ok" if ok else "failed", problems=ds.attrs["sampler_problems"],
        sampler=sampled.sampler, draws=int(draws["eps_g"].shape[1]), chains=int(draws["eps_g"].shape[0]),
        stopped=sampled.stopped, warmup_draws=sampled.warmup_draws, warmup_log=list(sampled.warmup_log),
        sampling_seconds=sampled.seconds, divergences=int(np.sum(stats["diverging"])),
        accept_prob=float(np.mean(stats["accept_prob"])) if "accept_prob" in stats else None,
        eps_g=float(e.mc_mean), eps_g_error=float(e.mc_error),
        eps_g_theory={str(t): float(e.prediction.sel(theory=t)) for t in ds.theory.values},
        verdict={str(t): e.verdict.sel(theory=t).item() for t in ds.theory.values},
        reliable=bool(ds.reliable.all()), summary=ds.attrs["summary"], warnings=notes,
        starts=sorted(set(point.starts())), starts_agree=not bool(ds.starts_apart.any()),
        **({"kernel": kernel} if kernel is not None else {}),
        **({"states": dict(count=found.count, transitions=found.transitions.tolist(), held=found.held,
                           block=found.block, weights=found.weights.round(4).tolist())} if found is not None else {}),
    )


def metastable_states(draws: dict):
    """:func:`renormpp.diagnostics.states` of a point's quantities after the thermalization cut of eps_g, or None for a
    run too short to cut into blocks."""
    eps = np.asarray(draws["eps_g"])
    try:
        return diagnostics.states(diagnostics.scalar_series(draws), cut=diagnostics.thermalization_cut(eps))
    except ValueError:  # fewer than 3 draws per chain after the cut
        return None


def kernel_outputs(store: PointStore, fit, data, sampled: Sampled) -> tuple[dict | None, str]:
    """The measured hidden kernel of a point (``kernel.nc``: K_post on the train inputs, the train-test cross kernel,
    the test diagonal, <w^T w>/N1, after the thermalization cut of eps_g) and its diagnosis against the theory
    (``kernel.json``, :func:`renormpp.diagnostics.kernel.diagnose`): ``(diagnosis as a dict, markdown section)``;
    ``(None, "")`` without ``run.kernel_diagnosis``."""
    import xarray as xr

    from ..diagnostics import kernel as dk

    if sampled.kernel is None or not sampled.kernel.sums:
        return None, ""
    hk = sampled.kernel.kernel(diagnostics.thermalization_cut(sampled.draws["eps_g"]))
    xr.Dataset({"K_post": (("train", "train_"), hk.train), "K_post_cross": (("train", "test"), hk.cross),
                "K_post_test": (("test",), hk.test), "first_layer": (("input", "input_"), hk.first_layer)},
               attrs={"summands": hk.summands, "segments": hk.segments, "first_draw": hk.first_draw}
               ).to_netcdf(store.folder / "kernel.nc")
    head = (f"\n## Hidden kernel\n\nThe posterior's hidden kernel K_post = <sigma(h) sigma(h)^T>/N1, averaged over "
            f"{hk.summands} thinned draws of the chains from draw {hk.first_draw} on, in {hk.segments} segments (kernel.nc).")
    try:
        d = dk.diagnose(hk, fit, data.X_test, data.Y_test, teacher=data.metadata.get("teacher_directions"))
    except ValueError as err:
        return None, f"{head} No theory judges it here: {err}.\n"
    store.write_json("kernel.json", d.as_dict())
    md = f"{head}\n\n{d.markdown()}\n"
    keep = ("holds", "deviation", "verdict", "r", "r_err", "r_theory", "alignment", "alignment_post", "alignment_err",
            "alignment_theory", "oracle_eps_g", "oracle_err", "matched_eps_g", "matched_err", "theory_eps_g")
    return {k: v for k, v in d.as_dict().items() if k in keep}, md

