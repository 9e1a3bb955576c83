"""Implementation of ``dpjax.budgeting`` (private: use the public face)."""
