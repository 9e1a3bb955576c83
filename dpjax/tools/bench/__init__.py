"""The benchmark harness behind ``dpjax bench``: one timing method for every benchmark.

* :mod:`dpjax.bench.harness`: timing (compile time apart, ``block_until_ready``, median and spread
  of repeats), compiled memory, machine and device description.
* :mod:`dpjax.bench.floor`: the ``jax.random`` floor for a number of variates.
* :mod:`dpjax.bench.case` and :mod:`dpjax.bench.cases`: the headline row of every mechanism family.
* :mod:`dpjax.bench.peers`: OpenDP, diffprivlib and python-dp (the ``bench`` extra), imported on use.
* :mod:`dpjax.bench.run`, :mod:`dpjax.bench.report`, :mod:`dpjax.bench.cli`: the ``dpjax bench`` command.
"""

from dpjax.bench.case import Case, Peer
from dpjax.bench.floor import rng_floor
from dpjax.bench.harness import Timing, machine_info, time_eager, time_host, time_jitted
from dpjax.bench.run import measure

__all__ = [
    "Case",
    "Peer",
    "Timing",
    "machine_info",
    "measure",
    "rng_floor",
    "time_eager",
    "time_host",
    "time_jitted",
]
