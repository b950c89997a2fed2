"""A child process's stdout and stderr, captured per candidate and bounded, never mixed into the orchestrator's.

At child start, :func:`start` points file descriptors 1 and 2 at a pipe the child itself reads in a thread (Python's
``print``, C ``printf``, a compiler's diagnostics and any process the candidate starts all write there). The thread
keeps the first and the last :data:`KEEP_BYTES` bytes and counts the rest, so an output flood costs neither memory
nor disk nor the orchestrator's console. :meth:`OutputCapture.finish` returns what was kept.

This module imports no other kbstudy module.
"""

from __future__ import annotations

import os
import sys
import threading

#: bytes kept from the start and from the end of a child's output
KEEP_BYTES = 64 << 10


class OutputCapture:
    """The reading end of a child's redirected stdout and stderr (see the module docstring)."""

    def __init__(self, keep: int = KEEP_BYTES):
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        read_fd, write_fd = os.pipe()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        os.dup2(write_fd, 1)
        os.dup2(write_fd, 2)
        os.close(write_fd)
        devnull = os.open(os.devnull, os.O_RDWR)  # nor its terminal through standard input
        os.dup2(devnull, 0)
        os.close(devnull)
        self._read_fd = read_fd
        self._thread = threading.Thread(target=self._read, name="kbstudy-output-capture", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._read_fd, 1 << 16)
            except OSError:
                return
            if not chunk:
                return
            self.total += len(chunk)
            room = self.keep - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail += chunk
                if len(self.tail) > 2 * self.keep:
                    del self.tail[:-self.keep]

    def finish(self, timeout_s: float = 1.0) -> dict | None:
        """Close this process's stdout and stderr and return ``{"bytes": total, "head": text, "tail": text}`` (the
        tail holds the last :data:`KEEP_BYTES` not already in the head; text decoded with replacement), or None if
        nothing was written. Waits at most ``timeout_s`` for the reader (a descendant still holding the pipe)."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        for fd in (1, 2):
            try:
                os.close(fd)
            except OSError:
                pass
        self._thread.join(timeout_s)
        if not self.total:
            return None
        tail = bytes(self.tail[-self.keep:])
        return {"bytes": self.total, "head": bytes(self.head).decode("utf-8", "replace"),
                "tail": tail.decode("utf-8", "replace")}


def start() -> OutputCapture | None:
    """Redirect this process's stdout and stderr into a bounded capture; None if it cannot (the output then goes
    where it went before)."""
    try:
        return OutputCapture()
    except OSError:
        return None
