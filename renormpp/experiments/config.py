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
    architecture = "fc"     # fc (depth = 1 by default) | conv: the one-hidden-layer CNN, N1 channels, with its keys
                            # image_shape = "28x28" (or 28) and patch = 7 (the data's N0 must be 28 * 28)

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

    [theory]                # optional: the theories compared (default: every one that samples nothing)
    methods = ["exact", "infinite_width", "adaptive_kernel", "specialists"]
    options = {specialists = {k = 2}}   # a theory's own options; sampled theories take minutes per point

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

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator

from .. import architectures, datasets, diagnostics, network
from .fields import (Count, Count0, Flag, NonNegative, OneOrMany, Positive, Probability, Shift, Table,  # noqa: F401
                     Text, expect)
from .samplers import SAMPLERS, START_KINDS, V_SAMPLING, SamplerTable  # noqa: F401

LOADERS = {"synthetic": datasets.synthetic, "mnist": datasets.mnist, "projected_mnist": datasets.projected_mnist,
           "cifar10": datasets.cifar10, "low_dimensional": datasets.low_dimensional}
EXECUTORS = ("inprocess", "process", "ray")
#: keys that may change when a run resumes (they do not change the draws; run.kernel_diagnosis turned on when a point
#: resumes measures its hidden kernel from there on)
RUN_ONLY = tuple(f"run.{k}" for k in ("executor", "workers", "address", "progress", "checkpoint_every",
                                      "chunk_seconds", "blas_threads", "max_seconds", "kernel_diagnosis",
                                      "compilation_cache"))
#: keys of earlier versions, and what they became
RENAMED = {"sampler.readout": "sampler.v_sampling ('sampled' is now 'joint', 'marginal' is 'integrated')"}
#: keys of earlier versions that are still read, under their new name (a config that gives both is refused)
ALIASES = {"sampler.adaptation": "sampler.pooling"}


class ConfigError(ValueError):
    """A config key is unknown, missing, or has a value that is not allowed."""


# ---- field types (renormpp.experiments.fields): each says in words what it allows, for the error messages ----
_Table, _expect = Table, expect


# ---- [data] ----------------------------------------------------------------------------------------------------
def _data_table(name: str, loader) -> type[_Table]:
    """A table of the loader's options, from its signature: its defaults, and its annotated types."""
    hints = typing.get_type_hints(loader)
    fields: dict[str, Any] = {"name": (Literal[name], name)}
    for p in inspect.signature(loader).parameters.values():
        if p.name == "download" or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
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


# ---- [model]: one table per architecture ------------------------------------------------------------------------
class _Model(_Table):
    """The Bayesian network and its theory: what every architecture has; its own options come from its record."""

    N1: Any = Field(description="hidden units: one width or a list (the sweep)")
    T: Positive = 0.01
    lambda0: Positive = Field(1.0, description="prior precision of the hidden-layer weights (every layer)")
    lambda1: Positive = Field(1.0, description="prior precision of the readout weights")
    activation: Literal[tuple(network.ACTIVATIONS)] = "erf"
    architecture: str = Field("fc", description="the kind of network: a name of renormpp.architectures.ARCHITECTURES "
                                                "(its own keys follow)")

    def options(self) -> dict:
        """The architecture's own options (``depth`` for ``"fc"``), as :func:`renormpp.architectures` records take
        them."""
        return {k: getattr(self, k) for k in type(self).model_fields if k not in _Model.model_fields}

    @model_validator(mode="after")
    def _covered(self):
        architectures.get_architecture(self.architecture).check(self.activation, **self.options())
        return self


def _field_type(kind):
    """The config's field type of an option's annotation: int, float, bool (alone or in a Union) as the checked types
    that say what they allow."""
    if typing.get_origin(kind) is Union:
        return Union[tuple(map(_field_type, typing.get_args(kind)))]
    return {int: Count, float: Positive, bool: Flag, str: Text}.get(kind, kind)


def _model_table(arch, point: bool) -> type[_Table]:
    """The [model] table of ``arch``: the common keys and the options its record declares (their annotated types,
    defaults and descriptions, :class:`renormpp.architectures.Architecture`)."""
    hints = typing.get_type_hints(arch.options, include_extras=True)
    fields: dict[str, Any] = {
        "architecture": (Literal[arch.name], Field(arch.name, description=_Model.model_fields["architecture"].description)),
        "N1": (Count if point else OneOrMany(Count), Field(description="hidden units: one width or a list (the sweep)"))}
    for p in inspect.signature(arch.options).parameters.values():
        if p.kind is p.KEYWORD_ONLY:  # what the check reads from the common keys (the activation)
            continue
        kind, meta = hints.get(p.name, Any), ()
        if typing.get_origin(kind) is Annotated:
            kind, *meta = typing.get_args(kind)
        kind = _field_type(kind)
        default = ... if p.default is p.empty else p.default  # an option without a default is a required key
        fields[p.name] = (kind, Field(default, description=" ".join(m for m in meta if isinstance(m, str)) or None))
    name = f"{arch.name.title().replace('_', '')}{'Point' if point else ''}Model"
    cls = create_model(name, __base__=_Model, __module__=__name__, __doc__=f"[model] of architecture = {arch.name!r}: "
                       f"{arch.label}.", **fields)
    globals()[cls.__name__] = cls  # importable by name, so that configs pickle (process and Ray executors)
    return cls


def _tagged(tables: dict, key: str):
    """One table, or the union of several told apart by ``key``."""
    classes = tuple(tables.values())
    return classes[0] if len(classes) == 1 else Annotated[Union[classes], Field(discriminator=key)]


MODEL_TABLES = {name: _model_table(arch, point=False) for name, arch in architectures.ARCHITECTURES.items()}
POINT_MODEL_TABLES = {name: _model_table(arch, point=True) for name, arch in architectures.ARCHITECTURES.items()}
ModelConfig = _tagged(MODEL_TABLES, "architecture")
PointModel = _tagged(POINT_MODEL_TABLES, "architecture")


# ---- [sampler]: one table per kind, from the records of renormpp.experiments.samplers ------------------------
def _sampler_union():
    """The ``[sampler]`` tables of every kind in :data:`SAMPLERS`, told apart by ``kind``."""
    return Annotated[Union[tuple(rec.table for rec in SAMPLERS.values())], Field(discriminator="kind")]


Sampler = _sampler_union()


def _own_keys(kind: str) -> list[str]:
    return [k for k in SAMPLERS[kind].table.model_fields if k not in SamplerTable.model_fields and k != "kind"]


# ---- [theory] --------------------------------------------------------------------------------------------------
def default_methods() -> list[str]:
    """The theories a run compares where ``[theory] methods`` is not given: every record of
    :data:`renormpp.theory.THEORIES` that samples nothing and needs no option (the sampled ones opt in)."""
    from ..theory import THEORIES

    return [t.name for t in THEORIES.values() if t.cost != "sampled" and not t.required]


class TheoryConfig(_Table):
    """``[theory]``: the theories compared with the sampled networks. The kernel-renormalization methods of
    :data:`renormpp.theory.METHODS` cost milliseconds and are always compared (the report's tables and figures are
    drawn against them); ``methods`` adds the theories beyond them (``adaptive_kernel`` by default, ``specialists`` with
    ``[theory.options.specialists] k = 2``). A theory that samples takes minutes per point:
    it is solved once, before the point's sampling, and kept in ``theory.json``."""

    methods: Optional[OneOrMany(Text)] = Field(None, description="names of renormpp.theory.THEORIES (default: every "
                                                                  "theory that samples nothing: "
                                                                  "see default_methods)")
    options: Optional[dict[str, dict[str, Any]]] = Field(None, description="each theory's own options, e.g. "
                                                                           "{specialists = {k = 2}}")

    @model_validator(mode="after")
    def _known(self):
        from ..theory import THEORIES

        names = self.chosen()
        unknown = [n for n in names if n not in THEORIES]
        if unknown:
            raise ValueError(f"theory.methods has {unknown}, which renormpp.theory.THEORIES does not hold; choose "
                             f"among {list(THEORIES)}")
        options = self.options or {}
        for name, given in options.items():
            if name not in names:
                raise ValueError(f"theory.options.{name} is given but {name!r} is not in theory.methods = {names}: "
                                 "add it there, or drop its options")
            takes = [o for o in THEORIES[name].options if o != "sampler"]
            bad = sorted(set(given) - set(takes))
            if bad:
                raise ValueError(f"theory.options.{name} has {bad}, which the {name} theory does not take from a "
                                 f"config; it takes {takes}")
        for name in names:
            missing = [o for o in THEORIES[name].required if o not in options.get(name, {})]
            if missing:
                raise ValueError(f"the {name} theory needs {missing}: add [theory.options.{name}] with "
                                 f"{missing[0]} = ... (e.g. k = 2 explicit neurons)")
        return self

    def chosen(self) -> list[str]:
        """The theories compared: ``methods``, or :func:`default_methods`."""
        return list(self.methods) if self.methods is not None else default_methods()

    def options_of(self, name: str) -> dict:
        """The options given for the theory ``name``."""
        return dict((self.options or {}).get(name, {}))


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
                                                              "errors, once 4 draws per chain follow the warmup")
    blas_threads: Count0 = Field(1, description="BLAS/LAPACK threads while sampling (the Gibbs step's Cholesky "
                                                "factor): 1, so that points side by side and other jobs do not fight "
                                                "for the cores; 0 leaves them as they are")
    starts: Optional[OneOrMany(Literal[START_KINDS])] = Field(
        None, description="start the chains of each point from several kinds (of sampler.init's), shared out in turn "
                          "(chain c from the (c mod k)-th kind): the report judges agreement across the kinds "
                          "('starts disagree: not equilibrium'); e.g. [\"prior\", \"mode\"] with num_chains = 4")
    compilation_cache: Text = Field("auto", description="keep compiled programs between runs (JAX's persistent "
                                    "cache): 'auto' (~/.cache/renormpp/jax), a folder, or 'off'")
    kernel_diagnosis: Flag = Field(True, description="measure the posterior's hidden kernel while sampling (summed "
                                                     "over thinned draws, about 10% of the sampling time) and judge "
                                                     "it against the theory's (kernel.json, comparison.md)")


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
    theory: TheoryConfig = Field(default_factory=TheoryConfig, description="the theories compared")

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, raw):
        if isinstance(raw, dict):
            raw = {**raw, "sampler": {"kind": "kinetic", **raw.get("sampler", {})},
                   "model": {"architecture": "fc", **raw.get("model", {})}}
        return raw

    @model_validator(mode="after")
    def _complete_step(self):
        s, T = self.sampler, self.model.T
        if "step_size" not in type(s).model_fields:  # a kind without a step (NUTS tunes its own)
            return self
        eps = getattr(s, "epsilon", None)
        if s.step_size is not None and eps is not None and not math.isclose(s.step_size, eps * T):
            raise ValueError("give sampler.step_size or sampler.epsilon, not both (step_size = epsilon * T)")
        if s.step_size is None and eps is None:
            adapting = getattr(s, "adapt_step_size", False)
            paper = getattr(s, "default_epsilon", None)  # ULA: the paper's protocol
            if paper is None and not adapting:
                raise ValueError(f"sampler.step_size is required for kind = {s.kind!r} without step-size adaptation "
                                 "(e.g. 1e-4; or set sampler.num_warmup > 0 to adapt it)")
            if paper is not None:
                s.epsilon = paper
            else:
                s.step_size = 1e-4  # the first guess of the adaptation
        if s.step_size is None:
            s.step_size = s.epsilon * T
        return self

    @model_validator(mode="after")
    def _check_starts(self):
        s, kinds = self.sampler, self.run.starts
        if kinds is None:
            return self
        if s.init is not None and s.init not in kinds:
            raise ValueError(f"sampler.init = {s.init!r} is not among run.starts = {kinds}: give one of them (run.starts "
                             "lists every kind of start of the point's chains)")
        if s.num_chains < len(kinds):
            raise ValueError(f"run.starts = {kinds} shares the chains out among {len(kinds)} kinds of start: set "
                             f"sampler.num_chains >= {len(kinds)} (e.g. {2 * len(kinds)}, two chains per kind)")
        return self

    def starts(self) -> list[str]:
        """The kind of start of every chain (:func:`renormpp.infer.starts.assign`): ``run.starts`` shared out in turn,
        or ``sampler.init`` (default "prior") for all."""
        from ..infer.starts import assign

        return assign(self.run.starts or [self.sampler.init or "prior"], self.sampler.num_chains)

    def dumps(self) -> str:
        """The config as TOML (keys with value None are left out: they mean 'the default')."""
        import tomli_w

        tables = self.model_dump(mode="json", exclude_none=True)
        return tomli_w.dumps({k: v for k, v in tables.items() if v != {}})  # an empty table means the defaults

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
    """Read a TOML config file (not yet checked: see :func:`resolve`).

    Parameters
    ----------
    path : str or path
        The TOML file.

    Returns
    -------
    dict
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no config file at {path}")
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path} is not valid TOML: {err}") from None


def resolve(raw, *, out: str | None = None, point: bool = False) -> Config | PointConfig:
    """Check a config (a dict, or a Config) and fill in every default; ``out`` overrides ``run.out``. ``point`` reads
    the config of one point (``model.N1`` one width, ``run.seed``).

    Parameters
    ----------
    raw : dict or Config
        The config.
    out : str, optional
        Overrides ``run.out``.
    point : bool, default False
        Read the config of one point.

    Returns
    -------
    Config or PointConfig

    Raises
    ------
    ConfigError
        A ValueError for an unknown table or key, or a value out of its range (the message names it).
    """
    if isinstance(raw, _Config):
        raw = raw.model_dump(exclude_none=True)
    if not isinstance(raw, dict):
        raise ConfigError(f"a config is a dict of tables data, model, sampler, run; got {type(raw).__name__}")
    unknown = sorted(set(raw) - {"data", "model", "sampler", "run", "scaling", "theory"})
    if unknown:
        raise ConfigError(f"unknown table(s) {unknown}; a config has the tables data, model, sampler, run (and "
                          "optionally scaling and theory)")
    for table in ("data", "model", "sampler", "run", "scaling", "theory"):
        if not isinstance(raw.get(table, {}), dict):
            raise ConfigError(f"[{table}] must be a table of keys; got {raw[table]!r}")
    if "name" not in raw.get("data", {}):
        raise ConfigError(f"missing {'key data.name' if 'data' in raw else 'table [data]'}: name the data set, e.g. "
                          f"[data] name = \"synthetic\" (one of {', '.join(map(repr, LOADERS))}), with its options "
                          "(renormpp demo --print-config shows a complete config)")
    raw = {**raw, "run": {**raw.get("run", {}), **({"out": str(out)} if out is not None else {})}}
    raw.setdefault("model", {})
    raw = _read_aliases(raw)
    _follow_registry()
    try:
        return (PointConfig if point else Config).model_validate(raw)
    except ValidationError as err:
        raise ConfigError(_message(err.errors()[0], raw)) from None


def _read_aliases(raw: dict) -> dict:
    """``raw`` with the keys of :data:`ALIASES` under their new names."""
    for old, new in ALIASES.items():
        table, key = old.split(".")
        given = raw.get(table, {})
        if key in given:
            if new.split(".")[1] in given:
                raise ConfigError(f"{old} is the earlier name of {new}: give {new} only")
            raw = {**raw, table: {(new.split(".")[1] if k == key else k): v for k, v in given.items()}}
    return raw


_KINDS = tuple(SAMPLERS.items())  # the sampler kinds the config models were built for


def _follow_registry() -> None:
    """Rebuild the config models where :data:`SAMPLERS` has changed since (a kind registered at run time)."""
    global _KINDS, Sampler
    if tuple(SAMPLERS.items()) == _KINDS:
        return
    _KINDS, Sampler = tuple(SAMPLERS.items()), _sampler_union()
    for cls in (_Config, PointConfig, Config):
        cls.model_fields["sampler"].annotation = Sampler
        cls.model_rebuild(force=True)


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
        kind = SAMPLERS.get(raw.get("sampler", {}).get("kind", "kinetic"))
        return kind.table if kind is not None else None
    if table == "model":
        return MODEL_TABLES.get(raw.get("model", {}).get("architecture", "fc"), MODEL_TABLES["fc"])
    return {"run": RunConfig, "scaling": ScalingConfig, "theory": TheoryConfig}[table]


def _describe(kind) -> str | None:
    """What an annotation allows, in words: the ``expect`` of its Field, or the options of a Literal."""
    if typing.get_origin(kind) is Literal:
        return f"choose one of {', '.join(map(repr, typing.get_args(kind)))}"
    for meta in getattr(kind, "__metadata__", ()):
        expect = (getattr(meta, "json_schema_extra", None) or {}).get("expect")
        if expect:
            return f"expected {expect}"
    described = [d for d in map(_describe, typing.get_args(kind)) if d]
    if typing.get_origin(kind) is Union and len(described) > 1:  # "expected an integer >= 1 or a non-empty string"
        return "expected " + " or ".join(d.removeprefix("expected ") for d in described)
    return described[0] if described else None


def _allowed(field) -> str:
    expect = (field.json_schema_extra or {}).get("expect")
    return f"expected {expect}" if expect else (_describe(field.annotation) or f"expected {field.annotation}")


def _message(e: dict, raw: dict) -> str:
    """One pydantic error as a sentence that names the key, the bad value and what is allowed."""
    loc = [str(x) for x in e["loc"]]
    table = loc[0] if loc else ""
    tagged = table in ("data", "sampler") or (table == "model" and len(MODEL_TABLES) > 1)
    if tagged and len(loc) > 1 and e["type"] != "union_tag_invalid":
        loc = [table] + loc[2:]  # drop the union tag (the loader's name, the sampler's kind, the architecture)
    if e["type"] == "value_error":  # a check of ours: of one key (say which), or of the whole table (says it)
        return f"{'.'.join(loc[:2])} = {e['input']!r} is not allowed: {e['ctx']['error']}" if loc else str(e["ctx"]["error"])
    if e["type"] == "union_tag_invalid":  # data.name or sampler.kind
        key = f"{table}.{e['ctx']['discriminator'].strip(chr(39))}"
        return f"{key} = {e['ctx']['tag']!r} is not allowed: choose one of {e['ctx']['expected_tags']}"
    key = ".".join(loc[:2])
    cls = _table_class(raw, table)
    if e["type"] == "extra_forbidden":
        if key in RENAMED:
            return f"{key} was renamed {RENAMED[key]}"
        name = loc[1]
        if table == "sampler":
            kind = raw["sampler"].get("kind", "kinetic")
            if any(name in rec.table.model_fields for rec in SAMPLERS.values()):
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
