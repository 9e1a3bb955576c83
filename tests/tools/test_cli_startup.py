"""Fast starts: ``import dpjax`` and ``dpjax --help`` load neither JAX nor the plotting, table and
host-math libraries (they are imported where they are used)."""

import argparse
import importlib
import subprocess
import sys

from dpjax._src.tools.cli import SUBCOMMANDS

HEAVY = ("jax", "matplotlib", "pandas", "scipy", "dp_accounting", "optax", "tqdm")


def _loaded_after(code: str) -> set[str]:
    """The top-level packages of HEAVY that a fresh interpreter holds after running ``code``."""
    probe = f"import sys\n{code}\nprint(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(out.split()) & set(HEAVY)


def test_import_dpjax_and_help_load_no_heavy_library():
    assert _loaded_after("import dpjax") == set()
    help_only = "from dpjax.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    assert _loaded_after(help_only) == set()
    # A mechanism package loads JAX, but still no plotting, tables or scipy.
    assert _loaded_after("import dpjax.quantiles, dpjax.selection, dpjax.svt") == {"jax"}


def test_lazy_attributes_resolve():
    import dpjax

    assert dpjax.quantiles is importlib.import_module("dpjax.quantiles")
    assert dpjax.PureDP is importlib.import_module("dpjax.accounting").PureDP
    assert set(dpjax.__all__) <= set(dir(dpjax))


def test_listed_help_is_each_command_s_own():
    """``dpjax --help`` lists each command by the help line its module gives (without importing it)."""
    for name, (module_name, summary) in SUBCOMMANDS.items():
        commands = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module_name).add_parser(commands)
        (action,) = commands._choices_actions
        assert (action.dest, action.help) == (name, summary)
