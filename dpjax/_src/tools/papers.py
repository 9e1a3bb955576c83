"""Data of the papers dpjax reproduces (``dpjax reproduce``, benchmarks): the papers' real datasets
read from a directory the caller gives, and built-in stand-ins (synthetic, seeded) when it is not given.

Real files (``dpjax data fetch`` downloads them; ``dpjax data list`` names their sources):
``books.csv`` (Goodreads: ``average_rating`` and ``"  num_pages"``, 11,123 well-formed rows),
``adult.data`` + ``adult.test`` (UCI Adult: age and hours-per-week, 48,842 rows),
``mnist_5k.csv.gz`` (5,000 MNIST training images, 784 pixels then the label). The package never
reads a data path by itself.

Stand-ins (ours, not the papers' data; they have roughly the shape of each column, so the ratios to
the paper's numbers are only indicative):

* ratings: 11,123 values N(3.94, 0.35^2) clipped to [0, 5], rounded to 0.01, 25 of them 0.
* pages: 11,123 integers round(lognormal(log 300, 0.6)), 76 of them 0.
* ages: 48,842 integers 17 + round(Gamma(2.3, 9.4)), at most 90.
* hours: 48,842 integers, 47% exactly 40, the rest round(N(40, 17^2)) clipped to [1, 99].
* digits (for kNN): 1,797 points in 64 dimensions, values in [0, 16], 10 Gaussian clusters.
* item counts (free gap): Zipf-law counts with the item and occurrence totals of BMS-POS,
  Kosarak and T40I10D100K (see :data:`ITEMSETS`), each count at most the number of transactions,
  shuffled once (the stream order).
"""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import numpy as np

from dpjax._src.datasets.zipf import zipf_histogram

__all__ = [
    "COLUMNS",
    "ITEMSETS",
    "hotspots",
    "item_counts",
    "knn_points",
    "read_adult",
    "read_goodreads",
    "real_columns",
]

COLUMNS = ("ratings", "pages", "ages", "hours")

# name: (transactions, unique items, item occurrences, Zipf exponent of the stand-in). The totals
# are the datasets' published sizes (Ding et al. 2019, Table 2) and average transaction lengths
# (FIMI repository); the exponents are ours (T40I10D100K is a flat synthetic Quest dataset).
ITEMSETS = {
    "BMS-POS": (515_597, 1_657, 3_367_020, 1.0),
    "Kosarak": (990_002, 41_270, 8_019_015, 1.0),
    "T40I10D100K": (100_000, 942, 3_960_507, 0.5),
}


def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, *name.encode()])


def read_goodreads(data_dir: Path) -> dict[str, np.ndarray]:
    """``ratings`` and ``pages`` from ``books.csv`` (rows with the wrong number of fields skipped)."""
    ratings, pages = [], []
    with open(data_dir / "books.csv", newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        rating_col, pages_col = header.index("average_rating"), header.index("  num_pages")
        for row in reader:
            if len(row) != len(header):
                continue
            ratings.append(float(row[rating_col]))
            pages.append(float(row[pages_col]))
    return {"ratings": np.asarray(ratings), "pages": np.asarray(pages)}


def read_adult(data_dir: Path) -> dict[str, np.ndarray]:
    """``ages`` (column 0) and ``hours`` (column 12) of ``adult.data`` and ``adult.test``."""
    ages, hours = [], []
    for name in ("adult.data", "adult.test"):
        for line in (data_dir / name).read_text().splitlines():
            fields = [s.strip() for s in line.split(",")]
            if len(fields) != 15:  # blank lines and adult.test's "|1x3 Cross validator" header
                continue
            ages.append(float(fields[0]))
            hours.append(float(fields[12]))
    return {"ages": np.asarray(ages), "hours": np.asarray(hours)}


def _stand_in(name: str, seed: int) -> np.ndarray:
    rng = _rng(seed, name)
    if name == "ratings":
        x = np.round(np.clip(rng.normal(3.94, 0.35, 11_123), 0, 5), 2)
        x[rng.choice(x.size, 25, replace=False)] = 0.0
    elif name == "pages":
        x = np.round(rng.lognormal(np.log(300.0), 0.6, 11_123))
        x[rng.choice(x.size, 76, replace=False)] = 0.0
    elif name == "ages":
        x = np.minimum(17 + np.round(rng.gamma(2.3, 9.4, 48_842)), 90)
    elif name == "hours":
        x = np.clip(np.round(rng.normal(40.0, 17.0, 48_842)), 1, 99)
        x[rng.random(x.size) < 0.47] = 40.0
    else:
        raise ValueError(f"unknown column {name!r}")
    return x.astype(np.float64)


def real_columns(data_dir: Path | None, seed: int = 0) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The four real columns of Durfee (2023) and their source ("books.csv", "stand-in", ...).

    Each column comes from ``data_dir`` when its file is there, else from its stand-in.
    """
    columns: dict[str, np.ndarray] = {}
    sources: dict[str, str] = {}
    if data_dir is not None and (data_dir / "books.csv").exists():
        columns.update(read_goodreads(data_dir))
        sources.update(ratings="books.csv", pages="books.csv")
    if data_dir is not None and (data_dir / "adult.data").exists() and (data_dir / "adult.test").exists():
        columns.update(read_adult(data_dir))
        sources.update(ages="adult.data+test", hours="adult.data+test")
    for name in COLUMNS:
        if name not in columns:
            columns[name], sources[name] = _stand_in(name, seed), "stand-in"
    return columns, sources


def knn_points(data_dir: Path | None, seed: int = 0) -> tuple[np.ndarray, str]:
    """Points for the kNN study: MNIST 5k pixels (0..255) from ``data_dir``, else the digits stand-in."""
    if data_dir is not None and (data_dir / "mnist_5k.csv.gz").exists():
        with gzip.open(data_dir / "mnist_5k.csv.gz", "rt") as handle:
            rows = np.loadtxt(handle, delimiter=",", dtype=np.float32)
        return rows[:, :784], "MNIST 5k (mnist_5k.csv.gz, 784 pixels 0..255)"
    rng = _rng(seed, "digits")
    centres = rng.uniform(0, 16, (10, 64))
    x = np.clip(np.round(centres[rng.integers(0, 10, 1_797)] + rng.normal(0, 3, (1_797, 64))), 0, 16)
    return x.astype(np.float32), "stand-in: 1,797 points in 64-D, 10 Gaussian clusters, values 0..16"


def item_counts(name: str, seed: int = 0) -> np.ndarray:
    """Stand-in item counts for a free-gap dataset, in a fixed random (stream) order."""
    transactions, items, occurrences, exponent = ITEMSETS[name]
    counts = zipf_histogram(_rng(seed, name), items, occurrences, exponent)
    return np.minimum(counts, transactions).astype(np.float64)


def hotspots(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` users around 20 hotspots (sd 3 km) in a 100 km square, float32 metres, and the centres."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(10_000, 90_000, (20, 2))
    which = rng.integers(0, 20, n)
    x = centres[which] + rng.normal(0, 3_000, (n, 2))
    return x.astype(np.float32), centres.astype(np.float32)
