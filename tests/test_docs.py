"""The README's quick start runs as written and the README keeps its two setup commands."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_quick_start_runs():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## Quick start\s+```python\n(.*?)```", readme, re.S)
    assert block, "README has no quick start block"
    assert len(block.group(1).strip().splitlines()) <= 10
    exec(compile(block.group(1), "README quick start", "exec"), {})


def test_readme_has_exactly_the_two_setup_commands():
    readme = (ROOT / "README.md").read_text()
    for marker in ("<!-- main-command -->", "<!-- test-command -->"):
        assert readme.count(marker) == 1
    assert "dpjax study" in readme.split("<!-- main-command -->")[1].split("```")[1]
    assert "pytest" in readme.split("<!-- test-command -->")[1].split("```")[1]


def test_readme_study_example_runs(tmp_path, monkeypatch):
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## Studies\n.*?```python\n(.*?)```", readme, re.S)
    assert block, "README has no study example"
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(block.group(1), "README study example", "exec"), namespace)
    table = namespace["result"].table
    assert len(table) == 8 and (tmp_path / "my-study" / "my_mean.png").exists()
