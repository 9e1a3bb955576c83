"""The ``dpjax`` command line (``dpjax study``, ``bench``, ``reproduce``, ``train``, ``data``).

Each subcommand's parser answers ``--help`` without loading JAX; ``python -m dpjax.cli`` equals ``dpjax``.
"""

import sys

from dpjax._src.tools.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
