"""The public API is deliberate (issue 32.1): every public module of ``dpjax`` (no underscored part
in its dotted name) states ``__all__``, every name it lists exists, every public-named object the
module defines is listed, and the union of the lists equals the checked-in ``tests/meta/public_api.txt``.

Anything else is private (an underscored module or name), free to change. A change to the public
surface is a deliberate one: regenerate the list with ``python tests/meta/test_public_api.py --write``
(from the repository root) and say what changed in CHANGELOG.md.
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LISTING = Path(__file__).with_name("public_api.txt")


def public_modules() -> dict[str, Path]:
    """Dotted name -> file of every importable module of dpjax whose name has no underscored part."""
    out = {}
    for path in sorted((ROOT / "dpjax").rglob("*.py")):
        if not (path.parent / "__init__.py").exists():
            continue  # a data folder's script, not part of the package
        parts = path.relative_to(ROOT).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if not any(part.startswith("_") for part in parts):
            out[".".join(parts)] = path
    return out


def defined_names(path: Path) -> set[str]:
    """Names a module's top level binds by ``def``, ``class`` or assignment (not by import)."""
    names = set()

    def visit(body):
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    elements = t.elts if isinstance(t, ast.Tuple | ast.List) else [t]
                    names.update(e.id for e in elements if isinstance(e, ast.Name))
            elif isinstance(node, ast.If | ast.Try):
                for block in (node.body, node.orelse, *(h.body for h in getattr(node, "handlers", ()))):
                    visit(block)

    visit(ast.parse(path.read_text()).body)
    return {n for n in names if not (n.startswith("__") and n.endswith("__"))}


def surface() -> list[str]:
    """``module:name`` for every name in every public module's ``__all__``, sorted."""
    lines = []
    for name in public_modules():
        lines += [f"{name}:{n}" for n in getattr(importlib.import_module(name), "__all__", ())]
    return sorted(lines)


MODULES = public_modules()


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_states_its_api(name):
    module = importlib.import_module(name)
    assert hasattr(module, "__all__"), f"{name} does not state __all__"
    listed = list(module.__all__)
    assert len(listed) == len(set(listed)), f"{name}.__all__ lists a name twice"
    missing = [n for n in listed if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ lists names the module does not have: {missing}"
    unlisted = sorted(n for n in defined_names(MODULES[name]) if not n.startswith("_") and n not in listed)
    assert not unlisted, (
        f"{name} defines public-named {unlisted} but does not list them in __all__: "
        "underscore them (private) or add them to __all__ (public API)"
    )


def test_public_surface_is_the_checked_in_list():
    expected = [line for line in LISTING.read_text().splitlines() if line and not line.startswith("#")]
    actual = surface()
    added, removed = sorted(set(actual) - set(expected)), sorted(set(expected) - set(actual))
    assert not (added or removed), (
        "The public API changed.\n"
        + "".join(f"  + {line}\n" for line in added)
        + "".join(f"  - {line}\n" for line in removed)
        + "If this is deliberate, run `python tests/meta/test_public_api.py --write` and record the change "
        "in CHANGELOG.md."
    )


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/meta/test_public_api.py --write   (rewrites tests/meta/public_api.txt)")
    lines = surface()
    LISTING.write_text(
        "# The public API of dpjax, one module:name a line (tests/meta/test_public_api.py).\n"
        "# Regenerate: python tests/meta/test_public_api.py --write; record changes in CHANGELOG.md.\n"
        + "".join(f"{line}\n" for line in lines)
    )
    print(f"{len(lines)} public names written to {LISTING.relative_to(ROOT)}")
