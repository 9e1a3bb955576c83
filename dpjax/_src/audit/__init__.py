"""Implementation of ``dpjax.audit`` (private: use the public face)."""
