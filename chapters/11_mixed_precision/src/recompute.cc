// recompute (tt/recompute.h): the autograd Function around a segment run without its graph. Its
// backward, the re-run, is exercise ch11.3 (recompute_backward.cc).
#include "tt/recompute.h"

#include <string>
#include <vector>

#include "tt/autograd.h"

namespace tt {

namespace {

// Input {x}; output {segment(x)}. Keeps x (and the segment) only.
struct RecomputeFn : autograd::Function {
  explicit RecomputeFn(Segment segment) : segment_(std::move(segment)) {}
  std::string name() const override { return "RecomputeBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    return {segment_(in[0])};  // Function::apply runs forward with grad mode off: no graph kept
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>&) override {
    save_for_backward({in[0]});
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grads) override {
    return {recompute_backward(segment_, saved_tensors()[0], grads[0])};
  }
  void release_saved() override {
    Function::release_saved();
    segment_ = nullptr;  // what the segment captured
  }
  Segment segment_;
};

}  // namespace

Tensor recompute(const Segment& segment, const Tensor& x) {
  TT_CHECK(x.defined(), "recompute: the segment's input is undefined");
  TT_CHECK(static_cast<bool>(segment), "recompute: empty segment");
  return autograd::Function::apply<RecomputeFn>({x}, segment)[0];
}

}  // namespace tt
