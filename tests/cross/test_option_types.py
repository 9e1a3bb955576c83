"""The annotations say what the validation accepts: each ``Literal`` option alias equals the values its
check takes, every public mechanism's annotations resolve, and keys are ``jax.Array``."""

import importlib
import inspect
import typing

import jax
import pytest

import dpjax
from dpjax import accounting
from dpjax._src import noise, selection_draws, selection_gap

# Modules by import path: several packages re-export a function under its module's name.
_common, pie_kernel, splits = (
    importlib.import_module(f"dpjax._src.budgeting.{m}") for m in ("common", "pie_kernel", "splits")
)
optax_accounting = importlib.import_module("dpjax._src.optax.accounting")
joint_exp, joint_exp_tables, unbounded, exp_mech = (
    importlib.import_module(f"dpjax._src.quantiles.{m}")
    for m in ("joint_exp", "joint_exp_tables", "unbounded", "exp_mech")
)
above_threshold = importlib.import_module("dpjax._src.svt.above_threshold")

FAMILIES = ("additive", "aggregates", "budgeting", "noise", "optax", "postprocess", "quantiles", "selection",
            "svt", "topk")

# (the Literal alias, the values its validation accepts)
OPTIONS = {
    "selection.Noise": (selection_draws.Noise, selection_draws.NOISES),
    "selection.Method": (selection_draws.Method, selection_draws.METHODS),
    "selection.TopKMethod": (selection_draws.TopKMethod, selection_draws.TOP_K_METHODS),
    "selection.GapNoise": (selection_gap.GapNoise, selection_gap.GAP_NOISES),
    "svt.AboveThresholdNoise": (above_threshold.AboveThresholdNoise, above_threshold.NOISES),
    "svt.AboveThresholdMethod": (above_threshold.AboveThresholdMethod, above_threshold.METHODS),
    "quantiles.UnboundedNoise": (unbounded.UnboundedNoise, unbounded.NOISES),
    "quantiles.JointExpMethod": (joint_exp.JointExpMethod, joint_exp_tables.METHODS),
    "quantiles.QuantileMethod": (exp_mech.QuantileMethod, exp_mech._METHODS),
    "noise.NoiseMode": (noise.NoiseMode, noise._MODES),
    "noise.Sampler": (noise.Sampler, tuple(noise.SAMPLERS)),
    "budgeting.common.Mode": (_common.Mode, _common.MODES),
    "budgeting.splits.Split": (splits.Split, splits._SPLITS),
    "optax.accounting.AccountantName": (optax_accounting.AccountantName, optax_accounting._ACCOUNTANTS),
}


@pytest.mark.parametrize("name", OPTIONS)
def test_each_option_alias_lists_exactly_what_its_validation_accepts(name):
    alias, accepted = OPTIONS[name]
    assert typing.get_origin(alias) is typing.Literal
    assert typing.get_args(alias) == tuple(accepted)


def test_neighbors_like_lists_the_enum_values_and_pie_noise_mode_is_noise_mode():
    (_, literal) = typing.get_args(accounting.NeighborsLike)
    assert typing.get_args(literal) == tuple(member.value for member in accounting.Neighbors)
    for mode in typing.get_args(noise.NoiseMode):
        pie_kernel.check_plan(1, noise_mode=mode)
    with pytest.raises(ValueError, match="noise_mode"):
        pie_kernel.check_plan(1, noise_mode="medium")


def _public_functions():
    for family in FAMILIES:
        module = getattr(dpjax, family)
        for name in getattr(module, "__all__", [n for n in dir(module) if not n.startswith("_")]):
            obj = getattr(module, name)
            if inspect.isfunction(obj) and obj.__module__.startswith("dpjax."):
                yield f"{family}.{name}", obj


def test_public_annotations_resolve_keys_are_arrays_and_literal_defaults_are_allowed():
    checked = 0
    for name, fn in _public_functions():
        hints = typing.get_type_hints(fn)  # a misspelt alias fails here
        if "key" in inspect.signature(fn).parameters and "key" in hints:
            assert jax.Array in (typing.get_args(hints["key"]) or (hints["key"],)), name
        for parameter in inspect.signature(fn).parameters.values():
            hint = hints.get(parameter.name)
            if typing.get_origin(hint) is typing.Literal and parameter.default is not inspect.Parameter.empty:
                assert parameter.default in typing.get_args(hint), (name, parameter.name)
                checked += 1
    assert checked >= 30
