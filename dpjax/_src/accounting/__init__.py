"""Implementation of ``dpjax.accounting`` (private: use the public face)."""
