"""``dpjax data``: the papers' public datasets, fetched into a local cache and verified by sha256."""

__all__: list[str] = []
