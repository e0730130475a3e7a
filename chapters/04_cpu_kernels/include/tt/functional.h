/// @file functional.h
/// @brief Every differentiable op of chapter 04 in one include: element-wise ops with
/// broadcasting, reductions, matmul, views, and the neural-network ops.
#pragma once

#include "tt/autograd.h"
#include "tt/ops_elementwise.h"
#include "tt/ops_matmul.h"
#include "tt/ops_nn.h"
#include "tt/ops_reduce.h"
#include "tt/ops_view.h"
#include "tt/parallel.h"
