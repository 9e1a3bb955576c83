"""Input validation shared by every dpjax mechanism.

Two contracts, one per side of the host/device line:

* **Mechanisms** validate through a :class:`Checks` recorder. A concrete value (a Python or NumPy
  number, a concrete ``jax.Array``) is checked eagerly and a bad one raises a ``ValueError`` naming
  the argument before any randomness is used. A traced value (inside ``jit``, ``vmap``, ``scan``)
  cannot be inspected on the host, so the check is recorded in the graph instead, and
  :meth:`Checks.guard` makes the mechanism's output say "invalid": every floating output becomes
  NaN and every integer output ``-1`` (the library's "no index" marker). A bad privacy parameter
  (NaN, infinite, out of range) or NaN data therefore never yields a confident answer. Traced
  inside :func:`checkify_checks`, the same recorded checks also raise under
  :func:`jax.experimental.checkify.checkify`, naming the argument.
  Only shape-fixing arguments (``k``, ``m``, ``c``, caps, sizes) must be concrete.
* **Guarantee companions** run on the host for the accountant: they use the plain ``check_*``
  functions below, which require concrete numbers and refuse tracers with a clear message.

Every check raises a ``ValueError`` (``TypeError`` for a wrong kind of object, and
:class:`TracedParameterError`, a ``TypeError``, for a traced value where a concrete one is needed).
"""

from dpjax._src.host_checks import (
    TracedParameterError,
    check_array,
    check_choice,
    check_epsilon,
    check_exact_integers,
    check_flag,
    check_int,
    check_positive,
    check_probability,
    check_rational,
    check_real,
    check_same_shape,
    exact_integer_dtype,
    float_dtype,
    is_traced,
    refuse_values,
    release_bound,
)
from dpjax._src.validation import Checks, checkify_checks

__all__ = [
    "Checks",
    "TracedParameterError",
    "check_array",
    "check_choice",
    "check_epsilon",
    "check_exact_integers",
    "check_flag",
    "check_int",
    "check_positive",
    "check_probability",
    "check_rational",
    "check_real",
    "check_same_shape",
    "checkify_checks",
    "exact_integer_dtype",
    "float_dtype",
    "is_traced",
    "refuse_values",
    "release_bound",
]
