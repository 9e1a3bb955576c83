"""The tools built on the library: the ``dpjax`` commands, their cases, tables and figures.

* :mod:`dpjax._src.tools.study`: ``dpjax study`` (the command line of :mod:`dpjax.studies`).
* :mod:`dpjax._src.tools.bench`: ``dpjax bench``, the benchmark harness (one timing method for all).
* :mod:`dpjax._src.tools.reproduce`: ``dpjax reproduce``, the papers' numbers beside ours.
* :mod:`dpjax._src.tools.train`: ``dpjax train``, DP-SGD with :mod:`dpjax.optax` on Adult or MNIST.
* :mod:`dpjax._src.tools.argtypes` and :mod:`dpjax._src.tools.readme`: what several commands share.

The tools import the library (mechanisms, accounting, noise, audit, :mod:`dpjax.studies`,
:mod:`dpjax.optax`, :mod:`dpjax.datasets`); the library never imports the tools
(``tests/meta/test_import_graph.py`` holds both rules, and that no import cycle exists).
"""

__all__: list[str] = []
