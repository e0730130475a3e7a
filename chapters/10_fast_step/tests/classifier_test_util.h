// Helpers shared by the fused classifier tests (CPU and CUDA): seeded inputs, the loss and
// gradients of either path through autograd, a norm-relative error, and a KernelObserver that
// records the tensors kernels see and the peak bytes allocated at kernel boundaries.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "tt/allocation_watch.h"
#include "tt/autograd.h"
#include "tt/functional.h"
#include "tt/fused_classifier.h"
#include "tt/generator.h"
#include "tt/testing.h"

namespace tt::test10 {

/// One test geometry: x [B, T, C], wte [Vp, C], V predicted classes.
struct ClassifierCase {
  int64_t B, T, C, V, Vp;
};

/// "B=2 T=7 C=5 V=37 Vp=40" for failure messages.
inline std::string case_name(const ClassifierCase& c) {
  std::ostringstream os;
  os << "B=" << c.B << " T=" << c.T << " C=" << c.C << " V=" << c.V << " Vp=" << c.Vp;
  return os.str();
}

/// The inputs of one case (on the CPU).
struct ClassifierInputs {
  Tensor x, wte, targets;
};

/// x ~ N(0, 1), wte ~ N(0, 1) * w_scale, targets uniform in [0, V), all from `seed`.
inline ClassifierInputs classifier_inputs(const ClassifierCase& c, uint64_t seed, DType dtype,
                                          double w_scale = 0.5) {
  Generator gen(seed);
  ClassifierInputs in;
  in.x = randn({c.B, c.T, c.C}, gen, {dtype});
  in.wte = mul(randn({c.Vp, c.C}, gen, {dtype}), w_scale);
  std::vector<int64_t> t(static_cast<std::size_t>(c.B * c.T));
  for (int64_t& v : t) v = static_cast<int64_t>(gen.next_u64() % static_cast<uint64_t>(c.V));
  in.targets = from_vector(t, {c.B, c.T});
  return in;
}

/// The loss and the gradients of x and wte.
struct ClassifierGrads {
  Tensor loss, dx, dwte;
};

/// Runs the fused (or the unfused reference) classifier on copies of `in` converted to
/// `dtype` on `device`, then backward from the loss.
inline ClassifierGrads classifier_grads(bool fused, const ClassifierInputs& in, int64_t V,
                                        DType dtype, Device device,
                                        const FusedClassifierOptions& options = {}) {
  auto leaf = [&](const Tensor& t) {
    Tensor c = t.to(dtype).to(device).contiguous().clone();
    c.set_requires_grad();
    return c;
  };
  const Tensor x = leaf(in.x), wte = leaf(in.wte);
  const Tensor targets = in.targets.to(device);
  const Tensor loss = fused ? fused_classifier_loss(x, wte, V, targets, options)
                            : classifier_loss_unfused(x, wte, V, targets);
  autograd::backward(loss);
  return {loss.detach(), x.grad(), wte.grad()};
}

/// ||a - ref|| / ||ref|| (Frobenius, in float64 on the CPU; ||ref|| > 0 in every use).
inline double rel_norm_error(const Tensor& a, const Tensor& ref) {
  const Tensor y = ref.to(Device::cpu()).to(DType::kFloat64);
  const Tensor d = sub(a.to(Device::cpu()).to(DType::kFloat64), y);
  return std::sqrt(sum(mul(d, d)).item() / sum(mul(y, y)).item());
}

/// Records, while installed, the largest tensor argument of any dispatched kernel (footprint
/// bytes), every argument's shape, the calls per op, and (AllocationWatch) the peak bytes
/// allocated on `device` at kernel boundaries.
class MemoryObserver final : public prof::AllocationWatch {
 public:
  explicit MemoryObserver(Device device) : AllocationWatch(device) {}

  /// Bytes of the largest tensor any kernel saw.
  std::size_t largest_tensor() const { return largest_; }
  /// The most rows of any 2-D tensor argument with at least `cols` columns, except those of
  /// exactly `except_rows` rows (0 if none): with cols = V and except_rows = C (wte's transposed
  /// view [C, V] is such an argument), the largest block of logits rows a kernel saw.
  int64_t max_rows_with_cols(int64_t cols, int64_t except_rows = -1) const {
    int64_t rows = 0;
    for (const Shape& s : shapes_) {
      if (s.size() == 2 && s[1] >= cols && s[0] != except_rows) rows = std::max(rows, s[0]);
    }
    return rows;
  }
  /// How many kernel calls of `op` were seen.
  int64_t count(const std::string& op) const { return std::count(ops_.begin(), ops_.end(), op); }

 protected:
  void on_call(const KernelCall& call) override {
    ops_.push_back(call.op);
    for (const KernelTensorArg& t : call.tensors) {
      largest_ = std::max(largest_, t.bytes);
      shapes_.push_back(t.shape);
    }
  }

 private:
  std::size_t largest_ = 0;
  std::vector<std::string> ops_;
  std::vector<Shape> shapes_;
};

}  // namespace tt::test10
