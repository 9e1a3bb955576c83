"""Every name the library's docstrings and comments cite exists, so a rename cannot leave them stale.

Three kinds of citation are checked, in every docstring (module, class, function and attribute
docstrings) and comment of every module under ``dpjax/``:

* a dotted dpjax path (``dpjax.quantiles.unbounded``, :mod:`dpjax._src.studies.runner`), in double
  backticks or in a Sphinx role, must resolve: its longest importable prefix is imported and the rest
  looked up as attributes (a dataclass field counts as an attribute of its class);
* a Sphinx role with a bare name (:func:`top_k`, :meth:`Plan.run`) must name something the module
  defines or imports (then the rest of a dotted name must be its attributes), or a dpjax name;
* a double-backtick span that is one identifier which looks like a name of the code rather than of
  the math (``snake_case`` with an underscore, ``UPPER_CASE``, or ``_private``, optionally followed by
  ``()``), and every ``UPPER_CASE`` constant inside a longer span, must be an identifier of the
  module's own source (a name it defines, imports, passes or reads: parameters, fields, keywords and
  record keys included) or a name some dpjax module defines at its top level or in a class.

The identifiers are read with ``ast`` (only dotted paths and dotted roles import anything).
``EXTERNAL`` lists the few names of other libraries, of the tests and of the papers' math that
docstrings cite without the module naming them in code; each entry says what it is.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import io
import re
import textwrap
import tokenize
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "dpjax"

SPAN = re.compile(r"(?<!`)``([^`]+)``(?!`)")
ROLE = re.compile(r":(?:mod|func|class|meth|attr|data|obj|exc):`~?([^`<>]+)`")
DOTTED = re.compile(r"(?<![\w.])dpjax(?:\.[A-Za-z_]\w*)+")
# A code name: snake_case or UPPER_CASE with an underscore and a last part of two characters or more
# (``rho_i``, ``S_0``, ``theta_k`` are math), or a _private name.
SNAKE = r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*_[a-z0-9]{2,}"
UPPER = r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_[A-Z0-9]{2,}"
CODE_NAME = re.compile(rf"_*{SNAKE}|_*{UPPER}|_+[A-Za-z]\w*")
CONSTANT = re.compile(rf"(?<![\w.'\"])_*{UPPER}(?![\w'\"])")
BARE = re.compile(r"([A-Za-z_]\w*)(?:\(\))?")

EXTERNAL = {
    "jax_enable_x64": "jax's configuration flag for 64-bit types",
    "dp_accounting": "Google's accounting library, the model of dpjax's guarantee objects",
    "JAX_PLATFORMS": "jax's environment variable that picks the backends",
    "JAX_COMPILATION_CACHE_DIR": "jax's environment variable for the persistent compilation cache",
    "_xla_gc_callback": "jaxlib's garbage-collection hook, where an interrupt can land",
    "clipped_count_stddev": "TF Privacy's parameter of its adaptive clipping",
    "compute_quantile": "the function of the AggTree paper's code",
    "make_private_quantile": "OpenDP's quantile constructor, a benchmark peer",
    "noisy_max_monotone_scale": "a negative control of tests/negative_controls.py",
    "f_eps": "the paper's trade-off curve f_eps (math, Dong, Roth, Su)",
    "h_bot": "the paper's threshold h_bot (math, Durfee and Rogers)",
}
# Names of these objects may be cited bare (``dot_general``, ``shard_map``, ``block_until_ready``).
EXTERNAL_NAMESPACES = (
    ("jax", ""), ("jax.lax", ""), ("jax.numpy", ""), ("jax.random", ""), ("numpy", ""), ("jax", "Array"),
    ("jax.stages", "Compiled"),
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


SOURCES = {module_name(path): path for path in sorted(LIBRARY.rglob("*.py"))}


def texts(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every docstring (any string statement) and comment of ``source``."""
    found = [
        (node.lineno, node.value.value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ]
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    found += [(token.start[0], token.string) for token in tokens if token.type == tokenize.COMMENT]
    return found


def identifiers(tree: ast.AST) -> set[str]:
    """Every name a module's code mentions: definitions, imports, parameters, reads, attributes,
    keywords, and string constants that are identifiers (record keys, option names)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.keyword) and node.arg:
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.update(filter(None, [node.asname, node.name.rpartition(".")[2]]))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            names.add(node.value)
    return names


def defined(tree: ast.Module) -> set[str]:
    """The names a module defines at its top level and in its classes (``self.x`` attributes and
    the functions' parameters included), and the string keys of its top-level dict literals (record
    columns, option names)."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.update(arg.arg for arg in ast.walk(node.args) if isinstance(arg, ast.arg))
        if isinstance(node, ast.ClassDef):
            names.update(defined(ast.Module(body=node.body, type_ignores=[])))
            names.update(
                n.attr for n in ast.walk(node)
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
            )
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        for target in filter(None, targets):
            names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        value = getattr(node, "value", None)
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(value, ast.Dict):
            names.update(key.value for key in value.keys if isinstance(getattr(key, "value", None), str))
    return names


@functools.cache
def trees() -> dict[str, ast.Module]:
    return {name: ast.parse(path.read_text(), str(path)) for name, path in SOURCES.items()}


@functools.cache
def library_names() -> frozenset[str]:
    """Every name some dpjax module defines (top level or in a class), and the modules' own names."""
    names = {name.rpartition(".")[2] for name in SOURCES}
    for tree in trees().values():
        names |= defined(tree)
    return frozenset(names)


def known_locally(module: str, tree: ast.Module) -> set[str]:
    """The identifiers of ``module``'s code; for a public face (outside ``dpjax._src``), those of the
    implementation modules it re-exports from too (its docstring cites their parameters)."""
    names = identifiers(tree)
    if not module.startswith("dpjax._src"):
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dpjax._src"):
                names |= identifiers(trees().get(node.module, ast.Module(body=[], type_ignores=[])))
    return names


@functools.cache
def external(name: str) -> bool:
    """Whether ``name`` is a listed outside name or an attribute of one of ``EXTERNAL_NAMESPACES``."""
    if name in EXTERNAL:
        return True
    for module, attribute in EXTERNAL_NAMESPACES:
        namespace = importlib.import_module(module)
        if hasattr(getattr(namespace, attribute) if attribute else namespace, name):
            return True
    return False


def in_tree(name: str) -> bool:
    """Whether ``name`` is a module of this tree's ``dpjax/`` (not one an editable install of another
    checkout would supply)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    return bool(spec and spec.origin) and Path(spec.origin).resolve().is_relative_to(LIBRARY)


MISSING = object()


def has_chain(target, parts: list[str]) -> bool:
    """Whether ``target.<parts...>`` exists (a dataclass field or class annotation counts at the end)."""
    for index, part in enumerate(parts):
        fields = getattr(target, "__dataclass_fields__", {})
        annotations = getattr(target, "__annotations__", {}) if isinstance(target, type) else {}
        if part in fields or part in annotations:
            return index == len(parts) - 1
        value = getattr(target, part, MISSING)
        submodule = f"{getattr(target, '__name__', '')}.{part}"
        if value is MISSING or getattr(value, "__name__", None) == submodule:
            return False  # a submodule is found by import only (a stale one may linger as an attribute)
        target = value
    return True


def resolves(path: str) -> bool:
    """Whether a dotted dpjax path names a module of this tree or an attribute of one."""
    parts = path.split(".")
    cut = next((cut for cut in range(len(parts), 0, -1) if in_tree(".".join(parts[:cut]))), 0)
    return bool(cut) and has_chain(importlib.import_module(".".join(parts[:cut])), parts[cut:])


def role_exists(module: str, name: str, local: set[str]) -> bool:
    """Whether a role's bare ``name`` (``top_k``, ``Plan.run``) is a name the module knows; a dotted
    one whose head the module defines or imports must also have the rest as attributes."""
    head, *rest = name.split(".")
    if not (head in local or head in library_names() or external(head)):
        return False
    namespace = vars(importlib.import_module(module)) if rest and in_tree(module) else {}
    if head not in namespace:
        return True
    value = namespace[head]
    if isinstance(value, types.ModuleType) and not value.__name__.startswith("dpjax"):
        return other_library_has(f"{value.__name__}.{'.'.join(rest)}")  # ``jax.experimental.checkify``
    return has_chain(value, rest)


def other_library_has(path: str) -> bool:
    """Whether a dotted path of another library (``jax.custom_batching.custom_vmap``) exists."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            return has_chain(importlib.import_module(".".join(parts[:cut])), parts[cut:])
        except ImportError:
            continue
    return False


def citations(text: str) -> list[tuple[str, str]]:
    """``(kind, name)`` for every citation in ``text``: ``"path"`` (a dotted dpjax path), ``"role"``
    (a bare name in a Sphinx role, dotted or not) or ``"name"`` (a code-like bare identifier)."""
    found = []
    for match in ROLE.finditer(text):
        target = match.group(1).strip().rstrip("()")
        found.append(("path" if target.startswith("dpjax.") else "role", target))
    for match in SPAN.finditer(text):
        span = match.group(1).strip()
        found += [("path", path) for path in DOTTED.findall(span)]
        bare = BARE.fullmatch(span)
        if bare and CODE_NAME.fullmatch(bare.group(1)):
            found.append(("name", bare.group(1)))
        elif not bare:
            found += [("name", name) for name in CONSTANT.findall(span)]
    return found


def problems(module: str, source: str) -> list[str]:
    """What ``source`` (the text of ``module``) cites that does not exist, one line each."""
    tree = ast.parse(source)
    local = known_locally(module, tree)
    found = []
    for line, text in texts(source):
        for kind, name in citations(text):
            if kind == "path":
                ok = resolves(name)
            elif kind == "role":
                ok = role_exists(module, name, local)
            else:
                ok = name in local or name in library_names() or external(name)
            if not ok:
                found.append(f"{module}:{line}: {kind} {name!r}")
    return found


@pytest.mark.parametrize("module", sorted(SOURCES))
def test_docstrings_cite_names_that_exist(module):
    assert problems(module, SOURCES[module].read_text()) == []


def test_a_stale_citation_is_caught():
    """The check fails on what goes stale: a renamed function or constant (cited by its old name, its
    new one underscored), a removed module or path. The old names are ones no dpjax module defines."""
    source = textwrap.dedent('''\
    """Blocks of :func:`stale_block_size`; see ``dpjax.quantiles.unbounded_bins`` and
    :mod:`dpjax.studies.runner`, within ``log(1 / STALE_MASS)``; ``stale_tables()`` fills them."""

    _STALE_MASS = 2.0**-64


    def _stale_block_size(size):
        # rounded up to ``STALE_ALIGN``; ``jax_enable_x64`` and ``size`` are fine, so is ``dpjax.quantiles``
        return size
    ''')
    assert [line.split(": ", 1)[1] for line in problems("dpjax._src.example", source)] == [
        "role 'stale_block_size'",
        "path 'dpjax.studies.runner'",
        "path 'dpjax.quantiles.unbounded_bins'",
        "name 'STALE_MASS'",
        "name 'stale_tables'",
        "name 'STALE_ALIGN'",
    ]


def test_a_stale_method_is_caught():
    """A dotted role is followed through the module's own names: the class exists, its method must."""
    source = '"""Settled by :meth:`Reservation.settle`, not :meth:`Reservation.setle`."""\n'
    assert [line.split(": ", 1)[1] for line in problems("dpjax._src.accounting.ledger", source)] == [
        "role 'Reservation.setle'"
    ]
