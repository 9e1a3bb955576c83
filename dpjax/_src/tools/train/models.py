"""The models of ``dpjax train`` (:mod:`dpjax._src.tools.train.run`): a pure-JAX MLP and a small CNN, their
per-example loss and their accuracy."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from dpjax._src.datasets import training as data_lib
from dpjax._src.numerics import ceil_div

__all__ = ["CNN_CHANNELS", "Model", "accuracy", "cnn", "example_loss", "mlp", "model_for"]


class Model(NamedTuple):
    """A classifier: ``init(key) -> params`` (jitted: one compilation, not one per eager op) and
    ``logits(params, x)`` for one example ``x`` (a flat feature vector) or a batch of them."""

    init: Callable
    logits: Callable


def mlp(sizes) -> Model:
    """An MLP with layer widths ``sizes`` (tanh hidden layers, linear output), Glorot-uniform weights
    and zero biases."""
    sizes = tuple(sizes)

    def init(key):
        params = []
        for k, (fan_in, fan_out) in zip(
            jax.random.split(key, len(sizes) - 1), itertools.pairwise(sizes), strict=True
        ):
            limit = math.sqrt(6.0 / (fan_in + fan_out))
            params.append(
                (jax.random.uniform(k, (fan_in, fan_out), minval=-limit, maxval=limit), jnp.zeros(fan_out))
            )
        return params

    def logits(params, x):
        for w, b in params[:-1]:
            x = jnp.tanh(x @ w + b)
        w, b = params[-1]
        return x @ w + b

    return Model(jax.jit(init), logits)


CNN_CHANNELS = (8, 16)  # two 3x3 convolutions of stride 2: 28x28 -> 14x14x8 -> 7x7x16 -> classes


def cnn(classes: int, side: int = 28, channels=CNN_CHANNELS) -> Model:
    """A small CNN for ``side x side`` grey images given as flat vectors: 3x3 convolutions of stride 2
    ('SAME' padding, tanh) with ``channels`` output channels, then a linear layer to ``classes``
    (9,098 parameters for 10 classes at the defaults). He-uniform convolution weights,
    Glorot-uniform output weights, zero biases."""
    channels = tuple(channels)
    out_side = side
    for _ in channels:
        out_side = ceil_div(out_side, 2)
    flat = out_side * out_side * channels[-1]

    def init(key):
        keys = jax.random.split(key, len(channels) + 1)
        params, fan_in = [], 1
        for k, c in zip(keys[:-1], channels, strict=True):
            limit = math.sqrt(6.0 / (9 * fan_in))
            params.append(
                (jax.random.uniform(k, (3, 3, fan_in, c), minval=-limit, maxval=limit), jnp.zeros(c))
            )
            fan_in = c
        limit = math.sqrt(6.0 / (flat + classes))
        params.append(
            (jax.random.uniform(keys[-1], (flat, classes), minval=-limit, maxval=limit), jnp.zeros(classes))
        )
        return params

    def logits(params, x):
        batch_shape = x.shape[:-1]
        h = x.reshape((-1, side, side, 1))
        for w, b in params[:-1]:
            h = jax.lax.conv_general_dilated(h, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
            h = jnp.tanh(h + b)
        w, b = params[-1]
        return (h.reshape(h.shape[0], -1) @ w + b).reshape(*batch_shape, classes)

    return Model(jax.jit(init), logits)


def model_for(name: str, dataset: data_lib.Dataset, hidden: int) -> Model:
    """``"mlp"`` (one hidden layer of ``hidden`` units) or ``"cnn"`` (:func:`cnn`, 28x28 images)."""
    if name == "cnn":
        if dataset.x_train.shape[1] != 28 * 28:
            raise ValueError(
                f"--model cnn needs 28x28 images, {dataset.name} has {dataset.x_train.shape[1]} features"
            )
        return cnn(dataset.classes)
    return mlp((dataset.x_train.shape[1], hidden, dataset.classes))


def example_loss(model: Model):
    """Softmax cross-entropy of one example (``x`` without a batch axis, integer label ``y``)."""

    def loss(params, x, y):
        return optax.softmax_cross_entropy_with_integer_labels(model.logits(params, x), y)

    return loss


def accuracy(model: Model, params, x, y):
    """Fraction of correct argmax predictions."""
    return jnp.mean(jnp.argmax(model.logits(params, x), axis=-1) == y)
