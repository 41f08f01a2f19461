// batch_norm on the CPU backends' shared loops (backends/cpu/batch_norm.h), synchronised
// or not: OpenBLAS has no batch norm of its own.
#include "strata/backends/cpu/batch_norm.h"
#include "strata/backends/openblas/openblas_backend.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

void OpenBlasBackend::batch_norm_fwd(const BatchNormFwdArgs& a) { loops::batch_norm_fwd(kName, a); }
void OpenBlasBackend::batch_norm_bwd(const BatchNormBwdArgs& a) { loops::batch_norm_bwd(kName, a); }

}  // namespace strata::backends
