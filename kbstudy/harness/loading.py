"""Running a source as a module: a problem in the reference process, a candidate in its build or candidate process,
inside the candidate's build lock (:func:`extensions_lock`) so that a build killed earlier never stalls a later load.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import linecache
import os
import sys
import types
from pathlib import Path
from typing import Iterator


def load_module(source: str, name: str, filename: str) -> types.ModuleType:
    """Execute ``source`` as a fresh module registered as ``sys.modules[name]`` (so dataclasses, pickling and
    ``inspect`` work), with ``filename`` in its tracebacks. Raises whatever executing the source raises."""
    spec = importlib.util.spec_from_loader(name, loader=None, origin=filename)
    module = importlib.util.module_from_spec(spec)
    module.__file__ = filename
    sys.modules[name] = module
    # Triton's @jit reads its function's source through inspect.getsourcelines and refuses ("@jit functions should be
    # defined in a Python file") when it finds none; an mtime of None keeps linecache.checkcache from evicting it.
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    code = compile(source, filename, "exec")
    exec(code, module.__dict__)  # noqa: S102 - running candidate code is this process's job
    return module


#: the file, in a candidate's ``TORCH_EXTENSIONS_DIR``, that :func:`extensions_lock` locks
EXTENSIONS_LOCK_FILE = ".kbstudy-load.lock"


@contextlib.contextmanager
def extensions_lock(root: str | os.PathLike | None = None) -> Iterator[list[Path]]:
    """Hold an exclusive lock on a candidate's extensions folder, and remove the build locks no live build holds.

    ``torch.utils.cpp_extension`` guards each extension's build folder with a lock *file* (``<root>/<name>/lock``, a
    ``torch.utils.file_baton.FileBaton``); a process that finds one polls until it disappears, with no timeout. A
    build killed mid-way (a batch stopped at its deadline, a device call that ended) leaves it behind, and every
    later load of that candidate then waits out kbstudy's load timeout (900 s by default) and fails. On the H200, one
    left by a batch stopped mid-build stalled the same batch in its next two runs.

    Every kbstudy process that loads a candidate (the build process, ``kbstudy.harness.child.build``, and the
    candidate process) does so inside this lock, an ``fcntl.flock`` that the kernel releases when its holder dies,
    and ``root`` is the candidate's own folder (``kbstudy.harness.pool.child_env`` sets ``TORCH_EXTENSIONS_DIR`` per
    source SHA-256). So a build lock found while holding it belongs to no live build, and is removed. Loads of the same candidate by two processes
    (two batches sharing a build cache) take turns; other candidates are not held up.

    Args:
        root: the extensions folder; default ``$TORCH_EXTENSIONS_DIR``. With neither, nothing is locked or removed
            (torch's default folder is shared with builds that are not kbstudy's).

    Yields the build-lock paths removed (empty when none was left). Raises nothing of its own: where the folder
    cannot be created, locked or listed (a file system without ``flock``), the load goes on as torch alone would.

    Limit: a candidate that compiles later than its module's import (in ``__init__`` or ``forward``) builds outside
    this lock, and a second process loading the same candidate at that moment would take its live lock file for a
    stale one and build into the same folder. None of the level-1 leaderboard kernels does (each calls ``load_inline``
    at module level); the script that runs two batches at once (``scripts/h200_leaderboard.sh`` on two GPUs) runs
    one phase per GPU, and two phases share a candidate only across versions or precisions of one chunk.
    """
    root = root if root is not None else os.environ.get("TORCH_EXTENSIONS_DIR")
    handle = None
    if root:
        folder = Path(root)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            handle = open(folder / EXTENSIONS_LOCK_FILE, "a")
            fcntl.flock(handle, fcntl.LOCK_EX)
        except OSError:  # a file system without flock (or read-only): load as torch alone would, nothing removed
            if handle is not None:
                handle.close()
            handle = None
    if handle is None:
        yield []
        return
    try:
        try:
            stale = sorted(p for p in folder.glob("*/lock") if p.is_file())
            for path in stale:
                path.unlink(missing_ok=True)
        except OSError:  # not ours to fix: torch reports what it cannot read or write
            stale = []
        yield stale
    finally:
        handle.close()  # closing the descriptor releases the flock
