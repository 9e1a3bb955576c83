"""Exact laws of the sparse-vector mechanisms, test oracles written from the papers' formulas."""

import numpy as np


def gumbel_halting_log_probabilities(queries, threshold, epsilon: float, *, sensitivity: float = 1.0):
    """Exact log-law of Gumbel AboveThreshold with ``epsilon1 = epsilon2 = epsilon`` (Durfee 2023,
    Lemma 3.3), as a NumPy array of length ``n + 1``: entry ``i`` is ``log P(index = i)`` for
    ``i < n`` and the last entry is ``log P(index = -1)``. Computed in float64."""
    q = np.asarray(queries, dtype=np.float64) * (epsilon / sensitivity)
    t = float(threshold) * (epsilon / sensitivity)
    # log(e^t + sum_{i<=k} e^{q_i}) for k = 0..n (k = 0: e^t alone).
    log_den = np.logaddexp.accumulate(np.concatenate([[t], q]))
    log_halt = q + t - log_den[1:] - log_den[:-1]
    return np.concatenate([log_halt, [t - log_den[-1]]])
