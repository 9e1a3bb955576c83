"""Implementation of ``dpjax.optax`` (private: use the public face)."""
