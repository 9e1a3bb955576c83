"""The public faces type-check clean under mypy (issue 48.6), and so do the README's examples and
the command-line apps.

One mypy run (configuration: ``[tool.mypy]`` in pyproject.toml) over every face (each module of
``dpjax`` outside ``dpjax/_src``), every module of ``dpjax/_src/tools`` (the apps, which no face
imports), every ``python`` block of README.md (written to files) and a probe
of three calls a checker must refuse, and calls it must accept (``ACCEPTED``, traced parameters): the
check passes when the only findings are the probe's.
Through the faces mypy reads the implementation's annotations, so the README's calls are checked
against the real signatures (a wrong argument type, an unknown root name, a misused result); it also
reports the findings inside the implementation modules that pyproject's ``[[tool.mypy.overrides]]``
lists as held clean (the others are read for their types only).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Each call is refused for a different reason; the line numbers are those of the findings.
PROBE = """\
import jax
import dpjax
from dpjax.additive import laplace_mechanism
from dpjax.quantiles import unbounded

key = jax.random.key(0)
laplace_mechanism(key, "3.0", 1.0)
dpjax.Accountant(1.0)
text: str = unbounded(key, jax.numpy.ones(4), 0.5, 1.0)
"""
PROBE_FINDINGS = {(7, "arg-type"), (8, "arg-type"), (9, "assignment")}

# Calls the docstrings allow (parameters that "may be traced", given as jax.Array): no finding.
ACCEPTED = """\
import jax
import jax.numpy as jnp
from dpjax.budgeting import pie_k, pie_ni
from dpjax.quantiles import csmooth, emq, joint_exp
from dpjax.selection import noisy_top_k_with_gap_scale
from dpjax.svt import adaptive_sparse_vector_with_gap, gap_budget, sparse_vector_with_gap

key, scores, traced = jax.random.key(0), jnp.array([-50.0, 3.0, 80.0]), jnp.asarray(0.5)
pie_ni(key, scores, traced, c=4, beta0=traced, nu_low=traced, nu_high=traced)
pie_k(key, scores, traced, k=2, c=8, beta0=traced)
sparse_vector_with_gap(key, scores, traced, traced, c=1, theta=traced, sensitivity=traced)
adaptive_sparse_vector_with_gap(key, scores, traced, traced, c=1, theta=traced, sigma=traced)
gap_budget(traced, 2, theta=traced, sigma=traced, sensitivity=traced)
scale: jax.Array = noisy_top_k_with_gap_scale(2, traced)
# the quantiles' docstring examples: levels as a list, bounds as a pair or an array of shape (2,)
joint_exp(key, scores, [0.25, 0.75], 1.0, bounds=(-100, 100))
emq(key, scores, 0.5, 1.0, bounds=(traced, 2.0))
csmooth(key, scores, [0.25, 0.5], 0.5, bounds=jnp.array([-10.0, 10.0]))
"""


def face_files() -> list[Path]:
    package = ROOT / "dpjax"
    files = {package / "__init__.py", *package.glob("*/__init__.py"), *package.glob("*.py")}
    return sorted(path for path in files if not path.relative_to(package).parts[0].startswith("_src"))


def tool_files() -> list[Path]:
    return sorted((ROOT / "dpjax/_src/tools").rglob("*.py"))


def readme_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(), flags=re.M | re.S)


def test_the_faces_and_the_readme_examples_type_check(tmp_path):
    faces, tools = face_files(), tool_files()
    assert len(faces) >= 19 and ROOT / "dpjax/quantiles/__init__.py" in faces, faces
    assert ROOT / "dpjax/_src/tools/bench/run.py" in tools, tools
    blocks = readme_blocks()
    assert len(blocks) >= 5, "README.md's python examples not found"
    examples = []
    for index, block in enumerate(blocks):
        examples.append(tmp_path / f"readme_example_{index}.py")
        examples[-1].write_text(block)
    probe, accepted = tmp_path / "probe.py", tmp_path / "accepted.py"
    probe.write_text(PROBE)
    accepted.write_text(ACCEPTED)
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
               "--cache-dir", str(tmp_path / "cache"), "--no-error-summary", "--show-error-codes"]
    done = subprocess.run(
        [*command, *map(str, faces), *map(str, tools), *map(str, examples), str(probe), str(accepted)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    findings = re.findall(r"^(\S+?):(\d+): error: .*\[([a-z-]+)\]$", done.stdout, flags=re.M)
    assert done.returncode == 1 and not done.stderr.strip(), done.stdout + done.stderr
    probe_findings = {(int(line), code) for path, line, code in findings if Path(path).name == "probe.py"}
    others = [line for line in done.stdout.splitlines() if "probe.py" not in line]
    where = "the faces, the tools, the README's examples or ACCEPTED"
    assert not others, f"mypy findings in {where}:\n" + "\n".join(others)
    assert probe_findings == PROBE_FINDINGS, done.stdout
