"""Ghost clipping for :func:`dpjax.optax.dp_gradients`: per-example gradient norms and the clipped sum
of a loss's parameters without materializing their per-example gradients, found in its jaxpr.

Which parameters. The one-example loss ``loss_fn(params, *example)`` is traced to a jaxpr (calls of
``jit`` inlined). A parameter leaf is a *layer* when it is used exactly once, possibly through
reshapes, transposes, squeezes, copies and float casts (each used once), as

* an operand of a ``dot_general`` (dense layers, attention projections, einsums);
* the kernel of a ``conv_general_dilated`` with one feature and batch group;
* the table of a ``gather`` that takes whole rows of it (embeddings: ``table[ids]``).

Every other parameter leaf (biases, norms' scales, parameters used twice) is *materialized*: its
per-example gradients are computed as ``per_example_grads`` would, in the same backward pass.

How (Li, Tramer, Liang, Hashimoto 2022, "Large language models can be strong differentially private
learners", Sec. 4, ghost norm; Bu, Mao, Zha, Karypis 2023, "Differentially private optimization on
large model at small cost", Algorithm 1, book-keeping). A layer ``y = op(x, W)`` is linear in ``W``, so
the gradient of example i is the transpose of ``op(x_i, .)`` applied to ``dy_i``, the cotangent of its
output. One vmapped backward pass of the one-example loss, with a zero added to every layer's output,
gives every ``dy_i`` (the gradient with respect to that zero) and records every ``x_i``; the
gradients of the layers' ``W`` are not formed. Then

* ``||G_i||^2``: with ``x_i`` as ``[T, K]`` (T rows: sequence positions, image patches of a
  convolution from ``conv_general_dilated_patches``) and ``dy_i`` as ``[T, N]``,
  ``G_i = x_i^T dy_i`` and ``||G_i||_F^2 = <x_i x_i^T, dy_i dy_i^T>`` (the Gram form, ``T^2 (K + N)``
  operations, ``||x_i||^2 ||dy_i||^2`` for T = 1), or ``||x_i^T dy_i||^2`` directly (``T K N``);
  for an embedding ``sum_{t,s} [id_t = id_s] dy_t . dy_s`` (``T^2 N``), or the squares of the
  example's gradient table (``V N``, for a table of V rows read more than V times). Each layer
  takes the form of least cost by the static model of :mod:`dpjax._src.optax.ghost_cost` (floating-point
  operations and floats moved, from the shapes of the jaxpr alone). With ``per_example=True``
  (``dp_gradients(method="auto")``) the model also weighs the layer's per-example gradient
  materialized (``T K N`` once, then its norm and weighted sum from it): a layer for which that
  is cheaper, such as a small convolution over many positions, joins the materialized leaves;
* the clipped sum ``sum_i w_i G_i`` is the layer's own transposition applied once to the batch's
  ``x`` and ``w_i dy_i`` (``jax.linear_transpose``): one weight-gradient contraction, as in
  non-private training.

Guarantee: none of its own. The norms and the sums equal those of the per-example gradients up to
float rounding, so :func:`dpjax.optax.dp_gradients` releases what ``dp_aggregate`` releases on
``per_example_grads`` (the same law and, for a given key, the same noise).
"""

from __future__ import annotations

import itertools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.extend import core as jcore

from dpjax._src.optax import ghost_cost as cost
from dpjax._src.optax.transform import weighted_sum

__all__ = [
    "Analysis",
    "analyze",
    "analyze_batch",
    "ghost_clipped_sum",
]

_ALIASES = frozenset({"convert_element_type", "transpose", "reshape", "squeeze", "copy", "copy_p"})
_INLINED = frozenset({"jit", "pjit", "closed_call"})
_HIGHEST = lax.Precision.HIGHEST


class _Lit(NamedTuple):
    value: Any


class _Eqn(NamedTuple):
    """One equation of the inlined jaxpr; ``ins`` are value ids or :class:`_Lit`, ``outs`` ids."""

    eqn: Any
    ins: tuple
    outs: tuple


class _Layer(NamedTuple):
    leaf: int  # index of the parameter leaf
    eqn: int  # index of the layer's equation
    position: int  # operand position of the parameter in it
    chain: tuple  # the alias equations from the leaf to that operand
    form: str = "gram"  # how its norm is computed (a ghost form of dpjax._src.optax.ghost_cost)


class Analysis(NamedTuple):
    """The inlined jaxpr of the one-example loss and its layers (see the module docstring)."""

    eqns: tuple
    inputs: tuple  # value ids of the parameter leaves, then of the example leaves
    output: Any  # value id (or literal) of the loss
    consts: dict
    layers: tuple
    materialized: tuple  # indices of the parameter leaves that are not layers


def _inline(closed) -> tuple[tuple, tuple, Any, dict]:
    """The equations of ``closed`` with every ``jit`` call inlined, values renamed to integers."""
    counter, eqns, consts = itertools.count(), [], {}

    def walk(jaxpr, values, args):
        env = dict(zip(jaxpr.invars, args, strict=True))
        for var, value in zip(jaxpr.constvars, values, strict=True):
            env[var] = next(counter)
            consts[env[var]] = value

        def read(atom):
            return _Lit(atom.val) if isinstance(atom, jcore.Literal) else env[atom]

        for eqn in jaxpr.eqns:
            ins = tuple(read(a) for a in eqn.invars)
            if eqn.primitive.name in _INLINED:
                inner = eqn.params["jaxpr"]
                outs = walk(inner.jaxpr, inner.consts, ins)
            else:
                outs = tuple(next(counter) for _ in eqn.outvars)
                eqns.append(_Eqn(eqn, ins, outs))
            for var, out in zip(eqn.outvars, outs, strict=True):
                if not isinstance(var, jcore.DropVar):
                    env[var] = out
        return tuple(read(a) for a in jaxpr.outvars)

    inputs = tuple(next(counter) for _ in closed.jaxpr.invars)
    (output,) = walk(closed.jaxpr, closed.consts, inputs)
    return tuple(eqns), inputs, output, consts


def _is_float(aval) -> bool:
    return jnp.issubdtype(aval.dtype, jnp.floating)


def _supported(eqn, position: int, aval) -> bool:
    """Whether operand ``position`` of ``eqn`` (of type ``aval``) can be a layer's parameter."""
    name, params = eqn.primitive.name, eqn.params
    if not _is_float(aval) or not _is_float(eqn.outvars[0].aval):
        return False
    if name == "dot_general":
        return position in (0, 1)
    if name == "conv_general_dilated":
        return position == 1 and params["feature_group_count"] == 1 and params["batch_group_count"] == 1
    if name == "gather" and position == 0 and aval.ndim >= 1:
        dims = params["dimension_numbers"]
        out_ndim = eqn.outvars[0].aval.ndim
        indices = eqn.invars[1].aval
        return (
            tuple(dims.collapsed_slice_dims) == (0,)
            and tuple(dims.start_index_map) == (0,)
            and not dims.operand_batching_dims
            and tuple(params["slice_sizes"]) == (1, *aval.shape[1:])
            and tuple(dims.offset_dims) == tuple(range(out_ndim - aval.ndim + 1, out_ndim))
            and indices.ndim >= 1
            and indices.shape[-1] == 1
        )
    return False


def _layer_of(leaf: int, start, eqns, uses, outputs, taken) -> _Layer | None:
    """The layer that parameter leaf ``leaf`` (value id ``start``) feeds, if it is one."""
    value, chain = start, []
    while True:
        if value in outputs or len(uses.get(value, ())) != 1:
            return None
        index, position = uses[value][0]
        eqn = eqns[index].eqn
        if eqn.primitive.name in _ALIASES and position == 0 and len(eqn.invars) == 1:
            if not _is_float(eqn.outvars[0].aval):
                return None
            chain.append(index)
            value = eqns[index].outs[0]
            continue
        if index in taken or not _supported(eqn, position, eqn.invars[position].aval):
            return None
        return _Layer(leaf, index, position, tuple(chain))


def analyze(loss_fn, params, example, *, per_example: bool = False) -> Analysis:
    """Traces ``loss_fn(params, *example)`` (one example, a scalar loss) and finds its layers, each
    with the ghost form of least cost (:mod:`dpjax._src.optax.ghost_cost`); with ``per_example``, a
    layer whose per-example gradient costs less than every ghost form is materialized instead."""
    closed = jax.make_jaxpr(loss_fn)(params, *example)
    if len(closed.out_avals) != 1 or closed.out_avals[0].shape != ():
        raise ValueError(f"loss_fn must return a scalar for one example, got {closed.out_avals}.")
    eqns, inputs, output, consts = _inline(closed)
    uses: dict[int, list] = {}
    for index, e in enumerate(eqns):
        for position, atom in enumerate(e.ins):
            if not isinstance(atom, _Lit):
                uses.setdefault(atom, []).append((index, position))
    n_params = len(jax.tree.leaves(params))
    layers, materialized, taken = [], [], set[int]()
    for leaf in range(n_params):
        layer = _layer_of(leaf, inputs[leaf], eqns, uses, {output}, taken)
        if layer is not None:
            taken.add(layer.eqn)
            form = cost.cheapest(cost.dims(eqns[layer.eqn].eqn, layer.position), per_example)
            layer = layer._replace(form=form)
        if layer is None or layer.form == "per_example":
            materialized.append(leaf)
        else:
            layers.append(layer)
    return Analysis(eqns, inputs, output, consts, tuple(layers), tuple(materialized))


def analyze_batch(loss_fn, params, batch, *, per_example: bool = False) -> Analysis:
    """:func:`analyze` at the shapes of one example of ``batch`` (leaves with a leading example axis)."""
    abstract = lambda a, cut: jax.ShapeDtypeStruct(jnp.shape(a)[cut:], jnp.result_type(a))  # noqa: E731
    return analyze(
        loss_fn,
        jax.tree.map(lambda a: abstract(a, 0), params),
        tuple(jax.tree.map(lambda a: abstract(a, 1), b) for b in batch),
        per_example=per_example,
    )


def _bind(eqn, *args):
    out = eqn.primitive.bind(*args, **eqn.primitive.get_bind_params(eqn.params))
    return out if eqn.primitive.multiple_results else [out]


def _evaluate(analysis: Analysis, leaves, example, zeros):
    """The loss of one example, with ``zeros[k]`` added to layer k's output, and each layer's other
    operand (its input ``x``)."""
    env = dict(analysis.consts)
    env.update(zip(analysis.inputs, (*leaves, *example), strict=True))
    at = {layer.eqn: k for k, layer in enumerate(analysis.layers)}
    inputs = [None] * len(analysis.layers)

    def read(atom):
        return atom.value if isinstance(atom, _Lit) else env[atom]

    for index, e in enumerate(analysis.eqns):
        args = [read(a) for a in e.ins]
        outs = _bind(e.eqn, *args)
        if index in at:
            k = at[index]
            inputs[k] = args[1 - analysis.layers[k].position]
            outs = [outs[0] + zeros[k]]
        env.update(zip(e.outs, outs, strict=True))
    return read(analysis.output), inputs


def _rows(x, dy, eqn, position):
    """``x`` as ``[B, T, K]`` and ``dy`` as ``[B, T, N]`` for one example of a dense or convolution
    layer (B: the operation's own batch dimensions, T: rows summed over, K and N: the parameter's)."""
    if eqn.primitive.name == "conv_general_dilated":
        p = eqn.params
        _, rhs_spec, out_spec = p["dimension_numbers"]
        kernel = eqn.invars[1].aval.shape
        patches = lax.conv_general_dilated_patches(
            x,
            [kernel[d] for d in rhs_spec[2:]],
            p["window_strides"],
            p["padding"],
            p["lhs_dilation"],
            p["rhs_dilation"],
            p["dimension_numbers"],
            precision=_HIGHEST,
        )
        order = (out_spec[0], *out_spec[2:], out_spec[1])
        flat = lambda a: jnp.transpose(a, order).reshape(1, -1, a.shape[out_spec[1]])  # noqa: E731
        return flat(patches), flat(dy)
    (contract, batch) = eqn.params["dimension_numbers"]
    own_contract, own_batch = contract[1 - position], batch[1 - position]
    free = [d for d in range(x.ndim) if d not in own_contract and d not in own_batch]
    b = [x.shape[d] for d in own_batch]
    t = [x.shape[d] for d in free]
    x3 = jnp.transpose(x, (*own_batch, *free, *own_contract)).reshape(math.prod(b), math.prod(t), -1)
    nb, nt = len(b), len(t)
    n_free = dy.ndim - nb - nt
    if position == 0:  # the output is [batch, parameter's free dims, x's free dims]
        dy = jnp.transpose(dy, (*range(nb), *range(nb + n_free, dy.ndim), *range(nb, nb + n_free)))
    return x3, dy.reshape(math.prod(b), math.prod(t), -1)


def _dense_square(x3, dy3, form, dtype):
    """``sum_b ||x3[b]^T dy3[b]||_F^2`` in ``form``: ``outer`` (one row), ``gram`` or ``direct``."""
    x3, dy3 = x3.astype(dtype), dy3.astype(dtype)
    if form == "outer":
        return jnp.sum(jnp.sum(x3 * x3, axis=(1, 2)) * jnp.sum(dy3 * dy3, axis=(1, 2)))
    if form == "gram":
        gx = jnp.einsum("btk,bsk->bts", x3, x3, precision=_HIGHEST)
        gy = jnp.einsum("btn,bsn->bts", dy3, dy3, precision=_HIGHEST)
        return jnp.sum(gx * gy)
    g = jnp.einsum("btk,btn->bkn", x3, dy3, precision=_HIGHEST)
    return jnp.sum(g * g)


def _embedding_square(ids, dy, eqn, form, dtype):
    """``||G||_F^2`` of one example's gather gradient (rows with equal ids add up) in ``form``:
    ``table`` (the gradient's rows, then their squares) or ``ids`` (the id-equality Gram form)."""
    rows = eqn.invars[0].aval.shape[0]
    ids = ids.reshape(-1)
    dy = dy.reshape(ids.shape[0], -1).astype(dtype)
    if eqn.params["mode"] == lax.GatherScatterMode.CLIP:
        ids, valid = jnp.clip(ids, 0, rows - 1), jnp.ones(ids.shape, bool)
    else:  # fill-or-drop and promise-in-bounds: the transposed scatter drops out-of-bounds rows
        valid = (ids >= 0) & (ids < rows)
    if form == "table":  # (a negative id would wrap around in .at[]: its row is selected to 0)
        dy = jnp.where(valid[:, None], dy, 0)
        table = jnp.zeros((rows, dy.shape[1]), dtype).at[ids].add(dy, mode="drop")
        return jnp.sum(table * table)
    same = (ids[:, None] == ids[None, :]) & valid[:, None] & valid[None, :]
    gram = jnp.einsum("tn,sn->ts", dy, dy, precision=_HIGHEST)
    return jnp.sum(jnp.where(same, gram, 0))


def _layer_square(analysis: Analysis, k: int, x, dy, dtype):
    layer = analysis.layers[k]
    eqn = analysis.eqns[layer.eqn].eqn
    if eqn.primitive.name == "gather":
        return _embedding_square(x[..., 0], dy, eqn, layer.form, dtype)
    x3, dy3 = _rows(x, dy, eqn, layer.position)
    return _dense_square(x3, dy3, layer.form, dtype)


def _per_example(analysis: Analysis, dtype):
    """``fn(leaves, example) -> (materialized grads, layer inputs, layer cotangents, squared norm)``
    for one example (vmapped by the caller)."""
    layer_avals = [analysis.eqns[layer.eqn].eqn.outvars[0].aval for layer in analysis.layers]

    def fn(leaves, example):
        leaves = list(leaves)

        def loss(rest, zeros):
            for leaf, value in zip(analysis.materialized, rest, strict=True):
                leaves[leaf] = value
            return _evaluate(analysis, leaves, example, zeros)

        rest = [leaves[leaf] for leaf in analysis.materialized]
        zeros = [jnp.zeros(a.shape, a.dtype) for a in layer_avals]
        (grads, cotangents), inputs = jax.grad(loss, argnums=(0, 1), has_aux=True)(rest, zeros)
        square = sum((jnp.sum(jnp.square(g.astype(dtype))) for g in grads), jnp.zeros((), dtype))
        for k, (x, dy) in enumerate(zip(inputs, cotangents, strict=True)):
            square = square + _layer_square(analysis, k, x, dy, dtype)
        return grads, inputs, cotangents, square

    return fn


def _layer_sum(analysis: Analysis, k: int, leaf_value, inputs, weighted):
    """``sum_i w_i G_i`` of layer k: its operation's transposition in the parameter, on the batch."""
    layer = analysis.layers[k]
    eqn = analysis.eqns[layer.eqn].eqn

    def apply(w):
        for index in layer.chain:
            (w,) = _bind(analysis.eqns[index].eqn, w)

        def one(x):
            args = (w, x) if layer.position == 0 else (x, w)
            return _bind(eqn, *args)[0]

        return jax.vmap(one)(inputs)

    (total,) = jax.linear_transpose(apply, leaf_value)(weighted)
    return total


def ghost_clipped_sum(analysis: Analysis, leaves, batch, weights_fn, dtype):
    """``(sums, norms)``: the clipped sum of every parameter leaf (a list in leaf order) and every
    example's gradient norm. ``weights_fn(norms) -> (weights, finite)`` gives the clip weights
    ``w_i`` and which rows have a finite norm; other rows are zeroed before they are summed."""
    grads, inputs, cotangents, squares = jax.vmap(_per_example(analysis, dtype), in_axes=(None, 0))(
        leaves, batch
    )
    norms = jnp.sqrt(squares)
    weights, finite = weights_fn(norms)

    def rows(a, scale=None):  # the rows of examples with a non-finite norm selected to 0
        if not _is_float(a):
            return a
        shape = (-1,) + (1,) * (a.ndim - 1)
        a = a if scale is None else a * scale.astype(a.dtype).reshape(shape)
        return jnp.where(finite.reshape(shape), a, 0)

    sums = [None] * len(leaves)
    for k, layer in enumerate(analysis.layers):
        x, dy = rows(inputs[k]), rows(cotangents[k], weights)
        sums[layer.leaf] = _layer_sum(analysis, k, leaves[layer.leaf], x, dy)
    for leaf, total in zip(analysis.materialized, weighted_sum(grads, weights, finite), strict=True):
        sums[leaf] = total
    return sums, norms
