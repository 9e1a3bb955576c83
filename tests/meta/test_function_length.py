"""Functions a reader can hold (issue 32.3): no function in ``dpjax/`` has more than
:data:`MAX_CODE_LINES` lines of code, unless :data:`ALLOWED` names it with a reason.

A function's code lines are the lines of its source (nested functions and classes included) that
hold a token other than a comment, less the lines of every docstring in it: its own and those of
the functions and classes nested in it. Blank and comment-only lines do not count.
"""

import ast
import functools
import io
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "dpjax"

MAX_CODE_LINES = 80

ALLOWED: dict[str, str] = {}
"""Qualified name (module, then enclosing classes and functions) -> why it may be longer."""

_LAYOUT = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
_LAYOUT.add(tokenize.ENDMARKER)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _docstring_lines(tree: ast.Module) -> set[int]:
    """The lines of every docstring (module, classes, functions) of ``tree``."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, *_SCOPES)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                if isinstance(first.value.value, str):
                    lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def _code_lines(source: str, tree: ast.Module) -> set[int]:
    """The lines holding a token other than a comment, less the docstrings' lines."""
    lines = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in _LAYOUT:
            lines.update(range(token.start[0], token.end[0] + 1))
    return lines - _docstring_lines(tree)


def _functions(tree: ast.Module, module: str):
    """``(qualified name, node)`` of every function in ``tree``, nested ones included."""

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _SCOPES):
                name = f"{prefix}.{child.name}"
                if not isinstance(child, ast.ClassDef):
                    yield name, child
                yield from visit(child, name)
            else:
                yield from visit(child, prefix)

    yield from visit(tree, module)


@functools.cache
def function_lengths() -> dict[str, int]:
    """Code lines of every function in ``dpjax/``, by qualified name."""
    lengths = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        code = _code_lines(source, tree)
        for name, node in _functions(tree, module):
            lengths[name] = len(code.intersection(range(node.lineno, node.end_lineno + 1)))
    return lengths


def test_no_function_is_longer_than_the_limit():
    long = {name: n for name, n in function_lengths().items() if n > MAX_CODE_LINES and name not in ALLOWED}
    listed = "\n".join(f"  {name}: {n} lines" for name, n in sorted(long.items(), key=lambda kv: -kv[1]))
    assert not long, (
        f"functions over {MAX_CODE_LINES} lines of code (docstrings, comments and blank lines aside); "
        f"split them, or add them to ALLOWED with a reason:\n{listed}"
    )


def test_every_allowed_function_is_still_long():
    """The allowlist stays true: an entry whose function was split or removed goes."""
    lengths = function_lengths()
    stale = {name: lengths.get(name) for name in ALLOWED if lengths.get(name, 0) <= MAX_CODE_LINES}
    assert not stale, f"remove from ALLOWED (now within the limit, or gone: None): {stale}"


def test_the_count_leaves_out_docstrings_comments_and_blank_lines():
    source = '''
def f(x):
    """A docstring
    of three lines.
    """
    # a comment

    def g():
        """Nested docstring."""
        return """a string
        that is code"""

    return g()  # trailing comment
'''
    tree = ast.parse(source)
    code = _code_lines(source, tree)
    (name, node), (inner, inner_node) = _functions(tree, "m")
    assert (name, inner) == ("m.f", "m.f.g")
    assert len(code.intersection(range(node.lineno, node.end_lineno + 1))) == 5
    assert len(code.intersection(range(inner_node.lineno, inner_node.end_lineno + 1))) == 3


MAX_FILE_LINES = 500

LONG_FILES: dict[str, str] = {}
"""Path under ``dpjax/`` -> why it may hold more than :data:`MAX_FILE_LINES` lines."""


def long_files(package: Path = PACKAGE) -> dict[str, int]:
    """``{path relative to the package's parent: lines}`` of every file of ``package`` over the limit."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_FILE_LINES:
            found[path.relative_to(package.parent).as_posix()] = lines
    return found


def test_no_file_is_longer_than_the_limit():
    """One idea per file (issue 48.5): a file over the limit holds several; split it into modules."""
    long = {path: n for path, n in long_files().items() if path not in LONG_FILES}
    listed = "\n".join(f"  {path}: {n} lines" for path, n in sorted(long.items(), key=lambda kv: -kv[1]))
    assert not long, f"files over {MAX_FILE_LINES} lines; split them into modules of one idea each:\n{listed}"


def test_every_allowed_file_is_still_long():
    stale = sorted(set(LONG_FILES) - set(long_files()))
    assert not stale, f"remove from LONG_FILES (now within the limit, or gone): {stale}"


def test_the_file_check_finds_a_long_file(tmp_path):
    package = tmp_path / "dpjax"
    (package / "sub").mkdir(parents=True)
    (package / "short.py").write_text("x = 1\n" * MAX_FILE_LINES)
    (package / "sub" / "long.py").write_text("\n" * MAX_FILE_LINES + "x = 1\n")
    (package / "notes.txt").write_text("x\n" * (2 * MAX_FILE_LINES))
    assert long_files(package) == {"dpjax/sub/long.py": MAX_FILE_LINES + 1}
