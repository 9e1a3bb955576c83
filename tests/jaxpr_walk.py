"""Walking a jaxpr with its nested jaxprs (``jit``, ``cond``, ``scan``, ``custom_vmap`` bodies): what the
tests that check a kernel's structure (which path runs, what is batched, which dtypes appear) share."""

from collections.abc import Iterator

import jax.extend


def equations(jaxpr) -> Iterator:
    """Every equation of ``jaxpr`` (a core ``Jaxpr``), nested jaxprs' included, depth first."""
    for eqn in jaxpr.eqns:
        yield eqn
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            yield from equations(sub)


def operand_shapes(jaxpr, primitives) -> list[tuple[int, ...]]:
    """The shapes of the operands of every equation whose primitive is named in ``primitives``."""
    return [v.aval.shape for eqn in equations(jaxpr) if eqn.primitive.name in primitives for v in eqn.invars]


def kernel_names(closed_jaxpr) -> str:
    """The names of the jitted kernels a traced call runs (``jax.make_jaxpr``'s result), space-separated."""
    return " ".join(str(eqn.params.get("name", "")) for eqn in equations(closed_jaxpr.jaxpr))


def branches(jaxpr, path: tuple = ()) -> Iterator:
    """Every equation of ``jaxpr`` with the ``cond`` branches that enclose it: ``(eqn, path)``, ``path``
    a tuple of ``(cond equation, branch index)`` pairs, outermost first (index 0 is the false branch)."""
    for eqn in jaxpr.eqns:
        yield eqn, path
        if eqn.primitive.name == "cond":
            for index, branch in enumerate(eqn.params["branches"]):
                yield from branches(branch.jaxpr, (*path, (eqn, index)))
            continue
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            yield from branches(sub, path)
