"""Outcome categories of a record: the strings that records hold, and :class:`Outcome`, the enum the harness uses.

A ``str`` enum whose values are exactly the strings of :data:`OUTCOMES`: a member compares equal to its string, and
the harness writes ``.value`` into records, so committed records and new ones hold the same plain strings.
"""

from __future__ import annotations

import enum


class Outcome(str, enum.Enum):
    """What became of one candidate (or one problem's reference), in the order a candidate meets them. Only
    ``EVALUATED`` carries verdicts and timings."""

    EVALUATED = "evaluated"  # built, ran on every trial; verdicts (and timings, if it was correct) recorded
    SKIPPED = "skipped"  # not run, with the reason (e.g. a CUDA candidate on a machine without a GPU)
    COMPILE_ERROR = "compile_error"  # the source did not build: syntax error, nvcc/ninja failure, missing ModelNew
    RUNTIME_ERROR = "runtime_error"  # a Python exception while constructing or calling ModelNew
    CUDA_ERROR = "cuda_error"  # a CUDA error: illegal address, launch failure, misaligned access, device-side assert
    OUT_OF_MEMORY = "out_of_memory"  # torch.OutOfMemoryError (device or host)
    TIMEOUT = "timeout"  # exceeded the compile or run timeout (a hang); the worker was killed
    CRASHED = "crashed"  # the worker died without reporting: segfault, abort, killed by a signal
    REFERENCE_ERROR = "reference_error"  # the reference itself failed on this problem; no candidate verdict is possible

    def __str__(self) -> str:  # the record's string, also in f-strings (Python 3.11 changed Enum.__format__)
        return self.value


#: The outcome strings, in :class:`Outcome`'s order (what records hold and tables are ordered by).
OUTCOMES = tuple(o.value for o in Outcome)
