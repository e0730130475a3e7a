// Chapter 11 exercise ch11.3: the backward of activation recomputation (tt/recompute.h). The
// autograd Function that calls it, and the forward without a graph, are in recompute.cc.
#include "tt/autograd.h"
#include "tt/recompute.h"
#include "tt/todo.h"

namespace tt {

Tensor recompute_backward(const Segment& segment, const Tensor& x, const Tensor& dy) {
#if TT_SOLUTION
  // A fresh leaf with x's values: the re-run's graph starts here and ends at y.
  Tensor leaf = x.detach();
  leaf.set_requires_grad();
  Tensor y;
  {
    // The engine runs backward functions with grad mode off; the re-run must record.
    struct GradModeOn {
      bool previous = autograd::is_grad_enabled();
      GradModeOn() { autograd::set_grad_enabled(true); }
      ~GradModeOn() { autograd::set_grad_enabled(previous); }
    } on;
    y = segment(leaf);
  }
  // A nested backward: it accumulates into leaf.grad and the parameters' .grad.
  autograd::backward(y, dy);
  return leaf.grad();
#else
  (void)segment, (void)x, (void)dy;
  TT_TODO("ch11.3",
          "recompute_backward: returns the gradient of sum(segment(x) * dy) with respect to x "
          "(x's shape, dtype and device) and adds to the .grad of every parameter the segment "
          "uses what a backward through a recorded forward would add, although the forward kept "
          "no graph; nothing flows into x's own graph, and grad mode is as it was on return");
#endif
}

}  // namespace tt
