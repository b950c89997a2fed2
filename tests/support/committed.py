"""The committed record folders a test reads.

A test that reads a committed record folder (``outputs/records/<suite>/<hardware>/<purpose>/``, each listed in
``outputs/records/MANIFEST.md``) fails when the folder is missing: those folders are part of the repository, so a
missing one is a broken checkout or a stale path, never a reason to skip.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RECORDS = REPO / "outputs" / "records"


def committed_records(*paths: str | Path, file: str | None = None):
    """Assert that each of ``paths`` (a committed record folder; relative paths are taken under ``outputs/records``)
    exists, and holds ``file`` when one is given. Returns the single path, or the paths as a tuple."""
    resolved = tuple(RECORDS / p if not Path(p).is_absolute() else Path(p) for p in paths)
    for path in resolved:
        where = path / file if file else path
        assert where.exists(), (f"committed records missing: {where} (outputs/records/MANIFEST.md lists every "
                                f"record folder; a test that needs one fails, it does not skip)")
    return resolved[0] if len(resolved) == 1 else resolved
