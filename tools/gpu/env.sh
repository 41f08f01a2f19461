# Sourced by the tools/gpu/*.sh scripts on the GPU machine: puts PyTorch's cuDNN first
# on LD_LIBRARY_PATH (the system one there is older than the headers strata is built
# with), then the packed build's lib/ and the CUDA runtime. Sets cudnn_lib. Expects
# $pkg (the packed build, default .gpu) and the repository root as the working folder.
cudnn_lib=$(python3 - <<'PY' 2>/dev/null
import os
try:
    import nvidia.cudnn as m
    print(os.path.join(list(m.__path__)[0], "lib"))
except Exception:
    import torch
    print(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia", "cudnn", "lib"))
PY
)
export LD_LIBRARY_PATH="${cudnn_lib}:$PWD/${pkg:-.gpu}/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"

# For the data-parallel scripts: the machines' rule for NCCL (NVLink multicast off, for PyTorch's
# processes too) and PyTorch's NCCL first on LD_LIBRARY_PATH (newer than the system's).
use_nccl() {
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  local lib
  lib=$(python3 -c "import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], 'lib'))" 2>/dev/null)
  export LD_LIBRARY_PATH="${lib:+$lib:}$LD_LIBRARY_PATH"
}
