"""Measuring a substitution: baseline and substituted step times in separate processes, interleaved.

One *case* is a workload in a configuration (``eager``, or ``production``: ``torch.compile`` of the model, Inductor's
default mode) with the kernels of one source (``llm`` or ``expert``). The substituted process is started first: it
builds the workload (same seed, so the same weights and inputs as the baseline), loads the kernels, finds the places
and decides them with the guard, and runs the end-to-end check. Only where a place is substituted and the check
passes is the baseline process started and anything timed: a case with no applicable place contributes nothing
(``outcome = "nothing_applicable"``, saving 0 by definition), a failing check is recorded and not timed
(``"check_failed"``).

Timing: each process warms up (``warmup`` steps; under ``production`` the compilation happens there), then the
processes take turns, ``reps`` blocks of ``steps`` steps each, the order alternating (A B B A ...) so that drift
falls on both. A step is timed on the host around a device synchronisation (``time.perf_counter``). Medians with
their distribution-free 95% intervals (:func:`kbstudy.harness.timing_stats.summarize`); the saving
``1 - substituted / baseline`` with the percentile-bootstrap interval of the ratio of medians
(:func:`kbstudy.harness.timing_stats.speedup_interval`).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import time
import traceback

import torch
import torch._dynamo
import torch._inductor.config

from kbstudy.harness.timing_stats import speedup_interval, summarize
from kbstudy.profiling import workloads
from kbstudy.profiling.production import SETUPS, apply_setup
from kbstudy.records import provenance
from kbstudy.substitution.adapters import module_adapters
from kbstudy.substitution.check import end_to_end_check
from kbstudy.substitution.kernels import KernelChoice
from kbstudy.substitution.places import LoadedKernel, Substitution

#: the setups a substitution is measured in: the profiles' (eager PyTorch, the production setup)
CONFIGS = SETUPS
RECORD_TYPE = "substitution"
SCHEMA = "substitution/1"
#: seconds to wait for a worker's answer (build, kernel loads, compilation, one block of steps)
WORKER_TIMEOUT_S = 420


def apply_config(workload, config: str) -> None:
    """The profiles' setups (:func:`kbstudy.profiling.production.apply_setup`): ``production`` compiles the model in
    place with ``nn.Module.compile`` (DLRM: its dense part), which leaves instance ``forward`` attributes (module
    places) free; ``eager`` leaves it as built. An unknown config raises ``ValueError``."""
    apply_setup(workload, config, workloads.WORKLOADS[workload.name].compile_targets)


@contextlib.contextmanager
def _eager_randomness(config: str):
    """Under ``production``, the check's compiled runs draw random numbers as eager PyTorch does
    (``torch._inductor.config.fallback_random``): a substituted call splits the compiled graph, and Inductor's own
    random streams then give dropout other masks than in the original, a difference that is not the kernel's. The
    graphs compiled so are dropped afterwards, so the timed steps run Inductor's default code."""
    if config != "production":
        yield
        return
    inductor_config = torch._inductor.config
    before = inductor_config.fallback_random
    inductor_config.fallback_random = True
    try:
        yield
    finally:
        inductor_config.fallback_random = before
        torch._dynamo.reset()


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def time_steps(step, device: str, steps: int, warmup: int = 0) -> list[float]:
    """Per-step times (ms) of ``steps`` calls of ``step`` after ``warmup`` untimed ones."""
    for _ in range(warmup):
        step()
    _sync(device)
    out = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        _sync(device)
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def _load(spec: dict) -> Substitution:
    kernels = [LoadedKernel.load(KernelChoice(**c)) for c in spec["choices"]]
    return Substitution(kernels, spec["missing"], module_adapters())


def worker(conn, spec: dict) -> None:
    """A baseline or substituted process (module docstring): answers ``("ready", info)`` then serves ``("time", n,
    warmup)`` with ``("samples", [ms...])`` until ``("stop",)``; ``("error", text)`` on an exception."""
    try:
        torch.manual_seed(spec["seed"])
        w = workloads.build(spec["workload"], spec["device"], size=spec["size"])
        info: dict = {"precision": w.precision, "mode": "train" if w.mode == "train" else "infer"}
        if spec["substituted"]:
            sub = _load(spec)
            sub.discover(w.model, w.probe)
            info.update(places_substituted=[p.as_dict() for p in sub.applicable],
                        places_not_applicable=[p.as_dict() for p in sub.not_applicable],
                        operators_without_places=sub.operators_without_places(),
                        kernel_errors={k.choice.operator: k.error for k in sub.kernels.values() if k.error})
            if sub.applicable:
                apply_config(w, spec["config"])
                with _eager_randomness(spec["config"]):
                    info.update(end_to_end_check(w.model, w.probe, sub, train=w.mode == "train",
                                                 precision=w.precision, seed=spec["seed"]))
            conn.send(("ready", info))
            if not sub.applicable or not info.get("e2e_passed"):
                return
            sub.__enter__()  # applied for the rest of the process's life
        else:
            apply_config(w, spec["config"])
            conn.send(("ready", info))
        while True:
            cmd = conn.recv()
            if cmd[0] != "time":
                return
            conn.send(("samples", time_steps(w.step, spec["device"], cmd[1], cmd[2])))
    except BaseException:  # noqa: BLE001 - reported to the parent, which records it
        conn.send(("error", traceback.format_exc()[-2000:]))


def _ask(conn, proc, message=None, timeout=WORKER_TIMEOUT_S):
    if message is not None:
        conn.send(message)
    if not conn.poll(timeout):
        raise TimeoutError(f"worker gave no answer within {timeout} s")
    kind, payload = conn.recv()
    if kind == "error":
        raise RuntimeError(payload)
    return payload


def _start(ctx, spec):
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=worker, args=(child, spec), daemon=True)
    proc.start()
    return parent, proc


def _stop(conn, proc):
    try:
        conn.send(("stop",))
    except (OSError, BrokenPipeError):
        pass
    proc.join(30)
    if proc.is_alive():
        proc.kill()
        proc.join(5)


def _timing_fields(base: list[float], sub: list[float]) -> dict:
    b, s = summarize(base), summarize(sub)
    speedup = b.median / s.median
    interval = speedup_interval(base, sub)
    return {"baseline_ms_median": b.median, "baseline_ms_ci_low": b.ci_low, "baseline_ms_ci_high": b.ci_high,
            "substituted_ms_median": s.median, "substituted_ms_ci_low": s.ci_low,
            "substituted_ms_ci_high": s.ci_high, "speedup": speedup, "saving_fraction": 1.0 - 1.0 / speedup,
            "saving_ci_low": None if interval is None else 1.0 - 1.0 / interval[0],
            "saving_ci_high": None if interval is None else 1.0 - 1.0 / interval[1],
            "baseline_ms_samples": base, "substituted_ms_samples": sub}


def measure_case(workload: str, config: str, kernel_source: str, choices: list[KernelChoice],
                 missing: dict[str, str], *, device: str = "cuda", size: str | None = None, reps: int = 4,
                 steps: int = 5, warmup: int = 3, seed: int = 0, purpose: str = "") -> dict:
    """Measure one case (module docstring) and return its record (``docs/reference/substitution.md``)."""
    ctx = mp.get_context("spawn")
    spec = {"workload": workload, "size": size, "device": device, "config": config, "seed": seed,
            "choices": [c.as_dict() for c in choices], "missing": dict(missing), "substituted": True}
    record = {"record_type": RECORD_TYPE, "schema": SCHEMA, "purpose": purpose, "workload": workload,
              "size": size or workloads.WORKLOADS[workload].default_size, "config": config,
              "kernel_source": kernel_source, "operators": [c.summary() for c in choices],
              "operators_without_kernel": dict(missing), "device": device, "reps": reps, "steps_per_rep": steps,
              "warmup_steps": warmup, "saving_fraction": None}
    record.update({k: v for k, v in provenance.collect(device).items()
                   if k in ("git_commit", "torch_version", "triton_version", "cuda_version", "hardware",
                            "created_utc", "kbstudy_version")})
    conn, proc = _start(ctx, spec)
    base = None
    try:
        info = _ask(conn, proc)
        record.update(info)
        if not info["places_substituted"]:
            record.update(outcome="nothing_applicable", saving_fraction=0.0)
            return record
        if not info.get("e2e_passed"):
            record["outcome"] = "check_failed"
            return record
        base = _start(ctx, {**spec, "choices": [], "substituted": False})
        _ask(*base)
        samples = {"base": [], "sub": []}
        workers = {"base": base, "sub": (conn, proc)}
        for name in ("base", "sub"):  # warm-up (and compilation) first, untimed
            _ask(*workers[name], message=("time", 1, warmup))
        for rep in range(reps):
            for name in (("base", "sub") if rep % 2 == 0 else ("sub", "base")):
                samples[name] += _ask(*workers[name], message=("time", steps, 0))
        record.update(outcome="timed", **_timing_fields(samples["base"], samples["sub"]))
    except (RuntimeError, TimeoutError, EOFError, OSError) as exc:
        record.update(outcome="error", error_message=str(exc)[-2000:])
    finally:
        _stop(conn, proc)
        if base is not None:
            _stop(*base)
    return record
