#pragma once
// strata in one include, as <torch/torch.h> is LibTorch's:
//
//   #include <strata/strata.h>
//
// Tensors, their operators and methods (the tensor API), factories and printing; backends
// and dispatch modes; autograd (backward, grad, gradcheck);
// the nn layer (layers and their factories, the type-erased Model over ResNet, LeNet or
// the user's own network, init policies, optimizers, schedules, losses, checkpoints);
// dataset readers and the loader. docs/library.md is the how-to.
#include "strata/core/factories.h"
#include "strata/core/print.h"
#include "strata/core/random.h"
#include "strata/core/tensor.h"

#include "strata/backends/api/registry.h"
#include "strata/ops/dispatch.h"

#include "strata/autograd/default_dispatch.h"
#include "strata/autograd/functions.h"
#include "strata/autograd/grad_mode.h"
#include "strata/autograd/gradcheck.h"
#include "strata/autograd/indexing.h"
#include "strata/autograd/nn_functional.h"
#include "strata/autograd/node.h"

#include "strata/nn/custom_model.h"
#include "strata/nn/layers/dag.h"
#include "strata/nn/layers/transformer.h"
#include "strata/nn/layers/factories.h"
#include "strata/nn/nn.h"

#include "strata/data/cifar10.h"
#include "strata/data/dataset.h"
#include "strata/data/idx.h"
#include "strata/data/loader.h"
#include "strata/data/stl10.h"
#include "strata/data/transforms.h"
#include "strata/data/voc.h"
