#!/usr/bin/env bash
# KernelBench level 1 on the H200 (issue #4): every leaderboard kernel against both problem versions (v0, the one it
# was written for, and the current one), in fp32 and bf16, with eager and torch.compile baselines, plus null:reference
# on every current problem (our eager/compile baseline of all 100 problems, for the H100 comparison). One device call
# runs this once; it resumes from the committed records and stops before SECONDS, so calls can be repeated until
# `phases_done.txt` lists every phase (the script prints what is left).
#
# Before each call, on the analysis machine (the GPU machine cannot see ../shared):
#   mkdir -p .device/kernelbench && cp ../shared/kernelbench/*.jsonl .device/kernelbench/
# The device call (run tool: carry [".device"], timeout_s 600; kind nvidia-h200, or nvidia-h200-x2 for two phases
# at once):
#   KBSTUDY_GIT_COMMIT=<git rev-parse HEAD> bash scripts/h200_leaderboard.sh 540
# After it: cp <files_at>/rec/* outputs/records/kernelbench/h200/leaderboard/ and commit; the next call resumes there.
#
# usage: bash scripts/h200_leaderboard.sh [SECONDS] [PHASE_REGEX]
#   SECONDS      stop starting work after this many seconds (default 540: a 600 s call minus merge and transfer)
#   PHASE_REGEX  run only the phases whose name matches (grep -E), e.g. 'top5\..*\.fp32$'
# Phases, in order: {top5, rest} x problem chunks {001-025, 026-050, 051-075, 076-100} x {fp32, bf16} x
# {current, v0}; named like top5.p001-025.current.fp32. Chunk-major order reuses the CUDA builds of a chunk (cached
# per source hash in .cache/kbstudy while the machine stays warm) across versions and precisions.
# top5: the five largest level-1 configurations; rest: the other two (gemini-1.5-flash's current fp32 kernels were
# measured before, in outputs/records/kernelbench/h200/level1-fp32, and are measured again here in the same settings).
# Environment overrides (tests, partial runs): RECORDS_DIR, KB_DIR, NGPU, RUN_TIMEOUT, LOAD_TIMEOUT, MIN_LEFT, MIN_LEFT_CHEAP, CHUNKS, RUN_GROUPS,
# PRECISIONS, VERSIONS, EXTRA_EVAL_ARGS, SKIP_FLAG (the bf16 flag; unset: probe kbstudy.harness.orchestrator.EvalConfig), SUMMARY=0
# (no summary table at the end), DRY_RUN=1 (print the commands, run nothing), REDO=1 (run the phases PHASE_REGEX
# matches even if done: with EXTRA_EVAL_ARGS="--retry-outcome out_of_memory" a done phase's records of that outcome
# are evaluated again and their new records replace the old ones in $OUT/rec (kbstudy.pipeline.release.merge_record_folders:
# the newest record per identity); its other records are kept, as in any resumed phase), RETRY_PHASES=<regex> (the
# done phases it matches run first, with RETRY_ARGS, default "--retry-outcome out_of_memory", and then the call goes
# on with the pending phases: e.g. RETRY_PHASES='top5\.p026-050\.current\.fp32' bash scripts/h200_leaderboard.sh 540).
# At most 5 files come back under $OUT: rec/{evaluations,references}.jsonl, rec/phases_done.txt, eval.log, status.txt.
set -u
secs=${1:-540}
phase_regex=${2:-.}
start=$(date +%s)
deadline=$((start + secs))

export KBSTUDY_GIT_COMMIT=${KBSTUDY_GIT_COMMIT:-unknown}
export PYTHONUNBUFFERED=1
OUT=${OUT:?OUT must name the output folder}
REC=${RECORDS_DIR:-outputs/records/kernelbench/h200/leaderboard}
KB=${KB_DIR:-.device/kernelbench}
RUN_TIMEOUT=${RUN_TIMEOUT:-60}
# a candidate's build or load: a level-1 build takes about a minute even 16 at a time, and a hang must cost less than
# a call (the default 900 s is longer than one: a build waiting on a stale lock file would lose the call)
LOAD_TIMEOUT=${LOAD_TIMEOUT:-420}
CHUNKS=${CHUNKS:-"1-25 26-50 51-75 76-100"}
RUN_GROUPS=${RUN_GROUPS:-"top5 rest"}
PRECISIONS=${PRECISIONS:-"fp32 bf16"}
VERSIONS=${VERSIONS:-"current v0"}
EXTRA_EVAL_ARGS=${EXTRA_EVAL_ARGS:-}
DRY_RUN=${DRY_RUN:-0}
TOP5="claude-3.5-sonnet gpt-o1 llama-3.1-405b gpt-4o deepseek-coder"
REST="llama-3.1-70b gemini-1.5-flash"
if [ -z "${NGPU:-}" ]; then
  NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  [ "${NGPU:-0}" -ge 1 ] 2>/dev/null || NGPU=1
fi
NCPU=$(nproc 2>/dev/null || echo 2)
BUILD_JOBS=$(( NCPU / NGPU > 0 ? NCPU / NGPU : 1 ))
[ "$KBSTUDY_GIT_COMMIT" = unknown ] && echo "warning: KBSTUDY_GIT_COMMIT is not set: records will say git_commit unknown"

# a dry run prints the commands and leaves $OUT alone: its bookkeeping goes to a scratch folder
if [ "$DRY_RUN" = 1 ]; then
  OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT
fi
mkdir -p "$OUT/rec" "$OUT/logs"
for f in evaluations.jsonl references.jsonl phases_done.txt; do
  [ -f "$REC/$f" ] && cp "$REC/$f" "$OUT/rec/$f"
done
touch "$OUT/rec/phases_done.txt"

# the phases, in order
phases=()
for group in $RUN_GROUPS; do
  for chunk in $CHUNKS; do
    a=${chunk%-*}; b=${chunk#*-}
    for prec in $PRECISIONS; do
      for version in $VERSIONS; do
        phases+=("$group.p$(printf %03d "$a")-$(printf %03d "$b").$version.$prec")
      done
    done
  done
done

# the `kbstudy eval` command of one phase, writing into folder $2 (value-level verdicts and timings, as the study file:
# the structural variants' re-run of these kernels is correctness-only, outputs/records/kernelbench/h100/structural)
phase_command() {
  local phase=$1 work=$2 group chunk version prec a b configs problems nullref="" bf16=""
  IFS=. read -r group chunk version prec <<<"$phase"
  a=$((10#${chunk:1:3})); b=$((10#${chunk:5:3}))
  if [ "$group" = top5 ]; then configs=$TOP5; else configs=$REST; fi
  if [ "$version" = v0 ]; then problems=$KB/kernelbench_v0_problems.jsonl; else problems=$KB/kernelbench_levels_1-3.jsonl; fi
  [ "$group.$version.$prec" = top5.current.fp32 ] && nullref="-c null:reference"
  [ "$prec" != fp32 ] && [ -n "${SKIP_FLAG:-}" ] && bf16=$SKIP_FLAG
  local retry=""
  for r in ${retrying[@]+"${retrying[@]}"}; do [ "$r" = "$phase" ] && retry=$RETRY_ARGS; done
  echo python3 -m kbstudy eval --problems "$problems" --level 1 $(seq -f '--problem-id %g' "$a" "$b") \
    -c "$KB/leaderboard_kernels.jsonl" $nullref $(for c in $configs; do echo "--model-config $c"; done) \
    --precision "$prec" --out "$work" --run "h200-level1-leaderboard-$version-$prec" --timing-budget-ms 500 \
    --run-timeout "$RUN_TIMEOUT" --load-timeout "$LOAD_TIMEOUT" --build-jobs "$BUILD_JOBS" --no-progress \
    --no-structural-variants $bf16 $retry \
    $EXTRA_EVAL_ARGS
}

# the evaluator may know to record float32-only kernels at bf16 without running them (kbstudy.harness.candidates
# scan_dtype_support; see docs/results/kernelbench-level1.md): use it when it is there
if [ -z "${SKIP_FLAG+set}" ]; then
  SKIP_FLAG=""
  # (in a dry run too, so that it prints the commands a real call runs)
  # (the option's name, not `kbstudy eval --help`: rich cuts long option names to the terminal's width, 80 columns
  # without a terminal, and the grep of the help text never matched)
  if python3 -c "import sys, dataclasses; from kbstudy.harness.config import EvalConfig
sys.exit(0 if 'skip_float32_only' in {f.name for f in dataclasses.fields(EvalConfig)} else 1)" 2>/dev/null; then
    SKIP_FLAG=--skip-float32-only
  fi
fi

is_done() { grep -qx -- "$1" "$OUT/rec/phases_done.txt"; }

# RETRY_PHASES: done phases to run again *first*, with RETRY_ARGS, before the pending ones of the same call (one
# command instead of a REDO call and a resumed one; the merge keeps the retried records: the newest per identity)
RETRY_PHASES=${RETRY_PHASES:-}
RETRY_ARGS=${RETRY_ARGS:-"--retry-outcome out_of_memory"}
retrying=()
pending=()
for phase in "${phases[@]}"; do
  echo "$phase" | grep -Eq -- "$phase_regex" || continue
  if [ -n "$RETRY_PHASES" ] && echo "$phase" | grep -Eq -- "$RETRY_PHASES" \
      && is_done "$phase"; then
    retrying+=("$phase"); continue
  fi
  [ "${REDO:-0}" = 1 ] || ! is_done "$phase" || continue
  pending+=("$phase")
done
pending=(${retrying[@]+"${retrying[@]}"} ${pending[@]+"${pending[@]}"})
echo "phases: ${#phases[@]}, pending here: ${#pending[@]} (retried first: ${#retrying[@]}), GPUs: $NGPU, build jobs per phase: $BUILD_JOBS"

if [ "$DRY_RUN" = 1 ]; then
  for phase in "${pending[@]}"; do echo "[$phase] $(phase_command "$phase" "\$OUT/work/g0")"; done
  exit 0
fi

merge_slot() {  # the records of the phase that ran in slot $1 into $OUT/rec (one record per key; $OUT/rec is a source too)
  python3 -c "import sys; from kbstudy.pipeline.release import merge_record_folders as m; print(m(sys.argv[1], sys.argv[1:]))" \
    "$OUT/rec" "$OUT/work/g$1" 2>&1 | tail -1
}

start_phase() {  # phase, slot, seconds left
  local phase=$1 slot=$2 left=$3 work="$OUT/work/g$2" cmd
  rm -rf "$work"; mkdir -p "$work"
  cp "$OUT/rec/evaluations.jsonl" "$OUT/rec/references.jsonl" "$work/" 2>/dev/null
  cmd=$(phase_command "$phase" "$work")
  (
    [ "$NGPU" -gt 1 ] && export CUDA_VISIBLE_DEVICES=$slot
    echo "== $phase (GPU slot $slot, $(date -u +%H:%M:%S)): $cmd"
    timeout -s INT -k 20 $((left - 30)) $cmd
    rc=$?
    echo "== $phase rc=$rc ($(date -u +%H:%M:%S))"
    echo "$rc" > "$work/rc"
  ) > "$OUT/logs/$phase.log" 2>&1 &
  slot_pid[$slot]=$!
  slot_phase[$slot]=$phase
}

# One phase per GPU slot; a slot takes the next phase as soon as its own ends (waves of two phases wait for
# the slower phase: the GPUs were busy 63% of such a call). A phase starts only with MIN_LEFT seconds left; past
# that, bf16 phases still start while MIN_LEFT_CHEAP seconds are left, when the evaluator skips float32-only
# kernels: every level-1 leaderboard kernel is float32-only, so such a phase only writes `skipped` records (seconds;
# a call can end with 73 s left and two of them pending).
MIN_LEFT=${MIN_LEFT:-90}
MIN_LEFT_CHEAP=${MIN_LEFT_CHEAP:-30}
cheap_only=0
stopped=0
slot_pid=(); slot_phase=()
i=0
while :; do
  for ((slot = 0; slot < NGPU; slot++)); do
    [ -n "${slot_pid[$slot]:-}" ] && continue
    [ "$stopped" = 0 ] && [ "$i" -lt "${#pending[@]}" ] || continue
    left=$((deadline - $(date +%s)))
    if [ "$left" -lt "$MIN_LEFT" ] && [ "$cheap_only" = 0 ] && [ -n "$SKIP_FLAG" ] && [ "$left" -ge "$MIN_LEFT_CHEAP" ]; then
      cheap=()
      for phase in "${pending[@]:$i}"; do [[ $phase == *.bf16 ]] && cheap+=("$phase"); done
      if [ ${#cheap[@]} -gt 0 ]; then
        echo "${left} s left: only the ${#cheap[@]} bf16 phases (float32-only kernels skipped) from here"
        pending=("${pending[@]:0:$i}" "${cheap[@]}")
        cheap_only=1
      fi
    fi
    if [ "$left" -lt "$MIN_LEFT" ] && { [ "$cheap_only" = 0 ] || [ "$left" -lt "$MIN_LEFT_CHEAP" ]; }; then
      echo "stopping: ${left} s left"; stopped=1; continue
    fi
    [ "$i" -lt "${#pending[@]}" ] || continue
    start_phase "${pending[$i]}" "$slot" "$left"
    i=$((i + 1))
  done
  running=0
  for ((slot = 0; slot < NGPU; slot++)); do
    pid=${slot_pid[$slot]:-}
    [ -n "$pid" ] || continue
    if kill -0 "$pid" 2>/dev/null; then running=1; continue; fi
    wait "$pid" 2>/dev/null
    phase=${slot_phase[$slot]}
    rc=$(cat "$OUT/work/g$slot/rc" 2>/dev/null || echo 1)
    echo "$phase rc=$rc (slot $slot)"
    # (a REDO of a done phase is listed once)
    [ "$rc" = 0 ] && ! is_done "$phase" && echo "$phase" >> "$OUT/rec/phases_done.txt"
    echo "merged: $(merge_slot "$slot")"
    slot_pid[$slot]=""
    running=1  # the slot is free: fill it before deciding to end
  done
  [ "$running" = 0 ] && break
  sleep 1
done

# what comes back: the merged records, the phases done, one log (ninja's per-file build lines left out), a status
for phase in "${pending[@]}"; do
  [ -f "$OUT/logs/$phase.log" ] && grep -v '^\[[0-9]*/[0-9]*\] ' "$OUT/logs/$phase.log"
done > "$OUT/eval.log"
rm -rf "$OUT/logs" "$OUT/work"
{
  echo "elapsed $(( $(date +%s) - start )) s; commit $KBSTUDY_GIT_COMMIT; GPUs $NGPU"
  echo "phases done: $(grep -c . "$OUT/rec/phases_done.txt") of ${#phases[@]}"
  for phase in "${phases[@]}"; do is_done "$phase" || echo "left: $phase"; done
  wc -l "$OUT"/rec/*.jsonl
} > "$OUT/status.txt"
cat "$OUT/status.txt"
[ "${SUMMARY:-1}" = 1 ] && [ -s "$OUT/rec/evaluations.jsonl" ] && python3 -m kbstudy summary "$OUT/rec" 2>&1 | tail -30
exit 0
