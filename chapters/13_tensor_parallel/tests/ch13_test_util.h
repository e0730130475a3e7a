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
#include "tt/layers.h"
#include "tt/ops_elementwise.h"
#include "tt/ops_nn.h"
#include "tt/ops_reduce.h"
#include "tt/ops_view.h"
#include "tt/process_grid.h"
#include "tt/tensor_parallel.h"

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

}  // namespace ch13_test
