"""Implementation of ``dpjax.svt`` (private: use the public face)."""
