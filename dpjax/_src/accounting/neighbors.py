"""The neighboring relation: one enum for every family that offers a choice.

* ``Neighbors.SWAP``: the datasets have the same size and differ in one record (replace one
  record; "swap" in Gillenwater, Joseph and Kulesza 2021 and Durfee 2023, "bounded DP").
* ``Neighbors.ADD_REMOVE``: one dataset is the other with one record added ("unbounded DP").

A mechanism that takes ``neighbors`` calibrates its noise to the relation, so that the epsilon of
its guarantee is the same under either; its companion takes the same argument. Families whose
calibration does not depend on the relation (additive noise, selection, SVT and top-k take the
sensitivity or the contribution bound under the caller's relation; the unbounded quantiles are
private under both, Durfee 2023 Lemma B.1) take no ``neighbors`` argument.
"""

from __future__ import annotations

import enum
from typing import Literal, TypeAlias

__all__ = [
    "Neighbors",
    "NeighborsLike",
]


class Neighbors(enum.StrEnum):
    """The neighboring relation (a ``str`` enum: ``Neighbors.SWAP == "swap"``)."""

    SWAP = "swap"
    ADD_REMOVE = "add_remove"

    @classmethod
    def check(cls, value: Neighbors | str, name: str = "neighbors") -> Neighbors:
        """``value`` as a :class:`Neighbors` (an enum member or its string value), else ValueError."""
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(repr(m.value) for m in cls)
            message = f"{name} must be a Neighbors member or one of {choices}, got {value!r}."
            raise ValueError(message) from None


NeighborsLike: TypeAlias = Neighbors | Literal["swap", "add_remove"]
"""A :class:`Neighbors` member or its string value (what :meth:`Neighbors.check` accepts)."""
