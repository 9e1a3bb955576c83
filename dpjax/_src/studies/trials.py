"""One trial of a study: a mechanism's release on a dataset, measured by the metrics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from dpjax._src.datasets import builtin
from dpjax._src.studies.definition import Mechanism
from dpjax._src.studies.metrics import Metric

__all__ = ["Data", "load_dataset", "trial_function"]


class Data(NamedTuple):
    """One dataset of a study: on the device (what ``fn`` gets), on the host (for theory values and
    parameters computed from the data), and its fixed parameters."""

    device: Any
    host: Any
    params: Mapping


def load_dataset(entry, seed: int) -> Data:
    """The :class:`Data` of one ``datasets`` entry."""
    params: Mapping = {}
    if isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], Mapping):
        entry, params = entry
    if isinstance(entry, str):
        entry = builtin.load(entry, seed)
    if isinstance(entry, builtin.Dataset):
        entry = entry.values
    params = {k: v(entry) if callable(v) else v for k, v in params.items()}
    return Data(jax.tree.map(jnp.asarray, entry), entry, params)


_MISSING = object()


def _pick(tree, key):
    """``tree[key]`` (the whole ``tree`` for ``key=None``), or ``_MISSING``."""
    if key is None:
        return tree
    if isinstance(tree, Mapping) and key in tree:
        return tree[key]
    return _MISSING


def _measure(mechanism: Mechanism, metrics: Sequence[Metric], release, truth) -> dict:
    """``{(label, metric name): scalar}`` for one release."""
    out = {}
    for label in mechanism.labels:
        r = release[label] if mechanism.variants else release
        t = truth[label] if mechanism.variants and isinstance(truth, Mapping) and label in truth else truth
        for metric in metrics:
            r_m = _pick(r, metric.output)
            if r_m is _MISSING:
                continue
            t_m = _pick(t, metric.truth)
            if t_m is _MISSING:
                raise ValueError(f"metric {metric.name!r} reads truth[{metric.truth!r}]: no such entry.")
            value = jnp.asarray(metric.fn(r_m, t_m))
            if value.ndim != 0:
                raise ValueError(
                    f"metric {metric.name!r} must give one number per trial, got shape {value.shape}."
                )
            out[(label, metric.name)] = value.astype(jnp.result_type(float))
    return out


def trial_function(mechanism, metrics, truth_fn, fixed: dict, point: dict | None):
    """``trial(key, data, grid) -> {(label, metric): [G]}``: vmap over the traced grid; or, with a
    concrete ``point``, ``trial(key, data) -> {(label, metric): scalar}`` at that point."""

    def at(key, data, values):
        params = {**fixed, **values}
        release = mechanism.fn(key, data, **params)
        truth = None if truth_fn is None else truth_fn(data, **params)
        return _measure(mechanism, metrics, release, truth)

    if point is not None:
        return lambda key, data: at(key, data, point)
    return lambda key, data, grid: jax.vmap(lambda values: at(key, data, values))(grid)
