#!/usr/bin/env bash
# A dead or hung rank must stop the job with an error, never hang it. Two ranks of
# dist_resnet train (ResNet-18, 64 px) under the launcher; then
#  (1) rank 1 is killed (SIGKILL): the launcher must exit non-zero naming rank 1 within
#      30 s (it stops rank 0 at once);
#  (2) rank 1 is frozen (SIGSTOP): rank 0's bounded wait (--timeout 20) must end in
#      "did not finish within" and the job must exit non-zero within 20 + 30 s.
# A second argument picks the dispatch mode (default direct); in graph mode the ranks
# replay a captured step whose all-reduces run inside the graph.
# Usage: kill_one_rank.sh <dist_resnet> [dispatch]   (exit 77: fewer than 2 GPUs)
set -uo pipefail
prog=$1
dispatch=${2:-direct}
gpus=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true)
if [ "${gpus:-0}" -lt 2 ]; then echo "skipped: needs 2 GPUs, found ${gpus:-0}"; exit 77; fi
dir=${DIST_CHECK_DIR:-$(mktemp -d)}
mkdir -p "$dir"
fail=0
# Running, and not a zombie waiting to be reaped (kill -0 succeeds on those).
alive() {
  local state
  # One read: bash may reap the process between a test of the file and a read of it.
  state=$(cut -d' ' -f3 /proc/"$1"/stat 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}
for how in KILL STOP; do
  log="$dir/kill_${dispatch}_$how.log"
  "$prog" --model resnet18 --resolution 64 --batch 32 --steps 1000000 --warmup 0 --nproc 2 --timeout 20 \
    --dispatch "$dispatch" >"$log" 2>&1 &
  launcher=$!
  victim=
  for _ in $(seq 1 240); do
    victim=$(sed -n 's/^dist_resnet: rank 1 pid \([0-9]*\) .*/\1/p' "$log" | head -1)
    [ -n "$victim" ] && grep -q '^dist_resnet: training' "$log" && break
    sleep 0.5
  done
  if [ -z "$victim" ]; then echo "$how: rank 1 never started"; cat "$log"; kill -9 "$launcher"; fail=1; continue; fi
  sleep 5  # a few steps in
  t0=$(date +%s.%N)
  kill -"$how" "$victim"
  limit=30
  [ "$how" = STOP ] && limit=50
  # Never hang here either: past the limit (and a margin) the job is a failure, killed.
  for _ in $(seq 1 $(((limit + 30) * 10))); do alive "$launcher" || break; sleep 0.1; done
  if alive "$launcher"; then
    echo "$how: FAIL: the job still runs $((limit + 30)) s after rank 1 was stopped; killing it"
    for c in $(cat /proc/"$launcher"/task/*/children 2>/dev/null); do kill -9 "$c"; done
    kill -9 "$launcher"
  fi
  wait "$launcher"
  rc=$?
  t1=$(date +%s.%N)
  secs=$(python3 -c "print(round($t1 - $t0, 1))")
  echo "$dispatch, $how rank 1: the job exited with status $rc after $secs s (limit $limit s)"
  grep -E 'error|launcher' "$log" | head -5
  in_time=$(python3 -c "print(1 if $secs <= $limit else 0)")
  if [ "$rc" -eq 0 ] || [ "$in_time" != 1 ]; then echo "$how: FAIL"; fail=1; fi
  if [ "$how" = STOP ] && ! grep -q 'did not finish within 20' "$log"; then
    echo "STOP: FAIL: rank 0 did not report the timeout"; fail=1
  fi
done
exit $fail
