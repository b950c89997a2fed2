"""The rendered reports show tables as HTML and figures with alt text.

``kbstudy.analysis.tables.html_table`` is the one way a notebook shows a table: rounded, deterministic (no random ids,
so nbval can compare its HTML), long tables collapsed. The committed reports (``outputs/reports/**``) must hold no
plain-text pandas dump where a reader would look for a table (a header line over aligned rows of numbers, or
``[N rows x M columns]``, in an output with no ``text/html``), and every image of their HTML export has alt text.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from kbstudy.analysis import figures  # noqa: E402
from kbstudy.analysis.tables import MAX_ROWS, csv_link, html_table  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
REPORTS = REPO / "outputs" / "reports"
NOTEBOOKS = sorted(REPORTS.glob("**/*.ipynb"))
HTML_REPORTS = sorted(REPORTS.glob("**/*.html"))

_SHAPE_LINE = re.compile(r"\[\d+ rows x \d+ columns\]")
_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?[%x]?$|^(nan|NaN|inf|-inf|-|<NA>|None|True|False)$")


def _numeric_cells(line: str) -> int:
    return sum(bool(_NUMBER.match(token)) for token in line.split())


def frame_dumps(text: str) -> list[str]:
    """The plain-text pandas frames in ``text``: ``[N rows x M columns]``, or a header line followed by at least three
    rows of the same width (``DataFrame.to_string`` pads every line to the table's width) holding numbers. Lines of
    one sentence template that happen to be as long as each other are not a table: a header shares few of its words
    with the rows below it."""
    found = [m.group(0) for m in _SHAPE_LINE.finditer(text)]
    lines = text.splitlines()
    start = 0
    while start < len(lines):
        end = start + 1
        while end < len(lines) and len(lines[end]) == len(lines[start]):
            end += 1
        header, rows = lines[start], lines[start + 1:end]
        numeric_rows = [r for r in rows if _numeric_cells(r) >= 1]
        words = set(header.split())
        is_header = len(words) >= 2 and rows and len(words & set(rows[0].split())) < len(words) / 2
        if is_header and len(rows) >= 3 and len(numeric_rows) >= 3:
            found.append("\n".join(lines[start:min(end, start + 5)]))
        start = end
    return found


def _text_outputs(cell: dict):
    """(kind, text) of each output a reader sees as plain text: streams, and results with no ``text/html``."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            yield "stream", "".join(output.get("text", ""))
        elif output.get("output_type") in ("execute_result", "display_data"):
            data = output.get("data", {})
            if "text/html" not in data and "text/plain" in data:
                yield output["output_type"], "".join(data["text/plain"])


# ------------------------------------------------------------------------------------------------ committed reports


@pytest.mark.skipif(not NOTEBOOKS, reason="no committed rendered reports")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[str(p.relative_to(REPORTS)) for p in NOTEBOOKS])
def test_committed_report_has_no_text_dump_table(path):
    nb = json.loads(path.read_text())
    dumps = []
    for number, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        for kind, text in _text_outputs(cell):
            dumps += [f"cell {number} ({kind}):\n{d}" for d in frame_dumps(text)]
    assert not dumps, "tables printed as text (show them with kbstudy.analysis.tables.show_table):\n\n" + \
        "\n\n".join(dumps)


@pytest.mark.skipif(not NOTEBOOKS, reason="no committed rendered reports")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[str(p.relative_to(REPORTS)) for p in NOTEBOOKS])
def test_committed_report_tables_carry_no_absolute_path(path):
    """Table and figure outputs (nbval compares them) name files relative to the report, never by absolute path."""
    nb = json.loads(path.read_text())
    rich = json.dumps([o.get("data", {}) for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
                       if "text/html" in o.get("data", {})])
    assert str(REPO) not in rich and str(Path.home()) not in rich and "/tmp/" not in rich


@pytest.mark.skipif(not HTML_REPORTS, reason="no committed HTML reports")
@pytest.mark.parametrize("path", HTML_REPORTS, ids=[str(p.relative_to(REPORTS)) for p in HTML_REPORTS])
def test_committed_html_report_images_have_alt_text(path):
    images = re.findall(r"<img\b[^>]*>", path.read_text())
    assert images, f"{path.name}: no figure"
    missing = [tag[:80] for tag in images if not re.search(r'\balt="[^"]{10,}"', tag)]
    assert not missing, f"{path.name}: images without alt text: {missing}"


# ------------------------------------------------------------------------------------------------ the detector


def test_detector_flags_a_printed_frame_and_passes_prose():
    frame = pd.DataFrame({"model_config": ["a", "bb", "ccc"], "n": [100, 9, 53], "fast_1": [0.1, 0.25, np.nan]})
    assert frame_dumps(frame.to_string(index=False))
    assert frame_dumps(frame.round(3).to_string())
    big = pd.DataFrame({"x": range(100), "y": np.linspace(0, 1, 100)})
    with pd.option_context("display.max_rows", 10):
        assert any("rows x" in d for d in frame_dumps(repr(big)))
    prose = ("hardware: CPU; precision: fp32; level: 1\nrecord folders read: ['cpu-default']\n"
             "- 1 EmbeddingBagSum: 1.19x of the floor\n- 12 TopMLP: 1.25x\n")
    assert frame_dumps(prose) == []
    templated = "\n".join(f"fp32: all-zeros passes KernelBench's check on {a} of {b} level-{c} problems"
                          for a, b, c in [(2, 98, 1), (3, 40, 2), (0, 23, 3), (0, 99, 1)])
    assert frame_dumps(templated) == []
    # two-line outputs are not tables
    assert frame_dumps("a  b\n1  2\n") == []


def test_detector_reads_outputs_a_reader_sees_as_text():
    frame = pd.DataFrame({"a": [1.5, 2.5, 3.5], "b": [1, 2, 3]})
    cell = {"outputs": [{"output_type": "display_data", "data": html_table(frame)._repr_mimebundle_()},
                        {"output_type": "execute_result", "data": {"text/plain": frame.to_string()}}]}
    seen = list(_text_outputs(cell))
    assert [kind for kind, _ in seen] == ["execute_result"]  # the HTML table's text/plain twin is not a dump
    assert frame_dumps(seen[0][1])


# ------------------------------------------------------------------------------------------------ html_table


def _cells(html: str) -> list[str]:
    return re.findall(r"<td[^>]*>(.*?)</td>", html)


def test_precision_and_significant_digits():
    frame = pd.DataFrame({"name": ["a", "b"], "n": [3, 40], "rate": [0.123456, np.nan], "count": [2.0, np.nan],
                          "ms": [0.000123456, 432035.59]})
    table = html_table(frame, precision=2)
    assert _cells(table.html) == ["a", "3", "0.12", "2", "0.00", "b", "40", "-", "-", "432035.59"]
    table = html_table(frame, significant=3)
    assert _cells(table.html) == ["a", "3", "0.123", "2", "0.000123", "b", "40", "-", "-", "432036"]
    assert "0.123" in table.text and "432036" in table.text and "0.123456" not in table.text
    # a column of its own: percentages with one decimal beside fractions with three
    mixed = pd.DataFrame({"correct_pct": [83.01886, 100.0], "fast_1": [0.13207, 0.0]})
    assert _cells(html_table(mixed, decimals={"correct_pct": 1}).html) == ["83.0", "0.132", "100.0", "0.000"]
    # missing text (None, NaN, pandas' NA in a string column) reads "-"
    text = pd.DataFrame({"reason": pd.array([pd.NA, pd.NA], dtype="string"), "note": [None, np.nan]})
    assert _cells(html_table(text).html) == ["-", "-", "-", "-"]
    # shares that are all 0 or 1 keep their decimals
    assert _cells(html_table(pd.DataFrame({"share": [0.0, 1.0]}), precision=3).html) == ["0.000", "1.000"]


def test_html_is_deterministic_and_scoped():
    frame = pd.DataFrame({"model_config": ["x<y", "z"], "speedup": [1.5, 0.25]})
    first, second = html_table(frame, caption="c"), html_table(frame.copy(), caption="c")
    assert first.html == second.html and first.text == second.text
    ids = re.findall(r'id="([^"]+)"', first.html)
    assert len(ids) == 1  # the table itself; no per-cell ids
    assert ids[0] != re.findall(r'id="([^"]+)"', html_table(frame.assign(speedup=[1.5, 0.5])).html)[0]
    assert f"#{ids[0]} " in first.html  # the styles are the table's own
    assert "x&lt;y" in first.html and "x<y" not in first.html
    assert "<caption>c</caption>" in first.html
    assert "model_<wbr>config" in first.html  # long headers may break after an underscore
    bundle = first._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/plain"}


def test_long_tables_collapse():
    short = pd.DataFrame({"i": range(MAX_ROWS)})
    long = pd.DataFrame({"i": range(MAX_ROWS + 1)})
    assert "<details>" not in html_table(short).html
    collapsed = html_table(long, caption="every kernel", csv="report/tables/every.csv").html
    assert collapsed.startswith('<div style="overflow-x: auto;"><details><summary>every kernel: '
                                f"{MAX_ROWS + 1} rows, 1 column (click to show)")
    assert '<a href="report/tables/every.csv">every.csv</a>' in collapsed
    assert "<details>" in html_table(short, max_rows=10).html


def test_index_and_crosstab_columns():
    frame = pd.DataFrame({"v": [1.0, 2.5]}, index=pd.Index(["gpt2", "bert"], name="workload_key"))
    table = html_table(frame, index=True)
    assert re.search(r'<th class="row_heading[^"]*" >gpt2</th>', table.html)
    assert "workload_key" in table.text and "gpt2" in table.text
    assert "gpt2" not in html_table(frame).html  # index hidden by default
    cross = pd.crosstab(pd.Series(["a", "b"], name="m"), [pd.Series(["x", "y"], name="c"),
                                                          pd.Series([True, False], name="f")]).reset_index()
    html = html_table(cross).html
    assert ">x / True</th>" in html and ">m</th>" in html


def test_csv_link_is_relative_to_the_report():
    assert csv_link("outputs/reports/cpu-default/01_kernelbench_level1", "headline") == \
        "01_kernelbench_level1/tables/headline.csv"


# ------------------------------------------------------------------------------------------------ figures


def test_figures_carry_alt_text(tmp_path):
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [1, 4, 9], label="ours")
    ax.set(title="Speedups", xlabel="problem", ylabel="speedup", yscale="log")
    ax.legend()
    figures.legend_outside(ax)
    alt = figures.describe_figure(fig)
    assert alt == "Speedups; x: problem; y: speedup (log scale); legend: ours"
    png, _ = figures.save_figure(fig, tmp_path / "speedups")
    plt.close(fig)
    image = figures.FigureImage(png, f'Line plot "quoted". {alt}')
    bundle = image._repr_mimebundle_()
    assert 'alt="Line plot &quot;quoted&quot;. Speedups; x: problem; y: speedup (log scale); legend: ours"' in \
        bundle["text/html"]
    assert bundle["text/html"].startswith('<img src="data:image/png;base64,')
    assert bundle["text/plain"].startswith("[figure speedups] Line plot")
    assert image.width == round(int.from_bytes(png.read_bytes()[16:20], "big") * 100 / figures.PNG_DPI)


def test_legend_outside_leaves_the_axes():
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="a")
    ax.legend(loc="lower right")
    figures.legend_outside(ax)
    fig.canvas.draw()
    box = ax.get_legend().get_window_extent()
    assert box.x0 >= ax.get_window_extent().x1  # right of the axes, over no data
    plt.close(fig)
