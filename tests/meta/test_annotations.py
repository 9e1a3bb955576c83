"""Every public parameter and return is annotated (issue 48.6).

The public callables are what the faces list in ``__all__`` (``dpjax/__init__.py``,
``dpjax/<package>/__init__.py`` and ``dpjax/<module>.py``): functions, and for the classes dpjax
defines their ``__init__`` and public methods (properties' getters included). Each parameter
(``self``/``cls`` aside, ``*args`` and ``**kwargs`` included) needs an annotation, and each callable
but ``__init__`` a return annotation. Methods that the standard library generates on a dpjax class
(the proxy constructors ``multiprocessing`` registers on ``LedgerManager``) are not dpjax's to annotate.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def faces() -> list[str]:
    """The dotted names of the public modules: every module of ``dpjax`` outside ``dpjax/_src``."""
    package = ROOT / "dpjax"
    paths = [package / "__init__.py", *package.glob("*/__init__.py"), *package.glob("*.py")]
    names = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__") for p in paths}
    return sorted(name for name in names if not any(part.startswith("_") for part in name.split(".")))


def _ours(obj: object) -> bool:
    return (getattr(obj, "__module__", None) or "").split(".")[0] == "dpjax"


def _methods(cls: type) -> Iterator[tuple[str, Callable, bool]]:
    """``(name, function, bound)`` of a class's ``__init__`` and public methods; ``bound`` when its
    first parameter is ``self`` or ``cls``."""
    for name, attr in vars(cls).items():
        if name.startswith("_") and name != "__init__":
            continue
        fn = attr.fget if isinstance(attr, property) else getattr(attr, "__func__", attr)
        if inspect.isfunction(fn) and _ours(fn):
            yield name, fn, not isinstance(attr, staticmethod)


def public_callables(modules: list[str]) -> dict[str, tuple[Callable, bool]]:
    """``qualified name -> (callable, bound)`` of the public callables of ``modules`` (each object once)."""
    found: dict[str, tuple[Callable, bool]] = {}
    seen: set[int] = set()
    for module_name in modules:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj):
                members = [(f"{name}.{m}", fn, bound) for m, fn, bound in _methods(obj)] if _ours(obj) else []
            elif callable(obj) and not inspect.ismodule(obj) and _ours(obj):
                members = [(name, obj, False)]
            else:
                members = []
            for qualified, fn, bound in members:
                if id(fn) not in seen:
                    seen.add(id(fn))
                    found[f"{module_name}.{qualified}"] = (fn, bound)
    return found


def unannotated(fn: Callable, bound: bool) -> list[str]:
    """The parameters of ``fn`` without an annotation, and ``"return"`` when it has none."""
    signature = inspect.signature(fn)
    parameters = list(signature.parameters.values())[1 if bound else 0 :]
    missing = [p.name for p in parameters if p.annotation is inspect.Parameter.empty]
    if fn.__name__ != "__init__" and signature.return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


def test_every_public_parameter_and_return_is_annotated():
    modules = faces()
    assert len(modules) >= 19 and "dpjax.quantiles" in modules and "dpjax.noise" in modules, modules
    callables = public_callables(modules)
    assert len(callables) >= 300, len(callables)  # the walk reaches the whole API
    missing = {name: gaps for name, (fn, bound) in callables.items() if (gaps := unannotated(fn, bound))}
    assert not missing, "unannotated public parameters or returns:\n" + "\n".join(
        f"{name}: {', '.join(gaps)}" for name, gaps in sorted(missing.items())
    )


def test_the_check_sees_what_it_forbids(tmp_path, monkeypatch):
    """A synthetic face with an unannotated function, method, ``*args``/``**kwargs`` and return."""
    package = tmp_path / "dpjax_probe"
    package.mkdir()
    (package / "__init__.py").write_text(
        "__all__ = ['Probe', 'annotated', 'bare']\n"
        "def annotated(x: int, *args: int, **kwargs: str) -> int:\n    return x\n"
        "def bare(x, *args, y: int = 0, **kwargs):\n    return x\n"
        "class Probe:\n"
        "    def __init__(self, a) -> None:\n        self.a = a\n"
        "    def fine(self, b: int) -> int:\n        return b\n"
        "    def method(self, b: int):\n        return b\n"
        "    @staticmethod\n    def helper(c) -> int:\n        return 0\n"
        "    @property\n    def value(self):\n        return self.a\n"
        "    def _private(self, d):\n        return d\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(__name__ + "._ours", lambda obj: True)
    found = public_callables(["dpjax_probe"])
    assert set(found) == {f"dpjax_probe.{n}" for n in (
        "annotated", "bare", "Probe.__init__", "Probe.fine", "Probe.method", "Probe.helper", "Probe.value"
    )}
    gaps = {name.removeprefix("dpjax_probe."): unannotated(*found[name]) for name in found}
    assert gaps == {
        "annotated": [],
        "bare": ["x", "args", "kwargs", "return"],
        "Probe.__init__": ["a"],
        "Probe.fine": [],
        "Probe.method": ["return"],
        "Probe.helper": ["c"],
        "Probe.value": ["return"],
    }
