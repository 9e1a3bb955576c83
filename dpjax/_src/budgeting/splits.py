"""Splitting one user's per-query budget into c rounds (Liang and Yi, Sec. 7, Fact 6.2).

User ``i`` with per-query allotment ``rho_i`` spends ``r_{i,j} = rho_i * frac_j`` in round ``j``.

* ``"even"``: ``frac_j = 1/c``, cumulative fraction ``j/c`` (the paper's "c4", "c64").
* ``"doubling"``: ``frac_j = 2^(j-1) / (2^c - 1)``, cumulative ``(2^j - 1)/(2^c - 1)`` ("log-c10").

A user that releases in rounds ``1..e`` is charged exactly ``rho_i * cumfrac[e]``; ``cumfrac[0] = 0``
and ``cumfrac[c] = 1`` hold exactly, so survivors are charged exactly ``rho_i``. The largest possible
single-query saving is ``1 - frac_1``.
"""

from __future__ import annotations

from typing import Literal, NamedTuple, TypeAlias, get_args

import numpy as np

from dpjax._src.host_checks import check_choice, check_int

__all__ = [
    "Split",
    "SplitSchedule",
    "split_schedule",
]

Split: TypeAlias = Literal["even", "doubling"]
"""How PIE splits each user's budget over its rounds (static): evenly, or doubling."""
_SPLITS: tuple[Split, ...] = get_args(Split)
_MAX_ROUNDS = 32767  # rounds are stored per user as int16


class SplitSchedule(NamedTuple):
    """One user's budget over c rounds, as fractions of the per-query allotment (float64).

    Attributes:
      frac: (c,) the fraction ``frac_j`` spent in round ``j``.
      cumfrac: (c + 1,) the fraction spent by the end of round ``j`` (``cumfrac[0] = 0``,
        ``cumfrac[c] = 1``).
    """

    frac: np.ndarray
    cumfrac: np.ndarray


def split_schedule(c: int, kind: Split = "even") -> SplitSchedule:
    """Returns ``(frac, cumfrac)``: (c,) round fractions and (c + 1,) cumulative fractions, float64.

    Example:
      >>> frac, cumfrac = split_schedule(4)
      >>> cumfrac.tolist()
      [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    c = check_int(c, "c", minimum=1, maximum=_MAX_ROUNDS)
    check_choice(kind, "split", _SPLITS)
    j = np.arange(1, c + 1, dtype=np.float64)
    if kind == "even":
        cumfrac = np.concatenate([[0.0], j / c])
    else:
        # (2^j - 1)/(2^c - 1) = (2^(j-c) - 2^(-c)) / (1 - 2^(-c)), free of overflow for any c.
        cumfrac = np.concatenate([[0.0], (np.exp2(j - c) - np.exp2(-c)) / (1 - np.exp2(-c))])
    cumfrac[-1] = 1.0
    return SplitSchedule(np.diff(cumfrac), cumfrac)


def running_mean_weights(cumfrac: np.ndarray) -> np.ndarray:
    """(c,) weights ``frac_j / cumfrac_j`` of the inverse-variance running mean update.

    ``mean_j = mean_{j-1} + w_j (v_j - mean_{j-1})`` equals ``sum_{s<=j} r_s v_s / sum_{s<=j} r_s``
    (Fact 6.2); ``w_1 = 1`` exactly, so after one round the mean *is* the release (which makes the
    c = 1 equivalences with the baselines exact).
    """
    w = np.diff(cumfrac) / cumfrac[1:]
    w[0] = 1.0
    return w
