"""``dpjax study``: the command line of :mod:`dpjax.studies` (:mod:`dpjax._src.tools.study.cli`) and its
TOML configuration files (:mod:`dpjax._src.tools.study.config`)."""

__all__: list[str] = []
