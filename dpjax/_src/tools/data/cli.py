"""``dpjax data fetch [NAME ...] [--mirror URL]`` and ``dpjax data list``: the papers' public datasets
(UCI Adult, the Goodreads books file, the MNIST subset) in a local cache that ``dpjax reproduce`` and
``dpjax train`` read by default. Light to import: no JAX."""

from __future__ import annotations

import argparse
import sys
import textwrap

from dpjax._src.tools.data.catalog import DATASETS, cache_dir
from dpjax._src.tools.data.fetch import FetchError, fetch_files, file_sha256

__all__ = [
    "add_parser",
    "run",
    "status",
]


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Adds the ``data`` command to the ``dpjax`` command's subparsers."""
    parser = subparsers.add_parser(
        "data",
        help="fetch the papers' public datasets into a local cache, or list them",
        description="The papers' public datasets, downloaded into $DPJAX_DATA (default: "
        "~/.cache/dpjax/data) and checked by sha256; dpjax reproduce and dpjax train read them "
        "from there unless --data-dir (or --data) says otherwise.",
        usage="dpjax data {fetch [NAME ...] [--mirror URL], list}",
    )
    parser.add_argument("action", choices=("fetch", "list"),
                        help="fetch: download the datasets, each checked by sha256; list: show each "
                        "dataset's files, source, licence and whether present (no default)")
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"fetch: the datasets, of {', '.join(DATASETS)} (default: all)")
    parser.add_argument("--mirror", metavar="URL",
                        help="fetch: each file as URL/FILE from this base URL instead of its public "
                        "source (default: the public sources)")
    return parser


def status(source, directory) -> str:
    """``present``, ``missing`` or ``corrupt`` (the file's sha256 is not the expected one)."""
    path = directory / source.name
    if not path.is_file():
        return "missing"
    return "present" if file_sha256(path) == source.sha256 else "corrupt (fetch again)"


def _list() -> int:
    directory = cache_dir()
    print(f"cache (set DPJAX_DATA to move it):\n  {directory}")
    for name, data in DATASETS.items():
        print(f"\n{name}: {data.title}")
        for label, text in (("source", data.source), ("licence", data.licence), ("used by", data.used_by)):
            print(textwrap.fill(text, 96, initial_indent=f"  {label}: ", subsequent_indent="    "))
        for source in data.files:
            print(f"  {source.name}: {status(source, directory)}")
    return 0


def _fetch(names: list[str], mirror: str | None) -> int:
    unknown = [name for name in names if name not in DATASETS]
    if unknown:
        return _error(f"unknown dataset {unknown[0]!r}; choose from {', '.join(DATASETS)}")
    directory = cache_dir()
    wanted = [source for name in (names or DATASETS) for source in DATASETS[name].files]
    todo = [source for source in wanted if status(source, directory) != "present"]
    for source in wanted:
        if source not in todo:
            print(f"  {source.name}: already present (sha256 checked)")
    try:
        fetch_files(todo, directory, mirror=mirror, say=lambda line: print(line, flush=True))
    except FetchError as err:
        return _error(str(err))
    print(f"{len(wanted)} file(s), each with its sha256 checked, in\n  {directory}")
    return 0


def _error(message: str) -> int:
    print(f"dpjax data: error: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    """``dpjax data list`` or ``dpjax data fetch``."""
    if args.action == "list":
        if args.names or args.mirror:
            return _error("list takes no NAME and no --mirror")
        return _list()
    return _fetch(args.names, args.mirror)
