"""Helpers shared by the application modules: baseline releases with PIE's round-1 noise."""

from __future__ import annotations

import jax.numpy as jnp

from dpjax.budgeting.pie import _user_release, user_noise
from dpjax.validation import check_choice

MODES = ("point", "distance")


def check_mode(mode: str) -> str:
    return check_choice(mode, "mode", MODES)


def baseline_release(key, data, r, noise_mode: str = "high"):
    """One-shot Gaussian releases ``data + Z/sqrt(2 r)`` (BM0 / BM1) with the noise PIE draws in
    round 1 for the same key, so that c = 1 runs of PIE and the baselines share their noise."""
    z = user_noise(key, 0, data.shape[0], data.shape[1:], data.dtype, noise_mode)
    return _user_release(data, r, z)


def as_float(x, dtype):
    return jnp.asarray(x, dtype)
