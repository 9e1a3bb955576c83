"""Implementation of ``dpjax.topk`` (private: use the public face)."""
