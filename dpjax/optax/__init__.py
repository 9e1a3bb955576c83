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

from dpjax.optax.accounting import (
    dp_event,
    noise_multiplier_for_epsilon,
    pure_dp_to_gdp,
    spent_epsilon,
    training_epsilon,
    training_guarantee,
)
from dpjax.optax.clip import (
    ClipStrategy,
    FixedClip,
    GeometricClip,
    QuantileClip,
    fixed_clip,
    geometric_clip,
    quantile_clip,
)
from dpjax.optax.grads import per_example_grads
from dpjax.optax.transform import DPAggregateState, dp_aggregate, example_norms

__all__ = [
    "ClipStrategy",
    "DPAggregateState",
    "FixedClip",
    "GeometricClip",
    "QuantileClip",
    "dp_aggregate",
    "dp_event",
    "example_norms",
    "fixed_clip",
    "geometric_clip",
    "noise_multiplier_for_epsilon",
    "per_example_grads",
    "pure_dp_to_gdp",
    "quantile_clip",
    "spent_epsilon",
    "training_epsilon",
    "training_guarantee",
]
