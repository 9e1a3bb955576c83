"""MkDocs hook: Sphinx roles in docstrings (``:func:`x```, ``:mod:`~a.b```) render as plain code."""

import re

# The role's leading colon is gone where griffe read it as a "type: description" separator (Returns).
_ROLE = re.compile(r"(?::|(?<=<p>))(?:func|mod|class|meth|attr|data|exc|obj):<code>~?")


def on_page_content(html, **_):
    return _ROLE.sub("<code>", html)
