"""``dpjax study``: the command line of :mod:`dpjax.studies` (:mod:`dpjax.tools.study.cli`) and its
TOML configuration files (:mod:`dpjax.tools.study.config`)."""

__all__: list[str] = []
