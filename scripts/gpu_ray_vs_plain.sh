#!/usr/bin/env bash
# One GPU, the same level-1 leaderboard kernels through the plain path and through `kbstudy eval --ray` (issue 30):
# both record folders and a comparison (verdicts equal, timings within their intervals, Ray's overhead per candidate)
# under $OUT. Each path builds its CUDA candidates into a cache of its own, so both walls include their builds.
#
# Before the device call, here (the GPU machine reaches no network and cannot see ../shared):
#   scripts/pack_ray.sh cp312            # .device/ray.tar.xz; the tag is the GPU image's CPython (check it)
#   mkdir -p .device/kernelbench && cp ../shared/kernelbench/*.jsonl .device/kernelbench/
# The device call (run tool: carry [".device"], timeout_s 600, one GPU):
#   KBSTUDY_GIT_COMMIT=<git rev-parse HEAD> bash scripts/gpu_ray_vs_plain.sh
# After it: copy <files_at>/{plain,ray}/*.jsonl and compare.json to outputs/records/kernelbench/<gpu>/ray-vs-plain/.
#
# Environment: KB_DIR (default .device/kernelbench), MODEL_CONFIG (default claude-3.5-sonnet), PROBLEM_IDS (default
# the ten activations and reductions 19-28: small, quick to build).
set -euo pipefail
OUT=${OUT:?OUT must name the output folder}
KB=${KB_DIR:-.device/kernelbench}
MODEL_CONFIG=${MODEL_CONFIG:-claude-3.5-sonnet}
PROBLEM_IDS=${PROBLEM_IDS:-"19 20 21 22 23 24 25 26 27 28"}
export KBSTUDY_GIT_COMMIT=${KBSTUDY_GIT_COMMIT:-unknown} PYTHONUNBUFFERED=1
mkdir -p "$OUT/plain" "$OUT/ray"
source scripts/unpack_ray.sh
export PYTHONPATH="$PWD:$PYTHONPATH"   # this checkout for the driver and for Ray's workers
python3 -c "import ray, sys; print('ray', ray.__version__, 'python', sys.version.split()[0])"
ids=(); for p in $PROBLEM_IDS; do ids+=(--problem-id "$p"); done
# v0 problems: the current level-1 activations at full size (6 GiB a tensor) run out of memory on an 80 GB H100
# beside their float64 reference (outputs/records/kernelbench/h100/quickstart's README)
common=(--problems "$KB/kernelbench_v0_problems.jsonl" -c "$KB/leaderboard_kernels.jsonl" --model-config "$MODEL_CONFIG"
        --level 1 "${ids[@]}" --precision fp32 --no-compile-baseline --no-progress --run ray-vs-plain
        --extra-seeds 101,102,103,104 --load-timeout 300 --run-timeout 60)
t0=$(date +%s.%N)
python3 -m kbstudy eval "${common[@]}" --out "$OUT/plain" --cache-dir /tmp/kbstudy-cache-plain 2>&1 | tail -n 25
t1=$(date +%s.%N)
python3 -m kbstudy eval "${common[@]}" --out "$OUT/ray" --cache-dir /tmp/kbstudy-cache-ray --ray 2>&1 | tail -n 25
t2=$(date +%s.%N)
python3 - "$OUT" "$t0" "$t1" "$t2" <<'EOF'
import json, sys
from pathlib import Path

out, t0, t1, t2 = Path(sys.argv[1]), *map(float, sys.argv[2:])
def rows(name):
    return {(r["key"], r["model_config"], r["sample_id"]): r
            for r in map(json.loads, (out / name / "evaluations.jsonl").read_text().splitlines())}
plain, ray = rows("plain"), rows("ray")
per = []
for ident in sorted(set(plain) | set(ray)):
    p, r = plain.get(ident), ray.get(ident)
    entry = {"problem": (p or r)["problem_name"], "candidate": (p or r)["candidate_id"]}
    if p is None or r is None:
        entry["missing_in"] = "plain" if p is None else "ray"
        per.append(entry)
        continue
    entry.update({f: [p[f], r[f]] for f in ("outcome", "kernelbench_correct", "kbstudy_correct")})
    entry["verdicts_equal"] = all(p[f] == r[f] for f in ("outcome", "kernelbench_correct", "kbstudy_correct"))
    if p.get("candidate_ms_median") and r.get("candidate_ms_median"):
        lo = lambda x: x.get("candidate_ms_ci_low") or x["candidate_ms_q1"]
        hi = lambda x: x.get("candidate_ms_ci_high") or x["candidate_ms_q3"]
        entry["median_ms"] = [p["candidate_ms_median"], r["candidate_ms_median"]]
        entry["intervals_overlap"] = lo(p) <= hi(r) and lo(r) <= hi(p)
        entry["ratio"] = r["candidate_ms_median"] / p["candidate_ms_median"]
    per.append(entry)
n = max(len(plain), 1)
timed = [e for e in per if "ratio" in e]
summary = {
    "candidates": len(per), "plain_records": len(plain), "ray_records": len(ray),
    "verdicts_equal": all(e.get("verdicts_equal") for e in per),
    "timed": len(timed), "timings_within_intervals": sum(bool(e["intervals_overlap"]) for e in timed),
    "median_ratio_ray_over_plain": sorted(e["ratio"] for e in timed)[len(timed) // 2] if timed else None,
    "plain_wall_s": round(t1 - t0, 1), "ray_wall_s": round(t2 - t1, 1),
    "ray_overhead_per_candidate_s": round((t2 - t1 - (t1 - t0)) / n, 2),
    "ray_retries": sum(1 for r in ray.values() if (r.get("metadata") or {}).get("ray_retries")),
    "hardware": next(iter(plain.values()))["hardware"] if plain else None,
}
(out / "compare.json").write_text(json.dumps({"summary": summary, "per_candidate": per}, indent=1))
print(json.dumps(summary, indent=1))
EOF
