"""Implementation of ``dpjax.exact`` (private: use the public face)."""
