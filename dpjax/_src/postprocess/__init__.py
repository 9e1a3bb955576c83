"""Implementation of ``dpjax.postprocess`` (private: use the public face)."""
