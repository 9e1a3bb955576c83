"""Builds ``adult.npz`` (shipped with dpjax) from the UCI Adult files ``adult.data`` and ``adult.test``.

Usage: ``python dpjax/datasets/adult/make_adult.py DIR`` where DIR holds the two original files
(``adult.test`` has a one-line header and labels ending in "."). Output, in this folder:

* ``categorical``: uint8 [48842, 8], the category index of workclass, education, marital-status,
  occupation, relationship, race, sex, native-country ("?" is a category of its own);
* ``numeric``: int32 [48842, 5], the raw age, education-num, capital-gain, capital-loss and
  hours-per-week (fnlwgt, a census sampling weight, is dropped);
* ``label``: uint8 [48842], 1 for income ">50K";
* ``train``: bool [48842], True for the 32,561 rows of ``adult.data`` (the usual split);
* ``categories_<column>``: the category names of each categorical column, in index order (sorted).

Every row is kept; no value is edited. :func:`dpjax.datasets.load_adult` turns this into
one-hot and standardized features.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

COLUMNS = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
)
CATEGORICAL = (
    "workclass",
    "education",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "native-country",
)
NUMERIC = ("age", "education-num", "capital-gain", "capital-loss", "hours-per-week")


def read(path: Path, skip_header: bool) -> list[list[str]]:
    with open(path, newline="") as f:
        rows = [[cell.strip() for cell in row] for row in csv.reader(f) if row and row[0].strip()]
    if skip_header:
        rows = rows[1:]
    if any(len(row) != len(COLUMNS) for row in rows):
        raise ValueError(f"{path}: expected {len(COLUMNS)} columns per row")
    return rows


def main(source: str) -> None:
    directory = Path(source)
    train_rows = read(directory / "adult.data", skip_header=False)
    test_rows = read(directory / "adult.test", skip_header=True)
    rows = train_rows + test_rows
    index = {name: i for i, name in enumerate(COLUMNS)}
    out: dict[str, np.ndarray] = {}
    codes = []
    for name in CATEGORICAL:
        values = [row[index[name]] for row in rows]
        names = sorted(set(values))
        lookup = {v: i for i, v in enumerate(names)}
        codes.append([lookup[v] for v in values])
        out[f"categories_{name}"] = np.array(names, dtype=np.str_)
    out["categorical"] = np.array(codes, dtype=np.uint8).T
    out["numeric"] = np.array([[int(row[index[n]]) for n in NUMERIC] for row in rows], dtype=np.int32)
    out["label"] = np.array([row[index["income"]].rstrip(".") == ">50K" for row in rows], dtype=np.uint8)
    out["train"] = np.arange(len(rows)) < len(train_rows)
    target = Path(__file__).with_name("adult.npz")
    np.savez_compressed(target, **out)  # type: ignore[arg-type]  # no key of out is allow_pickle
    print(f"wrote {target}: {len(rows)} rows ({len(train_rows)} train), {target.stat().st_size} bytes")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
