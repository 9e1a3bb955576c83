"""Helpers shared by the application modules: input checks and baseline releases with PIE's
round-1 noise."""

from __future__ import annotations

import functools
from typing import Literal, get_args

import jax
from jax import lax

from dpjax._src import sharded
from dpjax._src.budgeting.pie_noise import user_noise, user_release
from dpjax._src.host_checks import check_choice, float_dtype
from dpjax._src.noise import NoiseMode
from dpjax._src.validation import Checks

Mode = Literal["point", "distance"]
"""What each user releases (static): a noisy point (PM0/BM0) or a noisy distance (PM1/BM1)."""
MODES: tuple[Mode, ...] = get_args(Mode)


def check_mode(mode: Mode) -> Mode:
    return check_choice(mode, "mode", MODES)


def baseline_release(key: jax.Array, data, r, noise_mode: NoiseMode = "high"):
    """One-shot Gaussian releases ``data + Z/sqrt(2 r)`` (BM0 / BM1) with the noise PIE draws in
    round 1 for the same key, so that c = 1 runs of PIE and the baselines share their noise.

    The noise is materialized before it is scaled (``optimization_barrier``): otherwise XLA may fuse
    the sampler into the release and contract ``data + z * scale`` into a fused multiply-add in one
    compilation and not in another (e.g. under ``vmap`` over ``r``), a 1-ulp difference that would
    break "same key, same result" between a concrete and a traced ``rho``."""
    z = lax.optimization_barrier(user_noise(key, 0, data.shape[0], data.shape[1:], data.dtype, noise_mode))
    return user_release(data, r, z)


def points(checks: Checks, x) -> jax.Array:
    """(n, d) user points in their float dtype (:func:`dpjax.validation.float_dtype`); finite."""
    x = checks.array(x, "x", ndim=2)
    return x.astype(float_dtype(x))


def query_point(checks: Checks, x: jax.Array, p) -> jax.Array:
    """A (d,) query point matching the (n, d) points ``x``, finite, in their dtype (may be traced)."""
    p = checks.array(p, "p", ndim=1).astype(x.dtype)
    if p.shape != (x.shape[1],):
        raise ValueError(f"p must have shape ({x.shape[1]},) to match x, got {p.shape}.")
    return p


def on_users(body, layout, key, x, r, *rest):
    """``body(key, x, r, *rest, layout=layout)`` inside an application's jit-compiled kernel.

    Users sharded evenly over mesh axes (``layout``, :func:`dpjax._src.sharded.leading_axes` of ``x``):
    ``x`` and the allotments ``r`` are laid out along them and ``body`` passes ``layout`` to
    :func:`dpjax._src.budgeting.pie.pie_kernel`, which runs the rounds per device (per-user state split);
    the answer is then a reduction over the sharded per-user outputs. Otherwise (``layout=None``)
    ``body`` runs under :func:`dpjax.sharded.auto_axes` (XLA partitions it)."""
    if layout is None:
        return sharded.auto_axes(functools.partial(body, layout=None))(key, x, r, *rest)
    x, r = sharded.constrain_leading(x, layout), sharded.constrain_leading(r, layout)
    return body(key, x, r, *rest, layout=layout)
