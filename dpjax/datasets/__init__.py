"""The datasets of dpjax's studies, benchmarks and training example.

* :func:`load` and :data:`DATASET_NAMES`: the built-in study datasets (``normal``, ``uniform``,
  ``lognormal``, ``zipf``, ``zipf_sample``), synthetic and generated from a seed; a study names them
  (:class:`Dataset`).
* :func:`load_adult` and :func:`load_mnist`: UCI Adult (shipped with the package) and MNIST from a CSV,
  as train/test splits for DP-SGD (:data:`LOG_COLUMNS`: Adult's columns taken in log scale).
* :func:`zipf_histogram`: the Zipf-law histogram generator they share.

The papers' real datasets (Goodreads, Adult's raw files, the MNIST subset) are the ``dpjax`` commands'
business: ``dpjax data fetch`` downloads them. Nothing here downloads, and the package never reads a
data path by itself. Light to import: NumPy only.
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
