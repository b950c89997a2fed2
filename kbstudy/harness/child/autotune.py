"""The Triton autotuners' choices in a candidate's module, read after its timed calls: evidence beside its record."""

from __future__ import annotations

from kbstudy.records.schema import _finite_or_none


def _json_scalar(value):
    """``value`` if JSON has it (bool, int, float, str, None), else its ``str``."""
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def autotuned_configs(module) -> dict:
    """What the Triton autotuners defined at the top level of a candidate's ``module`` chose, after its calls:
    ``{name: {"configs": n, "chosen": {key: config}, "timings_ms": {config: ms}}}``, where ``key`` is the autotuner's
    cache key as a string (its ``key`` arguments' values and the tensors' dtypes), ``config`` a config's keyword
    arguments with ``num_warps``, ``num_stages`` (``Config.all_kwargs``), and ``timings_ms`` the benchmark of each
    config for the last key tuned (``Autotuner.configs_timings``: the candidate's own ``do_bench`` result, a median
    or a list of quantiles, in ms; ``None`` for a config that failed). Autotuners under other wrappers (e.g.
    ``triton.heuristics``, which keeps what it wraps as ``.fn``) are found too. An autotuner with one config (e.g.
    under ``TRITON_INTERPRET=1``) never benchmarks and reports ``best_config`` as its one choice. ``{}`` without
    Triton or autotuners. Read from attributes of ``triton.runtime.autotuner.Autotuner`` (Triton 3.x); never raises:
    a candidate's chosen configs are evidence beside its record (why one run's kernel took another config than the
    last), not part of any verdict."""
    try:
        from triton.runtime.autotuner import Autotuner  # triton is optional: absent on plain CPU installs
    except Exception:  # noqa: BLE001 - no Triton here: nothing was autotuned through it
        return {}

    def kwargs_of(config) -> dict:
        try:
            return {str(k): _json_scalar(v) for k, v in config.all_kwargs().items()}
        except Exception:  # noqa: BLE001 - another Triton's Config
            return {"config": str(config)}

    found = {}
    for name, value in sorted(vars(module).items()):
        try:  # (a candidate's own object may raise anything on attribute access)
            for _ in range(4):  # an autotuner under other wrappers (e.g. triton.heuristics), which keep it as .fn
                if isinstance(value, Autotuner) or not hasattr(value, "fn"):
                    break
                value = value.fn
        except Exception:  # noqa: BLE001
            continue
        if not isinstance(value, Autotuner):
            continue
        try:
            chosen = {str(key): kwargs_of(config) for key, config in dict(getattr(value, "cache", {}) or {}).items()}
            best = getattr(value, "best_config", None)
            if not chosen and best is not None:
                chosen = {"(one config)": kwargs_of(best)}
            timings = getattr(value, "configs_timings", None) or {}
            # a failed config's time is inf, which JSON lacks: None, as the records' writer maps it
            found[name] = _finite_or_none({
                "configs": len(getattr(value, "configs", []) or []), "chosen": chosen,
                "timings_ms": {str(c): ([float(x) for x in t] if isinstance(t, (list, tuple)) else float(t))
                               for c, t in timings.items()}})
        except Exception as exc:  # noqa: BLE001
            found[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return found
