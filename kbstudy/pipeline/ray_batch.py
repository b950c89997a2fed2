"""One evaluation batch spread over every GPU of a Ray cluster: ``kbstudy eval --ray`` (``docs/howto/scale-out-with-ray.md``).

The driver (this module) starts one lane per GPU (:class:`kbstudy.harness.ray_lane.Lane`, a Ray actor holding
``num_gpus=1``; one lane on a cluster without GPUs) and hands each lane one problem at a time, largest first (inputs
plus first output on PyTorch's meta device, :func:`kbstudy.pipeline.calibrate.cached_footprints`, sized in a CPU
task), so a problem's reference process is shared by its candidates and the long problems do not finish last. CUDA
candidates are built first as CPU tasks into the build cache (``cache_dir``: on several machines, a path every node
reads), and a problem's lane call waits on its candidates' builds.

One writer: a lane returns the JSON lines of its records and the driver alone appends them to the records folder,
so keys, resume and the JSONL are exactly as with one GPU, and a run resumed with or without Ray, on any number of
GPUs, evaluates only what is missing. A lane that dies (its process or node lost) loses only the problem it held,
none of whose records were written: the problem is evaluated again once on a fresh lane and its records say so
(``metadata.ray_retries``); if that lane dies too, each of its candidates is recorded as ``crashed``.

Ray is an optional dependency (``pip install -e ".[ray]"``): it is imported only when this module's entry runs.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import time
from pathlib import Path
from typing import Callable

from tqdm.auto import tqdm

from kbstudy.harness.assemble import BatchSummary, common_fields, write_record
from kbstudy.harness.candidates import Candidate
from kbstudy.harness.config import EvalConfig
from kbstudy.harness.orchestrator import candidate_identity, done_identities
from kbstudy.harness.problems import Problem
from kbstudy.harness.ray_lane import Lane, build_candidate
from kbstudy.pipeline.calibrate import cached_footprints
from kbstudy.records import provenance
from kbstudy.records.outcomes import OUTCOMES, Outcome
from kbstudy.records.schema import EvaluationRecord
from kbstudy.records.store import RecordStore, append_jsonl, iter_jsonl
from kbstudy.verdict.trials import plan_extra_trials

#: How many times a problem whose lane died is evaluated again on a fresh lane.
RAY_RETRIES = 1


class LaneFailure(RuntimeError):
    """A lane raised (not died): the machine or the settings are at fault, not a candidate; the batch stops, its
    records so far kept (as a plain batch stops on ``WorkerStartError``)."""


def problem_order(problems: list[Problem], sizes: list[dict]) -> list[Problem]:
    """``problems`` largest first: inputs plus first output elements (``sizes``: their footprints, in order); a
    problem the meta device cannot size counts as largest (it may be). Ties keep the given order."""
    def size(item):
        fp = item[1]
        if fp.get("error") or fp.get("input_numel") is None:
            return float("inf")
        return int(fp.get("input_numel") or 0) + int(fp.get("output_numel") or 0)
    ranked = sorted(enumerate(zip(problems, sizes)), key=lambda t: (-size(t[1]), t[0]))
    return [p for _, (p, _) in ranked]


def with_retries(line: str, retries: int) -> str:
    """An evaluation record's JSON line with ``metadata.ray_retries`` set (the record of a problem evaluated again
    after its lane died), serialised as the store serialises records."""
    row = json.loads(line)
    row["metadata"] = {**(row.get("metadata") or {}), "ray_retries": retries}
    return EvaluationRecord(**{f.name: row.get(f.name) for f in dataclasses.fields(EvaluationRecord)
                               if f.name in row}).to_json()


def _rows_by_problem(path: Path) -> dict[str, list[str]]:
    """The JSON lines of a record file, by ``problem_sha256`` (the records a lane needs to resume one problem)."""
    out: dict[str, list[str]] = collections.defaultdict(list)
    for row in iter_jsonl(path):
        if "problem_sha256" in row:
            out[row["problem_sha256"]].append(json.dumps(row))
    return out


def evaluate_batch_ray(problems: list[Problem], candidates: list[Candidate], store: RecordStore, cfg: EvalConfig,
                       address: str | None = None, *, lanes: int | None = None, lane_cpus: float = 1.0,
                       builds: bool = True, init_options: dict | None = None,
                       echo: Callable[[str], None] = print) -> BatchSummary:
    """:func:`kbstudy.harness.orchestrator.evaluate_batch` over the GPUs of a Ray cluster (see the module docstring).

    ``address``: the cluster (``auto``, ``HOST:6379``, ``ray://HOST:10001``); ``None`` connects to ``RAY_ADDRESS``
    if set, else starts a local cluster (shut down at the end). ``lanes``: how many (default: one per GPU of the
    cluster, one if it has none). ``lane_cpus``: CPUs each lane holds (its reference and candidate processes), the
    rest are left to the build tasks. Raises ``ImportError`` without Ray, ``RuntimeError`` when lanes disagree on the
    hardware (one run, one hardware label) or a lane raises (:class:`LaneFailure`); never for a candidate's failure.
    """
    import ray  # optional dependency (the "ray" extra): only `--ray` runs need it

    t0 = time.perf_counter()
    unknown = set(cfg.retry_outcomes) - set(OUTCOMES)
    if unknown:
        raise ValueError(f"unknown outcome(s) to retry: {sorted(unknown)}; known: {', '.join(OUTCOMES)}")
    # one batch, one set of extra-trial seeds (every lane's records list the same ones, as in one process)
    seeds = cfg.extra_seeds or [e.seed for e in plan_extra_trials(cfg.trials, cfg.fresh_trials, tuple(cfg.variants),
                                                                   structural=tuple(cfg.structural_variants))]
    lane_cfg = dataclasses.replace(cfg, progress=False, extra_seeds=list(seeds),
                                   cache_dir=str(Path(cfg.cache_dir).resolve()))
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, **{"include_dashboard": False, "log_to_driver": False, **(init_options or {})})
    summary = BatchSummary()
    actors: dict[int, object] = {}
    try:
        gpus = int(ray.cluster_resources().get("GPU", 0))
        count = lanes or max(gpus, 1)
        lane_options = {"num_gpus": 1 if gpus else 0, "num_cpus": lane_cpus, "max_restarts": 0}
        lane_actor = ray.remote(Lane).options(**lane_options)

        def new_lane():
            return lane_actor.remote(lane_cfg)

        actors = {i: new_lane() for i in range(count)}
        info = ray.get([a.describe.remote() for a in actors.values()])
        hardware = {row["hardware"] for row in info}
        if len(hardware) != 1:
            raise RuntimeError(f"lanes on different hardware {sorted(hardware)}: records are keyed by hardware, so run "
                               "one batch per GPU type (Ray resources or a cluster per type)")
        hardware_name, device, arch = info[0]["hardware"], info[0]["device"], info[0]["arch"]
        echo(f"ray: {count} lanes on {hardware_name} ({device}), hosts "
             f"{', '.join(sorted({row['hostname'] for row in info}))}")
        settings = lane_cfg.settings_key()
        done = done_identities(store.evaluations_by_identity(), cfg)
        index = {(p.level, p.problem_id): p for p in problems}
        by_problem: dict[tuple[int, int], list[Candidate]] = collections.defaultdict(list)
        for cand in candidates:
            problem = index.get((cand.level, cand.problem_id))
            if problem is None:
                summary.unmatched.append(cand.candidate_id)
                continue
            by_problem[(problem.level, problem.problem_id)].append(cand)
        todo: list[Problem] = []
        for key, cands in sorted(by_problem.items()):
            problem = index[key]
            identities = {candidate_identity(problem, c, cfg, hardware_name, settings)[1] for c in cands}
            if identities <= done:
                summary.already_done += len(cands)
            else:
                todo.append(problem)
        if not todo:
            summary.seconds = time.perf_counter() - t0
            return summary
        # no CPU held: the lanes may hold them all, and sizing is short (meta device, cached)
        sizer = ray.remote(cached_footprints).options(num_cpus=0)
        order = problem_order(todo, ray.get(sizer.remote(todo, cfg.size_scale, lane_cfg.cache_dir)))
        build_refs: dict[str, object] = {}
        if builds and device.startswith("cuda"):
            builder = ray.remote(build_candidate).options(
                num_cpus=1, runtime_env={"env_vars": {"TORCH_CUDA_ARCH_LIST": arch}} if arch else None)
            for problem in order:
                for cand in by_problem[(problem.level, problem.problem_id)]:
                    if cand.backend == "cuda" and cand.sha256 not in build_refs:
                        build_refs[cand.sha256] = builder.remote(cand, lane_cfg)
        evaluations = _rows_by_problem(store.evaluations_path)
        references = _rows_by_problem(store.references_path)
        queue = collections.deque((p, 0) for p in order)
        idle = collections.deque(actors)
        inflight: dict = {}  # object ref -> (lane id, problem, attempt)
        bar = tqdm(total=sum(len(by_problem[(p.level, p.problem_id)]) for p in order), desc=f"evaluate {cfg.run} "
                   f"(ray, {count} lanes)", unit="candidate", dynamic_ncols=True, disable=not cfg.progress)
        prov = None
        per_lane = collections.Counter()  # problems each lane recorded
        try:
            while queue or inflight:
                while queue and idle:
                    lane_id = idle.popleft()
                    problem, attempt = queue.popleft()
                    cands = by_problem[(problem.level, problem.problem_id)]
                    deps = [build_refs[c.sha256] for c in cands if c.sha256 in build_refs]
                    ref = actors[lane_id].evaluate.remote(problem, cands, evaluations.get(problem.sha256, []),
                                                          references.get(problem.sha256, []), *deps)
                    inflight[ref] = (lane_id, problem, attempt)
                ready, _ = ray.wait(list(inflight), num_returns=1)
                lane_id, problem, attempt = inflight.pop(ready[0])
                cands = by_problem[(problem.level, problem.problem_id)]
                try:
                    result = ray.get(ready[0])
                except ray.exceptions.RayActorError as exc:
                    ray.kill(actors[lane_id], no_restart=True)
                    actors[lane_id] = new_lane()
                    idle.append(lane_id)
                    if attempt < RAY_RETRIES:
                        echo(f"ray: lane {lane_id} died on {problem.name}; evaluating it again on a fresh lane")
                        queue.appendleft((problem, attempt + 1))
                        continue
                    if prov is None:
                        prov = {**provenance.collect("cpu"), "hardware": hardware_name}
                    _record_lane_deaths(store, summary, problem, cands, lane_cfg, device, hardware_name, settings,
                                        prov, done, f"evaluation lane died {attempt + 1} times: {exc}"[:2000],
                                        attempt)
                    bar.update(len(cands))
                    continue
                except ray.exceptions.RayTaskError as exc:
                    raise LaneFailure(f"lane {lane_id} failed on {problem.name}: {exc}") from None
                idle.append(lane_id)
                per_lane[lane_id] += 1
                for line in result["references"]:
                    append_jsonl(store.references_path, line)
                for line in result["evaluations"]:
                    append_jsonl(store.evaluations_path, with_retries(line, attempt) if attempt else line)
                summary.written += result["written"]
                summary.already_done += result["already_done"]
                summary.outcomes.update(result["outcomes"])
                bar.update(len(cands))
        finally:
            bar.close()
        echo("ray: problems per lane: " + ", ".join(str(per_lane[i]) for i in sorted(actors)))
    finally:
        for actor in actors.values():
            ray.kill(actor, no_restart=True)
        if started_here:
            ray.shutdown()
    summary.seconds = time.perf_counter() - t0
    return summary


def _record_lane_deaths(store: RecordStore, summary: BatchSummary, problem: Problem, cands: list[Candidate],
                        cfg: EvalConfig, device: str, hardware: str, settings: str, prov: dict, done: set,
                        message: str, retries: int) -> None:
    """Record each not yet recorded candidate of ``problem`` as ``crashed``: its lane died on every attempt."""
    common = common_fields(problem, cfg, device, hardware, prov)
    for cand in cands:
        identity = candidate_identity(problem, cand, cfg, hardware, settings)[1]
        if identity in done:
            continue
        done.add(identity)
        write_record(store, summary, problem, cand, cfg, hardware, settings, common,
                     {"outcome": Outcome.CRASHED.value, "error_message": message,
                      "metadata": {"ray_retries": retries}}, None)

