"""The XLA CPU emitters the suite compiles with (``tests/conftest.py`` puts the flag in ``XLA_FLAGS``
before JAX starts), and the environment of a subprocess that compiles as a user's program does.

A module of its own, not ``conftest.py``: tests import it by name (``from xla_env import ...``), and
the name ``conftest`` is ambiguous once a folder has its own ``conftest.py``.
"""

FAST_EMITTERS = "--xla_cpu_use_fusion_emitters=false"


def as_users_compile(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a subprocess that compiles as a user's program does: every XLA pass and XLA's
    default CPU emitters (where a test depends on compile times, e.g. a cache's threshold)."""
    flags = env.get("XLA_FLAGS", "").replace(FAST_EMITTERS, "").strip()
    return {**env, "JAX_DISABLE_MOST_OPTIMIZATIONS": "0", "XLA_FLAGS": flags}
