"""Chains of a NumPyro sampler (an ``MCMCKernel``), run in compiled blocks of draws and continued from a state.

This is what ``numpyro.infer.MCMC.run`` does (the same ``init``/``sample`` interface of the sampler, the same chain
methods, the sampler's own ``postprocess_fn`` and sample field), for runs that stop between blocks to checkpoint or
report progress: a block is compiled once per length (numpyro 0.22's ``MCMC.run`` recompiles its loop on every
call, and every compilation keeps its memory maps: thousands of blocks would exhaust them). Divergences are checked
on the host after each block, so no host callback runs inside the compiled loop.
"""
from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from functools import partial
from operator import attrgetter
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer.mcmc import MCMCKernel

from ..precision import full_precision


class DivergenceWarning(RuntimeWarning):
    """A chain made a divergent step (rejected: no draw is NaN)."""


@dataclass(frozen=True)
class Accumulator:
    """What :class:`Chains` sums over the draws of a block instead of recording per draw: ``fn`` of the entry ``key``
    of the sampler's recorded observables (which leaves the per-draw record), at every ``thin``-th draw of a block
    (counted from the first draw of the run: the draws are correlated, and the sum may cost more than a draw), in
    separate sums over the cells of a grid of draws, ``cell`` draws each (:meth:`Chains.run`), at most ``pieces``
    of them per block (:meth:`Chains.pieces` says which draws entered each): where the sums begin and end does not
    depend on where the blocks do, so that a resumed run sums what an uninterrupted one does."""

    fn: Callable
    key: str
    thin: int = 1
    pieces: int = 1

    def __post_init__(self):
        for name in ("thin", "pieces"):
            value = getattr(self, name)
            if int(value) != value or value < 1:
                raise ValueError(f"{name} must be a positive integer; got {value!r}")


class Chains:
    """``num_chains`` chains of ``sampler`` (a NumPyro ``MCMCKernel``, as ``MCMC(sampler, ...)`` takes it);
    ``chain_method`` as NumPyro's ``MCMC``: "vectorized" (the sampler steps a batch of chains) or "sequential" (one
    chain after the other, stacked). Between blocks, :class:`renormpp.infer.warmup.AdaptiveWarmup` may end the
    warmup early.

    >>> chains = Chains(Langevin(model, step_size=1e-3, observables=obs), num_chains=2, extra_fields=("diverging",))
    >>> state = chains.init(key, num_warmup, X, Y, N1=100)
    >>> state, draws, stats = chains.run(state, 500)     # draws and stats have axes (chain, draw, ...)

    Parameters
    ----------
    sampler : numpyro.infer.mcmc.MCMCKernel
        The kernel each chain runs, as ``MCMC(sampler, ...)`` takes it.
    num_chains : int, default 1
        The number of chains.
    chain_method : {"vectorized", "sequential"}
        As NumPyro's ``MCMC``: "vectorized" (the sampler steps a batch of chains) or "sequential" (one chain after
        the other, stacked).
    extra_fields : tuple of str, default ()
        Fields of the sampler's state recorded per draw in ``stats`` (e.g. ``"diverging"``), as NumPyro's
        ``extra_fields``.
    warn_divergences : bool, default True
        After each block, warn (:class:`DivergenceWarning`) where its draws made divergent steps (read from
        ``"diverging"`` among the ``extra_fields``).
    blas_threads : int, optional
        At most this many BLAS/LAPACK threads while a block runs (None: as the process has them).
    accumulate : Accumulator, optional
        Sums over the draws of a block of a quantity too large to keep per draw (e.g. the hidden layer's P x P
        kernel, :func:`renormpp.observables.hidden_sums`); after :meth:`run`, :attr:`sums` holds the block's sums
        over all chains, axes (piece, ...), and :attr:`pieces` which draws of each chain entered them. The sums are
        over the chains in the compiled block: a sum per chain would multiply the memory, the per-draw copies and
        the transfer to the host by the chain count.
    """

    def __init__(self, sampler: MCMCKernel, *, num_chains: int = 1, chain_method: str = "vectorized",
                 extra_fields=(), warn_divergences: bool = True, blas_threads: int | None = None,
                 accumulate: "Accumulator | None" = None):
        if chain_method not in ("vectorized", "sequential"):
            raise ValueError(f"chain_method must be 'vectorized' or 'sequential'; got {chain_method!r}")
        if int(num_chains) != num_chains or num_chains < 1:
            raise ValueError(f"num_chains must be a positive integer; got {num_chains!r}")
        self.sampler, self.num_chains, self.chain_method = sampler, int(num_chains), chain_method
        self.extra_fields = tuple(extra_fields)
        self.warn_divergences = bool(warn_divergences)
        self.blas_threads = blas_threads
        self.accumulate = accumulate
        self.sums, self._last = None, 0
        self._block = None

    def init(self, rng_key, num_warmup: int, *model_args, init_params=None, **model_kwargs):
        """The initial state of every chain (leading axis: chain). ``init_params`` (one per chain, stacked)
        replaces the sampler's initialization.

        Parameters
        ----------
        rng_key : jax.Array
            The key of the run; each chain gets its own.
        num_warmup : int
            The warmup draws (the sampler's adaptation schedule).
        *model_args
            The model's arguments, e.g. ``X, Y``.
        init_params : pytree, optional
            Initial parameters, one per chain, stacked.
        **model_kwargs
            The model's keyword arguments, e.g. ``N1=100``.

        Returns
        -------
        state
            The sampler's state, with a leading chain axis.
        """
        keys = jax.random.split(rng_key, self.num_chains)
        if self.chain_method == "vectorized":
            state = self.sampler.init(keys, num_warmup, init_params, model_args, model_kwargs)
        else:
            parts = [self.sampler.init(k, num_warmup, None if init_params is None else
                                      jax.tree_util.tree_map(lambda x, c=c: x[c], init_params), model_args, model_kwargs)
                     for c, k in enumerate(keys)]
            state = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *parts)
        self._compile(model_args, model_kwargs)
        # strongly typed, as every block returns it: a weakly typed counter (the kernel's jnp.array(0)) would make
        # the second block compile again
        return jax.tree_util.tree_map(lambda x: jax.lax.convert_element_type(x, x.dtype)
                                      if getattr(x, "weak_type", False) else x, state)

    def _compile(self, model_args, model_kwargs):
        sampler, vectorized = self.sampler, self.chain_method == "vectorized"
        post = sampler.postprocess_fn(model_args, model_kwargs)
        post = jax.vmap(post) if vectorized else post
        get_sample = attrgetter(sampler.sample_field)
        fields = {f: attrgetter(f) for f in self.extra_fields}
        acc = self.accumulate
        summand = None if acc is None else (jax.vmap(acc.fn) if vectorized else acc.fn)

        def summed(given):  # the block's summand, summed over the chains
            x = summand(given)
            return jax.tree_util.tree_map(lambda a: a.sum(axis=0), x) if vectorized else x

        def record(st):  # a draw's record: the sample field's observables (less the summed input) and the fields
            out = post(get_sample(st))
            given = None
            if acc is not None:  # the accumulated input leaves the per-draw record
                out = dict(out)
                given = out.pop(acc.key)
            return (out, {f: get(st) for f, get in fields.items()}), given

        @partial(jax.jit, static_argnums=5)
        @full_precision()  # every product at full float32 precision, the sampler's own (NUTS) included
        def block(state, n, offset, cell, summing, length):
            # buffers of `length` draws, the first `n` filled by a loop of n iterations: one compilation serves every
            # block up to `length`, and a short block costs its own draws only (no observables of unused steps)
            def body(i, carry):
                st, sums, buffers = carry
                st = sampler.sample(st, model_args, model_kwargs)
                rec, given = record(st)
                if acc is not None:  # every `thin`-th draw is summed
                    j = jnp.minimum((offset + i) // cell - offset // cell, acc.pieces - 1)  # the cell of draw i
                    # the summand (or zeros) under the condition, the sum updated in place outside it: a condition
                    # that returned the sums makes XLA copy all of them at every draw (half of a draw's time on 2
                    # cores at P = 1000)
                    x = jax.lax.cond(summing & ((offset + i) % acc.thin == 0), summed,
                                     lambda g: jax.tree_util.tree_map(jnp.zeros_like, zero), given)
                    sums = jax.tree_util.tree_map(lambda a, x: jax.lax.dynamic_update_index_in_dim(
                        a, jax.lax.dynamic_index_in_dim(a, j, keepdims=False) + x, j, 0), sums, x)
                buffers = jax.tree_util.tree_map(lambda b, x: jax.lax.dynamic_update_index_in_dim(b, x, i, 0),
                                                 buffers, rec)
                return st, sums, buffers

            shape, given = jax.eval_shape(record, state)
            buffers = jax.tree_util.tree_map(lambda x: jnp.zeros((length,) + x.shape, x.dtype), shape)
            sums = None
            if acc is not None:
                zero = jax.eval_shape(summed, given)
                sums = jax.tree_util.tree_map(lambda x: jnp.zeros((acc.pieces,) + x.shape, x.dtype), zero)
            state, sums, buffers = jax.lax.fori_loop(0, n, body, (state, sums, buffers))
            return state, buffers, sums

        self._block = block

    def run(self, state, num_draws: int, length: int | None = None, *, offset: int = 0, cell: int | None = None,
            summing: bool = True):
        """``num_draws`` iterations from ``state``: ``(state, draws, stats)``, the draws of the sampler's sample field
        and the ``extra_fields``, as numpy arrays with axes (chain, draw, ...).

        ``length`` (at least ``num_draws``; default ``num_draws``): the block is compiled for this many iterations
        and runs the first ``num_draws`` of them, so that blocks of different sizes share one compilation.
        ``offset`` (draws made before this block) and ``cell`` place the block's draws on the grid of the
        accumulated sums (:class:`Accumulator`; at most ``pieces`` cells per block; default: the block is one
        cell); ``summing=False``: the block sums nothing (:attr:`sums` None; the warmup's draws, whose sums nobody
        keeps).

        Parameters
        ----------
        state
            The chains' state, from :meth:`init` or the last block.
        num_draws : int
            The draws of this block.
        length : int, optional
            The iterations the block is compiled for (at least ``num_draws``).
        offset : int, default 0
            The draws made before this block.
        cell : int, optional
            The draws per cell of the accumulated sums.
        summing : bool, default True
            Whether the block adds to the accumulated sums.

        Returns
        -------
        state
            The chains' state after the block.
        draws : dict
            The sample field per draw, numpy arrays (chain, draw, ...).
        stats : dict
            The ``extra_fields`` per draw, (chain, draw, ...).
        """
        if self._block is None:
            raise RuntimeError("call init first: it binds the model arguments and compiles the block")
        num_draws = int(num_draws)
        length = num_draws if length is None else int(length)
        if not 0 < num_draws <= length:
            raise ValueError(f"need 0 < num_draws <= length; got num_draws={num_draws}, length={length}")
        offset = int(offset)
        cell = offset + num_draws if cell is None else int(cell)
        if self.accumulate is not None and (offset + num_draws - 1) // cell - offset // cell >= self.accumulate.pieces:
            raise ValueError(f"a block of {num_draws} draws from draw {offset} spans more than "
                             f"{self.accumulate.pieces} cells of {cell} draws: use larger cells")
        grid = (jnp.int32(offset), jnp.int32(cell), jnp.bool_(summing))

        def chain_first(tree):
            return jax.tree_util.tree_map(lambda x: np.swapaxes(np.asarray(x)[:num_draws], 0, 1), tree)

        with self._blas_limit():
            if self.chain_method == "vectorized":
                new, (draws, stats), sums = jax.block_until_ready(self._block(state, num_draws, *grid, length))
                draws, stats = chain_first(draws), chain_first(stats)
            else:
                outs = [jax.block_until_ready(self._block(jax.tree_util.tree_map(lambda x, c=c: x[c], state),
                                                          num_draws, *grid, length))
                        for c in range(self.num_chains)]
                new = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *[o[0] for o in outs])
                stack = lambda trees: jax.tree_util.tree_map(lambda *xs: np.stack([np.asarray(x)[:num_draws] for x in xs]), *trees)  # noqa: E731
                draws, stats = stack([o[1][0] for o in outs]), stack([o[1][1] for o in outs])
                sums = None if self.accumulate is None else \
                    jax.tree_util.tree_map(lambda *xs: sum(np.asarray(x) for x in xs), *[o[2] for o in outs])
        if self.accumulate is not None:
            self.sums = jax.tree_util.tree_map(np.asarray, sums) if summing else None
            self._last = (offset, num_draws, cell)
        if self.warn_divergences and "diverging" in stats:
            self._check_divergences(state, stats["diverging"])
        return new, draws, stats

    def pieces(self) -> list[tuple[int, int, int]]:
        """Which draws of the last block entered each piece of :attr:`sums`: ``(first, stop, count)`` per piece that
        the block reached, the draws first..stop-1 (counted from the run's first) and how many of them were summed
        (per chain)."""
        if self.accumulate is None or self.sums is None:
            return []
        (offset, n, cell), thin = self._last, self.accumulate.thin
        out = []
        for k in range(offset // cell, (offset + n - 1) // cell + 1):
            first, stop = max(offset, k * cell), min(offset + n, (k + 1) * cell)
            out.append((first, stop, len(range(-(-first // thin) * thin, stop, thin))))
        return out

    def _blas_limit(self):
        """At most ``blas_threads`` BLAS/LAPACK threads while a block runs (the Cholesky factor of the exact Gibbs draw
        of v runs in LAPACK): its thread pool otherwise fights XLA's and any other job's for the cores."""
        if not self.blas_threads:
            return contextlib.nullcontext()
        from threadpoolctl import threadpool_limits

        return threadpool_limits(limits=int(self.blas_threads), user_api="blas")

    def _check_divergences(self, state, diverging):
        counts = np.asarray(diverging).reshape(self.num_chains, -1).sum(axis=1)
        if counts.any():
            step = getattr(state, "step_size", None)
            step = f" at step_size={float(np.max(np.asarray(step))):.3g}" if step is not None else ""
            warnings.warn(f"{int(counts.sum())} draw(s) of this block ({', '.join(map(str, counts))} per chain) made a "
                          f"divergent step{step} (a NaN or inf potential or gradient; for NUTS, an energy error above "
                          "its max_delta_energy). Divergent steps are rejected (no draw is NaN), but many of them mean "
                          "the step is too large for the target: reduce it.", DivergenceWarning, stacklevel=3)
