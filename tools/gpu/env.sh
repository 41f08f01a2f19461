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
