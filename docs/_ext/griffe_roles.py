"""A griffe extension for the API reference: reStructuredText idioms in docstrings become Markdown.

The package's numpydoc docstrings are written for Sphinx: they cross-reference
with roles (``:func:`lnn.rollout```, ``:class:`~lnn.Trajectory```), lay some
overviews out as reST simple tables (columns under ``====  ====`` borders) and
open literal blocks with ``::``. mkdocstrings renders Markdown and would show
all three verbatim. When griffe loads a docstring, this extension rewrites

- each role to the code span of its target (``~`` keeps the last component,
  as in Sphinx);
- each simple table to a Markdown table (a continuation line, whose first
  column is empty, joins the row above);
- a paragraph ending in ``::`` to one ending in ``:`` (the indented block
  after it is code in Markdown too).
"""

from __future__ import annotations

import re

import griffe

_ROLE = re.compile(r":(?:py:)?(?:attr|class|data|exc|func|meth|mod|obj|const):`(~?)([^`]+)`")
_BORDER = re.compile(r"^( *)=+( +=+)+ *$")


def _span(match: re.Match) -> str:
    """The code span of one role: ``:func:`~a.b``` -> ```b```, ``:func:`a.b``` -> ```a.b```."""
    tilde, target = match.groups()
    if tilde:
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


def _columns(border: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every column of a simple-table border line."""
    return [match.span() for match in re.finditer(r"=+", border)]


def _cells(line: str, columns: list[tuple[int, int]]) -> list[str]:
    """The cells of one table line: the last column runs to the end of the line.

    A first cell that overflows into the next column (no blank before the
    column's start) takes the whole line, as its text cannot be split.
    """
    starts = [start for start, _ in columns]
    if any(0 < start <= len(line) and not line[start - 1].isspace() for start in starts[1:]):
        return [line.strip()] + [""] * (len(columns) - 1)
    bounds = starts + [None]
    return [line[a:b].strip() for a, b in zip(bounds[:-1], bounds[1:])]


def _table(lines: list[str]) -> list[str]:
    """A reST simple table (its lines, borders included) as Markdown table lines."""
    columns = _columns(lines[0])
    borders = [i for i, line in enumerate(lines) if _BORDER.match(line)]
    header_end = borders[1] if len(borders) > 2 else 0
    rows: list[list[str]] = []
    header: list[str] = [""] * len(columns)
    for i, line in enumerate(lines):
        if i in borders or not line.strip():
            continue
        cells = _cells(line, columns)
        if i < header_end:
            header = cells
        elif rows and not cells[0]:
            rows[-1] = [" ".join(filter(None, pair)) for pair in zip(rows[-1], cells)]
        else:
            rows.append(cells)
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(columns)]
    return out + ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]


def _tables(text: str) -> str:
    """``text`` with every reST simple table rewritten as a Markdown table."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if _BORDER.match(lines[i]):
            end = i + 1
            while end < len(lines) and lines[end].strip():
                end += 1
            block = lines[i:end]
            if len(block) > 2 and _BORDER.match(block[-1]):
                out.extend(["", *_table(block), ""])
                i = end
                continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def markdown(text: str) -> str:
    """``text`` with roles, simple tables and ``::`` openers rewritten for Markdown."""
    text = _tables(text)
    text = _ROLE.sub(_span, text)
    return re.sub(r"(\S) ?::\n\n", r"\1:\n\n", text)


class SphinxRoles(griffe.Extension):
    """Rewrite the reST idioms of every docstring griffe loads."""

    def on_instance(self, *, node, obj, agent, **kwargs) -> None:
        """Called by griffe for every module, class, function and attribute."""
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
