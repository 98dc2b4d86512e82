"""One point of a sweep (one N1, one seed): theory, sampling with checkpoints, comparison, figures.

A point's folder holds, when it is finished:

* ``config.toml``: the resolved config of this point; ``versions.json``: the package versions and machine;
* ``theory.json``: Q*, Q*/lambda1, the generalization loss and the solver report for the exact, one-loop and
  infinite-width theories (``applies: false`` where a theory does not apply);
* ``observables.nc``: the recorded observables (eps_g, v v^T/N1) per chain and draw, with the sampler's
  statistics, as an ArviZ DataTree in netCDF (``arviz.from_netcdf``);
* ``comparison.csv``, ``comparison.md``, ``comparison.nc``: :func:`renormpp.diagnostics.compare`;
* ``overlaps.png`` (Fig. 2-like), ``mc_analysis.png`` (the supplement's MC analysis of eps_g), ``trace.png``;
* ``result.json``: a short summary, written last: a point with it is finished and is not recomputed.

While sampling, ``checkpoint.pkl`` holds the sampler state and every draw recorded so far. It is written every
``run.checkpoint_every`` seconds, after the warmup, and when the run is stopped by SIGTERM or Ctrl-C (the
block of draws in flight is finished first on SIGTERM). A resumed point continues from it and gives the same
draws as an uninterrupted run: the chains carry their random keys in their state, so where the blocks of
draws begin does not change the draws.
"""
from __future__ import annotations

import json
import os
import pickle
import platform
import threading
import time
import warnings
from functools import partial
from pathlib import Path

import numpy as np

from . import config as config_mod

STOP = threading.Event()  # set by the SIGTERM handler of the runner: finish the current block, save, stop


class Interrupted(RuntimeError):
    """A run was stopped (SIGTERM or Ctrl-C) after saving its progress; run it again to resume."""


def write_atomic(path: Path, data: bytes | str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    os.replace(tmp, path)


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "platform": platform.platform(), "machine": platform.machine(),
           "cpu_count": os.cpu_count()}
    for pkg in ("renormpp", "numpy", "scipy", "jax", "jaxlib", "numpyro", "arviz", "xarray", "matplotlib"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def load_data(data_cfg: dict):
    """The data set of a config's ``[data]`` table; loader errors become ConfigErrors naming the table."""
    options = {k: (tuple(v) if isinstance(v, list) else v) for k, v in data_cfg.items() if k != "name"}
    try:
        return config_mod.LOADERS[data_cfg["name"]](**options)
    except (ValueError, TypeError) as err:
        raise config_mod.ConfigError(f"[data] name = {data_cfg['name']!r}: {err}") from err


# ---- theory ---------------------------------------------------------------------------------------------------
def theory_results(fit, data) -> dict:
    """The three theories at ``fit``'s N1 as plain numbers (for ``theory.json``)."""
    from ..diagnostics import THEORIES, theory_fit

    out = {}
    for method in THEORIES:
        th = theory_fit(fit, method)
        if th is None:
            out[method] = {"applies": False}
            continue
        out[method] = dict(applies=True, Q=th.Q.tolist(), readout_overlap=th.readout_overlap.tolist(),
                           eps_g=float(th.generalization_error(data.X_test, data.Y_test)), converged=bool(th.converged),
                           grad_norm=float(th.grad_norm), action=float(th.action), n_iter=int(th.n_iter))
    return out


def solve_theory(cfg: dict, data):
    from .. import theory

    m = cfg["model"]
    return theory.solve(data.X, data.Y, N1=m["N1"], T=m["T"], lambda0=m["lambda0"], lambda1=m["lambda1"],
                        activation=m["activation"], method="infinite_width")


# ---- sampling ---------------------------------------------------------------------------------------------------
def make_kernel(s: dict, gibbs_fn=None):
    """The MCMCKernel of a [sampler] table; ``gibbs_fn`` (readout = 'gibbs') draws v exactly after every draw."""
    from numpyro.infer import NUTS

    from ..infer import KineticLangevin, Langevin
    from ..models import one_hidden_layer

    if s["kind"] == "nuts":
        return NUTS(one_hidden_layer, target_accept_prob=s["target_accept_prob"], max_tree_depth=s["max_tree_depth"],
                    dense_mass=s["dense_mass"])
    if s["kind"] == "kinetic":
        return KineticLangevin(one_hidden_layer, step_size=s["step_size"], friction=s["friction"],
                               inner_steps=s["inner_steps"], adapt_step_size=s["adapt_step_size"],
                               target_accept_prob=s["target_accept_prob"], gibbs_fn=gibbs_fn)
    mala = s["kind"] == "mala"
    return Langevin(one_hidden_layer, step_size=s["step_size"], adjust=mala, inner_steps=s["inner_steps"],
                    adapt_step_size=mala and s["adapt_step_size"],
                    target_accept_prob=s["target_accept_prob"] if mala else 0.574, gibbs_fn=gibbs_fn)


STAT_FIELDS = {"ula": ("diverging",), "mala": ("accept_prob", "diverging", "step_size"),
               "kinetic": ("accept_prob", "diverging", "step_size"),
               "nuts": ("accept_prob", "diverging", "num_steps")}


class _Checkpoint:
    """Sampler state, warmup iterations and draws so far, pickled atomically to ``checkpoint.pkl``."""

    def __init__(self, path: Path):
        self.path = path
        self.state, self.warm, self.n, self.draws, self.stats, self.seconds = None, 0, 0, [], [], 0.0
        if path.exists():
            with open(path, "rb") as f:
                self.__dict__.update(pickle.load(f))
        self.saved_at = time.monotonic()

    def save(self) -> None:
        import jax

        data = dict(state=jax.device_get(self.state), warm=self.warm, n=self.n, draws=self.draws, stats=self.stats,
                    seconds=self.seconds)
        write_atomic(self.path, pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL))
        self.saved_at = time.monotonic()

    def joined(self):
        def cat(parts):
            return {k: np.concatenate([p[k] for p in parts], axis=1) for k in parts[0]} if parts else {}
        return cat(self.draws), cat(self.stats)


def _block_runner(kernel, s: dict, record, fields, args, kwargs):
    """``run(state, n) -> (state, draws, stats)``: n iterations of the kernel in one compiled scan.

    Compiled once per block length, not once per call (numpyro's MCMC recompiles on every ``run``, and every
    compilation keeps its memory maps: thousands of blocks would exhaust them). Draws and stats come back with
    the axes (chain, draw, ...).
    """
    import jax

    vectorized = s["chain_method"] == "vectorized"
    post = kernel.postprocess_fn(args, kwargs)
    observe = (lambda z: record(post(z)))
    observe = jax.vmap(observe) if vectorized else observe

    @partial(jax.jit, static_argnums=1)
    def block(state, n):
        def step(st, _):
            st = kernel.sample(st, args, kwargs)
            return st, (observe(st.z), {f: getattr(st, f) for f in fields})
        return jax.lax.scan(step, state, None, length=n)

    def chain_first(tree):
        return jax.tree_util.tree_map(lambda x: np.swapaxes(np.asarray(x), 0, 1), tree)

    def run(state, n):
        if vectorized:
            state, (draws, stats) = block(state, n)
            return state, chain_first(draws), chain_first(stats)
        outs = [block(jax.tree_util.tree_map(lambda x: x[c], state), n) for c in range(s["num_chains"])]
        state = jax.tree_util.tree_map(lambda *xs: jax.numpy.stack(xs), *[o[0] for o in outs])
        stack = lambda trees: jax.tree_util.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *trees)  # noqa: E731
        return state, stack([o[1][0] for o in outs]), stack([o[1][1] for o in outs])

    return run


def start_chains(cfg: dict, data, init_params=None):
    """``(state, run)`` for the sampler of a point config: the initial state of every chain, and
    ``run(state, n) -> (state, draws, stats)`` (see :func:`_block_runner`). ``init_params`` (one per chain,
    stacked) replaces the draw from the prior."""
    import jax

    from .. import observables, readout

    s, m = cfg["sampler"], cfg["model"]
    kwargs = dict(N1=m["N1"], activation=m["activation"], T=m["T"], lambda0=m["lambda0"], lambda1=m["lambda1"],
                  readout="marginal" if s["readout"] == "marginal" else "sampled")
    args = (data.X.astype(np.float32), data.Y.astype(np.float32))
    test = (data.X_test.astype(np.float32), data.Y_test.astype(np.float32))
    if s["rao_blackwell"]:
        record = readout.rao_blackwell(*args, *test, T=m["T"], lambda1=m["lambda1"], activation=m["activation"])
    else:
        record = observables.default(*test, m["activation"])
    gibbs = (readout.gibbs_fn(*args, T=m["T"], lambda1=m["lambda1"], activation=m["activation"])
             if s["readout"] == "gibbs" else None)
    kernel = make_kernel(s, gibbs)
    keys = jax.random.split(jax.random.PRNGKey(cfg["run"]["seed"]), s["num_chains"])
    if s["chain_method"] == "vectorized":
        state = kernel.init(keys, s["num_warmup"], init_params, args, kwargs)
    else:
        chains = [kernel.init(k, s["num_warmup"], None if init_params is None else
                              jax.tree_util.tree_map(lambda x: x[c], init_params), args, kwargs)
                  for c, k in enumerate(keys)]
        state = jax.tree_util.tree_map(lambda *xs: jax.numpy.stack(xs), *chains)
    return state, _block_runner(kernel, s, record, STAT_FIELDS[s["kind"]], args, kwargs)


def sample(cfg: dict, data, folder: Path, *, progress: bool = True, checkpoint_every: float = 300.0,
           chunk_seconds: float = 20.0, label: str = ""):
    """Run the sampler of ``cfg`` in blocks of draws, checkpointing to ``folder/checkpoint.pkl``.

    The kernel (an ``MCMCKernel``) is driven through its ``init``/``sample`` interface, as numpyro's MCMC
    does: ``num_warmup`` iterations (NUTS adapts its step size and mass matrix in them), then
    ``num_samples`` recorded ones. Returns ``(draws, stats, seconds)``: draws ``{"eps_g": (chain, draw),
    "overlap": (chain, draw, D, D)}``, the sampler statistics per draw, and the wall time of warmup and
    sampling (summed over resumptions).
    """
    from tqdm.auto import tqdm

    s = cfg["sampler"]
    state, run = start_chains(cfg, data)

    ck = _Checkpoint(folder / "checkpoint.pkl")
    if ck.state is None:
        ck.state = state
    W, total = s["num_warmup"], s["num_samples"]
    bar = tqdm(total=W + total, initial=ck.warm + ck.n, desc=f"{label} warmup+sampling", unit="it",
               disable=not progress, leave=False, dynamic_ncols=True)
    block, probes = 10, 2  # two short blocks time an iteration; then blocks of about chunk_seconds
    try:
        while ck.warm + ck.n < W + total:
            warmup = ck.warm < W
            n = min(block, (W - ck.warm) if warmup else (total - ck.n))
            t0 = time.perf_counter()
            state, draws, stats = run(ck.state, n)
            dt = time.perf_counter() - t0
            ck.state, ck.seconds = state, ck.seconds + dt
            if warmup:
                ck.warm += n
            else:
                ck.n += n
                ck.draws.append(draws)
                ck.stats.append(stats)
            bar.update(n)
            if "accept_prob" in stats:
                bar.set_postfix_str(f"acc. {np.mean(stats['accept_prob']):.2f}")
            probes -= 1
            if probes == 0:
                block = int(np.clip(chunk_seconds / (dt / n), 1, 100_000))
            end_of_warmup = warmup and ck.warm == W
            if STOP.is_set() or end_of_warmup or time.monotonic() - ck.saved_at >= checkpoint_every or ck.n == total:
                ck.save()
            if STOP.is_set() and ck.n < total:
                raise Interrupted(f"stopped after {ck.warm} warmup iterations and {ck.n} of {total} draws; "
                                  f"progress saved in {ck.path}")
    except KeyboardInterrupt:
        ck.save()  # the last finished block; the one in flight is lost
        raise
    finally:
        bar.close()
    draws, stats = ck.joined()
    return draws, stats, ck.seconds


# ---- outputs ------------------------------------------------------------------------------------------------
def to_datatree(draws: dict, stats: dict, class_names=None):
    import arviz as az

    from ..observables import DIMS

    D = draws["overlap"].shape[-1]
    names = list(class_names) if class_names is not None and len(class_names) == D else list(range(D))
    return az.from_dict({"posterior": draws, "sample_stats": stats}, dims=DIMS,
                        coords={"output": names, "output_": names})


def comparison_markdown(ds) -> str:
    """The :func:`~renormpp.diagnostics.compare` table as markdown: MC mean +- error, each theory and its z."""
    from ..diagnostics import THEORIES

    head = "| quantity | MC | " + " | ".join(f"{t} | z" for t in THEORIES) + " |"
    lines = [head, "|" + "---|" * (2 + 2 * len(THEORIES))]
    for q in ds.quantity.values:
        r = ds.sel(quantity=q)
        pred, z = (r.prediction.sel(theory=t) for t in THEORIES), (r.z.sel(theory=t) for t in THEORIES)
        cells = [f"{float(p):.5g} | {float(zz):+.1f}" if np.isfinite(p) else "– | –" for p, zz in zip(pred, z)]
        lines.append(f"| {q} | {float(r.mc_mean):.5g} ± {float(r.mc_error):.2g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def save_figures(folder: Path, ds, draws, dt, class_names) -> None:
    import matplotlib.pyplot as plt

    from .. import plots

    from ..diagnostics import ShortRunWarning

    warnings.simplefilter("ignore", ShortRunWarning)  # already listed in comparison.md
    for name, make in (("overlaps.png", lambda: plots.overlap_heatmaps(ds, class_names=class_names)),
                       ("mc_analysis.png", lambda: plots.mc_analysis(draws["eps_g"])),
                       ("trace.png", lambda: plots.trace(dt, var_names=["eps_g"]))):
        fig = make()
        fig = getattr(fig, "figure", fig)
        fig.savefig(folder / name, dpi=110)
        plt.close(fig)


def run_point(cfg: dict, folder, *, progress: bool = True, checkpoint_every: float = 300.0,
              chunk_seconds: float = 20.0) -> dict:
    """Run one point of a sweep into ``folder`` (see the module docstring), or return its saved result."""
    from .. import diagnostics

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    done = folder / "result.json"
    saved = folder / "config.toml"
    if saved.exists():
        changed = config_mod.differences(config_mod.load(saved), config_mod.normalized(cfg))
        if changed:
            raise config_mod.ConfigError(
                f"{folder} holds a point run with a different config ({', '.join(changed)} differ); "
                "use a new run.out folder, or delete that point's folder to recompute it")
    if done.exists():
        return json.loads(done.read_text())
    write_atomic(saved, config_mod.dumps(cfg))
    write_atomic(folder / "versions.json", json.dumps(versions(), indent=1))
    label = f"N1={cfg['model']['N1']} seed={cfg['run']['seed']}"
    data = load_data(cfg["data"])
    fit = solve_theory(cfg, data)
    th = theory_results(fit, data)
    write_atomic(folder / "theory.json", json.dumps(th, indent=1))

    draws, stats, seconds = sample(cfg, data, folder, progress=progress, checkpoint_every=checkpoint_every,
                                   chunk_seconds=chunk_seconds, label=label)
    dt = to_datatree(draws, stats, data.class_names)
    dt.to_netcdf(folder / "observables.nc")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", diagnostics.ShortRunWarning)
        ds = diagnostics.compare(dt, fit, data.X_test, data.Y_test, method=cfg["run"]["error_method"])
    ds.to_netcdf(folder / "comparison.nc")
    ds.drop_vars(["a", "b"]).to_dataframe().to_csv(folder / "comparison.csv")
    notes = sorted({str(w.message) for w in caught})
    md = f"# {label}\n\n```\n{ds.attrs['summary']}\n```\n\n{comparison_markdown(ds)}\n"
    if notes:
        md += "\n" + "\n".join(f"* {n}" for n in notes) + "\n"
    write_atomic(folder / "comparison.md", md)
    with warnings.catch_warnings():
        save_figures(folder, ds, draws, dt, data.class_names)
    e = ds.sel(quantity="eps_g")
    result = dict(
        N1=cfg["model"]["N1"], seed=cfg["run"]["seed"], draws=int(draws["eps_g"].shape[1]),
        chains=int(draws["eps_g"].shape[0]), sampling_seconds=seconds,
        divergences=int(np.sum(stats["diverging"])), accept_prob=(float(np.mean(stats["accept_prob"]))
                                                                 if "accept_prob" in stats else None),
        eps_g=float(e.mc_mean), eps_g_error=float(e.mc_error),
        eps_g_theory={t: float(e.prediction.sel(theory=t)) for t in diagnostics.THEORIES},
        reliable=bool(ds.reliable.all()), summary=ds.attrs["summary"],
    )
    write_atomic(done, json.dumps(result, indent=1))
    return result
