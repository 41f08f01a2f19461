#pragma once
// The nn layer in one include: the type-erased model and its factories (ResNet,
// LeNet), init policies, optimizers, schedules, losses and checkpoints. Layers and
// typed networks: nn/layers/*.h, nn/resnet.h, nn/lenet.h.
#include "strata/nn/checkpoint.h"
#include "strata/nn/init.h"
#include "strata/nn/loss.h"
#include "strata/nn/model.h"
#include "strata/nn/optim.h"
#include "strata/nn/safetensors.h"
#include "strata/nn/schedule.h"
