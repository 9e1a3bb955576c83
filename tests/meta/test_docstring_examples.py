"""Every docstring ``Example:`` in dpjax runs as a doctest: the examples the API reference shows are true.

Docstrings are found by reading the source (no import at collection), one test per docstring, named
by its qualified name. Each test runs its examples with the stdlib ``doctest`` in a fresh copy of
its module's namespace, so no example sees another's names.
"""

import ast
import doctest
import importlib
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "dpjax"
_HEADER = re.compile(r"^\s*Examples?:\s*$", re.MULTILINE)
_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _docstrings(tree: ast.Module, module: str):
    """(qualified name, docstring, line) of the module and every class and function, nested ones too."""
    stack = [(tree, module)]
    while stack:
        node, name = stack.pop()
        docstring = ast.get_docstring(node)
        if docstring:
            yield name, docstring, getattr(node, "lineno", 1)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                stack.append((child, f"{name}.{child.name}"))


def _examples() -> dict[str, tuple[str, str, Path, int]]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for name, docstring, line in _docstrings(ast.parse(path.read_text()), module):
            if _HEADER.search(docstring) and ">>>" in docstring:
                found[name] = (module, docstring, path, line)
    return found


EXAMPLES = _examples()


def run_examples(module: str, docstring: str, name: str, path: Path, line: int) -> doctest.TestResults:
    """Runs one docstring's examples in a copy of ``module``'s namespace; the failures are printed."""
    globs = dict(vars(importlib.import_module(module)))
    test = doctest.DocTestParser().get_doctest(docstring, globs, name, str(path), line)
    runner = doctest.DocTestRunner(optionflags=_FLAGS)
    runner.run(test)
    return runner.summarize(verbose=False)


LAPLACE = next(name for name in EXAMPLES if name.endswith(".laplace_mechanism"))


def test_examples_are_found():
    assert len(EXAMPLES) >= 50, sorted(EXAMPLES)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_docstring_example(name, no_fork):
    module, docstring, path, line = EXAMPLES[name]
    results = run_examples(module, docstring, name, path, line)
    assert results.attempted > 0
    assert results.failed == 0, f"{results.failed} of {results.attempted} examples in {name} failed (above)"


def test_a_wrong_example_fails():
    """The check has teeth: an example whose shown output is false is reported as failed."""
    module, docstring, path, line = EXAMPLES[LAPLACE]
    wrong = docstring + "\n  >>> 1 + 1\n  3\n"
    assert run_examples(module, wrong, "wrong", path, line).failed == 1
