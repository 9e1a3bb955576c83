"""MkDocs hook: Sphinx roles in docstrings (``:func:`x```, ``:mod:`~a.b```) render as plain code."""

import re

_ROLE = re.compile(r":(?:func|mod|class|meth|attr|data|exc|obj):<code>~?")


def on_page_content(html, **_):
    return _ROLE.sub("<code>", html)
