"""The documentation's own checks: no development history in the product, every relative link resolves, a short
README."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: How the development was organised, which the product must not mention (the history is in git and CHANGELOG.md).
SESSION_RE = re.compile(rb"session ?[0-9]", re.IGNORECASE)
#: A Markdown inline link or image: [text](target) or ![alt](target), the target up to a space or ")".
LINK_RE = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
README_MAX_LINES = 200


def product_files() -> list[Path]:
    """Every tracked file but the archive of superseded records and the measured candidate files kept in record
    folders (``outputs/records/**/candidates/``): those are evidence, the exact bytes whose SHA-256 the records carry
    (``candidate_sha256``), so they are never edited."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    names = [n for n in out.decode().split("\0") if n and not n.startswith("outputs/archive/")
             and not (n.startswith("outputs/records/") and "/candidates/" in n)]
    return [REPO / n for n in names if (REPO / n).is_file()]


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def relative_links(path: Path) -> list[tuple[int, str]]:
    """``(line number, target)`` of every relative link of a Markdown file, outside fenced code blocks and code spans;
    the target's ``#anchor`` is dropped (only the file is checked)."""
    links, fenced = [], False
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        for target in LINK_RE.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("#"):
                continue  # a URL (https:, mailto:) or an anchor in the same file
            links.append((lineno, target.split("#", 1)[0]))
    return links


def test_no_session_wording_in_the_product():
    hits = [str(p.relative_to(REPO)) for p in product_files() if SESSION_RE.search(p.read_bytes())]
    assert not hits, f"{len(hits)} files mention a session: {hits[:20]}"


def test_doc_links_resolve():
    files = doc_files()
    assert len(files) > 1, "no docs found"
    broken = [f"{p.relative_to(REPO)}:{lineno}: {target}"
              for p in files for lineno, target in relative_links(p)
              if not (p.parent / target).exists()]
    assert not broken, "links to files that do not exist:\n" + "\n".join(broken)


def test_relative_links_are_found(tmp_path):
    doc = tmp_path / "d.md"
    doc.write_text("[a](x.md) ![fig](img/f.png \"title\") [web](https://example.org) [here](#top)\n"
                   "`[not](code.md)`\n```\n[not](fenced.md)\n```\n[b](../y.md#part)\n")
    assert relative_links(doc) == [(1, "x.md"), (1, "img/f.png"), (6, "../y.md")]


def test_readme_is_short():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) < README_MAX_LINES, f"README.md has {len(lines)} lines"
