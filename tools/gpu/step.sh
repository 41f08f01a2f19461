# Sourced by tools/gpu/onnx.sh and onnx_gpt.sh: step NAME COMMAND... runs the command under
# a timeout (STEP_TIMEOUT seconds, default $step_timeout), its output to the terminal and
# to $log, then a line with its exit status; returns that status.
step() {
  local name=$1
  shift
  echo "== $name" | tee -a "$log"
  timeout "${STEP_TIMEOUT:-${step_timeout:-300}}" "$@" 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  echo "$name: rc=$rc" | tee -a "$log"
  return "$rc"
}
