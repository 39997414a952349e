"""MkDocs hook: drop Sphinx roles (``:func:`x``` and the like) that docstrings use, which
mkdocstrings would otherwise print literally before the code span."""

import re

_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|obj|exc):(?=<code>)")


def on_page_content(html, page, config, files):
    return _ROLE.sub("", html)
