"""Notebook 4's device-time view of DLRM-Bench runs: per problem, a kernel's device time (cold L2, the host's
enqueueing hidden: ``kbstudy.harness.timing.time_device``; in records made before it existed, the summed kernel
durations of the one profiled call) beside its per-call time, against the floor and against a copy of the problem's
bytes at its size (``copy_ms`` in ``floors.jsonl``). The run tables and record selection are in
:mod:`kbstudy.analysis.dlrm`."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kbstudy.analysis.dlrm import (
    FLOOR_TARGET,
    _finite,
    _floor_and_bound,
    _floor_row,
    _problem_label,
    _ratio,
    latest_records,
    load_floors,
    run_layout,
)
from kbstudy.suites.dlrm_bench import MODEL_CONFIG
from kbstudy.suites.dlrm_bench.roofline import launch_latency_ms

#: The columns of :func:`device_time_view`, in order.
DEVICE_COLUMNS = ("problem_id", "problem", "model_config", "bound", "per_call_ms", "device_ms", "floor_ms",
                  "per_call_over_floor", "device_over_floor", "gap_us", "device_within_target", "target_gap_us",
                  "n_kernels", "device_source", "device_q1_ms", "device_q3_ms", "profiled_ms", "copy_ms",
                  "copy_over_floor", "device_over_copy", "device_host_overran", "device_flush",
                  "copy_flush", "sector_over_bytes", "dram_copy_ms", "dram_copy_over_floor", "target_below_copy")
#: ``device_source`` values, each with the sentence :func:`device_notes` closes with: the record's device time
#: (``kbstudy.harness.timing.time_device``: median of calls with a cold L2 and the host hidden), or, in records made before it
#: existed, the kernels' summed durations of one profiled call
DEVICE_SOURCES = {
    "cold": "device time: the median of calls with the L2 flushed and the host hidden behind a spin kernel "
            "(kbstudy.harness.timing.time_device)",
    "profiled": "device time: the kernels' summed durations in one profiled, warm call (these records predate the "
                "cold device-time measurement, which is higher by the launches' start-up and the cold L2)",
}
#: ``device_flush`` values (how the L2 flush before each device-time call left the cache,
#: ``kbstudy.harness.timing.l2_flusher``), each with the sentence :func:`device_notes` adds.
DEVICE_FLUSHES = {
    "read": "each device-time call followed a flush that read a 2 x L2 buffer, leaving the L2 clean: a call pays for "
            "no earlier writes, while its own output lines still dirty in the L2 when it ends (at most the smaller of "
            "its output and the L2) are written back after its end event",
    "write": "each device-time call followed a flush that wrote a 2 x L2 buffer (records made before the read "
             "flush), so its "
             "device time includes the write-back of the flush's dirty lines (2.5-8.4 us per call for most of our "
             "kernels on the H200, outputs/records/dlrm_bench/h200/flush-states)",
}


def _cold_device_ms(record) -> float | None:
    """A record's device time (ms): ``candidate_device_ms_median`` (``kbstudy.harness.timing.time_device``), ``None`` where
    absent (a CPU run, or a record made before it existed) and where the timed outputs failed their check
    (``timing_output_ok`` false; in records made with the write flush the device-time calls' own outputs were not
    checked, since the read flush one of them, drawn at random, is checked with the timed calls')."""
    if record.get("timing_output_ok") is False:
        return None
    return _finite(record.get("candidate_device_ms_median"))


def _device_flush(record) -> str | None:
    """How the L2 flush of a record's device-time calls left the cache: ``metadata.device_time.flush`` (``None`` there:
    a warm device time, no flush), or ``"write"`` for a record with a device time that predates the key (the first
    device-time records, whose flush wrote); ``None`` without one."""
    meta = record.get("metadata")
    dt = meta.get("device_time") if isinstance(meta, dict) else None
    if not isinstance(dt, dict):
        return None
    if "flush" not in dt:
        return "write"
    return dt["flush"]  # None: a warm device time (no flush)


def _copy_flush(frow) -> str | None:
    """The flush of a floor row's copy at size: ``copy_flush``, or ``"write"`` for a row from before the key."""
    if frow is None or _finite(frow.get("copy_ms")) is None:
        return None
    flush = frow.get("copy_flush")
    return flush if isinstance(flush, str) else "write"


def _host_overran(record) -> int | None:
    """``metadata.device_time.host_overran`` of a record, ``None`` where absent."""
    meta = record.get("metadata")
    dt = meta.get("device_time") if isinstance(meta, dict) else None
    return int(dt["host_overran"]) if isinstance(dt, dict) and dt.get("host_overran") is not None else None


def _device_ms(record) -> float | None:
    """Device time (ms) of a record's one profiled call: the sum of ``metadata["kernel_time_us_by_origin"]`` (every
    kernel of the call, by origin) where recorded, else of ``top_kernels[*]["us"]`` (the five longest kernel names);
    ``None`` when the record has neither (a CPU run, or a record made before the profiled call)."""
    meta = record.get("metadata")
    by_origin = meta.get("kernel_time_us_by_origin") if isinstance(meta, dict) else None
    if by_origin and sum(by_origin.values()) > 0:
        return sum(float(us) for us in by_origin.values()) / 1e3
    top = record.get("top_kernels")
    if isinstance(top, list) and top:
        return sum(float(k["us"]) for k in top) / 1e3
    return None


def device_time_view(folder: str | Path, model_config: str = MODEL_CONFIG) -> pd.DataFrame:
    """Per problem, one model configuration's kernel (ours by default) by per-call time and by device time, each
    against the floor (columns :data:`DEVICE_COLUMNS`; times in ms, ``gap_us`` in us):

    * ``per_call_ms``: the record's median per-call time, the study's measure (``kbstudy.harness.timing``: each timed call
      follows an L2 flush and a device synchronisation, so it holds the host's work until the kernels are enqueued,
      every launch and a cold L2);
    * ``device_ms``: the record's *device time* where it has one (``device_source = "cold"``):
      ``candidate_device_ms_median``, the median over calls with the L2 flushed and the host's enqueueing hidden
      behind a spin kernel (``kbstudy.harness.timing.time_device``), with ``device_q1_ms``/``device_q3_ms``; it holds the
      launches' GPU-side start-up and any idle time between the call's kernels, no host time before the first
      launch. In records made before that measurement existed (``device_source = "profiled"``): ``profiled_ms``;
    * ``profiled_ms``: the summed duration of the device kernels of the one call the evaluation profiles
      (``torch.profiler``, one warm-up call then one traced call, on the last timing inputs:
      :func:`kbstudy.harness.orchestrator._profile_candidate`): ``metadata["kernel_time_us_by_origin"]`` (every kernel), or where
      a record lacks it the five longest kernel names of ``top_kernels``. **Caveat:** it is one call, not a median,
      and a warm one (no L2 flush before it: the warm-up leaves L2 and TLB state behind), and it leaves out the
      launches' start-up, so it is below the cold device time (by 2-11 us on the H200 where records hold both); it
      counts device work only (memsets and copies included), no host time;
    * ``floor_ms``, ``bound`` from ``floors.jsonl``; ``per_call_over_floor``, ``device_over_floor``;
    * ``copy_ms`` from ``floors.jsonl`` where measured (GPU runs that record it): the device time of a copy of the
      problem's compulsory bytes at its size (``kbstudy.suites.dlrm_bench.roofline.copy_at_size``); ``copy_over_floor``;
      ``device_over_copy`` (below 1: the kernel moves its bytes faster than a plain copy of as many bytes);
    * ``device_host_overran``: of the device-time calls, how many had host work outlasting the spin (a host
      synchronisation inside the call), so their samples hold host time (``metadata.device_time``);
    * ``device_flush``: how the L2 flush before each device-time call left the cache (:data:`DEVICE_FLUSHES`:
      ``"read"``, clean, in current records; ``"write"``, dirty, in earlier ones), ``None`` without a cold device time;
      ``copy_flush`` the same for ``copy_ms``;
    * ``sector_over_bytes``: the compulsory traffic counted in whole 32-byte DRAM sectors over the floor's bytes
      (``floors.jsonl``'s ``sector_bytes / bytes``, where recorded; above 1 where rows are gathered unaligned:
      problems 5 and 6, ``kbstudy.suites.dlrm_bench.roofline.expected_sectors``);
    * ``dram_copy_ms``: the device time of a copy of what the DRAM must move at the problem's size --
      ``sector_copy_ms`` where ``floors.jsonl`` has it (a copy of ``sector_bytes``), else ``copy_ms`` --, and
      ``dram_copy_over_floor``; ``target_below_copy``: that copy alone takes more than :data:`FLOOR_TARGET` x the
      floor (``None`` without a copy or for a compute-bound problem), i.e. the target asks for a kernel that moves
      those bytes faster than a plain copy of as many bytes at that size (evidence, not a proof: see
      ``roofline.copy_at_size``);
    * ``gap_us`` = (per call - device) in microseconds: host time before the first kernel starts, launch latency,
      gaps between launches and host syncs, and the cold-cache cost the device time does not see;
    * ``device_within_target``: ``device_over_floor`` within :data:`FLOOR_TARGET` (``None`` without a device time or
      a floor); the target itself is stated for memory-bound problems;
    * ``target_gap_us`` = (:data:`FLOOR_TARGET` x floor - device) in microseconds: the largest gap a call could have
      at this device time and still be within the target per call (negative: the device time alone exceeds it);
    * ``n_kernels``: how many kernel names ``top_kernels`` lists (at most 5).

    Device-time columns are NaN / ``None`` where the records have no profiled call (a CPU run has no device kernels).
    Raises ``FileNotFoundError`` if the folder has no ``evaluations.jsonl``."""
    folder = Path(folder)
    layout = run_layout(folder)
    records = latest_records(folder)
    floors = load_floors(folder)
    rows = []
    for _, r in records[records["model_config"] == model_config].iterrows():
        floor, bound = _floor_and_bound(floors, r, layout)
        frow = _floor_row(floors, r) if layout != "preliminary" else None
        copy = _finite(frow.get("copy_ms")) if frow is not None else None
        sector_copy = _finite(frow.get("sector_copy_ms")) if frow is not None else None
        dram_copy = sector_copy if sector_copy is not None else copy
        dram_over_floor = _ratio(dram_copy, floor)
        sector_bytes, nbytes = ((_finite(frow.get("sector_bytes")), _finite(frow.get("bytes")))
                                if frow is not None else (None, None))
        per_call, profiled, cold = r["candidate_ms_median"], _device_ms(r), _cold_device_ms(r)
        device = cold if cold is not None else profiled
        source = "cold" if cold is not None else ("profiled" if profiled is not None else None)
        top = r.get("top_kernels")
        device_over_floor = _ratio(device, floor)
        rows.append({
            "problem_id": int(r["problem_id"]), "problem": _problem_label(r["problem_name"]),
            "model_config": model_config, "bound": bound, "per_call_ms": per_call, "device_ms": device,
            "floor_ms": floor, "per_call_over_floor": _ratio(per_call, floor), "device_over_floor": device_over_floor,
            "gap_us": (per_call - device) * 1e3 if device is not None and per_call == per_call else None,
            "device_within_target": None if device_over_floor is None else bool(device_over_floor <= FLOOR_TARGET),
            "target_gap_us": (FLOOR_TARGET * floor - device) * 1e3 if device is not None and floor else None,
            "n_kernels": len(top) if isinstance(top, list) else None,
            "device_source": source,
            "device_q1_ms": r.get("candidate_device_ms_q1") if cold is not None else None,
            "device_q3_ms": r.get("candidate_device_ms_q3") if cold is not None else None,
            "profiled_ms": profiled, "copy_ms": copy, "copy_over_floor": _ratio(copy, floor),
            "device_over_copy": _ratio(device, copy),
            "device_host_overran": _host_overran(r) if cold is not None else None,
            "device_flush": _device_flush(r) if cold is not None else None,
            "copy_flush": _copy_flush(frow), "sector_over_bytes": _ratio(sector_bytes, nbytes),
            "dram_copy_ms": dram_copy, "dram_copy_over_floor": dram_over_floor,
            "target_below_copy": (None if dram_over_floor is None or bound != "memory"
                                  else bool(dram_over_floor > FLOOR_TARGET)),
        })
    out = pd.DataFrame(rows, columns=list(DEVICE_COLUMNS))
    for col in ("per_call_ms", "device_ms", "floor_ms", "per_call_over_floor", "device_over_floor", "gap_us",
                "target_gap_us", "device_q1_ms", "device_q3_ms", "profiled_ms", "copy_ms", "copy_over_floor",
                "device_over_copy", "device_host_overran", "sector_over_bytes", "dram_copy_ms",
                "dram_copy_over_floor"):
        out[col] = pd.to_numeric(out[col], errors="coerce").astype(float)
    return out.sort_values("problem_id", kind="stable").reset_index(drop=True)


def device_notes(view: pd.DataFrame, machine: dict) -> list[str]:
    """:func:`device_time_view` in sentences, numbers from the records: which memory-bound problems are within
    :data:`FLOOR_TARGET` of their floor by device time and by per-call time, how much gap the per-call target leaves
    those within it by device time, and the gap between the two times (in us and in the machine's empty-Triton-launch
    latencies, where measured)."""
    timed = view[view["device_ms"].notna()]
    if not len(timed):
        return [("no device times in these records (no profiled call: a CPU run has no device kernels to profile): "
                 "the per-call time is the only view")]

    def _listed(rows: pd.DataFrame, col: str) -> str:
        return (f"{len(rows)}: " + ", ".join(f"{r.problem_id} ({getattr(r, col):.2f}x)" for r in rows.itertuples())
                if len(rows) else "none")

    sources = set(timed["device_source"].dropna())
    source_note = (DEVICE_SOURCES[sources.pop()] if len(sources) == 1
                   else "device time: cold where the record has it, else profiled (mixed records)")
    notes = []
    mem = timed[(timed["bound"] == "memory") & timed["floor_ms"].notna()]
    if len(mem):
        by_device = mem[mem["device_over_floor"] <= FLOOR_TARGET]
        by_call = mem[mem["per_call_over_floor"] <= FLOOR_TARGET]
        notes.append(f"memory-bound problems within {FLOOR_TARGET}x of the floor, of {len(mem)} with a device time: "
                     f"by device time {_listed(by_device, 'device_over_floor')}; by per-call time "
                     f"{_listed(by_call, 'per_call_over_floor')}")
        notes.append(f"device time / floor, memory-bound: {mem['device_over_floor'].min():.2f}-"
                     f"{mem['device_over_floor'].max():.2f}x; per-call time / floor: "
                     f"{mem['per_call_over_floor'].min():.2f}-{mem['per_call_over_floor'].max():.2f}x")
        if len(by_device):
            notes.append("the most gap the per-call target leaves at these device times (the measured gap in "
                         "brackets): " + ", ".join(f"{r.problem_id}: {r.target_gap_us:.0f} us ({r.gap_us:.0f} us)"
                                                   for r in by_device.itertuples()))
    copies = mem[mem["copy_over_floor"].notna()] if len(mem) else mem
    if len(copies):
        over = copies[copies["copy_over_floor"] > FLOOR_TARGET]
        notes.append(f"a copy of the compulsory bytes at each memory-bound problem's size (device time) takes "
                     f"{copies['copy_over_floor'].min():.2f}-{copies['copy_over_floor'].max():.2f}x the floor; above "
                     f"{FLOOR_TARGET}x on {_listed(over, 'copy_over_floor')}; ours / copy: "
                     + ", ".join(f"{r.problem_id} {r.device_over_copy:.2f}x" for r in copies.itertuples()))
    sectors = mem[mem["sector_over_bytes"] > 1.0 + 1e-6] if len(mem) else mem
    if len(sectors):
        note = ("counted in whole 32-byte DRAM sectors, the compulsory traffic is "
                + ", ".join(f"{r.sector_over_bytes:.3f}x the floor's bytes on {r.problem_id}"
                            for r in sectors.itertuples()) + " (unaligned gathered rows)")
        copied = [r for r in sectors.itertuples() if r.dram_copy_over_floor == r.dram_copy_over_floor]
        if copied:  # (a CPU run times no copies)
            note += "; a copy of that many bytes at size takes " + ", ".join(
                f"{r.dram_copy_over_floor:.2f}x the floor on {r.problem_id}" for r in copied)
        notes.append(note)
    below = mem[mem["target_below_copy"] == True] if len(mem) else mem  # noqa: E712
    if len(below):
        notes.append(f"the {FLOOR_TARGET}x target is below a plain copy of what the DRAM must move, at the problem's "
                     f"size, on {_listed(below, 'dram_copy_over_floor')}: a kernel within it there would have to move "
                     f"those bytes faster than the copy")
    overran = timed[timed["device_host_overran"].fillna(0) > 0]
    if len(overran):
        notes.append("device-time calls whose host work outlasted the spin (a host synchronisation inside the call, "
                     "so their samples hold host time): " + ", ".join(
                         f"{r.problem_id} ({int(r.device_host_overran)})" for r in overran.itertuples()))
    gap = timed["gap_us"]
    widest = timed.loc[gap.idxmax()]
    note = (f"per-call median minus device time: {gap.min():.0f}-{gap.max():.0f} us over {len(timed)} problems "
            f"(median {gap.median():.0f} us; largest: problem {widest['problem_id']}, {widest['gap_us']:.0f} us, "
            f"{widest['n_kernels']} kernel names profiled)")
    launch = launch_latency_ms(machine)
    if launch is not None:
        note += (f"; one empty Triton launch here takes {launch * 1e3:.1f} us, so the gap is "
                 f"{gap.min() / (launch * 1e3):.1f}-{gap.max() / (launch * 1e3):.1f} launches' worth")
    notes.append(note)
    notes.append(source_note)
    flushes = sorted(set(timed["device_flush"].dropna()))
    copy_flushes = sorted(set(timed["copy_flush"].dropna()))
    if len(flushes) == 1:
        notes.append(DEVICE_FLUSHES[flushes[0]])
    elif flushes:
        notes.append(f"the device-time calls' L2 flushes differ between these records ({', '.join(flushes)}): compare "
                     f"their device times with care")
    if flushes and copy_flushes and copy_flushes != flushes:
        notes.append(f"the copies' L2 flush ({', '.join(copy_flushes)}) differs from the kernels' "
                     f"({', '.join(flushes)})")
    return notes
