"""The project's paths: the repository root, and repository-relative paths resolved against it.

Paths in study files and in notebook params files are relative to the repository root, not to the working directory:
the same executed notebook re-runs under papermill (working directory ``notebooks/``) and under nbval (working
directory ``outputs/reports/<name>/``), and :func:`project_path` finds the root from either.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The folder above the package (kbstudy/pipeline/paths.py -> the repository root of an editable install).
PACKAGE_PARENT = Path(__file__).resolve().parents[2]


def find_project_root(start: str | os.PathLike | None = None) -> Path:
    """The repository root: the nearest folder at or above ``start`` (default: the working directory) holding a
    ``pyproject.toml`` that names ``kbstudy``; falls back to the folder above the installed package
    (:data:`PACKAGE_PARENT`)."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file() and 'name = "kbstudy"' in pyproject.read_text(errors="replace"):
            return folder
    return PACKAGE_PARENT


def project_path(path: str | os.PathLike, root: str | os.PathLike | None = None) -> Path:
    """``path`` if absolute, else ``root / path`` (``root`` default: :func:`find_project_root`). What notebooks use
    to read the repository-relative paths of their parameters."""
    path = Path(path)
    if path.is_absolute():
        return path
    return (Path(root) if root is not None else find_project_root()) / path


def relative_to_root(path: str | os.PathLike, root: str | os.PathLike) -> str:
    """``path`` relative to ``root`` when it lies inside it (what provenance and rendered notebooks record, so they do
    not depend on where the repository is checked out), else ``path`` as given."""
    try:
        return str(Path(path).resolve().relative_to(Path(root).resolve()))
    except ValueError:
        return str(path)
