#pragma once
// The op front end of RMSprop, Adagrad and Adadelta (ops/table/optim_args.h): each
// parameter's step, and a parameter group's in one call, written into the parameter
// and its state tensors, which have the parameter's sizes and dtype. Instantiated for
// every dispatcher of the build in ops/adaptive_optim_ops.cpp.
#include <cstdint>
#include <span>
#include <string_view>

#include "strata/core/tensor.h"
#include "strata/ops/table/op_args.h"

namespace strata::ops {

// momentum_buf: needed when o.momentum != 0; grad_avg: when o.centered (else undefined).
template <class D> void rmsprop_step_(const D& d, const Tensor& param, const Tensor& grad, const Tensor& square_avg,
                                      const Tensor& momentum_buf, const Tensor& grad_avg, const RmspropOptions& o);
// step: 1-based, the parameter's count (lr_decay).
template <class D> void adagrad_step_(const D& d, const Tensor& param, const Tensor& grad, const Tensor& sum,
                                      const AdagradOptions& o, int64_t step);
template <class D> void adadelta_step_(const D& d, const Tensor& param, const Tensor& grad, const Tensor& square_avg,
                                       const Tensor& acc_delta, const AdadeltaOptions& o);
// Lists of equal length; momentum_bufs empty without momentum, grad_avgs unless centered.
template <class D> void multi_rmsprop_step_(const D& d, std::span<const Tensor> params, std::span<const Tensor> grads,
                                            std::span<const Tensor> square_avgs, std::span<const Tensor> momentum_bufs,
                                            std::span<const Tensor> grad_avgs, const RmspropOptions& o);
template <class D> void multi_adagrad_step_(const D& d, std::span<const Tensor> params, std::span<const Tensor> grads,
                                            std::span<const Tensor> sums, std::span<const int64_t> steps,
                                            const AdagradOptions& o);
template <class D> void multi_adadelta_step_(const D& d, std::span<const Tensor> params, std::span<const Tensor> grads,
                                             std::span<const Tensor> square_avgs, std::span<const Tensor> acc_deltas,
                                             const AdadeltaOptions& o);

// The options' ranges (torch.optim's: every value finite, lr, eps, weight decay, momentum
// and lr_decay >= 0, Adadelta's rho in [0, 1]; RMSprop's alpha in [0, 1), where 1 would
// never update its average and divide by eps alone). `who` names the caller in the
// message ("rmsprop_step", "optimizer rmsprop").
void check_rmsprop_options(std::string_view who, const RmspropOptions& o);
void check_adagrad_options(std::string_view who, const AdagradOptions& o);
void check_adadelta_options(std::string_view who, const AdadeltaOptions& o);

}  // namespace strata::ops
