// Shared by chapter 13's tests: seeded full layers and inputs (the same on every rank), the
// tensor-parallel sizes a world allows, and comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tt/autograd.h"
#include "tt/dist.h"
#include "tt/fused_classifier.h"
#include "tt/layers.h"
#include "tt/ops_elementwise.h"
#include "tt/ops_nn.h"
#include "tt/ops_reduce.h"
#include "tt/ops_view.h"
#include "tt/process_grid.h"
#include "tt/tensor_parallel.h"
#include "tt/tp_gpt2.h"
#include "tt/vocab_parallel.h"

namespace ch13_test {

using tt::Tensor;

/// Every tp that divides the world size (1, 2, 4 on 4 ranks): each test runs on all of them.
inline std::vector<int> tp_sizes(int world_size) {
  std::vector<int> out;
  for (int tp = 1; tp <= world_size; ++tp) {
    if (world_size % tp == 0) out.push_back(tp);
  }
  return out;
}

/// Runs `body(tp, group)` for every tp that divides the world size, with `group` the tp group
/// of the dp x tp grid (tp innermost) and the tp in gtest's failure messages.
template <typename Body>
void for_each_tp(Body body) {
  tt::dist::ProcessGroup& world = tt::dist::world();
  for (int tp : tp_sizes(world.world_size())) {
    SCOPED_TRACE("tp=" + std::to_string(tp));
    tt::tp::ProcessGrid grid = tt::tp::ProcessGrid::dp_tp(world, tp);
    body(tp, grid.group("tp"));
  }
}

/// A full Linear drawn from `seed`: the same weights on every rank.
inline tt::nn::Linear make_linear(int64_t in, int64_t out, uint64_t seed, bool bias = true) {
  tt::Generator gen(seed);
  return tt::nn::Linear(in, out, bias, gen);
}

/// A seeded input [rows, cols], the same on every rank.
inline Tensor make_input(int64_t rows, int64_t cols, uint64_t seed) {
  tt::Generator gen(seed);
  return tt::randn({rows, cols}, gen);
}

/// Largest |a - b| over the elements (a, b float32 of the same shape).
inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape()) << a.describe() << " vs " << b.describe();
  const Tensor ac = a.detach().contiguous(), bc = b.detach().contiguous();
  const float* pa = ac.data<float>();
  const float* pb = bc.data<float>();
  double m = 0;
  for (int64_t i = 0; i < ac.numel(); ++i) m = std::max(m, std::fabs(double(pa[i]) - pb[i]));
  return m;
}

/// True when a and b hold the same bytes.
inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  const Tensor ac = a.detach().contiguous(), bc = b.detach().contiguous();
  return ac.shape() == bc.shape() &&
         std::memcmp(ac.data_ptr(), bc.data_ptr(), static_cast<std::size_t>(ac.numel()) * 4) == 0;
}

/// The fused vocab-parallel head (chapter 10's fused classifier on this rank's rows, the row
/// statistics all-gathered: vocab_parallel_classifier_loss) on `device` against the fused
/// classifier on the whole table in one process on the CPU, for every tp: the loss on every rank
/// (`loss_tol` relative), dx summed over the group (x enters through f) and this rank's rows of
/// dwte (`grad_tol`, norm-relative), zero for the padded rows. bfloat16 x follows chapter 11's
/// policy (bf16 GEMMs, float32 statistics); each rank rounds its own term of dx to bfloat16.
/// MPI has no bfloat16 collective: on the CPU the bf16 dx is widened and summed here, where f
/// would sum it.
inline void check_fused_head(int64_t vocab, int64_t padded, tt::DType dtype, uint64_t seed,
                             tt::Device device, double loss_tol, double grad_tol) {
  SCOPED_TRACE("V=" + std::to_string(vocab) + " Vp=" + std::to_string(padded) + " " +
               tt::dtype_name(dtype) + " on " + device.str());
  constexpr int64_t kRows = 10, kC = 8;
  const bool sum_here = dtype == tt::DType::kBFloat16 && device.is_cpu();
  const Tensor x_in = make_input(kRows, kC, seed).to(dtype);
  const Tensor w_in = tt::mul(make_input(padded, kC, seed + 1), 0.5);
  std::vector<int64_t> t(kRows);
  for (int64_t i = 0; i < kRows; ++i) t[i] = (i * 7 + static_cast<int64_t>(seed)) % vocab;
  const Tensor targets = tt::from_vector(t, {kRows});
  Tensor rx = x_in.clone().set_requires_grad(), rw = w_in.clone().set_requires_grad();
  const Tensor ref = tt::fused_classifier_loss(rx, rw, vocab, targets);
  tt::autograd::backward(ref);
  const Tensor ref_dx = rx.grad().to(tt::DType::kFloat32);
  const auto rel = [](const Tensor& a, const Tensor& b) {
    const Tensor d = tt::sub(a.to(tt::Device::cpu()).to(tt::DType::kFloat32), b);
    return std::sqrt(tt::sum(tt::mul(d, d)).item() / tt::sum(tt::mul(b, b)).item());
  };
  for_each_tp([&](int tp, tt::dist::ProcessGroup& group) {
    const tt::tp::VocabShard shard = tt::tp::vocab_shard(padded, vocab, tp, group.rank());
    Tensor x = x_in.to(device).clone();
    Tensor w = w_in.narrow(0, shard.start, shard.size).to(device).contiguous().clone();
    x.set_requires_grad();
    w.set_requires_grad();
    const Tensor h = sum_here ? x : tt::tp::copy_to_tp(x, group);
    const Tensor loss =
        tt::tp::vocab_parallel_classifier_loss(h, w, targets.to(device), shard, vocab, group);
    ASSERT_EQ(loss.dim(), 0);
    EXPECT_NEAR(loss.item(), ref.item(), loss_tol * std::max(1.0, std::fabs(ref.item())));
    tt::autograd::backward(loss);
    ASSERT_TRUE(x.grad().defined() && w.grad().defined());
    Tensor dx = x.grad().to(tt::DType::kFloat32).contiguous();
    if (sum_here) group.all_reduce(dx);
    EXPECT_LE(rel(dx, ref_dx), grad_tol) << "dx summed over the group";
    if (shard.valid > 0) {  // (a rank of only padding has a zero reference: checked below)
      EXPECT_LE(rel(w.grad(), rw.grad().narrow(0, shard.start, shard.size).contiguous()), grad_tol)
          << "rank " << group.rank() << " rows " << shard.start << ".."
          << shard.start + shard.size - 1 << " (" << shard.valid << " valid)";
    }
    if (shard.valid < shard.size) {  // the padded rows get no gradient
      const Tensor pad =
          w.grad().narrow(0, shard.valid, shard.size - shard.valid).to(tt::Device::cpu());
      EXPECT_EQ(tt::max(tt::mul(pad, pad)).item(), 0.0);
    }
  });
}

/// The splits every model test runs: plain TP, and SP with each token shard (T/tp tokens of
/// every sequence, or B/tp whole sequences where tp divides the batch).
inline const tt::tp::TpOptions kSplits[] = {
    {.sequence_parallel = false},
    {.sequence_parallel = true, .shard_whole_sequences = false},
    {.sequence_parallel = true, .shard_whole_sequences = true},
};

/// The split's name for SCOPED_TRACE.
inline std::string options_name(const tt::tp::TpOptions& o) {
  if (!o.sequence_parallel) return "tensor parallel";
  return o.shard_whole_sequences ? "sequence parallel, whole sequences where tp divides B"
                                 : "sequence parallel, T/tp tokens of each sequence";
}

}  // namespace ch13_test
