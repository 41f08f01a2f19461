#pragma once
// An op bound to its operands: what the front end and a direct plan both make of an op's
// arguments, in one function per op of the table (ops/bind/*.h, bind::<op>):
//   - the arguments checked (ops/validate*.h: the same messages in every mode),
//   - the outputs inferred and allocated (planned_empty*: in the memory of a step being planned
//     when there is one, Tensor::empty otherwise; a parameter's gradient in its gradient's home
//     when the plan names the parameter, planned_grad),
//   - the backend's argument struct (op_args.h) filled.
// The eager front end binds and runs the binding once (run_once) and returns its outputs; a
// direct plan keeps the bound arguments and runs them at every step (run_kernel). A forward's
// binding sits beside the bindings of the ops that are its backward.
#include <utility>

#include "strata/core/tensor.h"
#include "strata/ops/direct/step_memory.h"
#include "strata/ops/table/op_args.h"
#include "strata/ops/table/op_id.h"

namespace strata::ops {

// For each op of the table: its argument struct and how to call it on a backend class or a
// dispatcher (each has one member per op, named by the op).
template <OpId op>
struct OpCall;
#define STRATA_OP(name, ArgsT, kind)            \
  template <>                                   \
  struct OpCall<OpId::name> {                   \
    using Args = ArgsT;                         \
    template <class Target>                     \
    static void call(Target& t, const ArgsT& a) { \
      t.name(a);                                \
    }                                           \
  };
#include "strata/ops/table/op_table.def"
#undef STRATA_OP

// An op's binding without outputs of its own (an in-place update, a write into a given tensor).
struct NoOutput {};

// Outputs beside the tensors a binding made for its args to read (a contiguous copy of an operand,
// a kernel's scratch), which must live as long as the args.
template <class Result, int N>
struct WithReads {
  Result result;
  Tensor reads[N];
};

// Made in one expression where the bindings return it ({Args{...}, outputs}): the argument
// structs are large (a TensorView holds its sizes and strides), and building one in place is
// what keeps the front end's cost what a hand-filled struct costs.
template <OpId op, class Out = NoOutput>
struct Bound {
  typename OpCall<op>::Args args;
  Out out;
};

namespace bind::detail {
// A parameter's gradient: in the gradient's home when a plan names the parameter (planned_grad),
// else a new buffer (in layout fmt).
inline Tensor gradient(const Tensor& param, const Shape& sizes, DType dt, Device dev,
                       MemoryFormat fmt = MemoryFormat::contiguous) {
  return param.defined() ? direct::planned_grad(param, sizes, dt) : direct::planned_empty(sizes, dt, dev, fmt);
}
// An output in the buffer a plan chose for it (checked: the sizes, dtype and device the op would
// allocate; the kernels take any strides), else a new one (in layout fmt). `op` and `what` name it in
// the error, which is strata's own (a plan's buffer, never a user's).
inline Tensor given_or_new(const char* op, const char* what, const Tensor& into, const Shape& sizes, DType dt,
                           Device dev, MemoryFormat fmt = MemoryFormat::contiguous) {
  if (!into.defined()) return direct::planned_empty(sizes, dt, dev, fmt);
  STRATA_CHECK(into.sizes() == sizes && into.dtype() == dt && into.device() == dev, op, ": the buffer for ", what, " ",
               into.str(), " must be ", sizes.str(), " ", dtype_name(dt), " (internal error)");
  return into;
}
}  // namespace bind::detail

// The eager front end: a binding run once through the dispatcher d (traced as every call).
template <OpId op, class Out, class D>
Out run_once(const D& d, Bound<op, Out>&& b) {
  OpCall<op>::call(d, b.args);
  return std::move(b.out);
}

}  // namespace strata::ops
