"""Griffe extension for the API reference (mkdocs.yml): dpjax's docstrings and exports as Python sees them.

* Griffe reads the source without importing it, so it misses two kinds of exports: names a package
  loads on first use (PEP 562 ``__getattr__``: ``dpjax.optax``), and functions named like the module
  they come from (``from dpjax.budgeting.kde import kde``), where griffe keeps the submodule. Each
  module that states ``__all__`` (or, without it, re-exports ``from a import X as X``) is imported,
  every exported name points at the object the import gives, and a submodule is shown only where
  its package exports it (``dpjax.audit.reference``) or where it exports names its package does not
  re-export (``dpjax.accounting.pay_what_you_get.Charge``), so every name in an ``__all__`` is shown.
  A name bound by assignment to a function or class defined elsewhere (``mean_guarantee =
  sum_guarantee``, ``discrete_report_noisy_max = _discrete.discrete_report_noisy_max``) is shown as
  that function or class, not as an attribute without a docstring.
* dpjax's docstrings head their doctests ``Example:``, which griffe's Google parser reads as an
  admonition; they are read as the ``Examples:`` section, so the ``>>>`` lines render as code.
* A default that names a private constant (``branching: int = _DEFAULT_BRANCHING``) is shown as its
  value (``8``): the reader sees what the default is, not a name they cannot use.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import types

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:[ \t]*$", re.MULTILINE)


def _modules(package: griffe.Module) -> list[griffe.Module]:
    found, stack = [], [package]
    while stack:
        module = stack.pop()
        found.append(module)
        stack.extend(sub for sub in module.modules.values() if not sub.is_alias)
    return found


def _home(module: griffe.Module, name: str, value, loader: griffe.GriffeLoader):
    """The griffe object of ``module.name`` at run time: where the value was defined."""
    if isinstance(value, types.ModuleType):
        return loader.modules_collection[value.__name__]
    try:
        return loader.modules_collection[f"{value.__module__}.{value.__qualname__}"]
    except (AttributeError, KeyError):  # a value with no qualified name (a type alias): a submodule's
        homes = [sub[name] for sub in module.modules.values() if name in sub.members]
        homes = [home for home in homes if not home.is_alias]
        return homes[0] if len(homes) == 1 else None


def _reexports(module: griffe.Module) -> list[str]:
    """A module without ``__all__``: its explicit re-exports, ``from a import X as X`` (PEP 484)."""
    tree = ast.parse(module.filepath.read_text()) if not isinstance(module.filepath, list) else None
    imports = [node for node in (tree.body if tree else []) if isinstance(node, ast.ImportFrom)]
    return [alias.name for node in imports for alias in node.names if alias.asname == alias.name]


def _defined_elsewhere(value, member: griffe.Object) -> bool:
    """``value`` is a function or class whose own name is not ``member``'s (an assignment alias)."""
    routine = inspect.isfunction(value) or inspect.isclass(value)
    return routine and f"{value.__module__}.{value.__qualname__}" != member.path


_PRIVATE_NAME = re.compile(r"(?<![\w.])_[A-Za-z]\w*")


def _runtime(function: griffe.Object):
    """The run-time object of a function or class (``None`` where it cannot be imported)."""
    try:
        obj = importlib.import_module(function.module.path)
        for part in function.path[len(function.module.path) + 1 :].split("."):
            obj = getattr(obj, part)
        return inspect.unwrap(obj)
    except (ImportError, AttributeError):
        return None


def _show_private_defaults(func: griffe.Function) -> None:
    """Each default of ``func`` that names a private constant, replaced by the run-time value."""
    private = [p for p in func.parameters if p.default and _PRIVATE_NAME.search(str(p.default))]
    runtime = _runtime(func) if private else None
    if runtime is None:
        return
    try:
        defaults = inspect.signature(runtime).parameters
    except (TypeError, ValueError):
        return
    for parameter in private:
        if parameter.name in defaults and defaults[parameter.name].default is not inspect.Parameter.empty:
            parameter.default = repr(defaults[parameter.name].default)


class DpjaxDocs(griffe.Extension):
    """The readings of the module docstring."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _EXAMPLE.sub(r"\1Examples:", obj.docstring.value)

    def on_function_instance(self, *, func: griffe.Function, **kwargs) -> None:
        _show_private_defaults(func)

    def on_attribute_instance(self, *, attr: griffe.Attribute, **kwargs) -> None:
        """A class field whose default names a private constant (a dataclass's ``__init__`` is made
        from these): its run-time value instead."""
        if not (attr.parent is not None and attr.parent.is_class and attr.value
                and _PRIVATE_NAME.search(str(attr.value))):
            return
        owner = _runtime(attr.parent)
        if owner is not None and hasattr(owner, attr.name):
            attr.value = repr(getattr(owner, attr.name))

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs) -> None:
        for module in _modules(pkg):
            exports = _reexports(module) if module.exports is None else None
            if module.exports is None and not exports:
                continue
            runtime, fixes = importlib.import_module(module.path), {}
            exports = exports or list(runtime.__all__)
            for name in exports:
                value, member = getattr(runtime, name), module.members.get(name)
                if member is not None and not member.is_alias and member.is_attribute and _defined_elsewhere(
                    value, member
                ):
                    pass  # an assignment of a function or class: shown as that function or class
                elif member is not None and (member.is_alias or not member.is_module):
                    continue  # griffe found it
                if member is not None and isinstance(value, types.ModuleType):
                    continue  # a submodule, as griffe has it
                home = _home(module, name, value, loader)
                if home is not None:
                    fixes[name] = home
            for name, home in fixes.items():
                module.set_member(name, griffe.Alias(name, home, parent=module))
            module.exports = exports
            for sub in module.modules.values():  # shown where exported, or where it has names of its own
                own = () if sub.is_alias else getattr(importlib.import_module(sub.path), "__all__", ())
                sub.public = sub.name in module.exports or bool(set(own) - set(exports))
