"""``dpjax train``: DP-SGD with :mod:`dpjax.optax` on UCI Adult or MNIST.

* :mod:`dpjax._src.tools.train.cli`: the parser and first line (no JAX);
* :mod:`dpjax._src.tools.train.settings`: its defaults and usage error;
* :mod:`dpjax._src.tools.train.run`: the model, the training loop and the metrics.
"""

__all__: list[str] = []
