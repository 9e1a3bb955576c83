"""Monte Carlo studies: the study API, the chunked ``vmap`` runner, metrics, datasets and the catalog.

* :func:`run_study` runs a :class:`Study` (mechanisms x datasets x parameter grid, measured by
  :mod:`~dpjax._src.studies.metrics`) and returns a tidy table with confidence intervals, the run record
  and a figure (:mod:`dpjax._src.studies.study`).
* :func:`monte_carlo` is the runner underneath: ``f(key_i, ...)`` for T keys, chunked.
* :func:`studies` lists the registered studies that ``dpjax study`` runs.
"""

from dpjax._src.datasets.builtin import Dataset
from dpjax._src.interrupt import Interrupted
from dpjax._src.studies import metrics
from dpjax._src.studies.catalog import studies
from dpjax._src.studies.checkpoint import CheckpointMismatch
from dpjax._src.studies.definition import Mechanism, Study
from dpjax._src.studies.registry import register
from dpjax._src.studies.result import StudyResult
from dpjax._src.studies.runner import monte_carlo, trial_keys
from dpjax._src.studies.study import run_study
from dpjax._src.studies.theory import Exponential, HalfNormal

__all__ = [
    "CheckpointMismatch",
    "Dataset",
    "Exponential",
    "HalfNormal",
    "Interrupted",
    "Mechanism",
    "Study",
    "StudyResult",
    "metrics",
    "monte_carlo",
    "register",
    "run_study",
    "studies",
    "trial_keys",
]
