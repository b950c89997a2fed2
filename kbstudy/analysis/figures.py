"""What the notebooks show besides their tables: one seaborn theme and deterministic figure saving (so re-rendering
an analysis changes no bytes), rounded text tables, and sections of the repository's Markdown documents."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # notebooks and batch runs render off-screen; a display backend is never needed
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import seaborn as sns  # noqa: E402

#: Fixed so that SVG element ids do not change between runs (matplotlib otherwise salts them randomly).
SVG_HASHSALT = "kbstudy"
PNG_DPI = 150


def set_theme() -> None:
    """Apply the study's seaborn theme (paper context, white grid) and the rc settings that make output deterministic."""
    sns.set_theme(context="paper", style="whitegrid", palette="colorblind")
    plt.rcParams["svg.hashsalt"] = SVG_HASHSALT
    plt.rcParams["figure.dpi"] = 100
    plt.rcParams["savefig.dpi"] = PNG_DPI


def seed_jitter(seed: int = 0) -> None:
    """Seed numpy's global generator, which seaborn's ``stripplot``/``swarmplot`` jitter draws from, so a figure with
    jittered points has the same bytes on every render."""
    np.random.seed(seed)


def save_figure(fig, path_stem: str | Path) -> list[Path]:
    """Save ``fig`` as ``<path_stem>.png`` and ``<path_stem>.svg`` with no date metadata; returns the two paths.

    PNG and SVG carry no creation date (``metadata`` below), and SVG ids use a fixed salt, so the same data gives the
    same bytes on every run.
    """
    stem = Path(path_stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    png, svg = stem.with_suffix(".png"), stem.with_suffix(".svg")
    plt.rcParams["svg.hashsalt"] = SVG_HASHSALT
    fig.savefig(png, dpi=PNG_DPI, bbox_inches="tight", metadata={"Software": None})
    fig.savefig(svg, bbox_inches="tight", metadata={"Date": None, "Creator": None})
    return [png, svg]


def fixed_palette(names) -> dict:
    """One colour per name (sorted, duplicates once) from the study's colorblind palette, cycling past its ten
    colours: pass as ``palette=`` (and its keys as ``hue_order=``) to every panel of a figure, so that a name keeps its
    colour where a panel lacks some names (seaborn otherwise numbers the hue levels of each panel afresh)."""
    ordered = sorted({str(n) for n in names})
    colours = sns.color_palette("colorblind", max(len(ordered), 1))
    return {name: colours[i % len(colours)] for i, name in enumerate(ordered)}


# ------------------------------------------------------------------------------------------------ notebook helpers


def report_dirs(output_dir: str | Path) -> tuple[Path, Path]:
    """Create and return ``(<output_dir>/tables, <output_dir>/figures)``, where a notebook writes its CSV tables and
    figures."""
    out = Path(output_dir)
    tables, figures = out / "tables", out / "figures"
    tables.mkdir(parents=True, exist_ok=True)
    figures.mkdir(parents=True, exist_ok=True)
    return tables, figures


def print_table(table, digits: int = 3, index: bool = False, significant: int | None = None) -> None:
    """Print a DataFrame as text rounded to ``digits`` decimals (or, with ``significant``, every float to that many
    significant digits, for columns spanning many orders of magnitude), missing values as ``-``: the form nbval
    compares (figures are not compared, so each figure's data is printed this way too)."""
    if significant is None:
        print(table.round(digits).to_string(index=index, na_rep="-"))
    else:
        print(table.to_string(index=index, na_rep="-", float_format=lambda x: f"{x:.{significant}g}"))


def show_figure(figures_dir: str | Path, fig, name: str) -> None:
    """Save ``fig`` as ``<figures_dir>/<name>.{png,svg}`` (:func:`save_figure`), close it, and display the PNG."""
    from IPython.display import Image, display  # the notebooks' kernel: batch runs save figures without IPython

    png, _ = save_figure(fig, Path(figures_dir) / name)
    plt.close(fig)
    display(Image(filename=str(png)))


def markdown_section(path: str | os.PathLike, heading: str) -> str:
    """The text of the section of a Markdown file that starts at the line ``heading`` (e.g. ``"## The proposed
    replacement check"``) and ends before the next heading of the same or a higher level. Raises ``KeyError`` when the
    heading is absent."""
    lines = Path(path).read_text().splitlines()
    level = len(heading) - len(heading.lstrip("#"))
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == heading.strip())
    except StopIteration:
        raise KeyError(f"{path}: no heading {heading!r}") from None
    end, fenced = len(lines), False
    for i in range(start + 1, len(lines)):
        stripped = lines[i].lstrip()
        if stripped.startswith("```"):
            fenced = not fenced  # a "#" inside a code block is a comment, not a heading
        elif not fenced and stripped.startswith("#"):
            hashes = len(stripped) - len(stripped.lstrip("#"))
            if hashes <= level and stripped[hashes:hashes + 1] == " ":
                end = i
                break
    return "\n".join(lines[start:end]).strip() + "\n"
