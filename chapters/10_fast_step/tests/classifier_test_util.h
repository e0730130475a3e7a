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
/// `dtype` on `device` (for bfloat16, chapter 11's policy: x bfloat16, wte float32), then
/// backward from the loss.
inline ClassifierGrads classifier_grads(bool fused, const ClassifierInputs& in, int64_t V,
                                        DType dtype, Device device,
                                        const FusedClassifierOptions& options = {}) {
  auto leaf = [&](const Tensor& t, DType dt) {
    Tensor c = t.to(dt).to(device).contiguous().clone();
    c.set_requires_grad();
    return c;
  };
  const Tensor x = leaf(in.x, dtype);
  const Tensor wte = leaf(in.wte, dtype == DType::kBFloat16 ? DType::kFloat32 : dtype);
  const Tensor targets = in.targets.to(device);
  const Tensor loss = fused ? fused_classifier_loss(x, wte, V, targets, options)
                            : classifier_loss_unfused(x, wte, V, targets);
  autograd::backward(loss);
  return {loss.detach(), x.grad(), wte.grad()};
}

/// The vocabulary [0, Vp) cut into parts of `part_rows` rows (the last parts may hold only
/// padding): the fused classifier run once per part, in one process, each with a
/// ClassifierVocabPart whose combine checks the part's statistics against the definition (the
/// float64 logits of the part's tokens, computed here on the host, rounded to bfloat16 for
/// bfloat16 x) within `stats_tol` relative,
/// then replaces them with the whole vocabulary's. Returns the loss every part returned (checked
/// equal), dx summed over the parts in order (in float64, on the CPU) and dwte concatenated
/// (wte's dtype, on `device`): what chapter 13's
/// vocab-parallel head gets over a group.
inline ClassifierGrads split_classifier_grads(const ClassifierInputs& in, int64_t V,
                                              int64_t part_rows, DType dtype, Device device,
                                              double stats_tol, int64_t chunk_rows = 0) {
  const int64_t Vp = in.wte.size(0), C = in.x.size(-1), N = in.targets.numel();
  // Float64 logits of the inputs as the kernels see them (rounded to dtype first).
  const Tensor x64 = in.x.to(dtype).to(DType::kFloat64).reshape({N, C});
  const Tensor w64 =
      in.wte.to(dtype == DType::kBFloat16 ? DType::kFloat32 : dtype).to(dtype).to(DType::kFloat64);
  // The logits as the kernels see them: bfloat16 logits are rounded (chapter 11's GEMM output).
  Tensor z64 = matmul(x64, transpose(w64, 0, 1));
  if (dtype == DType::kBFloat16) z64 = z64.to(DType::kBFloat16).to(DType::kFloat64);
  const std::vector<double> z = z64.contiguous().to_vector<double>();
  const std::vector<int64_t> t = in.targets.contiguous().to_vector<int64_t>();
  auto lse_of = [&](int64_t r, int64_t lo, int64_t hi) {
    double m = -INFINITY, s = 0;
    for (int64_t v = lo; v < hi; ++v) m = std::max(m, z[r * Vp + v]);
    for (int64_t v = lo; v < hi; ++v) s += std::exp(z[r * Vp + v] - m);
    return hi > lo ? m + std::log(s) : -INFINITY;
  };
  ClassifierGrads out;
  for (int64_t first = 0; first < Vp; first += part_rows) {
    const int64_t rows_here = std::min(part_rows, Vp - first);
    const int64_t valid = std::clamp<int64_t>(V - first, 0, rows_here);
    SCOPED_TRACE("part [" + std::to_string(first) + ", " + std::to_string(first + rows_here) +
                 "), " + std::to_string(valid) + " tokens");
    int64_t r0 = 0;  // the chunks come in order
    FusedClassifierOptions opt{.chunk_rows = chunk_rows};
    opt.part.first = first;
    opt.part.whole_vocab_size = V;
    opt.part.combine = [&](const Tensor& stats) {
      const int64_t R = stats.size(1);
      const std::vector<double> got =
          stats.to(Device::cpu()).to(DType::kFloat64).to_vector<double>();
      std::vector<double> whole(static_cast<std::size_t>(2 * R));
      for (int64_t r = 0; r < R; ++r) {
        const int64_t row = r0 + r, local = t[row] - first;
        const double lse = lse_of(row, first, first + valid);
        const double zt = local >= 0 && local < valid ? z[row * Vp + t[row]] : 0.0;
        if (std::isinf(lse)) {
          EXPECT_EQ(got[r], lse) << "row " << row;
        } else {
          EXPECT_NEAR(got[r], lse, stats_tol * std::max(1.0, std::abs(lse))) << "row " << row;
        }
        EXPECT_NEAR(got[R + r], zt, stats_tol * std::max(1.0, std::abs(zt))) << "row " << row;
        whole[r] = lse_of(row, 0, V);
        whole[R + r] = z[row * Vp + t[row]];
      }
      stats.copy_(from_vector(whole, {2, R}).to(stats.dtype()).to(stats.device()));
      r0 += R;
    };
    Tensor x = in.x.to(dtype).to(device).contiguous().clone();
    Tensor w = in.wte.narrow(0, first, rows_here)
                   .to(dtype == DType::kBFloat16 ? DType::kFloat32 : dtype)
                   .to(device)
                   .contiguous()
                   .clone();
    x.set_requires_grad();
    w.set_requires_grad();
    const Tensor loss = fused_classifier_loss(x, w, valid, in.targets.to(device), opt);
    autograd::backward(loss);
    EXPECT_EQ(r0, N) << "combine saw every row once";
    const Tensor dx = x.grad().to(Device::cpu()).to(DType::kFloat64);  // summed in float64
    if (!out.loss.defined()) {
      out.loss = loss.detach();
      out.dx = dx;
    } else {
      EXPECT_EQ(loss.item(), out.loss.item()) << "every part returns the whole loss";
      out.dx = add(out.dx, dx);
    }
    if (!out.dwte.defined()) out.dwte = empty({Vp, C}, {w.grad().dtype(), device});
    out.dwte.narrow(0, first, rows_here).copy_(w.grad());
  }
  return out;
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
