"""Reproductions of the numbers of the five papers dpjax implements (``dpjax reproduce``).

Each module runs one paper's experiments with dpjax's mechanisms and returns a
:class:`~dpjax._src.tools.reproduce.result.Reproduction`: every reproduced number beside the paper's
value (or claim), with its standard error and the ratio ours / paper.

* ``uqe`` (seed 000): Durfee (2023), Table 1 and Figure 3.
* ``jointexp`` (seed 001): Gillenwater, Joseph, Kulesza (2021), error vs m and runtime.
* ``freegap`` (seed 002): Ding, Wang, Zhang, Kifer (2019), gap estimators and adaptivity.
* ``topk`` (seed 003): Durfee and Rogers (2019), Figure 1 and the accuracy claims.
* ``budgeting`` (seed 004): Liang and Yi, adaptive privacy budgeting, savings trends.

Beside the seeds (issue 47: newer mechanisms dpjax implements, not seed papers):

* ``approxquantiles``: Kaplan, Schnapp, Stemmer (2022), AQ's error vs JointExp's as m grows, runtimes.
* ``jointtopk``: Gillenwater, Joseph, Munoz Medina, Ribero Diaz (2022), joint top-k vs peeling.
"""

from dpjax._src.tools.reproduce import approxquantiles, budgeting, freegap, jointexp, jointtopk, topk, uqe
from dpjax._src.tools.reproduce.result import Reproduction, Row

REPRODUCTIONS = {
    "uqe": uqe,
    "jointexp": jointexp,
    "freegap": freegap,
    "topk": topk,
    "budgeting": budgeting,
    "approxquantiles": approxquantiles,
    "jointtopk": jointtopk,
}
SEEDS = {"000": "uqe", "001": "jointexp", "002": "freegap", "003": "topk", "004": "budgeting"}
# The reproductions beside the seeds: what --list says in place of a seed number.
BESIDE = {"approxquantiles": "beside the seeds", "jointtopk": "beside the seeds"}

__all__ = [
    "BESIDE",
    "REPRODUCTIONS",
    "SEEDS",
    "Reproduction",
    "Row",
]
