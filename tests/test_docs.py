"""The README's quick start and the notebooks run as written."""

import json
import re
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_notebook_runs(path):
    notebook = json.loads(path.read_text())
    namespace = {}
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), f"{path.name} cell", "exec"), namespace)
