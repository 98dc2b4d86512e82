"""The samplers of ``renormpp run``, one record per ``sampler.kind``: its ``[sampler]`` table, its builder, the
statistics it records per draw and its label. :data:`SAMPLERS` holds them by kind; the config
(:mod:`.config`: the tables of ``[sampler]``, the error messages) and the sampling stage (:mod:`.stages`) read it, so
a new sampler is one more record here (docs/architecture.md, "Where to add things").

A builder takes the point's ``[sampler]`` table and the :class:`Parts` that the model and the data give (the NumPyro
model, the observables to record, the exact Gibbs draw of v, the site of the first layer's weights) and returns the
NumPyro kernel (an ``MCMCKernel``) that :class:`renormpp.infer.Chains` runs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Literal, NamedTuple, Optional

from pydantic import Field, model_validator

from .fields import Count, Count0, Flag, Positive, Probability, Shift, Table

V_SAMPLING = ("joint", "gibbs", "integrated")
#: the kinds of start (renormpp.infer.starts.KINDS, repeated here so that the config does not import jax)
START_KINDS = ("prior", "mode", "scaled")


# ---- the tables: what every kind has, and each kind's own keys -------------------------------------------------
class SamplerTable(Table):
    """The keys every ``[sampler]`` has. A kind's table sets its defaults in the class variables below."""

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
                          "the slow modes of w tens of times faster than gibbs: benchmarks/README.md), "
                          "joint otherwise")
    rao_blackwell: Optional[Flag] = Field(None, description="record E[observable | w] instead of the observable of "
                                                            "(w, v) (default: true with v_sampling = 'integrated')")
    init: Optional[Literal[START_KINDS]] = Field(
        None, description="where the chains start: 'prior' (a prior draw, the paper's), 'mode' (a network trained to "
                          "the posterior's mode by L-BFGS from a prior draw) or 'scaled' (a prior draw times "
                          "init_scale); run.starts starts the chains of one point from several kinds (default: prior)")
    init_scale: Positive = Field(0.5, description="the factor of a 'scaled' start's weights")
    init_steps: Count = Field(1000, description="L-BFGS iterations of a 'mode' start")
    default_num_warmup: ClassVar[int] = 200
    default_v_sampling: ClassVar[str] = "joint"
    default_chain_method: ClassVar[str] = "vectorized"
    gibbs: ClassVar[bool] = True  #: whether v_sampling = 'gibbs' is allowed (an exact Gibbs draw after every draw)

    @model_validator(mode="after")
    def _complete(self):
        if self.num_warmup is None:
            self.num_warmup = self.default_num_warmup
        if self.v_sampling is None:  # the recommended sampler: kinetic Langevin on w, v integrated out exactly
            self.v_sampling = self.default_v_sampling
        if self.rao_blackwell is None:
            self.rao_blackwell = self.v_sampling == "integrated"
        if self.v_sampling == "integrated" and not self.rao_blackwell:
            raise ValueError("sampler.rao_blackwell = false is not allowed with sampler.v_sampling = 'integrated': v is "
                             "not sampled, so its observables are recorded as their expectations given w")
        if self.v_sampling == "gibbs" and not self.gibbs:
            kinds = [k for k, rec in SAMPLERS.items() if rec.table.gibbs]
            raise ValueError(f"sampler.v_sampling = 'gibbs' works with kind = {', '.join(map(repr, kinds[:-1]))} or "
                             f"{kinds[-1]!r}; for NUTS use v_sampling = 'integrated' (v integrated out), or numpyro's "
                             "HMCGibbs with renormpp.readout.gibbs_fn in a script")
        if self.chain_method is None:
            self.chain_method = self.default_chain_method
        return self

    def warmup_adapts(self) -> bool:
        """Whether the warmup's length adapts (:class:`renormpp.infer.AdaptiveWarmup`)."""
        return False


class _Stepped(SamplerTable):
    step_size: Optional[Positive] = Field(None, description="the step h on the potential U")
    inner_steps: Count = Field(10, description="updates per recorded draw")


class _Adapted(_Stepped):
    adapt_step_size: Optional[Flag] = Field(None, description="tune the step in the warmup (default: true when "
                                                              "num_warmup > 0; step_size is then the first guess)")
    target_accept_prob: Optional[Probability] = None
    warmup: Literal["adaptive", "fixed"] = Field(
        "adaptive", description="'adaptive': each phase of the warmup (relaxation, mass window, step) ends when it "
                                "has done its job, num_warmup being the most it takes (renormpp.infer.warmup); "
                                "'fixed': always num_warmup draws, Stan's windows at 1/4 and 3/4")
    pooling: Literal["pooled", "per_chain"] = Field(
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

    def warmup_adapts(self) -> bool:
        return self.warmup == "adaptive"


class ULAConfig(_Stepped):
    """The paper's unadjusted Langevin algorithm (biased by O(h): keep h small)."""

    kind: Literal["ula"]
    epsilon: Optional[Positive] = Field(None, description="the paper's learning rate; h = epsilon * T")
    default_num_warmup: ClassVar[int] = 0
    default_epsilon: ClassVar[float] = 1e-3  #: the paper's protocol, where neither step_size nor epsilon is given


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
    default_v_sampling: ClassVar[str] = "integrated"

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


class TemperedConfig(KineticConfig):
    """Replica exchange over likelihood temperatures (renormpp.infer.tempering): each chain is a ladder of `replicas`
    kinetic Langevin replicas at powers beta = 1 ... beta_min of the likelihood, neighbours swapping before every
    draw; only the beta = 1 replicas give draws. For posteriors whose chains hold states."""

    kind: Literal["tempered"]
    replicas: Count = Field(8, description="replicas per chain (rungs of the ladder, beta = 1 included), at least 2")
    beta_min: Probability = Field(0.1, description="the hottest replica's power of the likelihood (T_max = T / "
                                                   "beta_min); the ladder is geometric from 1 down to it")
    pooling: Literal["per_chain"] = Field("per_chain", description="each replica adapts its own step and mass (a "
                                                                   "hot replica needs a larger step)")
    warmup: Literal["fixed"] = Field("fixed", description="always num_warmup draws, Stan's windows at 1/4 and 3/4")
    gibbs: ClassVar[bool] = False

    @model_validator(mode="after")
    def _ladder(self):
        if self.replicas < 2:
            raise ValueError(f"sampler.replicas = {self.replicas}: a ladder needs at least 2 rungs (beta = 1 and a "
                             "hotter one); for one replica use kind = 'kinetic'")
        if not self.beta_min < 1:
            raise ValueError("sampler.beta_min must be below 1 (the hottest replica's power of the likelihood)")
        return self


class NUTSConfig(SamplerTable):
    """NumPyro's NUTS."""

    kind: Literal["nuts"]
    target_accept_prob: Probability = 0.8
    max_tree_depth: Count = 10
    dense_mass: Flag = False
    default_chain_method: ClassVar[str] = "sequential"
    gibbs: ClassVar[bool] = False


# ---- the builders ----------------------------------------------------------------------------------------------
class Parts(NamedTuple):
    """What a builder gets from the model and the data: the NumPyro ``model``, the ``observables`` to record per draw
    (``fn(params) -> {"eps_g", "overlap"}``), ``gibbs_fn``, the exact Gibbs draw of v (None unless
    ``v_sampling = "gibbs"``), and ``first_layer``, the site of the weights that see the input."""

    model: Callable
    observables: Callable
    gibbs_fn: Callable | None
    first_layer: str


def _common(s, parts: Parts) -> dict:
    """The arguments every Langevin-type kernel of :mod:`renormpp.infer` takes from a table and the parts."""
    return dict(step_size=s.step_size, inner_steps=s.inner_steps, observables=parts.observables,
                gibbs_fn=parts.gibbs_fn,
                warn_divergences=False)  # checked on the host after every block (renormpp.infer.Chains)


def _ula(s: ULAConfig, parts: Parts):
    from ..infer import Langevin

    return Langevin(parts.model, adjust=False, adapt_step_size=False, target_accept_prob=None,
                    pooled_adaptation=False, **_common(s, parts))


def _mala(s: MALAConfig, parts: Parts):
    from ..infer import Langevin

    return Langevin(parts.model, adjust=True, adapt_step_size=s.adapt_step_size,
                    target_accept_prob=s.target_accept_prob, pooled_adaptation=s.pooling == "pooled",
                    **_common(s, parts))


def _kinetic(s: KineticConfig, parts: Parts):
    from ..infer import KineticLangevin

    return KineticLangevin(parts.model, friction=s.friction, adapt_step_size=s.adapt_step_size,
                           target_accept_prob=s.target_accept_prob,
                           row_mass=parts.first_layer if s.mass == "rows" else None,
                           freeze_gibbs_sites=s.freeze_v, accept_shift=s.accept_shift,
                           pooled_adaptation=s.pooling == "pooled", **_common(s, parts))


def _tempered(s: TemperedConfig, parts: Parts):
    from ..infer.tempering import ReplicaExchange, geometric_ladder

    return ReplicaExchange(_kinetic(s, parts), geometric_ladder(s.replicas, s.beta_min))


def _nuts(s: NUTSConfig, parts: Parts):
    from numpyro.infer import NUTS

    from ..infer import Observed

    return Observed(NUTS(parts.model, target_accept_prob=s.target_accept_prob, max_tree_depth=s.max_tree_depth,
                         dense_mass=s.dense_mass), parts.observables)


# ---- the records -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SamplerKind:
    """One ``sampler.kind``: its ``name``, its ``[sampler]`` ``table`` (a :class:`SamplerTable` whose ``kind`` is
    ``Literal[name]``), ``build(table, parts) -> MCMCKernel``, the ``stats`` fields it records per draw (its state's
    fields: ``diverging`` at least, which the health check reads) and a human ``label``."""

    name: str
    table: type
    build: Callable[[Any, Parts], Any]
    stats: tuple[str, ...]
    label: str


#: Every sampler of ``renormpp run``, by ``sampler.kind``.
SAMPLERS: dict[str, SamplerKind] = {rec.name: rec for rec in (
    SamplerKind("ula", ULAConfig, _ula, ("diverging",), "unadjusted Langevin (ULA, the paper's)"),
    SamplerKind("mala", MALAConfig, _mala, ("accept_prob", "diverging", "step_size"), "Metropolis-adjusted Langevin "
                "(MALA)"),
    SamplerKind("kinetic", KineticConfig, _kinetic, ("accept_prob", "diverging", "step_size"),
                "kinetic Langevin (OBABO, generalized HMC)"),
    SamplerKind("tempered", TemperedConfig, _tempered, ("accept_prob", "diverging", "step_size", "round_trips"),
                "replica exchange over likelihood temperatures, kinetic Langevin in every replica"),
    SamplerKind("nuts", NUTSConfig, _nuts, ("accept_prob", "diverging", "num_steps"), "NUTS (NumPyro's)"),
)}
