"""``dpjax train``: DP-SGD with :mod:`dpjax.optax` on UCI Adult or MNIST.

* :mod:`dpjax.tools.train.cli`: the parser and first line (no JAX);
* :mod:`dpjax.tools.train.settings`: its defaults and usage error;
* :mod:`dpjax.tools.train.run`: the model, the training loop and the metrics.
"""

__all__: list[str] = []
