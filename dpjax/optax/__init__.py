"""dpjax in JAX training loops: DP-SGD (Abadi et al. 2016) as optax transforms, with the clip norm
fixed, privately estimated by the unbounded quantile mechanism (Durfee 2023) or adapted
geometrically (Andrew et al. 2021), and the whole run accounted with ``dp_accounting``.

Example:
  >>> import jax, jax.numpy as jnp, optax
  >>> from dpjax import optax as dpo
  >>> strategy = dpo.quantile_clip(1.0, epsilon=0.05)
  >>> tx = optax.chain(dpo.dp_aggregate(1.0, strategy, jax.random.key(0), expected_batch_size=256),
  ...                  optax.adam(1e-3))
  >>> eps = dpo.training_epsilon(1e-5, steps=1000, sampling_rate=0.01, noise_multiplier=1.0, clip=strategy)
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the lazy names, for type checkers and the API reference
    from dpjax._src.optax.accounting import (
        AccountantName,
        calibration_discretization,
        dp_event,
        noise_multiplier_for_epsilon,
        spent_epsilon,
        training_epsilon,
        training_guarantee,
    )
    from dpjax._src.optax.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
    from dpjax._src.optax.clip import (
        ClipStrategy,
        FixedClip,
        GeometricClip,
        QuantileClip,
        fixed_clip,
        geometric_clip,
        quantile_clip,
    )
    from dpjax._src.optax.defaults import CLIP_EPSILON, EVERY, QUANTILE
    from dpjax._src.optax.gdp import pure_dp_to_gdp
    from dpjax._src.optax.gradients import DPGradients, GradientMethod, dp_gradients
    from dpjax._src.optax.grads import per_example_grads
    from dpjax._src.optax.sampling import (
        padded_batch_size,
        poisson_sample,
        truncation_delta,
        truncation_probability,
    )
    from dpjax._src.optax.transform import DPAggregateState, dp_aggregate, example_norms

# Loaded on first use (PEP 562), so that ``dpjax train``'s command line (dpjax._src.tools.train.cli) starts
# without importing JAX.
_HOMES = {
    "AccountantName": "accounting",
    "calibration_discretization": "accounting",
    "dp_event": "accounting",
    "CLIP_EPSILON": "defaults",
    "EVERY": "defaults",
    "QUANTILE": "defaults",
    "noise_multiplier_for_epsilon": "accounting",
    "pure_dp_to_gdp": "gdp",
    "spent_epsilon": "accounting",
    "training_epsilon": "accounting",
    "training_guarantee": "accounting",
    "CheckpointError": "checkpoint",
    "load_checkpoint": "checkpoint",
    "save_checkpoint": "checkpoint",
    "ClipStrategy": "clip",
    "FixedClip": "clip",
    "GeometricClip": "clip",
    "QuantileClip": "clip",
    "fixed_clip": "clip",
    "geometric_clip": "clip",
    "quantile_clip": "clip",
    "per_example_grads": "grads",
    "padded_batch_size": "sampling",
    "poisson_sample": "sampling",
    "truncation_delta": "sampling",
    "truncation_probability": "sampling",
    "DPGradients": "gradients",
    "GradientMethod": "gradients",
    "dp_gradients": "gradients",
    "DPAggregateState": "transform",
    "dp_aggregate": "transform",
    "example_norms": "transform",
}


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'dpjax.optax' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"dpjax._src.optax.{_HOMES[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_HOMES))


__all__ = [
    "CLIP_EPSILON",
    "EVERY",
    "QUANTILE",
    "AccountantName",
    "CheckpointError",
    "ClipStrategy",
    "DPAggregateState",
    "DPGradients",
    "FixedClip",
    "GeometricClip",
    "GradientMethod",
    "QuantileClip",
    "calibration_discretization",
    "dp_aggregate",
    "dp_event",
    "dp_gradients",
    "example_norms",
    "fixed_clip",
    "geometric_clip",
    "load_checkpoint",
    "noise_multiplier_for_epsilon",
    "padded_batch_size",
    "per_example_grads",
    "poisson_sample",
    "pure_dp_to_gdp",
    "quantile_clip",
    "save_checkpoint",
    "spent_epsilon",
    "training_epsilon",
    "training_guarantee",
    "truncation_delta",
    "truncation_probability",
]
