"""Implementation of ``dpjax.quantiles`` (private: use the public face)."""
