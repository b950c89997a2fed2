"""What the notebooks show besides their tables: one seaborn theme and deterministic figure saving (so re-rendering
an analysis changes no bytes), rounded text tables, and sections of the repository's Markdown documents."""

from __future__ import annotations

import base64
import html
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


def legend_outside(ax, title: str | None = None, below: bool = False, **options) -> None:
    """Move ``ax``'s legend outside the axes so that it never covers data: right of the top corner, or with
    ``below`` under the axes in columns (for panels side by side)."""
    import seaborn as sns  # a notebooks extra: loaded only when a figure is drawn

    legend = ax.get_legend()
    if legend is None:
        return
    if title is None:
        title = legend.get_title().get_text()
    place = dict(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2) if below else dict(
        loc="upper left", bbox_to_anchor=(1.01, 1))
    sns.move_legend(ax, place.pop("loc"), title=title, frameon=False, **{"fontsize": "small", **place, **options})


def describe_figure(fig) -> str:
    """Alt text read from the figure itself: per panel its title, axis labels (with log scales named) and legend
    entries; the figure's suptitle first. Deterministic for the same figure."""
    parts = []
    suptitle = getattr(fig, "_suptitle", None)
    if suptitle is not None and suptitle.get_text():
        parts.append(suptitle.get_text())
    for ax in fig.get_axes():
        if not ax.get_visible() or (not ax.has_data() and not ax.get_title()):
            continue  # colour bars and empty panels say nothing
        bits = [ax.get_title()] if ax.get_title() else []
        for axis, label, scale in (("x", ax.get_xlabel(), ax.get_xscale()), ("y", ax.get_ylabel(), ax.get_yscale())):
            if label:
                bits.append(f"{axis}: {label}" + (" (log scale)" if scale == "log" and "log" not in label else ""))
        legend = ax.get_legend()
        if legend is not None:
            entries = [t.get_text() for t in legend.get_texts() if t.get_text()]
            if entries:
                shown = ", ".join(entries[:12]) + (f" and {len(entries) - 12} more" if len(entries) > 12 else "")
                title = legend.get_title().get_text()
                bits.append(f"legend{f' ({title})' if title else ''}: {shown}")
        if bits:
            parts.append("; ".join(bits))
    return ". ".join(parts)


class FigureImage:
    """A saved figure for a notebook: an ``<img>`` with alt text (``text/html``, kept by nbconvert's HTML export,
    which drops the alt of a plain ``image/png`` output) and the alt text itself (``text/plain``)."""

    def __init__(self, png: Path, alt: str):
        self.png, self.alt = Path(png), alt
        data = self.png.read_bytes()
        width = int.from_bytes(data[16:20], "big")  # the PNG header's IHDR width, in pixels
        # shown at the figure's size in inches at 100 pixels per inch (a PNG_DPI image stays sharp on dense screens)
        self.width = round(width * 100 / PNG_DPI)
        self.data = base64.b64encode(data).decode("ascii")

    def _repr_mimebundle_(self, include=None, exclude=None):
        alt = html.escape(self.alt, quote=True)
        return {"text/html": f'<img src="data:image/png;base64,{self.data}" alt="{alt}" width="{self.width}"/>',
                "text/plain": f"[figure {self.png.stem}] {self.alt}"}


def show_figure(figures_dir: str | Path, fig, name: str, alt: str | None = None) -> None:
    """Save ``fig`` as ``<figures_dir>/<name>.{png,svg}`` (:func:`save_figure`), close it, and display the PNG with alt
    text: ``alt`` (one sentence saying what the figure shows) followed by :func:`describe_figure`."""
    from IPython.display import display  # IPython ships with every notebook kernel, not with the core dependencies

    described = describe_figure(fig)
    text = " ".join(part.strip() for part in (alt or "", described) if part and part.strip())
    png, _ = save_figure(fig, Path(figures_dir) / name)
    plt.close(fig)
    display(FigureImage(png, text or name))


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
