"""Experiment configs: a TOML file (or a dict) with four tables, checked and completed with defaults by typed
pydantic models.

.. code-block:: toml

    [data]                  # a loader of renormpp.datasets and its options
    name = "synthetic"      # synthetic | mnist | projected_mnist | cifar10 | low_dimensional
    P = 500
    P_test = 500
    N0 = 100                # any further key is an option of the loader (checked against its signature)
    D = 3

    [model]                 # the Bayesian network and its theory
    N1 = [100, 250, 1000]   # one width or a grid
    T = 0.01
    lambda0 = 1.0
    lambda1 = 1.0
    activation = "erf"

    [sampler]
    kind = "mala"           # kinetic | ula | mala | nuts; each kind has its own keys
    step_size = 3e-4        # ula/mala: h of theta' = theta - h grad U + sqrt(2h) eta (or epsilon = h / T, the paper's)
    inner_steps = 10        # ula/mala/kinetic: updates per recorded draw
    num_warmup = 200
    num_samples = 2000
    num_chains = 2

    [run]
    out = "runs/example"    # one folder per point below it
    seeds = [0, 1]          # sampler seeds; the sweep is N1 x seeds
    executor = "inprocess"  # inprocess | process | ray

:func:`resolve` returns the completed :class:`Config`; :meth:`Config.points` expands it into one
:class:`PointConfig` per (N1, seed). A bad key or value raises :class:`ConfigError`, which names the key, the bad
value and what is allowed.
"""
from __future__ import annotations

import inspect
import math
import tomllib
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, create_model,
                      model_validator)

from .. import datasets, diagnostics, network

LOADERS = {"synthetic": datasets.synthetic, "mnist": datasets.mnist, "projected_mnist": datasets.projected_mnist,
           "cifar10": datasets.cifar10, "low_dimensional": datasets.low_dimensional}
SAMPLERS = ("ula", "mala", "kinetic", "nuts")
EXECUTORS = ("inprocess", "process", "ray")
V_SAMPLING = ("joint", "gibbs", "integrated")
#: keys that may change when a run resumes (they do not change what a point computes)
RUN_ONLY = tuple(f"run.{k}" for k in ("executor", "workers", "address", "progress", "checkpoint_every",
                                      "chunk_seconds", "blas_threads", "max_seconds"))
#: keys of earlier versions, and what they became
RENAMED = {"sampler.readout": "sampler.v_sampling ('sampled' is now 'joint', 'marginal' is 'integrated')"}


class ConfigError(ValueError):
    """A config key is unknown, missing, or has a value that is not allowed."""


# ---- field types: each says in words what it allows, for the error messages ------------------------------------
def _expect(text: str) -> dict:
    return {"json_schema_extra": {"expect": text}}


Count = Annotated[int, Field(ge=1, **_expect("an integer >= 1"))]
Count0 = Annotated[int, Field(ge=0, **_expect("an integer >= 0"))]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False, **_expect("a finite number > 0"))]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False, **_expect("a finite number >= 0"))]
Probability = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False, **_expect("a finite number > 0 and <= 1"))]
Shift = Annotated[float, Field(ge=0, lt=2, allow_inf_nan=False, **_expect("a number >= 0 and < 2"))]
Text = Annotated[str, Field(min_length=1, **_expect("a non-empty string"))]
Flag = Annotated[bool, Field(**_expect("true or false"))]


def _listed(value):
    return value if isinstance(value, list) else [value]


def _distinct(values: list) -> list:
    if not values:
        raise ValueError("expected an integer or a non-empty list of integers")
    if len(set(values)) != len(values):
        raise ValueError("the list has repeated entries")
    return values


def OneOrMany(item):
    """One value or a non-empty list of distinct values (a sweep), read as a list."""
    return Annotated[list[item], BeforeValidator(_listed), AfterValidator(_distinct)]


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, validate_default=True)


# ---- [data] ----------------------------------------------------------------------------------------------------
def _data_table(name: str, loader) -> type[_Table]:
    """A table of the loader's options, from its signature: its defaults, and its annotated types."""
    hints = typing.get_type_hints(loader)
    fields: dict[str, Any] = {"name": (Literal[name], name)}
    for p in inspect.signature(loader).parameters.values():
        if p.name == "download":
            continue
        default = list(p.default) if isinstance(p.default, tuple) else p.default
        kind = hints.get(p.name, Any)
        if kind is int:
            kind = Count0 if p.name == "seed" else Count
        fields[p.name] = (kind, default)
    cls = create_model(f"{name.title().replace('_', '')}Data", __base__=_Table, __module__=__name__,
                       __doc__=f"Options of renormpp.datasets.{loader.__name__}.", **fields)
    globals()[cls.__name__] = cls  # importable by name, so that configs pickle (process and Ray executors)
    return cls


DATA_TABLES = {name: _data_table(name, loader) for name, loader in LOADERS.items()}
Data = Annotated[Union[tuple(DATA_TABLES.values())], Field(discriminator="name")]


def loader_options(data) -> dict:
    """The keyword arguments of the loader of a [data] table (lists become tuples)."""
    return {k: (tuple(v) if isinstance(v, list) else v) for k, v in data.model_dump().items() if k != "name"}


# ---- [model] ---------------------------------------------------------------------------------------------------
class _Model(_Table):
    """The Bayesian network and its theory."""

    N1: Any = Field(description="hidden units: one width or a list (the sweep)")
    T: Positive = 0.01
    lambda0: Positive = Field(1.0, description="prior precision of the hidden-layer weights (every layer)")
    lambda1: Positive = Field(1.0, description="prior precision of the readout weights")
    activation: Literal[tuple(network.ACTIVATIONS)] = "erf"
    depth: Count = Field(1, description="hidden layers, each of width N1 (renormpp.models.mlp; theory: odd "
                                        "activations)")

    @model_validator(mode="after")
    def _deep_theory(self):
        if self.depth > 1 and not network.get_activation(self.activation).odd:
            raise ValueError(f"model.depth = {self.depth} needs an odd activation (erf, tanh or linear): the theory of "
                             f"deep networks is derived for odd activations, and {self.activation!r} is not odd. "
                             "Use depth = 1 for a non-odd activation")
        return self


class ModelConfig(_Model):
    N1: OneOrMany(Count) = Field(description="hidden units: one width or a list (the sweep)")


class PointModel(_Model):
    N1: Count


# ---- [sampler]: one table per kind ------------------------------------------------------------------------------
class _Sampler(_Table):
    kind: str
    num_warmup: Optional[Count0] = Field(None, description="draws discarded before recording, in which the step "
                                                           "(and mass) adapt (default: 200; 0 for ula)")
    num_samples: Count = 1000
    num_chains: Count = 2
    chain_method: Optional[Literal["vectorized", "sequential"]] = None
    v_sampling: Optional[Literal[V_SAMPLING]] = Field(
        None, description="how the readout v is sampled: with w by the same kernel (joint); or drawn exactly given w "
                          "after every draw (gibbs: ula/mala/kinetic); or integrated out exactly, w sampled alone "
                          "(integrated) (renormpp.readout). Default: integrated for kinetic (on MNIST it relaxes "
                          "the slow modes of w tens of times faster than gibbs: benchmarks/README.md, issue 17), "
                          "joint otherwise")
    rao_blackwell: Optional[Flag] = Field(None, description="record E[observable | w] instead of the observable of "
                                                            "(w, v) (default: true with v_sampling = 'integrated')")

    @model_validator(mode="after")
    def _complete(self):
        if self.num_warmup is None:
            self.num_warmup = 0 if self.kind == "ula" else 200
        if self.v_sampling is None:  # the recommended sampler: kinetic Langevin on w, v integrated out exactly
            self.v_sampling = "integrated" if self.kind == "kinetic" else "joint"
        if self.rao_blackwell is None:
            self.rao_blackwell = self.v_sampling == "integrated"
        if self.v_sampling == "integrated" and not self.rao_blackwell:
            raise ValueError("sampler.rao_blackwell = false is not allowed with sampler.v_sampling = 'integrated': v is "
                             "not sampled, so its observables are recorded as their expectations given w")
        if self.v_sampling == "gibbs" and self.kind == "nuts":
            raise ValueError("sampler.v_sampling = 'gibbs' works with kind = 'ula', 'mala' or 'kinetic'; for NUTS use "
                             "v_sampling = 'integrated' (v integrated out), or numpyro's HMCGibbs with "
                             "renormpp.readout.gibbs_fn in a script")
        if self.chain_method is None:
            self.chain_method = "sequential" if self.kind == "nuts" else "vectorized"
        return self


class _Stepped(_Sampler):
    step_size: Optional[Positive] = Field(None, description="the step h on the potential U")
    inner_steps: Count = Field(10, description="updates per recorded draw")


class _Adapted(_Stepped):
    adapt_step_size: Optional[Flag] = Field(None, description="tune the step in the warmup (default: true when "
                                                              "num_warmup > 0; step_size is then the first guess)")
    target_accept_prob: Optional[Probability] = None
    warmup: Literal["adaptive", "fixed"] = Field(
        "adaptive", description="'adaptive': each phase of the warmup (relaxation, mass window, step) ends when it "
                                "has done its job, num_warmup being the most it takes (renormpp.experiments.warmup); "
                                "'fixed': always num_warmup draws, Stan's windows at 1/4 and 3/4")
    adaptation: Literal["pooled", "per_chain"] = Field(
        "pooled", description="'pooled': with vectorized chains, one step and mass learned from all chains together "
                              "(their mean acceptance, every chain's positions in the mass window); 'per_chain': "
                              "each chain adapts on its own, as Stan does")
    _target = 0.574

    @model_validator(mode="after")
    def _complete_adaptation(self):
        if self.adapt_step_size is None:
            self.adapt_step_size = self.num_warmup > 0
        if self.adapt_step_size and self.num_warmup == 0:
            raise ValueError("sampler.adapt_step_size = true needs warmup draws to adapt in: set sampler.num_warmup")
        if self.target_accept_prob is None:
            self.target_accept_prob = self._target
        return self


class ULAConfig(_Stepped):
    """The paper's unadjusted Langevin algorithm (biased by O(h): keep h small)."""

    kind: Literal["ula"]
    epsilon: Optional[Positive] = Field(None, description="the paper's learning rate; h = epsilon * T")


class MALAConfig(_Adapted):
    """Metropolis-adjusted Langevin, the step tuned to an acceptance of 0.574 in the warmup."""

    kind: Literal["mala"]
    epsilon: Optional[Positive] = Field(None, description="the paper's learning rate; h = epsilon * T")


class KineticConfig(_Adapted):
    """Underdamped Langevin (OBABO), Metropolis-adjusted; step and diagonal mass adapted in the warmup."""

    kind: Literal["kinetic"]
    friction: Positive = Field(1.0, description="the friction gamma (momentum persists for a time 1/gamma)")
    mass: Literal["diagonal", "rows"] = Field(
        "diagonal", description="the mass learned in the warmup: 'diagonal', or 'rows' (one dense matrix shared by the "
                                "rows of the first layer's weights; for anisotropic inputs such as MNIST)")
    freeze_v: Optional[Flag] = Field(None, description="with v_sampling = 'gibbs': the kinetic updates leave v where "
                                                         "it is (infinite mass) and only the exact Gibbs draw moves it "
                                                         "(default: true with v_sampling = 'gibbs')")
    accept_shift: Shift = Field(0.0, description="Neal's non-reversible acceptance: the uniform of the Metropolis test is "
                                            "kept and moved by this shift per update, so that rejections (and the "
                                            "momentum reversals) cluster; 0: a fresh uniform each update")
    _target = 0.8

    @model_validator(mode="after")
    def _mass_needs_warmup(self):
        if self.mass == "rows" and self.num_warmup == 0:
            raise ValueError("sampler.mass = 'rows' is learned in the warmup: set sampler.num_warmup > 0")
        if self.freeze_v is None:
            self.freeze_v = self.v_sampling == "gibbs"
        if self.freeze_v and self.v_sampling != "gibbs":
            raise ValueError(f"sampler.freeze_v = true needs v_sampling = 'gibbs' (an exact draw of v); with "
                             f"v_sampling = {self.v_sampling!r} nothing else would move v")
        return self


class NUTSConfig(_Sampler):
    """NumPyro's NUTS."""

    kind: Literal["nuts"]
    target_accept_prob: Probability = 0.8
    max_tree_depth: Count = 10
    dense_mass: Flag = False


SAMPLER_TABLES = {"ula": ULAConfig, "mala": MALAConfig, "kinetic": KineticConfig, "nuts": NUTSConfig}
Sampler = Annotated[Union[tuple(SAMPLER_TABLES.values())], Field(discriminator="kind")]


def _own_keys(kind: str) -> list[str]:
    return [k for k in SAMPLER_TABLES[kind].model_fields if k not in _Sampler.model_fields and k != "kind"]


# ---- [run] -----------------------------------------------------------------------------------------------------
class TargetError(_Table):
    """Errors of the means at which sampling stops (``[run.target_error]``), each with its autocorrelation time
    resolved (the estimate's ``reliable``), and every quantity settled (:func:`renormpp.diagnostics.converged`)."""

    eps_g: Optional[Positive] = Field(None, description="relative error of the mean of eps_g (0.01: 1%)")
    overlap: Optional[Positive] = Field(None, description="absolute error of the mean of every overlap entry")


class _Run(_Table):
    out: Text = Field(description="output folder (one sub-folder per point)")
    executor: Literal[EXECUTORS] = "inprocess"
    workers: Optional[Count] = Field(None, description="process executor: worker processes (default: number of "
                                                       "points, at most the CPU count)")
    address: Optional[Text] = Field(None, description="ray executor: address of the Ray cluster (default: a local one)")
    checkpoint_every: NonNegative = Field(300.0, description="seconds between checkpoints of the sampler state")
    chunk_seconds: Positive = Field(20.0, description="target seconds per compiled block of draws")
    error_method: Literal[tuple(diagnostics.ESTIMATORS)] = "gamma"
    progress: Flag = True
    target_error: Optional[TargetError] = Field(None, description="stop sampling once these errors are reached "
                                                                  "(checked after every block); sampler.num_samples "
                                                                  "is then the most draws taken")
    max_seconds: Optional[Positive] = Field(None, description="stop sampling after this many seconds of warmup "
                                                              "and sampling (summed over resumptions), whatever the "
                                                              "errors")
    blas_threads: Count0 = Field(1, description="BLAS/LAPACK threads while sampling (the Gibbs step's Cholesky "
                                                "factor): 1, so that points side by side and other jobs do not fight "
                                                "for the cores; 0 leaves them as they are")


class RunConfig(_Run):
    seeds: OneOrMany(Count0) = Field([0], description="sampler seeds; each N1 runs once per seed")


class PointRun(_Run):
    seed: Count0


# ---- [scaling]: finite-size scaling --------------------------------------------------------------------------
class ScalingConfig(_Table):
    """Finite-size scaling instead of a sweep over N1: at each scale s, P = s data.P and N1 = s model.N1, so that
    alpha = P / N1 stays fixed (and N0 = s data.N0 with ``grow_N0``); the report extrapolates MC - theory to 1/N1 = 0."""

    scales: OneOrMany(Annotated[float, Field(gt=0, allow_inf_nan=False, **_expect("a finite number > 0"))]) = Field(
        description="the scales s (at least 3 for the extrapolation)")
    grow_N0: Flag = Field(False, description="also N0 = s * data.N0 (synthetic data)")


class PointScaling(_Table):
    scale: float


# ---- the whole config -------------------------------------------------------------------------------------------
class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")
    data: Data
    model: Any
    sampler: Sampler
    run: Any

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, raw):
        if isinstance(raw, dict):
            raw = {**raw, "sampler": {"kind": "kinetic", **raw.get("sampler", {})}}
        return raw

    @model_validator(mode="after")
    def _complete_step(self):
        s, T = self.sampler, self.model.T
        if s.kind == "nuts":
            return self
        eps = getattr(s, "epsilon", None)
        if s.step_size is not None and eps is not None and not math.isclose(s.step_size, eps * T):
            raise ValueError("give sampler.step_size or sampler.epsilon, not both (step_size = epsilon * T)")
        if s.step_size is None and eps is None:
            adapting = getattr(s, "adapt_step_size", False)
            if s.kind != "ula" and not adapting:
                raise ValueError(f"sampler.step_size is required for kind = {s.kind!r} without step-size adaptation "
                                 "(e.g. 1e-4; or set sampler.num_warmup > 0 to adapt it)")
            if s.kind == "ula":
                s.epsilon = 1e-3  # the paper's protocol
            else:
                s.step_size = 1e-4  # the first guess of the adaptation
        if s.step_size is None:
            s.step_size = s.epsilon * T
        return self

    def dumps(self) -> str:
        """The config as TOML (keys with value None are left out: they mean 'the default')."""
        import tomli_w

        return tomli_w.dumps(self.model_dump(mode="json", exclude_none=True))

    def flat(self) -> dict:
        """``{"table.key": value}``, as the TOML reads back (for comparing configs)."""
        return {f"{t}.{k}": v for t, table in tomllib.loads(self.dumps()).items() for k, v in table.items()}


class PointConfig(_Config):
    """The config of one point of a sweep: one width ``model.N1`` and one seed ``run.seed`` (and, in a scaling
    sweep, its ``scaling.scale``, with the data and width already scaled)."""

    model: PointModel
    run: PointRun
    scaling: Optional[PointScaling] = None

    @property
    def name(self) -> str:
        """The point's folder name."""
        if self.scaling is not None:
            return f"s={self.scaling.scale:g}_seed={self.run.seed}"
        return f"N1={self.model.N1}_seed={self.run.seed}"


class Config(_Config):
    """A sweep: the data, the model with one or several widths ``model.N1``, the sampler and the run; with
    ``[scaling]``, a finite-size-scaling sweep over scales s instead."""

    model: ModelConfig
    run: RunConfig = Field(description="how and where the sweep runs")
    scaling: Optional[ScalingConfig] = None

    @model_validator(mode="after")
    def _one_width_to_scale(self):
        if self.scaling is not None:
            if len(self.model.N1) != 1:
                raise ValueError(f"model.N1 = {self.model.N1} is not allowed with [scaling]: give one width, the one at "
                                 "scale 1 (N1 = s * model.N1 at scale s)")
            if not hasattr(self.data, "P"):
                raise ValueError(f"[scaling] needs a data set with P; data.name = {self.data.name!r} has none")
            if self.scaling.grow_N0 and not hasattr(self.data, "N0"):
                raise ValueError(f"scaling.grow_N0 = true needs a data set with N0; data.name = {self.data.name!r} "
                                 "has none")
        return self

    def points(self) -> list[PointConfig]:
        """One :class:`PointConfig` per (N1, seed), or per (scale, seed) with ``[scaling]``."""
        base = self.model_dump(exclude={"scaling"})
        run = {k: v for k, v in base["run"].items() if k != "seeds"}
        if self.scaling is None:
            return [PointConfig.model_validate({**base, "model": {**base["model"], "N1": N1},
                                                "run": {**run, "seed": seed}})
                    for N1 in self.model.N1 for seed in self.run.seeds]
        out = []
        for s in self.scaling.scales:
            data = {**base["data"], "P": max(1, round(s * self.data.P))}
            if self.scaling.grow_N0:
                data["N0"] = max(1, round(s * self.data.N0))
            model = {**base["model"], "N1": max(1, round(s * self.model.N1[0]))}
            out += [PointConfig.model_validate({**base, "data": data, "model": model, "run": {**run, "seed": seed},
                                                "scaling": {"scale": s}}) for seed in self.run.seeds]
        return out


# ---- reading, checking, writing ---------------------------------------------------------------------------------
def load(path) -> dict:
    """Read a TOML config file (not yet checked: see :func:`resolve`)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no config file at {path}")
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path} is not valid TOML: {err}") from None


def resolve(raw, *, out: str | None = None, point: bool = False) -> Config | PointConfig:
    """Check a config (a dict, or a Config) and fill in every default; ``out`` overrides ``run.out``. ``point`` reads
    the config of one point (``model.N1`` one width, ``run.seed``)."""
    if isinstance(raw, _Config):
        raw = raw.model_dump(exclude_none=True)
    if not isinstance(raw, dict):
        raise ConfigError(f"a config is a dict of tables data, model, sampler, run; got {type(raw).__name__}")
    unknown = sorted(set(raw) - {"data", "model", "sampler", "run", "scaling"})
    if unknown:
        raise ConfigError(f"unknown table(s) {unknown}; a config has the tables data, model, sampler, run (and "
                          "optionally scaling)")
    for table in ("data", "model", "sampler", "run", "scaling"):
        if not isinstance(raw.get(table, {}), dict):
            raise ConfigError(f"[{table}] must be a table of keys; got {raw[table]!r}")
    if "name" not in raw.get("data", {}):
        raise ConfigError(f"missing {'key data.name' if 'data' in raw else 'table [data]'}: name the data set, e.g. "
                          f"[data] name = \"synthetic\" (one of {', '.join(map(repr, LOADERS))}), with its options "
                          "(renormpp demo --print-config shows a complete config)")
    raw = {**raw, "run": {**raw.get("run", {}), **({"out": str(out)} if out is not None else {})}}
    raw.setdefault("model", {})
    try:
        return (PointConfig if point else Config).model_validate(raw)
    except ValidationError as err:
        raise ConfigError(_message(err.errors()[0], raw)) from None


def dumps(cfg) -> str:
    """A config (a Config, or a dict that :func:`resolve` accepts) as TOML."""
    return (cfg if isinstance(cfg, _Config) else resolve(cfg)).dumps()


def differences(a: _Config, b: _Config, ignore=()) -> list[str]:
    """Keys ``table.key`` whose values differ between two resolved configs."""
    fa, fb = a.flat(), b.flat()
    return sorted(k for k in set(fa) | set(fb) if k not in ignore and fa.get(k) != fb.get(k))


# ---- error messages -----------------------------------------------------------------------------------------------
def _table_class(raw: dict, table: str):
    if table == "data":
        return DATA_TABLES.get(raw["data"]["name"])
    if table == "sampler":
        return SAMPLER_TABLES.get(raw.get("sampler", {}).get("kind", "kinetic"))
    return {"model": ModelConfig, "run": RunConfig, "scaling": ScalingConfig}[table]


def _describe(kind) -> str | None:
    """What an annotation allows, in words: the ``expect`` of its Field, or the options of a Literal."""
    if typing.get_origin(kind) is Literal:
        return f"choose one of {', '.join(map(repr, typing.get_args(kind)))}"
    for meta in getattr(kind, "__metadata__", ()):
        expect = (getattr(meta, "json_schema_extra", None) or {}).get("expect")
        if expect:
            return f"expected {expect}"
    return next((d for d in map(_describe, typing.get_args(kind)) if d), None)


def _allowed(field) -> str:
    expect = (field.json_schema_extra or {}).get("expect")
    return f"expected {expect}" if expect else (_describe(field.annotation) or f"expected {field.annotation}")


def _message(e: dict, raw: dict) -> str:
    """One pydantic error as a sentence that names the key, the bad value and what is allowed."""
    loc = [str(x) for x in e["loc"]]
    if e["type"] == "value_error":  # a check of ours: of one key (say which), or of the whole table (says it)
        return f"{'.'.join(loc[:2])} = {e['input']!r} is not allowed: {e['ctx']['error']}" if loc else str(e["ctx"]["error"])
    table = loc[0]
    if e["type"] == "union_tag_invalid":  # data.name or sampler.kind
        key = f"{table}.{e['ctx']['discriminator'].strip(chr(39))}"
        return f"{key} = {e['ctx']['tag']!r} is not allowed: choose one of {e['ctx']['expected_tags']}"
    if table in ("data", "sampler") and len(loc) > 1:
        loc = [table] + loc[2:]  # drop the union tag (the loader's name, the sampler's kind)
    key = ".".join(loc[:2])
    cls = _table_class(raw, table)
    if e["type"] == "extra_forbidden":
        if key in RENAMED:
            return f"{key} was renamed {RENAMED[key]}"
        name = loc[1]
        if table == "sampler":
            kind = raw["sampler"].get("kind", "kinetic")
            if any(name in SAMPLER_TABLES[k].model_fields for k in SAMPLER_TABLES):
                return (f"sampler.{name} does not apply to sampler.kind = {kind!r}; its own keys are "
                        f"{', '.join(_own_keys(kind))}")
        return f"unknown key {key}; allowed keys in [{table}]: {', '.join(k for k in cls.model_fields if k != 'kind')}"
    if e["type"] == "missing":
        field = cls.model_fields.get(loc[1]) if cls is not None else None
        doc = f": {field.description}" if field is not None and field.description else ""
        return f"missing key {key}{doc}"
    field = cls.model_fields.get(loc[1]) if cls is not None and len(loc) > 1 else None
    allowed = _allowed(field) if field is not None else e["msg"]
    return f"{key} = {e['input']!r} is not allowed: {allowed}"
