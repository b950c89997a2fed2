#!/usr/bin/env bash
# One batched H200 run (see README "Reproducing the GPU records"): the level-1 leaderboard kernels of one model
# configuration at full size in fp32, then the workload profiles. Records go to $OUT; rerunning with the previous
# records copied into $OUT/rec resumes.
# usage: bash scripts/h200_run.sh MODEL_CONFIG EVAL_SECONDS PROFILE_SECONDS
set -u
# the GPU machine gets no .git: the caller passes the commit, e.g. KBSTUDY_GIT_COMMIT=$(git rev-parse HEAD)
export KBSTUDY_GIT_COMMIT=${KBSTUDY_GIT_COMMIT:-unknown}
export PYTHONUNBUFFERED=1
model=${1:-gemini-1.5-flash}; eval_s=${2:-330}; prof_s=${3:-225}
# a level-1 call takes milliseconds; a candidate silent for RUN_TIMEOUT s in one stage is hung (the default 300 s
# let one hanging softmax kernel eat a whole device call)
run_timeout=${RUN_TIMEOUT:-60}
pkill -9 -f '^python3 -m kbstudy' 2>/dev/null
pkill -9 -f '^python3 -c from multiprocessing.forkserver' 2>/dev/null
mkdir -p "$OUT/rec"
[ -d outputs/records/kernelbench/h200/level1-fp32 ] && cp outputs/records/kernelbench/h200/level1-fp32/*.jsonl "$OUT/rec/" 2>/dev/null
timeout -s INT -k 15 "$eval_s" python3 -m kbstudy eval --problems .device/kernelbench/kernelbench_levels_1-3.jsonl \
  -c .device/kernelbench/leaderboard_kernels.jsonl --level 1 --model-config "$model" \
  --out "$OUT/rec" --run h200-level1-fp32 --timing-budget-ms 500 --run-timeout "$run_timeout" --no-progress > "$OUT/eval.log" 2>&1
echo "eval rc=$?"; wc -l "$OUT"/rec/*.jsonl
if [ "$prof_s" -gt 0 ]; then
  timeout -s INT -k 10 "$prof_s" python3 -m kbstudy.profiling.profile_run --out "$OUT/prof" --budget-s $((prof_s - 85)) > "$OUT/prof.log" 2>&1
  echo "prof rc=$?"; tail -5 "$OUT/prof.log"; ls "$OUT/prof"
fi
