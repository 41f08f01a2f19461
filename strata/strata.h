#pragma once
// strata in one include, as <torch/torch.h> is LibTorch's:
//
//   #include <strata/strata.h>
//
// Tensors and their factories and printing; backends and dispatch modes; autograd;
// the nn layer (layers and their factories, the type-erased Model over ResNet, LeNet or
// the user's own network, init policies, optimizers, schedules, losses, checkpoints);
// dataset readers and the loader. docs/library.md is the how-to.
#include "core/factories.h"
#include "core/print.h"
#include "core/random.h"
#include "core/tensor.h"

#include "backends/api/registry.h"
#include "ops/dispatch.h"

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"

#include "nn/custom_model.h"
#include "nn/layers/factories.h"
#include "nn/nn.h"

#include "data/cifar10.h"
#include "data/dataset.h"
#include "data/idx.h"
#include "data/loader.h"
#include "data/stl10.h"
#include "data/transforms.h"
#include "data/voc.h"
