"""dpjax._src.accounting.bounded_range: the DDR20 composition of bounded-range mechanisms, on the host
against the paper's grid search, and in the graph against the host optimum."""

import jax
import numpy as np

from dpjax._src.accounting.bounded_range import (
    composition_delta,
    composition_epsilon,
    optimal_composition_epsilon,
)


def test_optimal_composition_matches_paper_grid_and_is_valid():
    table = {1: 1.0, 2: 0.5, 3: 0.343333, 5: 0.23, 10: 0.15, 20: 0.10, 29: 0.0844828}
    for k, want in table.items():
        assert abs(optimal_composition_epsilon(1.0, 1e-6, k, grid=True) - want) < 1e-5
        best = optimal_composition_epsilon(1.0, 1e-6, k)
        assert best >= want - 1e-9 and best <= want + 0.011
        assert composition_delta(best, 1.0, k) <= 1e-6


def test_in_graph_composition_budget_is_valid_and_near_optimal():
    # float32 bisection with the rounding margin: never above the float64 optimum (so the
    # composition is (epsilon, delta)-DP), and within 1e-3 of it; delta = 0 gives basic composition.
    for k in (2, 5, 29):
        budget = jax.jit(lambda eps, delta, k=k: composition_epsilon(eps, delta, k, np.dtype(np.float32)))
        for epsilon, delta in ((1.0, 1e-6), (0.3, 1e-9), (4.0, 1e-3)):
            got = float(budget(epsilon, delta))
            best = optimal_composition_epsilon(epsilon, delta, k)
            assert composition_delta(got, epsilon, k) <= delta
            assert best * (1 - 1e-3) <= got <= best + 1e-8
        assert float(budget(1.0, 0.0)) == float(np.float32(1.0) / np.float32(k))


def test_optimal_composition_epsilon_is_the_largest_valid_budget():
    # The calibration rule of every dpjax calibrator: valid, and 0.1% more is not (or it is epsilon).
    for epsilon in (0.01, 0.3, 4.0):
        for delta in (1e-9, 1e-3):
            for k in (2, 50):
                best = optimal_composition_epsilon(epsilon, delta, k)
                assert composition_delta(best, epsilon, k) <= delta
                assert best == epsilon or composition_delta(best * (1 + 1e-3), epsilon, k) > delta
