"""What a benchmark row is: a mechanism's release function on fixed data, its noise, and its peers.

Each mechanism family's module in :mod:`dpjax._src.tools.bench.cases` returns :class:`Case` objects for a
size scale; :mod:`dpjax._src.tools.bench.run` times them all the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

__all__ = [
    "Case",
    "Peer",
    "power_label",
    "scaled",
]


@dataclasses.dataclass(frozen=True)
class Peer:
    """Another implementation of the same release, timed on the host.

    Attributes:
      name: what is timed, e.g. ``"OpenDP make_private_quantile"``.
      library: the distribution whose version is recorded (``"numpy"``, ``"opendp"``, ...).
      single: builds the call that makes one release from the raw data (everything a user pays for
        one release); raises ``ImportError`` when the library is not installed (the peer is then
        reported as skipped).
      repeated: builds the call that makes one more release when releases are repeated on the same
        data (state built once, e.g. diffprivlib's mechanism object), if that is faster; ``None``
        when ``single`` already is the peer's fastest repeated path.
      note: the input path (dtype, container, bounds) and anything that makes the comparison
        unequal (e.g. a bound given instead of estimated).
    """

    name: str
    library: str
    single: Callable[[], Callable[[], Any]]
    repeated: Callable[[], Callable[[], Any]] | None = None
    note: str = ""


@dataclasses.dataclass(frozen=True)
class Case:
    """One headline benchmark row.

    Attributes:
      family: the mechanism family (``"selection"``, ``"quantiles"``, ...).
      mechanism: the public function timed, e.g. ``"selection.gumbel_top_k"``.
      setting: the data, sizes and parameters, in words.
      release: ``release(key, *args)`` makes one release (keyword arguments for every parameter).
      args: the device arrays ``release`` takes after the key (shared by every Monte Carlo release).
      eager_single: time the single release as an eager call (the mechanism does host work per call,
        e.g. binning concrete data) instead of a compiled ``jax.jit(release)``.
      releases: Monte Carlo releases per batched call at scale 1 (``jit(vmap(release))`` over keys);
        0 for a single-release-only row.
      bytes_per_release: working memory of one vmapped release, to cap the batch by device memory.
      noise: the ``jax.random`` sampler of the RNG floor (see :mod:`dpjax._src.tools.bench.floor`).
      variates: noise variates per release, or a function of the batched output (of the single
        output when ``releases == 0``) returning the mean variates per release.
      variates_note: what the variate count counts.
      peers: other implementations, timed per release on the host.
      method: the ``method`` argument the release passes (``"auto"`` for the default, ``""`` for a
        mechanism with one kernel).
      methods: the kernel that runs for one release and for the Monte Carlo batch (what ``"auto"``
        chooses there, :mod:`dpjax._src.auto`).
      model: the model whose gradients a training row aggregates (``""`` elsewhere).
      host_data: arrays the release reads that are not in ``args`` (data it closes over, e.g. the
        NumPy data an eager call bins), counted in the bytes of its limit.
    """

    family: str
    mechanism: str
    setting: str
    release: Callable
    args: tuple = ()
    eager_single: bool = False
    releases: int = 0
    bytes_per_release: int = 0
    noise: str = "uniform"
    variates: float | Callable[[Any], float] = 1.0
    variates_note: str = ""
    peers: tuple[Peer, ...] = ()
    method: str = ""
    methods: tuple[str, str] = ("one kernel", "one kernel")
    model: str = ""
    host_data: tuple = ()


def scaled(headline: int, scale: float, minimum: int) -> int:
    """A size at ``scale`` times its headline value, at least ``minimum``."""
    return max(minimum, round(headline * scale))


def power_label(n: int) -> str:
    """``10^6`` for exact powers of ten, ``2.5e5`` style otherwise (for settings in words)."""
    text = f"{n:.0e}"
    mantissa, exponent = text.split("e")
    if mantissa == "1" and 10 ** int(exponent) == n:
        return f"10^{int(exponent)}"
    return f"{n:,}" if n < 10_000 else f"{n:.3g}"
