/// @file nn.h
/// @brief Everything of chapter 05 in one include: modules and layers, optimizers, gradient
/// clipping, learning-rate schedules and checkpoints.
#pragma once

#include "tt/checkpoint.h"
#include "tt/layers.h"
#include "tt/module.h"
#include "tt/optim.h"
