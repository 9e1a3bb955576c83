"""``method="auto"``: one release takes the single-release path, Monte Carlo over keys the fast sampler.

Every mechanism with several exact samplers of the same law (the literal kernel and a fast one:
the top-down Gumbel process or a first passage) takes ``method="auto"`` by default and hands its
kernels to :func:`run`, which applies the one rule below. The rule is static: it reads only which
arguments are batched, at which ``vmap`` level and by how much, never a value.

The rule. Count the releases that share one preparation: the product of the sizes of the ``vmap``
levels at which the key is batched and no other operand of the kernel is (a level that also batches
the data or a parameter, keys x datasets zipped, gives each release its own preparation). If at
least :data:`MIN_SHARED` releases share each preparation, the fast sampler runs: its preparation
(a heap or a table over the data, O(n)) is key independent, so nested ``vmap`` builds it once per
value of the batched data and parameters and only the O(log n) draw is batched over keys. Otherwise
(one release, ``jit`` without ``vmap``, ``vmap`` over parameters or datasets with one key each,
``lax.scan``/``lax.map`` over keys, which run one release per step) the single-release path runs,
the cheapest for one release: the literal kernel (n noise variates and a comparison, no
preparation to amortize). So:

* ``jit(vmap(f over keys))``, data fixed: fast, preparation once.
* ``vmap over epsilon of vmap over keys`` (the study runner's shape), and the reverse nesting:
  fast, one preparation per epsilon.
* ``vmap over datasets of vmap over keys``: fast, one preparation per dataset; keys zipped with
  datasets (``vmap(f)(keys, datasets)``): literal, there is nothing to share.
* ``vmap`` inside ``jit`` and ``jit`` inside ``vmap``: the same (the rule sees the batching when the
  ``jit``'s jaxpr is batched).

How. :func:`jax.custom_batching.custom_vmap` tells which arguments a ``vmap`` level batches. Its rule
does no work: it records the level (size and batched arguments, outermost first) and binds the
kernel again one level down, so after the outermost ``vmap`` the kernel is traced once with the
whole batching structure known, the rule picks the path, and the chosen kernel runs under one
``jax.vmap`` per recorded level. Concrete arguments (no tracer at all) cannot be batched and call
the single-release path directly, with no staging cost.

Same law, not the same draw: the paths use different random streams, so with ``"auto"`` a draw
depends on the key *and* on how the call is batched (``vmap(f)(keys)[i]`` need not equal
``f(keys[i])``; each is an exact draw of the mechanism's law). Name the method to get one stream.

Limits of :func:`~jax.custom_batching.custom_vmap` (JAX 0.10) and how they are handled: it has no
transpose rule, so reverse-mode differentiation (``jax.grad``, ``jax.vjp``) through it fails. The
staged call is therefore wrapped in a :func:`jax.custom_jvp` whose derivative is the single-release
path's: ``jax.jvp`` and ``jax.grad`` with respect to a traced parameter differentiate (and run) the
literal kernel, also under ``vmap`` (the outputs are samples, whose derivative depends on the sampler
anyway). A ``custom_vmap`` function must not close over tracers, which is why the kernels get every
array as an argument. ``jit``, ``scan``, ``checkify`` and sharded data (``NamedSharding``, meshes)
see the chosen kernel like any other function.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import jax
from jax.custom_batching import custom_vmap

from dpjax._src.host_checks import is_traced

AUTO = "auto"
MIN_SHARED = 2  # fast when at least this many releases share one preparation (it costs ~1 release)

Level = tuple[int, tuple[bool, ...]]  # (axis size, batched flag of each flat argument, key first)


def shared_releases(levels: tuple[Level, ...]) -> int:
    """How many releases share one preparation: the product of the sizes of the levels that batch
    the key (the first flat argument) and nothing else."""
    return math.prod(size for size, batched in levels if batched[0] and not any(batched[1:]))


def choose(levels: tuple[Level, ...], fast: str | None, single: str) -> str:
    """The rule of the module docstring: ``fast`` when at least :data:`MIN_SHARED` releases share a
    preparation (and there is a fast path), else ``single``."""
    return fast if fast is not None and shared_releases(levels) >= MIN_SHARED else single


def run(
    method: str,
    paths: Mapping[str, Callable],
    key,
    *operands,
    fast: str | None,
    single: str = "literal",
):
    """``paths[method](key, *operands)``; for ``method="auto"`` the path of the rule above.

    Args:
      method: a key of ``paths`` or ``"auto"`` (static; callers validate it).
      paths: the mechanism's kernels by method name, each ``kernel(key, *operands)`` with its static
        options bound, all of the same law and output structure.
      key, operands: the kernel's arguments (arrays, scalars or pytrees of them; the key is one leaf).
      fast: the path for Monte Carlo over keys, or None when the mechanism has none for these options
        (then ``"auto"`` is ``single``).
      single: the path for one release.
    """
    if method != AUTO:
        return paths[method](key, *operands)
    leaves, tree = jax.tree.flatten((key, operands))
    if fast is None or not any(is_traced(leaf) for leaf in leaves):
        return paths[single](key, *operands)
    staged = _staged(paths, fast, single, tree, ())
    return _differentiable(staged, _batched(paths[single], tree, ()))(*leaves)


def _differentiable(staged: Callable, single: Callable) -> Callable:
    """``staged`` whose derivatives are those of the single-release path (``custom_vmap`` has no
    transpose rule, so reverse mode through it fails; forward and reverse mode differentiate the
    literal kernel instead, batched like any other function)."""
    differentiable = jax.custom_jvp(staged)
    differentiable.defjvp(lambda primals, tangents: jax.jvp(single, primals, tangents))
    return differentiable


def _staged(paths, fast, single, tree, levels: tuple[Level, ...]) -> Callable:
    """The kernel over the flat arguments, batched by ``levels`` (outermost first) and with a
    ``vmap`` rule that records one more level and stages again."""

    @custom_vmap
    def kernel(*leaves):
        return _batched(paths[choose(levels, fast, single)], tree, levels)(*leaves)

    @kernel.def_vmap
    def rule(axis_size, in_batched, *leaves):
        level = (axis_size, tuple(bool(b) for b in in_batched))
        out = _staged(paths, fast, single, tree, (level, *levels))(*leaves)
        return out, jax.tree.map(lambda _: True, out)

    return kernel


def _batched(path: Callable, tree, levels: tuple[Level, ...]) -> Callable:
    """``path`` over flat arguments whose leading axes are ``levels``' batch axes, outermost first."""

    def flat(*leaves):
        key, operands = jax.tree.unflatten(tree, leaves)
        return path(key, *operands)

    for size, batched in reversed(levels):  # the innermost level is vmapped first
        flat = jax.vmap(flat, in_axes=tuple(0 if b else None for b in batched), axis_size=size)
    return flat
