"""The defaults of ``dpjax train`` and its usage error, shared by its command line
(:mod:`dpjax._src.tools.train.cli`) and its body (:mod:`dpjax._src.tools.train.run`); light to import:
no JAX."""

from __future__ import annotations

from dpjax._src.optax import defaults

__all__ = [
    "DEFAULTS",
    "DEFAULT_EPOCHS",
    "DEFAULT_MODEL",
    "UsageError",
]

# The defaults of ``dpjax train``, chosen from the study in benchmarks/README.md ("DP-SGD headline").
DEFAULTS = dict(
    dataset="adult",
    clip="quantile",
    clip_norm=1.0,
    quantile=defaults.QUANTILE,
    clip_epsilon=defaults.CLIP_EPSILON,
    every=defaults.EVERY,
    epsilon=3.0,
    delta=1e-5,
    batch_size=256,
    hidden=64,
    learning_rate=2e-3,
    seed=0,
)
DEFAULT_EPOCHS = {"adult": 5.0, "mnist": 5.0}
DEFAULT_MODEL = {"adult": "mlp", "mnist": "cnn"}


class UsageError(Exception):
    """A bad command-line value found after parsing (printed as ``dpjax train: error: ...``)."""
