"""The pieces of the HTML report's sections (report/html.py, report/cert_html.py): text
from the network escaped for the page, a paragraph, a table."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

from tlsprobe.report.escape import shown


def e(text: object) -> str:
    """Untrusted text for the page: non-printable characters escaped, then HTML."""
    return html.escape(shown(str(text)), quote=True)


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], raw: bool = False) -> str:
    """A table; cells are escaped unless `raw` (cells already built with `e`)."""
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c if raw else e(c)}</td>" for c in row)
                   + "</tr>\n" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table>\n"


def p(text: str, cls: str = "") -> str:
    return f'<p class="{cls}">{e(text)}</p>\n' if cls else f"<p>{e(text)}</p>\n"
