// ============================================================================================
// YOUR EXERCISE FILE for chapter 11_mixed_precision. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch11
// Generated from solutions/11_mixed_precision/recompute_backward.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 11 exercise ch11.3: the backward of activation recomputation (tt/recompute.h). The
// autograd Function that calls it, and the forward without a graph, are in recompute.cc.
#include "tt/autograd.h"
#include "tt/recompute.h"
#include "tt/todo.h"

namespace tt {

Tensor recompute_backward(const Segment& segment, const Tensor& x, const Tensor& dy) {
  (void)segment, (void)x, (void)dy;
  TT_TODO("ch11.3",
          "recompute_backward: returns the gradient of sum(segment(x) * dy) with respect to x "
          "(x's shape, dtype and device) and adds to the .grad of every parameter the segment "
          "uses what a backward through a recorded forward would add, although the forward kept "
          "no graph; nothing flows into x's own graph, and grad mode is as it was on return");
}

}  // namespace tt
