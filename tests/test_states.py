"""The metastable states of a run (renormpp.mcstats.states) on series whose states and transitions are known: a
two-state switching process, chains held at their own levels, and stationary or drifting series that have one."""
import numpy as np
import pytest
from series import ar1

from renormpp import mcstats as ms


def _ar1_chains(phi, chains, n, seed):
    return np.stack([ar1(phi, n, seed=seed * 100 + c) for c in range(chains)])


def _switching(chains, n, dwell, seed):
    """Two states (0, 1), each chain starting in state c % 2 and switching with probability 1/dwell per draw."""
    rng = np.random.default_rng(seed)
    flips = rng.random((chains, n)) < 1 / dwell
    flips[:, 0] = False
    return (np.arange(chains)[:, None] % 2 + np.cumsum(flips, axis=1)) % 2


@pytest.mark.parametrize("seed", range(5))
def test_the_transitions_of_a_two_state_process_are_counted(seed):
    """Levels 0 and 5 (AR(1) noise of unit variance, tau_int 39), a mean dwell of 5000 draws, blocks of 500: every
    transition the blocks can see is found (the counts per chain are those of the process's state in the majority of
    each block: a visit shorter than a block is averaged away), and the weights are the shares of time."""
    chains, n = 4, 20_000
    state = _switching(chains, n, 5000, seed)
    x = _ar1_chains(0.95, chains, n, seed) + 5.0 * state
    found = ms.states({"x": x, "other": _ar1_chains(0.95, chains, n, seed + 50)})
    majority = state.reshape(chains, -1, found.block).mean(axis=2) > 0.5
    true = np.sum(majority[:, 1:] != majority[:, :-1], axis=1)
    assert found.count == 2
    assert np.abs(found.transitions - true).max() <= 1, (found.transitions, true)
    level = np.argsort(found.centers[:, 0])  # state of level 0, state of level 5
    assert found.centers[level, 0] == pytest.approx([0, 5], abs=0.5)
    assert found.weights[level[1]] == pytest.approx(state.mean(), abs=0.05)
    assert not found.held and found.visits.sum() == found.transitions.sum() + chains


def test_chains_held_at_their_own_levels_are_states_without_transitions():
    """Four chains at levels 0, 5, 10, 15 (block noise about 0.4 at blocks of 500 draws): four states, none left."""
    x = _ar1_chains(0.95, 4, 20_000, 1) + 5.0 * np.arange(4)[:, None]
    found = ms.states(x)
    assert found.count == 4 and found.held and found.transitions.tolist() == [0, 0, 0, 0]
    assert np.sort(found.centers[:, 0]) == pytest.approx([0, 5, 10, 15], abs=0.5)
    assert np.allclose(np.sort(found.occupancy, axis=1)[:, -1], 1.0)
    assert "each chain holds its state, so their weights are unknown" in found.verdict()


def test_a_stationary_or_drifting_series_is_one_state():
    """No false states: 100 runs of 4 stationary AR(1) chains (tau_int 99) each make one state, as does a chain that
    drifts by 10 block noises over its length (a slow drift inside one state joins its blocks)."""
    counts = [ms.states(_ar1_chains(0.98, 4, 8000, seed)).count for seed in range(100)]
    assert counts == [1] * 100
    drift = _ar1_chains(0.98, 2, 20_000, 7) + np.linspace(0, 6, 20_000)
    assert ms.states(drift).count == 1


def test_a_quantity_that_does_not_move_is_left_out_of_the_distance():
    x = _ar1_chains(0.5, 2, 4000, 3)
    found = ms.states({"moves": x, "constant": np.ones_like(x)})
    assert found.count == 1 and found.noise[1] == np.inf and found.centers[0, 1] == 1.0


def test_bad_input_is_refused_with_the_problem_named():
    x = _ar1_chains(0.5, 2, 100, 0)
    with pytest.raises(ValueError, match="need at least 3"):
        ms.states(x, block=50)
    with pytest.raises(ValueError, match="NaN or inf"):
        ms.states(np.where(x > 1, np.nan, x))
    with pytest.raises(ValueError, match="same shape"):
        ms.states({"a": x, "b": x[:, :50]})
    with pytest.raises(ValueError, match="threshold must be positive"):
        ms.states(x, threshold=0)
    with pytest.raises(ValueError, match=r"\(chain, draw\) or \(chain, draw, quantity\)"):
        ms.states(np.zeros((2, 3, 4, 5)))


def test_a_run_s_states_are_judged_after_its_thermalization_cut():
    """renormpp run's per-point states (stages.metastable_states) on draws of eps_g and a 2 x 2 overlap: two chains
    held at two levels of overlap[1,1] after a transient that decays from far above both. The transient is cut away
    (it would otherwise be a third state, held for blocks), and the two levels are two states without transitions."""
    from renormpp.experiments.stages import metastable_states

    n = 12_000
    transient = 20.0 * np.exp(-np.arange(n) / 600)
    eps = _ar1_chains(0.9, 2, n, 4) * 0.01 + 0.05 + 0.01 * transient
    overlap = np.zeros((2, n, 2, 2))
    overlap[..., 0, 0] = 1 + 0.01 * _ar1_chains(0.9, 2, n, 5)
    overlap[..., 1, 1] = 1 + np.array([0.0, 0.5])[:, None] + 0.01 * _ar1_chains(0.9, 2, n, 6) + 0.1 * transient
    found = metastable_states({"eps_g": eps, "overlap": overlap})
    assert found.cut > 1000 and found.count == 2 and found.held
    assert found.names == ("eps_g", "overlap[0,0]", "overlap[0,1]", "overlap[1,1]")
    assert metastable_states({"eps_g": eps[:, :2], "overlap": overlap[:, :2]}) is None
