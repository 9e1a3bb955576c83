"""MkDocs hook: Sphinx roles in docstrings (``:func:`x```) render as plain code (`x`)."""

import re

_ROLE = re.compile(r":(?:func|mod|class|meth|attr|data|exc|obj):(?=<code>)")


def on_page_content(html, **_):
    return _ROLE.sub("", html)
