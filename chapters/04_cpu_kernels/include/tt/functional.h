/// @file functional.h
/// @brief Every differentiable op of chapter 04 in one include: element-wise ops with
/// broadcasting, reductions, matmul, views, and the neural-network ops.
#pragma once

#include "tt/autograd.h"
#include "tt/ops_elementwise.h"
#include "tt/ops_matmul.h"
#include "tt/ops_reduce.h"
#include "tt/ops_view.h"
#include "tt/parallel.h"
// The neural-network ops (softmax, layernorm, gelu, embedding, cross-entropy, ...) are written
// on a separate branch; add `#include "tt/ops_nn.h"` here when merging it.
