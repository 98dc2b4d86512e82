"""Experiment configs: a TOML file (or a dict) with four tables, checked and completed with defaults.

.. code-block:: toml

    [data]                  # a loader of renormpp.datasets and its options
    name = "synthetic"      # synthetic | mnist | projected_mnist | cifar10 | low_dimensional
    P = 500
    P_test = 500
    N0 = 100                # any further key is passed to the loader (checked against its signature)
    D = 3

    [model]                 # the Bayesian network and its theory
    N1 = [100, 250, 1000]   # one width or a grid
    T = 0.01
    lambda0 = 1.0
    lambda1 = 1.0
    activation = "erf"

    [sampler]
    kind = "mala"           # ula | mala | nuts
    step_size = 3e-4        # ula/mala: h of theta' = theta - h grad U + sqrt(2h) eta (or epsilon = h / T, the paper's)
    inner_steps = 10        # ula/mala: updates per recorded draw
    num_warmup = 200
    num_samples = 2000
    num_chains = 2

    [run]
    out = "runs/example"    # one folder per point below it
    seeds = [0, 1]          # sampler seeds; the sweep is N1 x seeds
    executor = "inprocess"  # inprocess | process | ray

:func:`resolve` returns the completed config; :func:`points` expands it into one config per (N1, seed).
A bad key or value raises :class:`ConfigError`, which names the key and what is allowed.
"""
from __future__ import annotations

import copy
import inspect
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .. import datasets, diagnostics, kernels

LOADERS = {"synthetic": datasets.synthetic, "mnist": datasets.mnist, "projected_mnist": datasets.projected_mnist,
           "cifar10": datasets.cifar10, "low_dimensional": datasets.low_dimensional}
SAMPLERS = ("ula", "mala", "kinetic", "nuts")
EXECUTORS = ("inprocess", "process", "ray")
REQUIRED = object()


class ConfigError(ValueError):
    """A config key is unknown, missing, or has a value that is not allowed."""


# ---- value checks: each returns the normalized value or raises ConfigError naming the key ------------------------
def _fail(key, value, allowed):
    raise ConfigError(f"{key} = {value!r} is not allowed: {allowed}")


def _int(key, value, low=1):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        _fail(key, value, f"expected an integer >= {low}")
    return value


def _float(key, value, low=0.0, strict=True, high=math.inf):
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or (value <= low if strict else value < low) or value > high:
        bounds = f"{'>' if strict else '>='} {low:g}" + (f" and <= {high:g}" if high < math.inf else "")
        _fail(key, value, f"expected a finite number {bounds}")
    return float(value)


def _choice(options):
    def check(key, value):
        if value not in options:
            _fail(key, value, f"choose one of {', '.join(map(repr, options))}")
        return value
    return check


def _bool(key, value):
    if not isinstance(value, bool):
        _fail(key, value, "expected true or false")
    return value


def _str(key, value):
    if not isinstance(value, str) or not value:
        _fail(key, value, "expected a non-empty string")
    return value


def _int_list(key, value):
    values = value if isinstance(value, list) else [value]
    if not values:
        _fail(key, value, "expected an integer or a non-empty list of integers")
    out = [_int(key, v, low=0 if key == "run.seeds" else 1) for v in values]
    if len(set(out)) != len(out):
        _fail(key, value, "the list has repeated entries")
    return out


@dataclass(frozen=True)
class Field:
    default: Any
    check: Callable
    doc: str


_RUN_ONLY = ("executor", "workers", "address", "progress", "checkpoint_every", "chunk_seconds")
SCHEMA = {
    "data": {
        "name": Field("synthetic", _choice(tuple(LOADERS)), "the data set (a loader of renormpp.datasets)"),
        "P": Field(1000, _int, "training examples"),
        "P_test": Field(1000, _int, "test examples"),
    },
    "model": {
        "N1": Field(REQUIRED, _int_list, "hidden units: one width or a list (the sweep)"),
        "T": Field(0.01, _float, "temperature"),
        "lambda0": Field(1.0, _float, "prior precision of the first-layer weights"),
        "lambda1": Field(1.0, _float, "prior precision of the readout weights"),
        "activation": Field("erf", _choice(kernels.ACTIVATIONS), "activation function"),
    },
    "sampler": {
        "kind": Field("kinetic", _choice(SAMPLERS), "kinetic (underdamped Langevin, Metropolis-adjusted: the "
                                                    "fastest, benchmarks/samplers.py), ula (the paper's Langevin), "
                                                    "mala (Metropolis-adjusted), nuts"),
        "num_warmup": Field(None, lambda k, v: _int(k, v, 0), "draws discarded before recording, in which the "
                                                              "step (and mass) adapt (default: 200; 0 for ula)"),
        "num_samples": Field(1000, _int, "recorded draws per chain"),
        "num_chains": Field(2, _int, "independent chains"),
        "chain_method": Field(None, _choice(("vectorized", "sequential")),
                              "how chains run (default: vectorized for ula/mala, sequential for nuts)"),
        "readout": Field(None, _choice(("sampled", "gibbs", "marginal")),
                         "sample v with w (sampled); or draw v exactly given w after every draw (gibbs: "
                         "ula/mala/kinetic); or integrate it out exactly and sample w alone (marginal) "
                         "(renormpp.readout). Default: gibbs for kinetic, sampled otherwise"),
        "rao_blackwell": Field(None, _bool, "record E[observable | w] instead of the observable of (w, v) "
                                            "(default: true with readout = 'marginal', where it is required)"),
        "step_size": Field(None, _float, "ula/mala: the step h on the potential U"),
        "epsilon": Field(None, _float, "ula/mala: the paper's learning rate; h = epsilon * T"),
        "inner_steps": Field(10, _int, "ula/mala/kinetic: updates per recorded draw"),
        "friction": Field(1.0, _float, "kinetic: the friction gamma (momentum persists for a time 1/gamma)"),
        "adapt_step_size": Field(None, _bool, "mala: tune the step in the warmup (default: true when num_warmup > 0; "
                                              "step_size is then the first guess)"),
        "target_accept_prob": Field(None, lambda k, v: _float(k, v, high=1.0),
                                    "mala/nuts: step-size adaptation target (default 0.574 for mala, 0.8 for nuts)"),
        "max_tree_depth": Field(10, _int, "nuts: maximum tree depth"),
        "dense_mass": Field(False, _bool, "nuts: adapt a dense mass matrix (else diagonal)"),
    },
    "run": {
        "out": Field(REQUIRED, _str, "output folder (one sub-folder per point)"),
        "seeds": Field([0], _int_list, "sampler seeds; each N1 runs once per seed"),
        "executor": Field("inprocess", _choice(EXECUTORS), "where points run"),
        "workers": Field(None, _int, "process executor: number of worker processes (default: number of points, "
                                    "at most the CPU count)"),
        "address": Field(None, _str, "ray executor: address of the Ray cluster (default: start a local one)"),
        "checkpoint_every": Field(300.0, lambda k, v: _float(k, v, strict=False),
                                  "seconds between checkpoints of the sampler state and the draws"),
        "chunk_seconds": Field(20.0, _float, "target seconds per compiled block of draws"),
        "error_method": Field("gamma", _choice(tuple(diagnostics.ESTIMATORS)), "error of MC means"),
        "progress": Field(True, _bool, "show progress bars"),
    },
}
SAMPLER_KEYS = {
    "ula": ("step_size", "epsilon", "inner_steps"),
    "mala": ("step_size", "epsilon", "inner_steps", "adapt_step_size", "target_accept_prob"),
    "kinetic": ("step_size", "inner_steps", "friction", "adapt_step_size", "target_accept_prob"),
    "nuts": ("target_accept_prob", "max_tree_depth", "dense_mass"),
}
#: keys that may change when a run resumes (they do not change what a point computes)
RUN_ONLY = tuple(f"run.{k}" for k in _RUN_ONLY)


def load(path) -> dict:
    """Read a TOML config file (not yet checked: see :func:`resolve`)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no config file at {path}")
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path} is not valid TOML: {err}") from None


def _loader_options(name: str) -> dict:
    params = inspect.signature(LOADERS[name]).parameters
    return {k: list(p.default) if isinstance(p.default, tuple) else p.default
            for k, p in params.items() if k not in ("P", "P_test", "download")}


def resolve(raw: dict, *, out: str | None = None) -> dict:
    """Check a config and fill in every default. ``out`` overrides ``run.out``. Returns a new dict."""
    if not isinstance(raw, dict):
        raise ConfigError(f"a config is a dict of tables {tuple(SCHEMA)}; got {type(raw).__name__}")
    unknown = set(raw) - set(SCHEMA)
    if unknown:
        raise ConfigError(f"unknown table(s) {sorted(unknown)}; a config has the tables {', '.join(SCHEMA)}")
    raw = copy.deepcopy(raw)
    if out is not None:
        raw.setdefault("run", {})["out"] = str(out)
    cfg = {}
    for table, fields in SCHEMA.items():
        given = raw.get(table, {})
        if not isinstance(given, dict):
            raise ConfigError(f"[{table}] must be a table of keys; got {given!r}")
        allowed = dict(fields)
        if table == "data":
            name = fields["name"].check("data.name", given.get("name", fields["name"].default))
            options = _loader_options(name)
            allowed.update({k: Field(v, lambda key, val: val, "loader option") for k, v in options.items()})
        if table == "sampler":
            kind = fields["kind"].check("sampler.kind", given.get("kind", fields["kind"].default))
            others = {k for ks in SAMPLER_KEYS.values() for k in ks} - set(SAMPLER_KEYS[kind])
            wrong = sorted(set(given) & others)
            if wrong:
                raise ConfigError(f"sampler.{wrong[0]} does not apply to sampler.kind = {kind!r}; its own keys are "
                                  f"{', '.join(SAMPLER_KEYS[kind])}")
            allowed = {k: f for k, f in allowed.items() if k not in others}
        for key in given:
            if key not in allowed:
                raise ConfigError(f"unknown key {table}.{key}; allowed keys in [{table}]: {', '.join(allowed)}")
        section = {}
        for key, field in allowed.items():
            if key in given:
                value = given[key]
                section[key] = value if value is None else field.check(f"{table}.{key}", value)
            elif field.default is REQUIRED:
                raise ConfigError(f"missing key {table}.{key}: {field.doc}")
            else:
                section[key] = copy.deepcopy(field.default)
        cfg[table] = section
    _complete_sampler(cfg["sampler"], cfg["model"]["T"])
    return cfg


def _complete_sampler(s: dict, T: float) -> None:
    if s["num_warmup"] is None:
        s["num_warmup"] = 0 if s["kind"] == "ula" else 200
    if s["readout"] is None:  # the recommended sampler moves w by kinetic Langevin and draws v exactly
        s["readout"] = "gibbs" if s["kind"] == "kinetic" else "sampled"
    if s["rao_blackwell"] is None:
        s["rao_blackwell"] = s["readout"] == "marginal"
    if s["readout"] == "marginal" and not s["rao_blackwell"]:
        raise ConfigError("sampler.rao_blackwell = false is not allowed with sampler.readout = 'marginal': v is not "
                          "sampled, so its observables are recorded as their expectations given w")
    if s["readout"] == "gibbs" and s["kind"] == "nuts":
        raise ConfigError("sampler.readout = 'gibbs' works with kind = 'ula', 'mala' or 'kinetic'; for NUTS use "
                          "readout = 'marginal' (v integrated out), or numpyro's HMCGibbs with "
                          "renormpp.readout.gibbs_fn in a script")
    if s["chain_method"] is None:
        s["chain_method"] = "sequential" if s["kind"] == "nuts" else "vectorized"
    if s["kind"] == "nuts":
        s["target_accept_prob"] = 0.8 if s["target_accept_prob"] is None else s["target_accept_prob"]
        return
    if s["kind"] in ("mala", "kinetic"):
        if s["adapt_step_size"] is None:
            s["adapt_step_size"] = s["num_warmup"] > 0
        if s["adapt_step_size"] and s["num_warmup"] == 0:
            raise ConfigError("sampler.adapt_step_size = true needs warmup draws to adapt in: set sampler.num_warmup")
        default = 0.574 if s["kind"] == "mala" else 0.8
        s["target_accept_prob"] = default if s["target_accept_prob"] is None else s["target_accept_prob"]
    eps = s.get("epsilon")  # ula and mala only
    if s["step_size"] is not None and eps is not None and not math.isclose(s["step_size"], eps * T):
        raise ConfigError("give sampler.step_size or sampler.epsilon, not both (step_size = epsilon * T)")
    if s["step_size"] is None and eps is None:
        if s["kind"] != "ula" and not s["adapt_step_size"]:
            raise ConfigError(f"sampler.step_size is required for kind = {s['kind']!r} without step-size adaptation (e.g. "
                              "1e-4; or give sampler.epsilon in the paper's units, step_size = epsilon * T; or set "
                              "sampler.num_warmup > 0 to adapt it)")
        if s["kind"] != "ula":
            s["step_size"] = 1e-4  # the first guess of the adaptation
        else:
            s["epsilon"] = 1e-3  # the paper's protocol
    if s["step_size"] is None:
        s["step_size"] = s["epsilon"] * T


def points(cfg: dict) -> list[tuple[str, dict]]:
    """One ``(name, config)`` per (N1, seed), with scalar ``model.N1`` and ``run.seed``; ``name`` is its folder."""
    out = []
    for N1 in cfg["model"]["N1"]:
        for seed in cfg["run"]["seeds"]:
            point = copy.deepcopy(cfg)
            point["model"]["N1"] = N1
            run = point.pop("run")
            point["run"] = {"seed": seed, "error_method": run["error_method"]}
            out.append((f"N1={N1}_seed={seed}", point))
    return out


def _drop_none(d):
    if isinstance(d, dict):
        return {k: _drop_none(v) for k, v in d.items() if v is not None}
    return list(d) if isinstance(d, tuple) else d


def dumps(cfg: dict) -> str:
    """The config as TOML (keys with value None are left out: they mean 'the default')."""
    import tomli_w

    return tomli_w.dumps(_drop_none(cfg))


def normalized(cfg: dict) -> dict:
    """``cfg`` as it reads back from its TOML (no None values, lists for tuples): for comparing configs."""
    return tomllib.loads(dumps(cfg))


def differences(a: dict, b: dict, ignore=()) -> list[str]:
    """Keys ``table.key`` whose values differ between two resolved configs."""
    keys = {f"{t}.{k}" for c in (a, b) for t, sec in c.items() for k in sec}
    return sorted(k for k in keys - set(ignore)
                  if a.get(k.split(".")[0], {}).get(k.split(".")[1]) != b.get(k.split(".")[0], {}).get(k.split(".")[1]))
