"""The datasets of dpjax's studies, reproductions, benchmarks and training example, in one place.

* :mod:`dpjax.datasets.builtin`: the built-in study datasets (``normal``, ``uniform``, ``lognormal``,
  ``zipf``, ``zipf_sample``), synthetic and generated from a seed; a study names them.
* :mod:`dpjax.datasets.papers`: the real datasets of the papers dpjax reproduces, read from a
  directory given by the caller, and their seeded synthetic stand-ins.
* :mod:`dpjax.datasets.training`: UCI Adult (shipped in ``adult/``, see ``adult/ADULT.md``) and
  MNIST from a CSV, as train/test splits for DP-SGD.
* :mod:`dpjax.datasets.zipf`: the Zipf-law histogram generator they share.

Nothing here downloads: the package never reads a data path by itself. Light to import: NumPy only.
"""

from dpjax._src.datasets.builtin import DATASET_NAMES, Dataset, load
from dpjax._src.datasets.training import LOG_COLUMNS, load_adult, load_mnist
from dpjax._src.datasets.zipf import zipf_histogram

__all__ = [
    "DATASET_NAMES",
    "LOG_COLUMNS",
    "Dataset",
    "load",
    "load_adult",
    "load_mnist",
    "zipf_histogram",
]
