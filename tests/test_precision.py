"""Every product the samplers compute is at full float32 precision, whatever the backend (issue 45).

On Ampere and Hopper GPUs XLA's default for float32 products is TF32 (a 10-bit mantissa): at Fig. 1a's alpha = 10
the potential's rounding noise was 1.38 on an H100 against 0.001 on CPU, and the chains froze. A CPU computes every
product at full precision whatever is asked, so the draws of a CPU run cannot show the difference; what CI can check
is what is asked: the precision recorded on every ``dot_general`` of the traced programs (the potential and its
gradient, a sampler's step with its record and exact Gibbs draw, NUTS inside a compiled block, the hidden kernel's
accumulator, the mode start's training), which is what XLA compiles on a GPU. On the code before issue 45 every one
of them was ``None`` (the backend's default)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer import NUTS

import renormpp as rp
from renormpp import infer, models, observables, readout

FULL = (jax.lax.Precision.HIGHEST, jax.lax.Precision.HIGHEST)


def _precisions(jaxpr) -> list:
    """The ``precision`` of every ``dot_general`` of a jaxpr, inner jaxprs (jit, scan, cond, while, custom rules)
    included."""
    found = []

    def walk(j):
        j = getattr(j, "jaxpr", j)  # a ClosedJaxpr holds its Jaxpr
        for eqn in j.eqns:
            if eqn.primitive.name == "dot_general":
                found.append(eqn.params["precision"])
            for value in eqn.params.values():
                for inner in value if isinstance(value, (tuple, list)) else (value,):
                    if hasattr(inner, "eqns") or hasattr(getattr(inner, "jaxpr", None), "eqns"):
                        walk(inner)

    walk(jaxpr)
    return found


def _assert_full(jaxpr, what):
    found = _precisions(jaxpr)
    assert found, f"{what}: no product found (the walk missed the inner programs)"
    low = [p for p in found if p != FULL]
    assert not low, f"{what}: {len(low)} of {len(found)} products at the backend's default precision ({low[:3]})"


def _data():
    d = rp.datasets.synthetic(P=12, P_test=8, N0=5, D=2, teacher="linear", seed=0)
    return np.asarray(d.X, np.float32), np.asarray(d.Y, np.float32), np.asarray(d.X_test, np.float32), \
        np.asarray(d.Y_test, np.float32)


@pytest.mark.parametrize("kind", ["mala, gibbs on v, rao-blackwellized", "kinetic, v integrated out", "nuts"])
def test_every_product_of_a_sampler_is_at_full_precision(kind):
    X, Y, X_test, Y_test = _data()
    kw = dict(N1=6, T=0.01)
    rb = readout.rao_blackwell(X, Y, X_test, Y_test, T=0.01, lambda1=1.0)
    if kind.startswith("mala"):
        sampler = infer.Langevin(models.one_hidden_layer, step_size=1e-3, adjust=True, adapt_step_size=True,
                                 inner_steps=2, observables=observables.with_hidden(rb),
                                 gibbs_fn=readout.gibbs_fn(X, Y, T=0.01, lambda1=1.0))
    elif kind.startswith("kinetic"):
        kw["integrate_v"] = True
        sampler = infer.KineticLangevin(models.one_hidden_layer, step_size=1e-3, inner_steps=2,
                                        observables=observables.with_hidden(rb))
    else:
        sampler = infer.Observed(NUTS(models.one_hidden_layer), observables.with_hidden(rb))
    acc = infer.Accumulator(observables.hidden_sums(X, X_test), observables.HIDDEN)
    chains = infer.Chains(sampler, num_chains=2, accumulate=acc)
    state = chains.init(jax.random.PRNGKey(0), 5, X, Y, **kw)
    _assert_full(jax.make_jaxpr(chains._block, static_argnums=5)(state, 3, 0, 3, True, 3), f"{kind}: a compiled block")
    _assert_full(jax.make_jaxpr(lambda s: sampler.sample(s, (X, Y), kw))(state), f"{kind}: one step (MCMC.run)")
    if kind != "nuts":
        U = sampler._bound.potential((X, Y), kw)
        x = jnp.zeros(sum(np.size(a[0]) for a in jax.tree_util.tree_leaves(state.z)), jnp.float32)
        _assert_full(jax.make_jaxpr(jax.value_and_grad(U))(x), f"{kind}: the potential and its force")


def test_the_mode_start_trains_at_full_precision():
    X, Y, _, _ = _data()
    kw = dict(N1=6, T=0.01)
    train = infer.starts._descend(models.one_hidden_layer, (X, Y), kw, steps=2)
    params = {"w": jnp.zeros((6, 5)), "v": jnp.zeros((2, 6))}
    _assert_full(jax.make_jaxpr(train)(params), "the mode start's L-BFGS")


def test_the_walk_sees_a_default_precision_product():
    """The check can fail: a product traced outside the context is reported."""
    jaxpr = jax.make_jaxpr(lambda a: jax.lax.scan(lambda c, _: (c @ a, None), a, None, length=2)[0])(jnp.eye(2))
    assert _precisions(jaxpr) == [None]
    with pytest.raises(AssertionError, match="1 of 1 products"):
        _assert_full(jaxpr, "a plain scan")
    with infer.full_precision():
        inner = jax.make_jaxpr(lambda a: jax.lax.scan(lambda c, _: (c @ a, None), a, None, length=2)[0])(jnp.eye(2))
    _assert_full(inner, "a scan traced in the context")
