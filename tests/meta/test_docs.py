"""The README and the docs site run as written and say the same: every Python block runs on its own,
the README's examples and setup commands appear in the docs, and the docs' own examples run too."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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
DOCS = ROOT / "docs"
DOC_PAGES = {page.relative_to(DOCS).as_posix(): page.read_text() for page in sorted(DOCS.rglob("*.md"))}
DOC_BLOCKS = {
    f"{page}: {name}": code for page, text in DOC_PAGES.items() for name, code in _python_blocks(text).items()
}
# The guides' own examples run here (multi-device.md's need several devices or hosts).
DOCS_ONLY = sorted(
    name
    for name, code in DOC_BLOCKS.items()
    if name.startswith(("guides/", "index.md")) and code not in BLOCKS.values()
)
DOCS_BUILD_COMMAND = 'pip install -e ".[docs]" && mkdocs build --strict'


def test_the_readme_has_its_examples():
    assert {"Quick start 1", "Quick start 2", "Studies 1", "Conventions 1"} <= set(BLOCKS)
    assert len(BLOCKS["Quick start 1"].strip().splitlines()) <= 10


def _run_alone(code: str, name: str, capsys) -> dict:
    namespace = {"__name__": "__main__"}
    exec(compile(code, name, "exec"), namespace)
    assert capsys.readouterr().out.strip(), f"{name!r} prints nothing"
    return namespace


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_every_readme_python_block_runs_alone_and_prints(name, tmp_path, monkeypatch, capsys):
    """A newcomer pastes one block into a fresh interpreter: it must run and show its result."""
    monkeypatch.chdir(tmp_path)
    namespace = _run_alone(BLOCKS[name], f"README {name}", capsys)
    if name == "Studies 1":
        assert len(namespace["result"].table) == 8 and (tmp_path / "my-study" / "my_mean.png").exists()


def test_readme_has_exactly_the_two_setup_commands():
    for marker in ("<!-- main-command -->", "<!-- test-command -->"):
        assert README.count(marker) == 1
    assert "dpjax study" in README.split("<!-- main-command -->")[1].split("```")[1]
    assert "pytest" in README.split("<!-- test-command -->")[1].split("```")[1]


def test_the_docs_show_every_readme_example_and_setup_command():
    """The README and the docs say the same: its examples and commands appear verbatim in the docs."""
    shown = set(DOC_BLOCKS.values())
    assert [name for name, code in BLOCKS.items() if code not in shown] == []
    for marker in ("<!-- main-command -->", "<!-- test-command -->"):
        assert README.split(marker)[1].split("```")[1] in DOC_PAGES["index.md"]
    assert README.count(DOCS_BUILD_COMMAND) == 1 and DOCS_BUILD_COMMAND in DOC_PAGES["index.md"]


@pytest.mark.parametrize("name", DOCS_ONLY)
def test_every_docs_only_python_block_runs_alone_and_prints(name, tmp_path, monkeypatch, capsys, no_fork):
    monkeypatch.chdir(tmp_path)
    _run_alone(DOC_BLOCKS[name], f"docs {name}", capsys)
