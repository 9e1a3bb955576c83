"""The README runs as written: every Python block on its own, and its two setup commands."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _python_blocks(text: str) -> dict[str, str]:
    """Every ```python block, named by the section it is in and its place there."""
    blocks, counts, section, fence, lines = {}, {}, "top", None, []
    for line in text.splitlines(keepends=True):
        if fence is None and line.startswith("```"):
            fence, lines = line[3:].strip(), []
        elif fence is not None and line.startswith("```"):
            if fence == "python":
                counts[section] = counts.get(section, 0) + 1
                blocks[f"{section} {counts[section]}"] = "".join(lines)
            fence = None
        elif fence is not None:
            lines.append(line)
        elif line.startswith("#"):
            section = line.lstrip("#").strip()
    return blocks


BLOCKS = _python_blocks(README)


def test_the_readme_has_its_examples():
    assert {"Quick start 1", "Quick start 2", "Studies 1", "Conventions 1"} <= set(BLOCKS)
    assert len(BLOCKS["Quick start 1"].strip().splitlines()) <= 10


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_every_readme_python_block_runs_alone_and_prints(name, tmp_path, monkeypatch, capsys):
    """A newcomer pastes one block into a fresh interpreter: it must run and show its result."""
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__main__"}
    exec(compile(BLOCKS[name], f"README {name}", "exec"), namespace)
    assert capsys.readouterr().out.strip(), f"README block {name!r} prints nothing"
    if name == "Studies 1":
        assert len(namespace["result"].table) == 8 and (tmp_path / "my-study" / "my_mean.png").exists()


def test_readme_has_exactly_the_two_setup_commands():
    for marker in ("<!-- main-command -->", "<!-- test-command -->"):
        assert README.count(marker) == 1
    assert "dpjax study" in README.split("<!-- main-command -->")[1].split("```")[1]
    assert "pytest" in README.split("<!-- test-command -->")[1].split("```")[1]
