"""Soak benchmark of the harness: N candidates over level-1 problems on the CPU, a share of them hostile, the
orchestrator optionally killed with SIGKILL at random points and resumed; a JSON report of what survived.

Honest candidates are the problems' own reference code under the name ``ModelNew`` (each with a line of its own, so
no two share a source). Hostile ones are the files of ``tests/adversarial/hostile/`` (KernelBench ``ModelNew`` format
for 19_ReLU; each names its expected outcome on its second line), dealt round-robin. The batch runs in a child
process (``--orchestrate``) whose every descendant carries ``KBSTUDY_SOAK_ID`` in its environment, so what it leaves
behind can be found; this process kills it when the store reaches each randomly drawn record count, checks that
nothing of it survived, and starts it again until the batch completes.

The report (``--out``): candidates, hostile share, kills; records ``lost`` (candidates without a record),
``duplicated`` (identities with more than one), ``torn_lines`` (unparseable lines left by kills: each candidate is
evaluated again on resume); ``batch_deaths`` (orchestrator exits other than the kills); ``outcomes_by_kind`` and
``wrong_outcomes`` (hostile records whose outcome is not the file's expected one, and honest ones not evaluated and
correct); ``escaped_processes`` per kind; ``leaked``: descriptors (the orchestrator's count at the batch's end minus
at its start, and its peak), processes (of the soak left alive after each kill and at the end) and shared-memory
files (new ``/dev/shm`` files of dead or soak processes); ``console_leaks`` (hostile output found in the
orchestrator's own stdout and stderr); ``records_per_minute`` over the whole wall time, kills and restarts included.

    python scripts/soak.py --candidates 1000 --hostile-share 0.05 --kills 2 --out outputs/benchmarks/soak-cpu.json
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from kbstudy.harness.candidates import make_candidate
from kbstudy.harness.config import EvalConfig
from kbstudy.harness.orchestrator import evaluate_batch
from kbstudy.harness.pool import start_forkserver
from kbstudy.harness.problems import load_problems
from kbstudy.pipeline.data import resolve_kernelbench_dir
from kbstudy.records.store import RecordStore
from kbstudy.verdict.trials import STRUCTURAL_VARIANTS

REPO = Path(__file__).resolve().parents[1]
HOSTILE_DIR = REPO / "tests" / "adversarial" / "hostile"
HOSTILE_PROBLEM = (1, 19)
ENV_MARKER = "KBSTUDY_SOAK_ID"
FLOOD_MARKER = "hostile output flood"


def hostile_kinds() -> dict[str, tuple[str, str]]:
    """``{kind: (source, expected outcome)}`` of the hostile files."""
    kinds = {}
    for path in sorted(HOSTILE_DIR.glob("*.py")):
        source = path.read_text()
        match = re.search(r"^# expected outcome: ([\w|]+)", source, re.M)
        if match:
            kinds[path.stem] = (source, match.group(1))
    return kinds


def honest_source(problem_source: str, index: int) -> str:
    """The reference's code as a candidate: ``Model`` renamed ``ModelNew``, a line of its own added."""
    source = re.sub(r"\bclass Model\b", "class ModelNew", problem_source)
    source = re.sub(r"super\(Model,", "super(ModelNew,", source)
    return f"# soak honest candidate {index}\n{source}"


def plan(args) -> list[dict]:
    """The batch's candidates: ``{"index", "kind", "level", "problem_id", "source", "expected"}``, drawn with
    ``args.seed``. Hostile candidates are spread evenly through the batch."""
    problems = {p.problem_id: p for p in load_problems(Path(args.kernelbench) / "kernelbench_levels_1-3.jsonl")
                if p.level == 1 and p.problem_id in args.problem_ids}
    kinds = hostile_kinds()
    names = sorted(kinds)
    n_hostile = round(args.candidates * args.hostile_share)
    rng = random.Random(args.seed)
    hostile_at = set(rng.sample(range(args.candidates), n_hostile)) if n_hostile else set()
    ids = sorted(problems)
    out, dealt = [], 0
    for i in range(args.candidates):
        if i in hostile_at:
            kind = names[dealt % len(names)]
            dealt += 1
            source, expected = kinds[kind]
            out.append({"index": i, "kind": kind, "level": HOSTILE_PROBLEM[0], "problem_id": HOSTILE_PROBLEM[1],
                        "source": f"# soak hostile candidate {i}\n{source}", "expected": expected})
        else:
            pid = ids[i % len(ids)]
            out.append({"index": i, "kind": "honest", "level": 1, "problem_id": pid,
                        "source": honest_source(problems[pid].source, i), "expected": "evaluated"})
    return out


def model_config(entry: dict) -> str:
    return f"soak-{entry['index']:05d}-{entry['kind']}"


# ------------------------------------------------------------------------------------------------ the orchestrator


def orchestrate(work: Path, args) -> int:
    """Run the batch (in the child process): every planned candidate not yet in ``work/records``. Writes the
    orchestrator's descriptor counts to ``work/fds-<pid>.json``."""
    entries = json.loads((work / "plan.json").read_text())
    ids = {e["problem_id"] for e in entries}
    problems = [p for p in load_problems(Path(args.kernelbench) / "kernelbench_levels_1-3.jsonl")
                if p.level == 1 and p.problem_id in ids]
    cands = [make_candidate(e["source"], level=e["level"], problem_id=e["problem_id"], model_config=model_config(e),
                            backend="torch") for e in entries]
    cfg = EvalConfig(run="soak", device="cpu", size_scale=args.size_scale, compile_baseline=False, progress=False,
                     time_candidates=not args.no_timing,
                     trials=args.trials, fresh_trials=args.fresh_trials, variants=tuple(args.variants),
                     structural_variants=tuple(args.structural_variants),
                     extra_seeds=[1000 + i for i in range(args.fresh_trials + len(args.variants)
                                                          + len(args.structural_variants))],
                     timing={"warmup_ms": 1, "budget_ms": 10, "min_reps": 3, "max_reps": 5},
                     run_timeout_s=args.run_timeout, load_timeout_s=60, cache_dir=str(work / "cache"))
    counts = {"start": None, "peak": 0, "end": None}
    stop = threading.Event()

    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    def sample():
        while not stop.wait(0.5):
            counts["peak"] = max(counts["peak"], fds())

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    start_forkserver("cpu")  # started here so the descriptor counts include the fork server's
    counts["start"] = counts["peak"] = fds()
    threading.Thread(target=sample, daemon=True).start()
    summary = evaluate_batch(problems, cands, RecordStore(work / "records"), cfg)
    stop.set()
    counts["end"] = fds()
    counts["written"] = summary.written
    (work / f"fds-{os.getpid()}.json").write_text(json.dumps(counts))
    return 0


# ------------------------------------------------------------------------------------------------ what is left


def soak_processes(marker: str, exclude: int | None = None) -> list[int]:
    """Live processes whose environment carries the soak's marker."""
    found, needle = [], f"{ENV_MARKER}={marker}".encode()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (os.getpid(), exclude):
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                if needle not in fh.read().split(b"\0"):
                    continue
            with open(f"/proc/{name}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                    continue
        except OSError:
            continue
        found.append(int(name))
    return found


def describe(pids: list[int]) -> list[dict]:
    """What a left-over process is: its state, parent and command line (for the report)."""
    out = []
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes()
            fields = stat.rsplit(b")", 1)[1].split()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:160].decode(errors="replace")
            out.append({"pid": pid, "state": fields[0].decode(), "ppid": int(fields[1]), "pgid": int(fields[2]),
                        "cmdline": cmd})
        except OSError:
            out.append({"pid": pid, "state": "gone"})
    return out


def leaked_shm(before: set[str], seen_pids: set[int]) -> list[str]:
    """New ``/dev/shm`` files made by torch (``torch_<pid>_...``) for a process of the soak that is gone."""
    out = []
    for name in sorted(set(os.listdir("/dev/shm")) - before):
        match = re.match(r"torch_(\d+)_", name)
        if not match:
            continue
        pid = int(match.group(1))
        if pid in seen_pids and not Path(f"/proc/{pid}").exists():  # (other users' files are not the soak's)
            out.append(name)
    return out


def wait_for_nothing_left(marker: str, seconds: float, seen: set[int]) -> list[int]:
    deadline = time.monotonic() + seconds
    while True:
        left = soak_processes(marker)
        seen.update(left)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def count_lines(path: Path) -> int:
    try:
        with path.open("rb") as fh:
            return sum(1 for line in fh if line.strip())
    except FileNotFoundError:
        return 0


def run(args) -> dict:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    entries = plan(args)
    (work / "plan.json").write_text(json.dumps(entries))
    marker = uuid.uuid4().hex
    rng = random.Random(args.seed + 1)
    kill_at = sorted(rng.sample(range(max(1, len(entries) // 10), max(2, len(entries) * 9 // 10)), args.kills)) \
        if args.kills else []
    shm_before = set(os.listdir("/dev/shm"))
    evaluations = work / "records" / "evaluations.jsonl"
    log = work / "orchestrator.log"
    env = {**os.environ, ENV_MARKER: marker, "KBSTUDY_FILE_SIZE_LIMIT": str(args.file_size_limit),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    command = [sys.executable, __file__, "--orchestrate", *sys.argv[1:]]
    started = time.monotonic()
    kills, deaths, after_kill, seen = [], [], [], set()
    while True:
        with log.open("ab") as out:
            proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
        try:
            killed = watch(proc, kill_at, evaluations, marker, seen, started, kills, after_kill, shm_before, args)
        finally:
            if proc.poll() is None:  # this script was interrupted: its batch goes with it
                proc.kill()
                proc.wait()
        if killed:
            continue
        if proc.returncode != 0:
            deaths.append({"returncode": proc.returncode, "at_records": count_lines(evaluations)})
            if len(deaths) > 3:
                break
            continue
        break
    wall = time.monotonic() - started
    left = wait_for_nothing_left(marker, args.leak_wait, seen)
    shm = leaked_shm(shm_before, seen)
    return report(args, work, entries, wall, kills, deaths, left, shm, log, after_kill)


def watch(proc, kill_at, evaluations, marker, seen, started, kills, after_kill, shm_before, args) -> bool:
    """Wait for the batch ``proc``; kill it (SIGKILL) when the store reaches the next of ``kill_at``, then record
    what of it is left after ``args.leak_wait`` seconds. True if it was killed."""
    killed = False
    while proc.poll() is None:
        time.sleep(0.2)
        seen.update(soak_processes(marker))
        if kill_at and count_lines(evaluations) >= kill_at[0]:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            killed = True
            records = count_lines(evaluations)
            kill_at.pop(0)
            left = wait_for_nothing_left(marker, args.leak_wait, seen)
            shm = leaked_shm(shm_before, seen)
            kills.append({"at_records": records, "seconds": round(time.monotonic() - started, 1),
                          "processes_left": len(left), "shm_files_left": len(shm), "left": describe(left)})
            after_kill.append({"processes": left, "shm": shm})
            for pid in left:  # hygiene: counted above; do not let them disturb the rest of the soak
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            break
    return killed


def report(args, work: Path, entries: list[dict], wall: float, kills: list, deaths: list, left: list[int],
           shm: list[str], log: Path, after_kill: list[dict]) -> dict:
    rows, torn = [], 0
    evaluations = work / "records" / "evaluations.jsonl"
    if evaluations.exists():
        for line in evaluations.read_text().splitlines():
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                torn += 1
    by_config = collections.defaultdict(list)
    for row in rows:
        by_config[row["model_config"]].append(row)
    outcomes = collections.defaultdict(collections.Counter)
    escaped = collections.defaultdict(int)
    wrong = []
    for entry in entries:
        got = by_config.get(model_config(entry))
        if not got:
            continue
        row = got[-1]
        outcomes[entry["kind"]][row["outcome"]] += 1
        escaped[entry["kind"]] += int((row.get("metadata") or {}).get("escaped_processes") or 0)
        ok = row["outcome"] in entry["expected"].split("|")
        if entry["kind"] == "honest":
            ok = ok and row.get("kbstudy_correct") is True
        if not ok:
            wrong.append({"candidate": model_config(entry), "expected": entry["expected"], "outcome": row["outcome"],
                          "error": (row.get("error_message") or "")[:300]})
    fd_files = sorted(work.glob("fds-*.json"), key=lambda p: p.stat().st_mtime)
    fds = json.loads(fd_files[-1].read_text()) if fd_files else {}
    console = log.read_text(errors="replace") if log.exists() else ""
    n_hostile = sum(e["kind"] != "honest" for e in entries)
    return {
        "candidates": len(entries), "hostile": n_hostile, "hostile_share": round(n_hostile / max(1, len(entries)), 4),
        "problems": sorted({e["problem_id"] for e in entries}), "size_scale": args.size_scale,
        "kills": kills, "batch_deaths": deaths,
        "records": len(rows), "lost": sum(1 for e in entries if model_config(e) not in by_config),
        "duplicated": sum(len(v) - 1 for v in by_config.values() if len(v) > 1), "torn_lines": torn,
        "outcomes_by_kind": {k: dict(v) for k, v in sorted(outcomes.items())},
        "expected_by_kind": {**{k: e for k, (_, e) in hostile_kinds().items()}, "honest": "evaluated"},
        "wrong_outcomes": wrong, "escaped_processes_by_kind": dict(sorted(escaped.items())),
        "leaked": {"descriptors": (fds["end"] - fds["start"]) if fds.get("end") is not None else None,
                   "descriptors_start": fds.get("start"), "descriptors_peak": fds.get("peak"),
                   "descriptors_end": fds.get("end"),
                   "processes": len(left) + sum(k["processes_left"] for k in kills),
                   "shm_files": len(set(shm).union(*[set(a["shm"]) for a in after_kill])),
                   "processes_left": describe(left), "shm_names": shm[:20]},
        "console_leaks": console.count(FLOOD_MARKER),
        "wall_s": round(wall, 1), "records_per_minute": round(len(rows) / (wall / 60), 1) if wall else None,
        "settings": {"trials": args.trials, "timing": not args.no_timing, "fresh_trials": args.fresh_trials,
                     "variants": list(args.variants), "structural_variants": list(args.structural_variants),
                     "run_timeout_s": args.run_timeout, "file_size_limit": args.file_size_limit,
                     "seed": args.seed},
    }


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", type=int, default=60)
    parser.add_argument("--hostile-share", type=float, default=0.05)
    parser.add_argument("--kills", type=int, default=0)
    parser.add_argument("--problems", default="19-50", help="level-1 problem ids, e.g. 19-50 or 19,20,21")
    parser.add_argument("--size-scale", type=float, default=1 / 64)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--fresh-trials", type=int, default=2)
    parser.add_argument("--variants", default="signed,large")
    parser.add_argument("--structural-variants", default=",".join(STRUCTURAL_VARIANTS),
                        help="comma-separated structural variants (kbstudy.verdict.trials.STRUCTURAL_VARIANTS); "
                             "'' for none")
    parser.add_argument("--run-timeout", type=float, default=10.0)
    parser.add_argument("--no-timing", action="store_true", help="verdicts only (no timing of candidates)")
    parser.add_argument("--file-size-limit", type=int, default=256 << 20)
    parser.add_argument("--leak-wait", type=float, default=10.0, help="seconds allowed for a killed batch's processes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kernelbench", default=None,
                        help="the KernelBench data folder (default: kbstudy.pipeline.data.resolve_kernelbench_dir)")
    parser.add_argument("--work", default=".cache/soak")
    parser.add_argument("--out", default=None)
    parser.add_argument("--orchestrate", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.kernelbench = str(resolve_kernelbench_dir(args.kernelbench))
    ids = set()
    for part in args.problems.split(","):
        lo, _, hi = part.partition("-")
        ids.update(range(int(lo), int(hi or lo) + 1))
    args.problem_ids = ids | {HOSTILE_PROBLEM[1]}
    args.variants = [v for v in args.variants.split(",") if v]
    args.structural_variants = [v for v in args.structural_variants.split(",") if v]
    return args


def main(argv=None) -> int:
    args = parse(argv)
    if args.orchestrate:
        return orchestrate(Path(args.work), args)
    result = run(args)
    text = json.dumps(result, indent=2)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
