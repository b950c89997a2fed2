"""Tables in rendered reports: one styled HTML table per call, rounded, deterministic, long ones collapsed.

A notebook shows a frame with :func:`show_table` (or builds the display object with :func:`html_table`). The display
bundle holds two forms of the same rounded table:

* ``text/html``: a pandas ``Styler`` table (what JupyterLab and nbconvert's HTML report show), with a fixed id
  derived from its content and no per-cell ids, so that re-rendering the same records gives the same bytes (nbval
  compares it); a table longer than ``max_rows`` sits in a ``<details>`` element, collapsed under a one-line summary;
* ``text/plain``: the same table as text (missing values as ``-``), for plain-text viewers and readable nbval diffs.

Floats are shown with ``precision`` decimals, or with ``significant`` significant digits (columns spanning orders of
magnitude); a float column holding only whole numbers (counts with gaps) is shown without decimals. Every number
stays at full precision in the CSV files a notebook writes beside its tables.
"""

from __future__ import annotations

import hashlib
import html
import math
from dataclasses import dataclass
from numbers import Integral, Real
from pathlib import PurePosixPath

import numpy as np
import pandas as pd
from pandas.io.formats.style import Styler  # needs Jinja2 (the notebooks extra)

#: A table with more rows than this is collapsed into a ``<details>`` element.
MAX_ROWS = 60
#: How missing values are shown.
NA_REP = "-"

# Left-aligned text, right-aligned tabular numbers, header labels that may break after an underscore (``<wbr>``);
# scoped to the table's own id so that two tables on a page never style each other.
_TABLE_STYLES = [
    {"selector": "", "props": "border-collapse: collapse; font-variant-numeric: tabular-nums; margin: 0.4em 0;"},
    {"selector": "caption",
     "props": "caption-side: top; text-align: left; font-weight: bold; padding: 0.2em 0; white-space: nowrap;"},
    {"selector": "th", "props": "text-align: right; vertical-align: bottom; max-width: 12em;"},
    {"selector": "td", "props": "text-align: right; white-space: nowrap;"},
    {"selector": "th.row_heading", "props": "text-align: left; white-space: nowrap;"},
]
#: Text columns whose longest value is at most this many characters never wrap; longer ones wrap within a width.
SHORT_TEXT = 28
_SHORT_TEXT_CELL = [{"selector": "td", "props": "text-align: left;"}, {"selector": "th", "props": "text-align: left;"}]
_LONG_TEXT_CELL = [
    {"selector": "td", "props": "text-align: left; white-space: normal; min-width: 14em; max-width: 48em;"},
    {"selector": "th", "props": "text-align: left;"}]


@dataclass(frozen=True)
class HtmlTable:
    """A rendered table: ``html`` (``text/html``) and ``text`` (``text/plain``) of the same rounded frame."""

    html: str
    text: str
    rows: int

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/html": self.html, "text/plain": self.text}

    def _repr_html_(self):
        return self.html

    def __repr__(self):
        return self.text


def _is_whole(column: pd.Series) -> bool:
    """Counts stored as floats (a count column with gaps): whole numbers, some above 1 (a column of shares that are
    all 0 or 1 keeps its decimals, like its neighbours)."""
    values = column.dropna().astype(float)
    values = values[np.isfinite(values)]
    return (len(values) > 0 and bool(((values % 1) == 0).all()) and bool((values.abs() < 1e15).all())
            and bool((values.abs() > 1).any()))


def _significant(x: float, digits: int) -> str:
    """``x`` to ``digits`` significant digits; no exponent from 1e-4 up to a million (a whole number there, beyond
    ``digits``: 432036 rather than 4.32e+05)."""
    if x == 0:
        return "0"
    if 10 ** digits <= abs(x) < 1e6:
        return f"{x:.0f}"
    return f"{x:.{digits}g}"


def _float_formatter(precision: int, significant: int | None, whole: bool):
    def fmt(x) -> str:
        if x is None or x is pd.NA or (isinstance(x, Real) and not isinstance(x, Integral) and math.isnan(x)):
            return NA_REP
        if isinstance(x, bool) or not isinstance(x, Real):
            return str(x)
        if isinstance(x, Integral):
            return str(int(x))
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        if whole:
            return f"{x:.0f}"
        return _significant(x, significant) if significant is not None else f"{x:.{precision}f}"
    return fmt


def _formatters(frame: pd.DataFrame, precision: int, significant: int | None, decimals: dict) -> dict:
    """One formatter per column position: floats rounded, whole-number float columns without decimals; a column
    named in ``decimals`` gets that many decimals."""
    out = {}
    for i in range(frame.shape[1]):
        column = frame.iloc[:, i]
        if frame.columns[i] in decimals:
            out[i] = _float_formatter(decimals[frame.columns[i]], None, False)
        elif pd.api.types.is_float_dtype(column.dtype):
            out[i] = _float_formatter(precision, significant, _is_whole(column))
        elif column.dtype == object and column.map(lambda v: isinstance(v, float)).any():
            numbers = pd.to_numeric(column.where(column.map(lambda v: isinstance(v, float))), errors="coerce")
            out[i] = _float_formatter(precision, significant, _is_whole(numbers))
        else:
            out[i] = lambda x: NA_REP if x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA else str(x)
    return out


def _label(value) -> str:
    """A header label as HTML: escaped, with a break opportunity after each underscore."""
    text = " / ".join(str(v) for v in value if str(v)) if isinstance(value, tuple) else str(value)
    return html.escape(text).replace("_", "_<wbr>")


def _text(frame: pd.DataFrame, formatters: dict, index: bool) -> str:
    cells = pd.DataFrame({i: frame.iloc[:, i].map(formatters[i]) for i in range(frame.shape[1])}, index=frame.index)
    cells.columns = frame.columns
    return cells.to_string(index=index)


def _table_id(frame: pd.DataFrame, caption: str | None, precision: int, significant: int | None,
              decimals: dict) -> str:
    """A fixed id from everything the table shows (pandas' Styler draws a random one unless given one)."""
    digest = hashlib.sha256()
    digest.update(repr((caption, precision, significant, sorted(decimals.items()), [str(c) for c in frame.columns],
                        [str(i) for i in frame.index.names])).encode())
    digest.update(frame.to_csv().encode())
    return "kb" + digest.hexdigest()[:10]


def html_table(frame: pd.DataFrame, precision: int = 3, *, significant: int | None = None, index: bool = False,
               caption: str | None = None, max_rows: int = MAX_ROWS, csv: str | None = None,
               decimals: dict | None = None) -> HtmlTable:
    """``frame`` as an :class:`HtmlTable`: floats with ``precision`` decimals (or ``significant`` significant digits;
    ``decimals`` maps a column to its own number of decimals, e.g. one for percentages), missing values as ``-``, the
    index shown only with ``index=True``, an optional ``caption`` above it and, with ``csv``, a link to the
    full-precision CSV file (a path relative to the report). More than ``max_rows`` rows: the table is collapsed into
    a ``<details>`` element whose summary names the caption and the row count."""
    if not isinstance(frame, pd.DataFrame):
        frame = pd.DataFrame(frame)
    decimals = dict(decimals or {})
    formatters = _formatters(frame, precision, significant, decimals)
    table_id = _table_id(frame, caption, precision, significant, decimals)
    # positional column keys: duplicate or tuple labels (crosstabs) cannot key Styler.format's dict
    positional = frame.set_axis(range(frame.shape[1]), axis=1)
    styler = Styler(positional, uuid=table_id, cell_ids=False, escape="html")
    styler = styler.format(formatters, escape="html")
    styler = styler.format_index(lambda i: _label(frame.columns[i]), axis=1, escape=None)
    if not index:
        styler = styler.hide(axis="index")
    else:
        styler = styler.format_index(escape="html", axis=0)
    text_columns = [i for i in range(frame.shape[1]) if not pd.api.types.is_numeric_dtype(frame.iloc[:, i].dtype)
                    or pd.api.types.is_bool_dtype(frame.iloc[:, i].dtype)]
    longest = {i: max((len(formatters[i](v)) for v in frame.iloc[:, i]), default=0) for i in text_columns}
    styles = {i: _LONG_TEXT_CELL if longest[i] > SHORT_TEXT else _SHORT_TEXT_CELL for i in text_columns}
    styler = styler.set_table_styles(_TABLE_STYLES).set_table_styles(styles, overwrite=False)
    if caption:
        styler = styler.set_caption(caption)
    body = styler.to_html()
    note = (f'<p style="margin: 0 0 0.8em 0;">CSV, full precision: <a href="{html.escape(csv)}">'
            f'{html.escape(PurePosixPath(csv).name)}</a></p>') if csv else ""
    if len(frame) > max_rows:
        what = html.escape(caption) if caption else "table"
        columns = f"{frame.shape[1]} column{'s' if frame.shape[1] != 1 else ''}"
        body = f"<details><summary>{what}: {len(frame)} rows, {columns} (click to show)</summary>\n{body}</details>"
    text = _text(frame, formatters, index)
    if caption:
        text = f"{caption}\n{text}"
    # a table wider than the page scrolls sideways within its own box instead of running off the page
    return HtmlTable(html=f'<div style="overflow-x: auto;">{body}{note}</div>', text=text, rows=len(frame))


def csv_link(output_dir: str, name: str) -> str:
    """The link from a rendered report to ``<output_dir>/tables/<name>.csv``: a report ``<reports>/<stem>.html``
    writes its tables under ``<reports>/<stem>/`` (its ``output_dir``), so the link is relative to the report's folder
    and holds no absolute path."""
    return str(PurePosixPath(PurePosixPath(str(output_dir).replace("\\", "/")).name, "tables", f"{name}.csv"))


def show_table(frame: pd.DataFrame, precision: int = 3, **options) -> None:
    """Display :func:`html_table` of ``frame`` in the notebook (``options`` as there)."""
    from IPython.display import display  # IPython ships with every notebook kernel, not with the core dependencies

    display(html_table(frame, precision, **options))
