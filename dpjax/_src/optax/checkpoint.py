"""Checkpoints of a DP-SGD run as data: the DP state (clip strategy and clip norm, noise key, step,
noise multiplier), the parameters and the optimizer state in one ``.npz`` of arrays and one JSON
description, never a pickle.

The accounting of a run is its state: :func:`dpjax.optax.spent_epsilon` reads the step count, the
noise multiplier and the clip strategy of the :class:`~dpjax.optax.DPAggregateState`, so a restored
state is accounted as if the run had never stopped. The public schedule (sampling rate, padded size,
delta) goes in ``metadata``.

Format (version 1), a directory:

* ``arrays.npz``: the pytree's leaves in ``jax.tree.leaves`` order, named ``leaf_0``, ``leaf_1``, ...
  (``numpy.savez``, read back with ``allow_pickle=False``); a typed PRNG key is stored as its
  ``jax.random.key_data``;
* ``checkpoint.json``: ``format``, ``version``, the tree structure (``str`` of its treedef), each
  leaf's shape, dtype and key implementation (``null`` for plain arrays), the sha256 of
  ``arrays.npz``, the jax and dpjax versions that wrote it, and the caller's ``metadata``.

Restoring checks everything against a template (``like``: the state a fresh ``init`` makes): the
same structure, shapes, dtypes and key implementations, and the array file's sha256. The restored
leaves have the template's avals and shardings (committed where its leaves are), so a jitted step
compiled for the template runs on them without a recompile, and continues the run bit for bit (the
same keys, the same arrays).
"""

from __future__ import annotations

import hashlib
import json
import os
from importlib import metadata as package_metadata
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpjax._src.atomic import atomic_path

__all__ = [
    "CheckpointError",
    "load_checkpoint",
    "save_checkpoint",
]

_FORMAT, _VERSION = "dpjax._src.optax.checkpoint", 1
_ARRAYS, _DESCRIPTION = "arrays.npz", "checkpoint.json"


class CheckpointError(ValueError):
    """A checkpoint that does not match its template, or whose arrays are not those it describes."""


def _is_key(leaf) -> bool:
    return isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def _describe(leaf) -> dict:
    if _is_key(leaf):
        data = jax.random.key_data(leaf)
        return dict(shape=list(leaf.shape), dtype=str(data.dtype), key=str(jax.random.key_impl(leaf)))
    leaf = np.asarray(leaf)
    return dict(shape=list(leaf.shape), dtype=str(leaf.dtype), key=None)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _version(package: str) -> str | None:
    try:
        return package_metadata.version(package)
    except package_metadata.PackageNotFoundError:
        return None


def save_checkpoint(path: str | os.PathLike, tree: Any, *, metadata: dict | None = None) -> Path:
    """Writes ``tree`` (any pytree of arrays and typed PRNG keys, e.g. ``(params, opt_state)`` of an
    ``optax.chain`` whose first entry is ``dp_aggregate``'s state, or a ``dp_gradients`` state) to the
    directory ``path`` in the format of the module docstring, each file atomically.

    Args:
      path: the checkpoint's directory (created if needed).
      tree: the pytree to save (concrete values, not traced).
      metadata: JSON-serializable facts to keep with it (e.g. the sampling rate and delta).

    Returns:
      The directory.

    Example:
      >>> import jax, tempfile
      >>> from dpjax import optax as dpo
      >>> state = dpo.dp_aggregate(1.0, 1.0, jax.random.key(0), expected_batch_size=8).init(None)
      >>> where = save_checkpoint(tempfile.mkdtemp(), state, metadata={"sampling_rate": 0.01})
      >>> restored, facts = load_checkpoint(where, state)
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    leaves, treedef = jax.tree.flatten(tree)
    arrays = {
        f"leaf_{i}": np.asarray(jax.random.key_data(leaf) if _is_key(leaf) else leaf)
        for i, leaf in enumerate(leaves)
    }
    with atomic_path(path / _ARRAYS) as tmp, open(tmp, "wb") as f:
        np.savez(f, **arrays)  # type: ignore[arg-type]  # no key is allow_pickle: they are leaf_<i>
    description = dict(
        format=_FORMAT,
        version=_VERSION,
        tree=str(treedef),
        leaves=[_describe(leaf) for leaf in leaves],
        sha256=_sha256(path / _ARRAYS),
        writer=dict(jax=jax.__version__, dpjax=_version("dpjax")),
        metadata=metadata or {},
    )
    text = json.dumps(description, indent=1) + "\n"
    with atomic_path(path / _DESCRIPTION) as tmp:
        tmp.write_text(text)
    return path


def _restore_leaf(value: np.ndarray, saved: dict, template, index: int):
    expected = _describe(template)
    if saved != expected:
        raise CheckpointError(f"leaf {index} is {saved} in the checkpoint, the template has {expected}.")
    shape = tuple(saved["shape"])
    if value.shape[: len(shape)] != shape or (saved["key"] is None and value.shape != shape):
        raise CheckpointError(f"leaf {index}'s array has shape {value.shape}, described as {saved['shape']}.")
    if str(value.dtype) != saved["dtype"]:
        raise CheckpointError(f"leaf {index}'s array has dtype {value.dtype}, described as {saved['dtype']}.")
    out = (
        # wrap_key_data takes NumPy arrays too; its stub says jax.Array
        jax.random.wrap_key_data(value, impl=saved["key"])  # type: ignore[arg-type]
        if saved["key"] is not None
        else jnp.asarray(value)
    )
    if isinstance(template, jax.Array) and template.committed:  # placed by the caller: place it alike
        out = jax.device_put(out, template.sharding)
    return out


def load_checkpoint(path: str | os.PathLike, like: Any) -> tuple[Any, dict]:
    """Reads a checkpoint written by :func:`save_checkpoint`, checked against the template ``like``.

    Args:
      path: the checkpoint's directory.
      like: a pytree with the saved structure, shapes, dtypes and key implementations (e.g. a fresh
        ``init`` of the same transformation); its shardings are those of the result.

    Returns:
      ``(tree, metadata)``: the saved pytree (``like``'s structure) and the saved ``metadata``.

    Raises:
      CheckpointError: the description is not a version-1 dpjax checkpoint, the structure, a shape,
        dtype or key implementation differs from ``like``, or ``arrays.npz`` does not have the
        recorded sha256.
    """
    path = Path(path)
    try:
        description = json.loads((path / _DESCRIPTION).read_text())
    except (OSError, ValueError) as error:
        raise CheckpointError(f"{path / _DESCRIPTION}: {error}") from None
    if not isinstance(description, dict) or (description.get("format"), description.get("version")) != (
        _FORMAT,
        _VERSION,
    ):
        raise CheckpointError(f"{path} is not a version-{_VERSION} {_FORMAT} checkpoint.")
    leaves, treedef = jax.tree.flatten(like)
    if description["tree"] != str(treedef):
        raise CheckpointError(f"the checkpoint's tree is {description['tree']}, the template's {treedef}.")
    if _sha256(path / _ARRAYS) != description["sha256"]:
        raise CheckpointError(f"{path / _ARRAYS} does not have the sha256 its description records.")
    with np.load(path / _ARRAYS, allow_pickle=False) as arrays:
        names = sorted(f"leaf_{i}" for i in range(len(leaves)))
        if sorted(arrays.files) != names or len(description["leaves"]) != len(leaves):
            raise CheckpointError(f"{path / _ARRAYS} does not hold the {len(leaves)} leaves of the template.")
        restored = [
            _restore_leaf(arrays[f"leaf_{i}"], saved, leaf, i)
            for i, (saved, leaf) in enumerate(zip(description["leaves"], leaves, strict=True))
        ]
    return jax.tree.unflatten(treedef, restored), description["metadata"]
