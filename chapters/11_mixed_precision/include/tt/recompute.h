/// @file recompute.h
/// @brief Activation recomputation (gradient checkpointing): run a segment of the forward pass
/// without keeping its intermediate tensors, and run it again in backward.
///
/// A training step keeps, between forward and backward, every tensor some backward needs: for
/// GPT-2's MLP the input ln, the c_fc pre-activation h [B, T, 4C], gelu(h) [B, T, 4C], and
/// whatever copies the ops make. recompute(segment, x) keeps only x: forward runs the segment
/// with grad mode off (no graph, so its intermediates are freed as soon as they are used);
/// backward re-runs it on x with grad mode on, then backpropagates the incoming gradient through
/// that fresh graph, which gives x its gradient and accumulates the gradients of every
/// parameter the segment uses. The price: the segment's forward FLOPs a second time.
/// @code
///   Tensor m = tt::recompute([&](const Tensor& h) { return c_proj(gelu(c_fc(h))); }, ln);
/// @endcode
#pragma once

#include <functional>

#include "tt/tensor.h"

namespace tt {

/// A segment of the forward pass: one tensor in, one tensor out; it may use parameters.
using Segment = std::function<Tensor(const Tensor&)>;

/// segment(x), differentiable in x and in the parameters the segment uses, keeping only x for
/// backward (see the file comment). `segment` must compute the same function when it runs again
/// (no dropout, no state that changes between the runs) and stay callable until backward.
/// Values and gradients equal those of segment(x) bit for bit when its ops are deterministic.
/// Throws tt::Error when x is undefined.
Tensor recompute(const Segment& segment, const Tensor& x);

/// The backward of recompute (exercise ch11.3): re-runs `segment` on a copy of x's values that
/// is a fresh leaf requiring grad, with grad mode on, backpropagates `dy` (the gradient of the
/// segment's output) through the graph it records, and returns the leaf's gradient, dx (the shape,
/// dtype and device of x). The parameters the segment uses receive their gradients on the way.
Tensor recompute_backward(const Segment& segment, const Tensor& x, const Tensor& dy);

}  // namespace tt
