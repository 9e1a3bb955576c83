"""The layers of ``dpjax/`` hold: no import cycle between its modules or between sibling packages, the
library never imports the tools (:mod:`dpjax._src.tools`), and nothing imports the command line back.

The graph is read from the source with ``ast`` (nothing is imported): every ``import`` and ``from ...
import`` anywhere in a module (inside functions too), absolute or relative, resolved to the dpjax
module it names (``from p import m`` names the module ``p.m`` when there is one, else ``p``).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS = "dpjax._src.tools"
ENTRY = "dpjax._src.tools.cli"  # the ``dpjax`` command: it names the tools' command modules by string
FACE_ENTRY = "dpjax.cli"  # its public face, the console script's target


def modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """``{dotted name: (file, is a package)}`` for every importable module of ``root/dpjax``."""
    found = {}
    for path in sorted((root / "dpjax").rglob("*.py")):
        folders = [path.parent, *path.parent.parents][: len(path.relative_to(root).parts) - 1]
        if not all((folder / "__init__.py").is_file() for folder in folders):
            continue  # in a data folder (no __init__.py on the way): not importable
        parts = list(path.relative_to(root).with_suffix("").parts)
        package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if package else parts)] = (path, package)
    return found


def _resolve(name: str, known) -> str | None:
    """The dpjax module ``name`` is, or is inside of (an attribute of a module), or None."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _base(module: str, package: bool, level: int) -> str:
    """The package a relative import of ``level`` dots in ``module`` starts from."""
    parts = module.split(".") if package else module.split(".")[:-1]
    return ".".join(parts[: len(parts) - level + 1])


def imports(module: str, path: Path, package: bool, known) -> set[str]:
    """The dpjax modules that ``module`` imports, anywhere in its source."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(_resolve(alias.name, known) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                source = ".".join(filter(None, [_base(module, package, node.level), source]))
            for alias in node.names:
                child = f"{source}.{alias.name}"
                found.add(child if child in known else _resolve(source, known))
    return found - {None, module}


@functools.cache
def import_graph(root: Path = ROOT) -> dict[str, frozenset[str]]:
    """``{module: the dpjax modules it imports}`` for every module of ``root/dpjax``."""
    known = modules(root)
    return {name: frozenset(imports(name, path, package, known)) for name, (path, package) in known.items()}


def package_graph(graph) -> dict[str, set[str]]:
    """The graph between siblings: an import of ``a.x.m`` from ``a.y.n`` is an edge ``a.y -> a.x``
    (the two children of their closest common package). Imports between a module and a package
    around it (``a.x.m`` importing ``a.x``, or ``a`` importing ``a.x``) are no sibling edges."""
    siblings: dict[str, set[str]] = {name: set() for name in graph}
    for source, targets in graph.items():
        for target in targets:
            a, b = source.split("."), target.split(".")
            shorter = min(len(a), len(b))
            common = next((i for i in range(shorter) if a[i] != b[i]), shorter)
            if common < shorter:
                x, y = ".".join(a[: common + 1]), ".".join(b[: common + 1])
                siblings.setdefault(x, set()).add(y)
                siblings.setdefault(y, set())
    return siblings


def find_cycle(graph) -> list[str] | None:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or None (depth-first, in name order)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target):], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def is_tool(module: str) -> bool:
    return module == TOOLS or module.startswith(TOOLS + ".") or module in (ENTRY, FACE_ENTRY)


def test_no_import_cycle_between_modules():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_import_cycle_between_sibling_packages():
    """E.g. no ``tools.reproduce`` module importing ``tools.bench`` while a ``tools.bench`` module
    imports ``tools.reproduce``: what both need lives below both."""
    cycle = find_cycle(package_graph(import_graph()))
    assert cycle is None, "import cycle between packages: " + " -> ".join(cycle)


def test_the_library_never_imports_the_tools():
    graph = import_graph()
    assert any(m.startswith(TOOLS + ".") for m in graph), f"no {TOOLS} package: is the test reading dpjax/?"
    wrong = sorted(f"{m} -> {t}" for m in graph if not is_tool(m) for t in graph[m] if is_tool(t))
    assert not wrong, "library modules importing tools:\n" + "\n".join(wrong)


def test_nothing_imports_the_command_line():
    """``dpjax.cli`` registers the subcommands by module name; they do not import it back."""
    wrong = sorted(m for m, targets in import_graph().items() if ENTRY in targets and m != FACE_ENTRY)
    assert not wrong, f"modules importing {ENTRY}: {wrong}"


def test_the_graph_sees_every_kind_of_import(tmp_path):
    """The checks above are real: on a small tree they find a cycle made of a relative import inside
    a function, a package-level cycle, and a library module importing a tool."""
    files = {
        "dpjax/__init__.py": "",
        "dpjax/a.py": "def f():\n    from . import b\n",
        "dpjax/b.py": "import dpjax.a\n",
        "dpjax/p/__init__.py": "",
        "dpjax/p/x.py": "from ..q.y import thing\n",
        "dpjax/q/__init__.py": "",
        "dpjax/q/y.py": "from dpjax.p import x\nthing = 1\n",
        "dpjax/_src/__init__.py": "",
        "dpjax/_src/tools/__init__.py": "",
        "dpjax/_src/tools/t.py": "",
        "dpjax/lib.py": "from dpjax._src.tools.t import name\n",
        "dpjax/data/not_a_module.py": "import dpjax.lib\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = dict(import_graph(tmp_path))
    assert "dpjax.data.not_a_module" not in graph
    assert graph["dpjax.a"] == {"dpjax.b"} and graph["dpjax.p.x"] == {"dpjax.q.y"}
    assert find_cycle(graph) == ["dpjax.a", "dpjax.b", "dpjax.a"]
    del graph["dpjax.a"], graph["dpjax.b"]
    assert find_cycle(graph) == ["dpjax.p.x", "dpjax.q.y", "dpjax.p.x"]
    graph["dpjax.q.y"] = frozenset()  # q.y no longer imports p.x: the packages still would if q.z did
    graph["dpjax.q.z"] = {"dpjax.p"}
    assert find_cycle(graph) is None and find_cycle(package_graph(graph)) == ["dpjax.p", "dpjax.q", "dpjax.p"]
    assert is_tool("dpjax._src.tools.t") and not is_tool("dpjax.lib")
    assert "dpjax._src.tools.t" in graph["dpjax.lib"]


SRC = "dpjax._src"
EXACT = "dpjax._src.exact"


def _is_src(module: str) -> bool:
    return module == SRC or module.startswith(SRC + ".")


def test_the_implementation_never_imports_a_face():
    """Faces re-export ``_src``; ``_src`` imports only ``_src`` (and the root package, for its version)."""
    wrong = sorted(
        f"{m} -> {t}" for m, targets in import_graph().items() if _is_src(m) for t in targets
        if not _is_src(t) and t != "dpjax"
    )
    assert not wrong, "implementation modules importing a public face:\n" + "\n".join(wrong)


def test_exact_noise_is_entered_by_its_package_only():
    """Outside ``_src/exact`` nothing reads the exact room's modules: only ``dpjax._src.exact`` itself."""
    wrong = sorted(
        f"{m} -> {t}" for m, targets in import_graph().items() if not m.startswith(EXACT)
        for t in targets if t.startswith(EXACT + ".")
    )
    assert not wrong, "modules reading the exact room's internals:\n" + "\n".join(wrong)


def underscored_imports(root: Path = ROOT) -> list[str]:
    """``module: name`` for every underscored name a dpjax module takes from another dpjax module, by
    ``from m import _x`` or by ``alias._x`` on an imported module."""
    known = modules(root)
    found = []
    for name, (path, _) in known.items():
        tree = ast.parse(path.read_text(), str(path))
        aliases = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "dpjax":
                for alias in node.names:
                    if f"{node.module}.{alias.name}" in known:
                        aliases.add(alias.asname or alias.name)
                    elif alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{name}: {node.module}.{alias.name}")
            elif isinstance(node, ast.Import):
                aliases.update(alias.asname for alias in node.names if alias.asname and alias.name in known)
        for node in ast.walk(tree):
            named = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            private = named and node.attr.startswith("_") and not node.attr.startswith("__")
            if private and node.value.id in aliases:
                found.append(f"{name}: {node.value.id}.{node.attr}")
    return sorted(found)


def test_no_module_imports_an_underscored_name_from_another():
    """"Private" is said one way: a module's own helpers are underscored and stay in it; a helper that
    other modules use has an ordinary name inside ``_src``."""
    found = underscored_imports()
    assert not found, "underscored names imported across modules:\n" + "\n".join(found)


_FACE_STATEMENTS = (ast.Import, ast.ImportFrom)


def _face_logic(path: Path) -> list[str]:
    """The statements of a face that are more than its docstring, imports, ``__all__`` and the lazy
    loading of PEP 562 (``__getattr__``/``__dir__`` and the name tables they read)."""
    wrong = []
    for index, node in enumerate(ast.parse(path.read_text()).body):
        if isinstance(node, _FACE_STATEMENTS) or (index == 0 and isinstance(node, ast.Expr)):
            continue
        if isinstance(node, ast.FunctionDef) and node.name in ("__getattr__", "__dir__"):
            continue
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if all(isinstance(t, ast.Name) and (t.id.startswith("_")) for t in targets):
                continue  # __all__, __version__, the lazy tables
        if isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'":
            continue  # the command's entry
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING" and not node.orelse:
            if all(isinstance(inner, _FACE_STATEMENTS) for inner in node.body):
                continue  # the lazily loaded names, spelled out for type checkers (imports only)
        wrong.append(f"{path}:{node.lineno} {type(node).__name__}")
    return wrong


def test_faces_define_no_logic():
    """Every module outside ``dpjax/_src`` is a public face: a docstring and an explicit re-export list."""
    faces = [path for name, (path, _) in modules(ROOT).items() if not _is_src(name)]
    assert len(faces) >= 15, faces
    wrong = [line for path in faces for line in _face_logic(path)]
    assert not wrong, "logic outside dpjax/_src:\n" + "\n".join(wrong)


def test_the_new_rules_see_what_they_forbid(tmp_path):
    """The three rules above are real: on a small tree they catch each kind of violation."""
    files = {
        "dpjax/__init__.py": "",
        "dpjax/face.py": "from typing import TYPE_CHECKING\nfrom dpjax._src.impl import f\n\n"
                         "if TYPE_CHECKING:\n    from dpjax._src.impl import f\n\n"
                         "if TYPE_CHECKING:\n    x = f()\n\ndef g():\n    return f()\n",
        "dpjax/_src/__init__.py": "",
        "dpjax/_src/impl.py": "from dpjax._src import other\nfrom dpjax._src.other import _h\n\ndef f():\n"
                              "    return other._h()\n",
        "dpjax/_src/other.py": "def _h():\n    return 1\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = underscored_imports(tmp_path)
    assert found == ["dpjax._src.impl: dpjax._src.other._h", "dpjax._src.impl: other._h"]
    face_logic = [line.rsplit(":", 1)[1] for line in _face_logic(tmp_path / "dpjax/face.py")]
    assert face_logic == ["7 If", "10 FunctionDef"]  # a TYPE_CHECKING block of imports is no logic
