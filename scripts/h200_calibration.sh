#!/usr/bin/env bash
# The full-size null calibration of issue #3 on the H200 (outputs/records/h200-calibration, notebook 02): KernelBench
# level 1, DLRM-Bench, then KernelBench levels 2-3 (folders level23-<precision>), fp32 and bf16. Level 1 and DLRM-Bench
# run one process per GPU: at full size one needs up to ~100 GB of GPU memory (problem 5 holds ~1e9-element float64
# references and input sets), and processes sharing a GPU at full size ran out of memory (see the folder's README).
# Levels 2-3 run LANES processes per GPU on the problems small enough to share it, then the large ones alone (LANES
# below). Resumable: it starts from the committed records and calibrates only the problems without an evaluated
# record of every null (`--skip-complete`: records of any checks version count, so checks-v3
# records are completed under v4, not redone); records whose outcome came from the machine (out of memory, a worker that
# died, a reference that could not run) are evaluated again (`--retry-outcome`). The failed attempts stay in the JSONL
# history; notebook 02 reads the latest record of each null on each problem.
#
# Before the device call, on the analysis machine (the GPU machine cannot see ../shared):
#   mkdir -p .device/kernelbench && cp ../shared/kernelbench/*.jsonl .device/kernelbench/
# The device call (run tool: carry [".device"], timeout_s 600; kind nvidia-h200-x2 runs both precisions at once):
#   KBSTUDY_GIT_COMMIT=<git rev-parse HEAD> bash scripts/h200_calibration.sh 540
# After it: tar -xzf <files_at>/calibration.tar.gz -C outputs/records/h200-calibration, and commit.
#
# Sharing a machine with the leaderboard run (issue 4), one GPU each (at most 8 files come back; these are 6):
#   export KBSTUDY_GIT_COMMIT=<git rev-parse HEAD>
#   GPUS=0 bash scripts/h200_calibration.sh 540 & CUDA_VISIBLE_DEVICES=1 NGPU=1 bash scripts/h200_leaderboard.sh 540; wait
# The leaderboard's timings are then taken on a host whose CPUs the calibration shares (as they are when the
# leaderboard runs two phases at once): candidate and eager are timed in the same phase, at most minutes apart, so the
# speedups see the same host; launch-bound absolute times move with the host's load (outputs/records/h200-dlrm-main).
#
# usage: OUT=<folder> [GPUS="0 1"] [DEFER="45"] [LANES=3] bash scripts/h200_calibration.sh [SECONDS]
#   (the device tool sets OUT: the folder whose files come back)
set -u
secs=${1:-540}
export KBSTUDY_GIT_COMMIT=${KBSTUDY_GIT_COMMIT:-unknown}
[ "$KBSTUDY_GIT_COMMIT" = unknown ] && echo "warning: KBSTUDY_GIT_COMMIT is not set: records will say git_commit unknown"
export PYTHONUNBUFFERED=1
OUT=${OUT:?OUT must name the output folder}
REC=${RECORDS_DIR:-outputs/records/h200-calibration}
KB=${KB_DIR:-.device/kernelbench}/kernelbench_levels_1-3.jsonl
deadline=$(( $(date +%s) + secs - 30 ))  # 30 s for the archive
W=$(mktemp -d); mkdir -p "$W/logs"
trap 'rm -rf "$W"' EXIT  # the working copy; what comes back is $OUT/calibration.tar.gz
cp -r "$REC"/. "$W/" 2>/dev/null
# GPUS: the GPU ids to use (default: every GPU nvidia-smi lists), e.g. GPUS=0 to leave GPU 1 to the leaderboard run
if [ -z "${GPUS:-}" ]; then
  NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true); [ "${NGPU:-0}" -ge 1 ] 2>/dev/null || NGPU=1
  GPUS=$(seq -s ' ' 0 $((NGPU - 1)))
fi
read -r -a GPU_IDS <<<"$GPUS"
NGPU=${#GPU_IDS[@]}
RETRY=(--skip-complete --retry-outcome out_of_memory --retry-outcome crashed --retry-outcome reference_error
       --retry-outcome cuda_error)

step() {  # gpu, records prefix, precision, problem options... (LOG_TAG: a suffix of the log's name, for lanes)
  local gpu=$1 prefix=$2 prec=$3; shift 3
  local left=$(( deadline - $(date +%s) )) log="$W/logs/$prefix-$prec${LOG_TAG:-}.txt"
  [ "$left" -gt 30 ] || return 0
  CUDA_VISIBLE_DEVICES=$gpu timeout -s INT -k 15 "$left" python3 -m kbstudy calibrate "$@" --precision "$prec" \
    --device cuda --run-timeout 60 --out "$W/$prefix" --no-progress "${RETRY[@]}" >> "$log" 2>&1
  echo "[$prefix $prec${LOG_TAG:-}] rc=$? at $(( secs - 30 - deadline + $(date +%s) )) s" | tee -a "$log"
}
# LANES: calibration processes sharing one GPU for levels 2-3 (kbstudy.analysis.calibration.assign_lanes): problems whose
# inputs and output hold at most kbstudy.analysis.calibration.SHARED_LANE_NUMEL elements are dealt to LANES lanes run at the
# same time, the larger ones (and those the meta device cannot size) run after them in the solo lane. A calibration
# times nothing, so sharing changes no recorded value; it overlaps the ~13 s per problem of process starts, input
# generation and float64 references that otherwise leave the GPU idle. LANES=1: one process, as before.
LANES=${LANES:-3}
LEVEL23=(--problems "$KB" --level 2 --level 3)
# The lane plan sizes every level-2/3 problem on the meta device (~2 min of CPU when cold, mostly the level-3 RNNs) and
# fills the footprint cache in .cache/kbstudy that every lane reads. It starts at once, in the background, so that it
# overlaps level 1 and DLRM-Bench; the levels 2-3 steps wait for it (if it fails, each lane plans alone).
if [ "$LANES" -gt 1 ] && [ $(( deadline - $(date +%s) )) -gt 30 ]; then
  ( timeout $(( deadline - $(date +%s) )) python3 -m kbstudy calibrate "${LEVEL23[@]}" --out "$W/level23" \
      --lanes "$LANES" --plan-lanes > "$W/logs/level23-lanes.txt" 2>&1 \
      || echo "lane plan failed (see logs/level23-lanes.txt); each lane plans alone"
    touch "$W/.lanes-planned" ) &
fi
level23() {  # gpu, precision
  local gpu=$1 prec=$2 k
  local args=("${LEVEL23[@]}")
  if [ "$LANES" -le 1 ]; then step "$gpu" level23 "$prec" "${args[@]}"; return; fi
  while [ ! -e "$W/.lanes-planned" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 1; done
  for k in $(seq 0 $((LANES - 1))); do
    LOG_TAG=-lane$k step "$gpu" level23 "$prec" "${args[@]}" --lanes "$LANES" --lane "$k" &
  done
  wait
  LOG_TAG=-solo step "$gpu" level23 "$prec" "${args[@]}" --lanes "$LANES" --lane solo
}
# DEFER: level-1 problem ids calibrated last, after levels 2-3: 45_Average_Pooling_2D (a 17 GB input, 4.3e9-element
# float64 references) ran a whole 524 s call at fp32 without finishing one null, blocking 97-100 behind it
read -r -a DEFER_IDS <<<"${DEFER-45}"  # DEFER="" defers nothing
LEVEL1_FIRST=(); LEVEL1_DEFERRED=()
for id in $(seq 1 100); do
  if [[ " ${DEFER_IDS[*]} " == *" $id "* ]]; then LEVEL1_DEFERRED+=(--problem-id "$id"); else LEVEL1_FIRST+=(--problem-id "$id"); fi
done
gpu_steps() {  # one GPU's share of the steps, in order
  local gpu=$1; shift
  for s in "$@"; do
    IFS=: read -r prefix prec <<<"$s"
    case $prefix in
      dlrm) step "$gpu" dlrm "$prec" --dlrm ;;
      level1) step "$gpu" level1 "$prec" --problems "$KB" --level 1 "${LEVEL1_FIRST[@]}" ;;
      level1-deferred) [ ${#DEFER_IDS[@]} -gt 0 ] && LOG_TAG=-deferred step "$gpu" level1 "$prec" --problems "$KB" \
                         --level 1 "${LEVEL1_DEFERRED[@]}" ;;
      level23) level23 "$gpu" "$prec" ;;
    esac
  done
}
if [ "$NGPU" -ge 2 ]; then
  gpu_steps "${GPU_IDS[0]}" level1:fp32 dlrm:fp32 level23:fp32 level1-deferred:fp32 &
  gpu_steps "${GPU_IDS[1]}" level1:bf16 dlrm:bf16 level23:bf16 level1-deferred:bf16 &
  wait
else
  gpu_steps "${GPU_IDS[0]}" level1:fp32 level1:bf16 dlrm:fp32 dlrm:bf16 level23:fp32 level23:bf16 level1-deferred:fp32 \
    level1-deferred:bf16
fi
wait  # the lane plan, if no step waited for it
rm -rf "$W"/*/.*.merge "$W/.lanes-planned"
tar -czf "$OUT/calibration.tar.gz" -C "$W" --exclude=README.md .
grep -h "rc=" "$W"/logs/*.txt
