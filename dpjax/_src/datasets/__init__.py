"""Implementation of ``dpjax.datasets`` (private: use the public face)."""
