#pragma once
// The nn layer in one include: the type-erased model and its factories (ResNet,
// LeNet), init policies, optimizers, schedules, losses and checkpoints. Layers and
// typed networks: nn/layers/*.h, nn/resnet.h, nn/lenet.h.
#include "nn/checkpoint.h"
#include "nn/init.h"
#include "nn/loss.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "nn/safetensors.h"
#include "nn/schedule.h"
