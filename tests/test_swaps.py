"""The reflection move between states (renormpp.infer.swaps) against an exact posterior.

The exact check: one erf neuron (N1 = 1) on N0 = 2 inputs, P = 4 points, D = 1, T = 0.05, v integrated out. Its
posterior of w has two pairs of modes (w and -w), one in the region |w1| > |w2| (weight 0.2477 by quadrature) and one
in |w1| < |w2|, separated by a barrier of about 10 nats that kinetic Langevin does not cross in the run. The weight
of |w1| > |w2| from chains started in that region, with the reflection w -> (w2, w1) (the pair of directions e1, e2)
attempted before every draw, must match the quadrature of the closed form (an independent computation: the log
marginal likelihood of one neuron, written out below, not the package's); the same chains without the move stay where
they are in after the warmup (weight 0 or 1 per chain), which the same comparison rejects by a z of about 75 (the move's error bar, 0.008).

Measured on correct code: 0.2507 +- 0.0080 against 0.2477 (z = 0.4). Planted bug, checked: with the Metropolis test
dropped (every move accepted) the weight is 0.480 +- 0.005 and ``test_weight_matches_quadrature`` fails (z about 50).
"""
from __future__ import annotations

import functools

import jax
import numpy as np
import pytest
from numpyro.infer import MCMC, NUTS
from scipy.special import erf, logsumexp

import renormpp as rp
from renormpp.infer import StateSwaps, class_contrasts
from renormpp.infer.swaps import _select, log_ratios, reflect, reflection_normals
from renormpp.mcstats import errors
from stat_bounds import assert_z_within, z_bound

T = 0.05
X = np.array([[2.158, 2.316], [-2.094, -6.244], [5.193, -2.517], [5.123, 4.003]])
Y = np.array([1.421, 0.709, -0.64, 1.32])[:, None]
START = np.array([-1.7, 0.77])  # the mode of the region |w1| > |w2|


def log_posterior(w):
    """log p(w | Y) + const of one neuron (N1 = lambda1 = lambda0 = 1), closed form: A = T + s s^T,
    y^T A^-1 y = (|y|^2 - (s.y)^2/(T + |s|^2))/T, log det A = P log T + log(1 + |s|^2/T)."""
    s = erf(w @ X.T / np.sqrt(2))
    ss, sy = np.sum(s**2, axis=-1), s @ Y[:, 0]
    return -0.5 * np.sum(w**2, axis=-1) + sy**2 / (2 * T * (T + ss)) - 0.5 * np.log1p(ss / T)


def exact_weight() -> float:
    """The posterior weight of |w1| > |w2|, by quadrature on a grid of spacing 0.01 over [-8, 8]^2 (the mass outside
    is below 1e-10)."""
    g = np.linspace(-8, 8, 1601)
    W = np.stack(np.meshgrid(g, g, indexing="ij"), axis=-1)
    L = log_posterior(W)
    A = np.abs(W[..., 0]) > np.abs(W[..., 1])
    return float(np.exp(logsumexp(L[A]) - logsumexp(L)))


def run(kernel, seed=0, chains=4, draws=3000):
    model = functools.partial(rp.models.one_hidden_layer, np.float32(X), np.float32(Y), N1=1, T=T, integrate_v=True)
    mcmc = MCMC(kernel(model), num_warmup=300, num_samples=draws, num_chains=chains, chain_method="vectorized",
                progress_bar=False)
    mcmc.run(jax.random.PRNGKey(seed), init_params={"w": np.tile(START.astype(np.float32), (chains, 1, 1))})
    w = np.asarray(mcmc.get_samples(group_by_chain=True)["w"], dtype=float)[:, :, 0, :]
    return (np.abs(w[..., 0]) > np.abs(w[..., 1])).astype(float), mcmc


def inner(model):
    return rp.infer.KineticLangevin(model, step_size=0.05, inner_steps=10, pooled_adaptation=True)


def test_quadrature_has_two_separated_modes():
    """The check's posterior is what the test needs: unequal weights, and the mode of each region far above the
    line |w1| = |w2| between them (the barrier)."""
    g = np.linspace(-8, 8, 1601)
    W = np.stack(np.meshgrid(g, g, indexing="ij"), axis=-1)
    L = log_posterior(W)
    A = np.abs(W[..., 0]) > np.abs(W[..., 1])
    line = np.abs(np.abs(W[..., 0]) - np.abs(W[..., 1])) < 0.02
    assert min(L[A].max(), L[~A].max()) - L[line].max() > 8
    assert 0.2 < exact_weight() < 0.3


@pytest.mark.parametrize("momentum", ["refresh", "keep"])
def test_weight_matches_quadrature(momentum):
    """The weight of |w1| > |w2| with the reflection move against the quadrature (z within the bound of 2
    comparisons); the move is accepted at the rate the quadrature gives, E min(1, p(Rw)/p(w)) = 0.139 (within 0.03).
    Fails on the planted bug (no Metropolis test): weight about 0.5."""
    x, mcmc = run(lambda m: StateSwaps(inner(m), np.eye(2), neurons="all", momentum=momentum))
    est = errors.error_of_mean(x)
    assert est.reliable
    assert_z_within((est.mean - exact_weight()) / est.error, n=2, what=f"weight of |w1| > |w2| ({momentum})")
    rate = float(np.mean(np.asarray(mcmc.last_state.swap_rate)))
    g = np.linspace(-8, 8, 1601)
    W = np.stack(np.meshgrid(g, g, indexing="ij"), axis=-1)
    L = log_posterior(W)
    p = np.exp(L - logsumexp(L))
    expected = float(np.sum(p * np.minimum(1.0, np.exp(log_posterior(W[..., ::-1]) - L))))
    assert abs(rate - expected) < 0.03, (rate, expected)


def test_without_the_move_chains_stay():
    """Without the move the chains almost never cross the barrier: each chain stays in the region where the warmup
    left it (which depends on the trajectory: a chain may cross in the warmup's first large steps), with a handful of
    crossings at most in 4 x 3000 draws, while with the move each chain crosses on about one draw in seven. So the
    weight such chains report is near 0 or 1 per chain, far from the quadrature's 0.2477 (the test can fail)."""
    x, _ = run(inner)
    without = np.mean(np.diff(x, axis=1) != 0)  # crossings per draw
    with_move, _ = run(lambda m: StateSwaps(inner(m), np.eye(2), neurons="all"), chains=2, draws=1000)
    crossings = np.mean(np.diff(with_move, axis=1) != 0)
    assert crossings > 0.05 and without < crossings / 50, (without, crossings)
    assert abs(1.0 - exact_weight()) / 0.01 > z_bound(2)  # any error bar below 0.01 (the move's run: 0.008)


def test_reflection_is_an_orthogonal_involution_swapping_the_directions():
    rng = np.random.default_rng(0)
    U = rng.standard_normal((3, 7))
    U /= np.linalg.norm(U, axis=1, keepdims=True)
    normals = reflection_normals(U)
    assert normals.shape == (3, 7)
    n = normals[0]  # the pair (0, 1)
    R = np.asarray(reflect(np.eye(7), n, np.ones(7, bool)))
    np.testing.assert_allclose(R @ R, np.eye(7), atol=1e-6)
    np.testing.assert_allclose(R @ R.T, np.eye(7), atol=1e-6)
    np.testing.assert_allclose(R @ U[0], U[1], atol=1e-6)
    W = rng.standard_normal((5, 7))
    mask = np.array([True, False, True, False, False])
    Wr = np.asarray(reflect(W, n, mask))
    np.testing.assert_allclose(Wr[~mask], W[~mask], atol=1e-6)
    np.testing.assert_allclose(Wr[mask], W[mask] @ R.T, atol=1e-6)


def test_aligned_selection_is_the_same_at_both_ends():
    """The proposal is symmetric: the neurons of largest |w.n| at w are those at Rw, so R undoes the move."""
    rng = np.random.default_rng(1)
    W = rng.standard_normal((20, 6))
    n = rng.standard_normal(6)
    n /= np.linalg.norm(n)
    key = jax.random.PRNGKey(0)
    mask = np.asarray(_select(W, n, key, "aligned", 3))
    W2 = np.asarray(reflect(W, n, mask))
    np.testing.assert_array_equal(np.asarray(_select(W2, n, key, "aligned", 3)), mask)
    np.testing.assert_allclose(np.asarray(reflect(W2, n, mask)), W, atol=1e-6)
    assert mask.sum() == 3


def test_log_ratios_against_the_closed_form():
    """log_ratios of the single pair (e1, e2) is log p(Rw) - log p(w) of the closed form."""
    w = START[None]
    got = log_ratios(lambda W: -log_posterior_jax(W), w, reflection_normals(np.eye(2)), selection="all")
    np.testing.assert_allclose(got, log_posterior(w[:, ::-1]) - log_posterior(w), rtol=1e-6)


def log_posterior_jax(W):
    import jax.numpy as jnp
    from jax.scipy.special import erf as jerf

    s = jerf(W @ jnp.asarray(X).T / np.sqrt(2))[0]
    ss, sy = jnp.sum(s**2), s @ jnp.asarray(Y[:, 0])
    return -0.5 * jnp.sum(W**2) + sy**2 / (2 * T * (T + ss)) - 0.5 * jnp.log1p(ss / T)


def test_class_contrasts_and_bad_input():
    Xc = np.array([[1.0, 0, 0], [3, 0, 0], [0, 2, 0], [0, 0, 5]])
    Yc = np.eye(3)[[0, 0, 1, 2]]
    U = class_contrasts(Xc, Yc)
    assert U.shape == (6, 3)
    np.testing.assert_allclose(np.linalg.norm(U, axis=1), 1.0)
    np.testing.assert_allclose(U[0], np.array([2.0, -2, 0]) / np.sqrt(8))
    np.testing.assert_allclose(U[1], -U[0])
    with pytest.raises(ValueError, match="two classes"):
        class_contrasts(Xc, np.eye(3)[[0, 0, 0, 0]])
    with pytest.raises(ValueError, match="same number of rows"):
        class_contrasts(Xc, Yc[:3])
    with pytest.raises(ValueError, match="neurons must be one of"):
        StateSwaps(None, np.eye(2), neurons="best")
    with pytest.raises(ValueError, match="momentum"):
        StateSwaps(None, np.eye(2), momentum="reflect")
    with pytest.raises(ValueError, match="two or more"):
        StateSwaps(None, np.eye(2)[:1])
    with pytest.raises(ValueError, match="every"):
        StateSwaps(None, np.eye(2), every=0)
    model = functools.partial(rp.models.one_hidden_layer, np.float32(X), np.float32(Y), N1=1, T=T, integrate_v=True)
    with pytest.raises(ValueError, match="N0 = 3"):
        MCMC(StateSwaps(inner(model), np.eye(3)), num_warmup=1, num_samples=1, progress_bar=False).run(
            jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="k=2"):
        MCMC(StateSwaps(inner(model), np.eye(2), k=2), num_warmup=1, num_samples=1, progress_bar=False).run(
            jax.random.PRNGKey(0))


def test_the_move_keeps_the_inner_kernels_adaptive_warmup():
    """A sweep chooses the adaptive warmup by the kernel's own declaration (renormpp.infer.wrapper), so wrapping the
    default kernel in the move keeps it: the warmup reads and moves the inner kernel's schedule through the wrapper.
    (With the choice made by hasattr(sampler, "schedule") the move silently turned the adaptive warmup off.)"""
    from types import SimpleNamespace

    from renormpp.experiments import stages
    from renormpp.infer import AdaptiveWarmup, adapts_warmup

    model = functools.partial(rp.models.one_hidden_layer, np.float32(X), np.float32(Y), N1=1, T=T, integrate_v=True)
    swaps = StateSwaps(inner(model), np.eye(2), neurons="all")
    assert adapts_warmup(swaps) and adapts_warmup(swaps.inner)
    assert not adapts_warmup(NUTS(model))
    chains = rp.infer.Chains(swaps, num_chains=2)
    state = chains.init(jax.random.PRNGKey(0), 200, init_params={"w": np.tile(START.astype(np.float32), (2, 1, 1))})
    point = SimpleNamespace(sampler=SimpleNamespace(warmup_adapts=lambda: True, num_warmup=200))
    warm = stages.adaptive_warmup(point, chains, state)
    assert isinstance(warm, AdaptiveWarmup)
    assert warm.schedule(state) == swaps.inner.schedule(state.inner) == (50, 150, 200)
    moved = swaps.reschedule(state, 40, 120, 160)
    assert swaps.inner.schedule(moved.inner) == (40, 120, 160)
    assert stages.warmup_end(chains, moved, 200) == 160
