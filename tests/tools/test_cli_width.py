"""Every command's help and listing fits the screen: at ``COLUMNS=100`` no line is wider (issue 46.4).
Nothing here compiles: ``--help`` and the listings run in this process."""

from __future__ import annotations

import pytest

from dpjax._src.tools.cli import SUBCOMMANDS, main

LISTINGS = [["--help"], *([name, "--help"] for name in SUBCOMMANDS),
            ["study", "--list"], ["reproduce", "--list"], ["data", "list"]]


@pytest.mark.parametrize("argv", LISTINGS, ids=" ".join)
def test_help_and_listings_fit_columns(argv, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("DPJAX_DATA", str(tmp_path))
    try:
        code = main(argv)
    except SystemExit as exit_:  # --help
        code = exit_.code
    out = capsys.readouterr().out
    assert code == 0 and out.strip()
    wide = [line for line in out.splitlines() if len(line) > 100]
    assert wide == [], f"{' '.join(argv)}: {len(wide)} lines over 100 columns, e.g. {wide[0]!r}"
