#pragma once
// The dispatcher of the tensor API's methods and operators (x.sum(1), a + b), through the
// virtual interface, chosen once per device type and dtype and process: the best backend built
// and usable for the device's type (backends::Registry::best: cuda, then onednn, openblas,
// eigen, reference) when it runs every op of the table in that dtype, else the first other one
// of the device that does (the reference backend last: it is the slow oracle), else the best
// one anyway (whose capability table then names what it lacks). So f32 on a CPU runs on onednn
// and f64, which onednn's primitives lack, on openblas (or eigen, or the reference backend).
// Explicit dispatchers (ops/dispatch.h) remain for the measured paths.
#include "strata/core/device.h"
#include "strata/core/dtype.h"
#include "strata/core/tensor.h"
#include "strata/ops/dispatch.h"

namespace strata::autograd {

const ops::VirtualDispatch& default_dispatch(Device device, DType dtype = DType::f32);
// The dispatcher for operand t (its device and dtype); an undefined t is an error naming `who`.
const ops::VirtualDispatch& default_dispatch(const Tensor& t, std::string_view who);

}  // namespace strata::autograd
