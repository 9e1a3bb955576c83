"""The benchmark harness behind ``dpjax bench``: one timing method for every benchmark.

* :mod:`dpjax._src.tools.bench.harness`: timing (compile time apart, ``block_until_ready``, median and
  spread of repeats), compiled memory, machine and device description.
* :mod:`dpjax._src.tools.bench.floor`: the ``jax.random`` floor for a number of variates.
* :mod:`dpjax._src.tools.bench.case` and :mod:`dpjax._src.tools.bench.cases`: the headline row of every
  mechanism family.
* :mod:`dpjax._src.tools.bench.peers`: OpenDP, diffprivlib and python-dp (the ``bench`` extra),
  imported on use.
* :mod:`dpjax._src.tools.bench.run`, :mod:`dpjax._src.tools.bench.report`,
  :mod:`dpjax._src.tools.bench.cli`: the ``dpjax bench`` command.
"""

from dpjax._src.tools.bench.case import Case, Peer
from dpjax._src.tools.bench.floor import rng_floor
from dpjax._src.tools.bench.harness import Timing, machine_info, time_eager, time_host, time_jitted
from dpjax._src.tools.bench.run import measure

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
