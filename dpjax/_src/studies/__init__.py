"""Implementation of ``dpjax.studies`` (private: use the public face)."""
