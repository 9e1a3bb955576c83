"""Griffe extension for the API reference (mkdocs.yml): dpjax's docstrings and exports as Python sees them.

* Griffe reads the source without importing it, so it misses two kinds of exports: names a package
  loads on first use (PEP 562 ``__getattr__``: ``dpjax.optax``), and functions named like the module
  they come from (``from dpjax.budgeting.kde import kde``), where griffe keeps the submodule. Each
  module that states ``__all__`` is imported, and every exported name points at the object the
  import gives.
* dpjax's docstrings head their doctests ``Example:``, which griffe's Google parser reads as an
  admonition; they are read as the ``Examples:`` section, so the ``>>>`` lines render as code.
"""

from __future__ import annotations

import importlib
import re
import types

import griffe


def _runtime_path(value) -> str | None:
    if isinstance(value, types.ModuleType):
        return value.__name__
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    return f"{module}.{qualname}" if module and qualname else None


_EXAMPLE = re.compile(r"^(\s*)Example:[ \t]*$", re.MULTILINE)


class DpjaxDocs(griffe.Extension):
    """The two readings of the module docstring."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _EXAMPLE.sub(r"\1Examples:", obj.docstring.value)

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs) -> None:
        modules, stack = [], [pkg]
        while stack:
            module = stack.pop()
            modules.append(module)
            stack.extend(m for m in module.modules.values() if not m.is_alias)
        for module in modules:
            if module.exports is None:
                continue
            runtime = importlib.import_module(module.path)
            fixes = {}
            for name in getattr(runtime, "__all__", ()):
                value, member = getattr(runtime, name), module.members.get(name)
                if member is not None and (member.is_alias or not member.is_module):
                    continue  # griffe found the name (a module stands for a runtime module)
                if member is not None and isinstance(value, types.ModuleType):
                    continue
                try:
                    fixes[name] = loader.modules_collection[_runtime_path(value)]
                except (KeyError, TypeError):  # a value without a home (a type alias): its defining module
                    homes = [m[name] for m in module.modules.values() if name in m.members and not m[name].is_alias]
                    fixes.update({name: homes[0]} if len(homes) == 1 else {})
            for name, target in fixes.items():
                module.set_member(name, griffe.Alias(name, target, parent=module))
            module.exports = list(runtime.__all__)
