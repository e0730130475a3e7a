// Tests of the reduction kernels (exercises ch04.3 sum, ch04.4 max_dim) and of the reduction
// front-ends sum / mean / max with their gradients.
#include <cmath>
#include <limits>

#include "ch04_test_util.h"
#include "tt/functional.h"

namespace tt {
namespace {

using test04::f32;
using test04::f64;
using test04::gradcheck_ok;
using test04::leaf64;

// 0, 1, ..., n-1 as float64 with the given shape (given code only).
Tensor iota64(const Shape& shape) {
  return arange(0, static_cast<double>(shape_numel(shape)), 1, {DType::kFloat64}).view(shape);
}

// ----- ch04.3 sum kernel ---------------------------------------------------------------------

TEST(Ch04_3_SumKernel, ReducesTheDimsWhereOutHasSizeOne) {
  Tensor x = iota64({2, 3, 4});
  Tensor out = empty({2, 1, 1}, {DType::kFloat64});
  cpu::sum(out, x);
  EXPECT_TENSOR_NEAR(out, f64({66, 210}, {2, 1, 1}), 0, 0);
  Tensor mid = empty({1, 3, 1}, {DType::kFloat64});
  cpu::sum(mid, x);  // dims 0 and 2: (0+..+3) + (12+..+15) = 6 + 54, ...
  EXPECT_TENSOR_NEAR(mid, f64({60, 92, 124}, {1, 3, 1}), 0, 0);
  Tensor all = empty({1, 1, 1}, {DType::kFloat64});
  cpu::sum(all, x);
  EXPECT_TENSOR_NEAR(all, f64({276}, {1, 1, 1}), 0, 0);
}

TEST(Ch04_3_SumKernel, NonContiguousInputAndInt64) {
  Tensor x = iota64({3, 4}).transpose(0, 1);  // [4, 3], strides [1, 4]
  Tensor out = empty({4, 1}, {DType::kFloat64});
  cpu::sum(out, x);
  EXPECT_TENSOR_NEAR(out, f64({12, 15, 18, 21}, {4, 1}), 0, 0);
  Tensor xi = from_vector(std::vector<int64_t>{1, 2, 3, 4}, {2, 2});
  Tensor oi = empty({1, 2}, {DType::kInt64});
  cpu::sum(oi, xi);
  EXPECT_EQ(oi.to_vector<int64_t>(), (std::vector<int64_t>{4, 6}));
}

TEST(Ch04_3_SumKernel, LongReductionsAreExactAndThreadCountIndependent) {
  // 3 * kReduceBlock + 5 elements per output: several blocks, the last one partial.
  const int64_t n = 3 * kReduceBlock + 5;
  Tensor x = iota64({2, n});
  Tensor out = empty({2, 1}, {DType::kFloat64});
  cpu::sum(out, x);
  const double s0 = static_cast<double>(n) * (n - 1) / 2;
  EXPECT_TENSOR_NEAR(out, f64({s0, s0 + static_cast<double>(n) * n}, {2, 1}), 0, 0);
  // float32 with values whose sum depends on the order: bitwise equal for 1 and 2 threads.
  Tensor r = test04::randn_t({3, 50000}, 11, DType::kFloat32);
  const int saved = num_threads();
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Tensor o = empty({3, 1});
    cpu::sum(o, r);
    results.push_back(o.to_vector<float>());
  }
  set_num_threads(saved);
  EXPECT_EQ(results[0], results[1]);
}

TEST(Ch04_3_SumKernel, ColumnSumsEqualTheStridedPathBitForBit) {
  // The sum over the rows of a contiguous [N, C] (a bias gradient) walks rows outer and columns
  // inner; the same values laid out column-major take the general strided path. Both sum each
  // output in the same blocks and order, so they agree exactly, for 1 and 2 threads.
  const int64_t rows = kReduceBlock + 7, cols = 1100;  // two row blocks, a partial column task
  const Tensor x = test04::randn_t({rows, cols}, 5, DType::kFloat32);
  const Tensor col_major = x.transpose(0, 1).contiguous().transpose(0, 1);  // strides [1, rows]
  ASSERT_FALSE(col_major.is_contiguous());
  for (int threads : {1, 2}) {
    const ScopedNumThreads scoped(threads);
    Tensor fast = empty({1, cols}), strided = empty({1, cols});
    cpu::sum(fast, x);
    cpu::sum(strided, col_major);
    EXPECT_EQ(fast.to_vector<float>(), strided.to_vector<float>()) << threads << " threads";
  }
}

// ----- ch04.4 max_dim kernel -----------------------------------------------------------------

TEST(Ch04_4_MaxDimKernel, ValuesAndFirstIndex) {
  Tensor x = f32({1, 7, 7, 2, -3, -1, -2, -5}, {2, 4});
  Tensor v = empty({2, 1}), i = empty({2, 1}, {DType::kInt64});
  cpu::max_dim(v, i, x, 1);
  EXPECT_TENSOR_NEAR(v, f32({7, -1}, {2, 1}), 0, 0);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 1}));  // first of the tied 7s
  Tensor v0 = empty({1, 4}), i0 = empty({1, 4}, {DType::kInt64});
  cpu::max_dim(v0, i0, x, 0);
  EXPECT_TENSOR_NEAR(v0, f32({1, 7, 7, 2}, {1, 4}), 0, 0);
  EXPECT_EQ(i0.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0}));
}

TEST(Ch04_4_MaxDimKernel, NanPropagatesAndStridesAreRespected) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = f32({1, nan, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);  // [3, 2]: rows (1,4) (nan,5) (3,6)
  Tensor v = empty({3, 1}), i = empty({3, 1}, {DType::kInt64});
  cpu::max_dim(v, i, x, 1);
  EXPECT_TENSOR_NEAR(v, f32({4, nan, 6}, {3, 1}), 0, 0);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1}));
}

// ----- front-ends (given code) ---------------------------------------------------------------

TEST(Ch04_Reduce, ShapesWithAndWithoutKeepdim) {
  Tensor x = iota64({2, 3, 4});
  EXPECT_EQ(sum(x, {1}).shape(), (Shape{2, 4}));
  EXPECT_EQ(sum(x, {-1, 0}, true).shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(sum(x).shape(), (Shape{}));
  EXPECT_DOUBLE_EQ(sum(x).item(), 276);
  EXPECT_DOUBLE_EQ(mean(x).item(), 11.5);
  EXPECT_TENSOR_NEAR(mean(x, {2}), f64({1.5, 5.5, 9.5, 13.5, 17.5, 21.5}, {2, 3}), 0, 0);
  EXPECT_TENSOR_NEAR(max(x, 1), f64({8, 9, 10, 11, 20, 21, 22, 23}, {2, 4}), 0, 0);
  EXPECT_EQ(max(x, 1, true).shape(), (Shape{2, 1, 4}));
  EXPECT_DOUBLE_EQ(max(x).item(), 23);
  MaxResult m = max_with_indices(x, -1);
  EXPECT_EQ(m.indices.to_vector<int64_t>(), (std::vector<int64_t>(6, 3)));
}

TEST(Ch04_Reduce, BadDimsNameOpAndShape) {
  Tensor x = iota64({2, 3});
  EXPECT_TT_ERROR(sum(x, {2}), "sum", "2");
  EXPECT_TT_ERROR(sum(x, {0, -2}), "sum", "twice", "[2, 3]");
  EXPECT_TT_ERROR(mean(tensor_i64({1, 2})), "mean", "int64");
  EXPECT_TT_ERROR(max(zeros({2, 0}), 1), "max", "[2, 0]");
}

TEST(Ch04_Reduce, Gradcheck) {
  Tensor x = leaf64({3, 4, 5}, 21);
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return sum(in[0], {0, 2}); }, {x}));
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return sum(in[0], {1}, true); }, {x}));
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return sum(in[0]); }, {x}));
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return mean(in[0], {-1}); }, {x}));
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return max(in[0], 1); }, {x}));
  EXPECT_TRUE(gradcheck_ok([](const auto& in) { return max(in[0], 2, true); }, {x}));
}

TEST(Ch04_Reduce, MaxGradientGoesToTheFirstMaximum) {
  Tensor x = f64({1, 3, 3, 0}, {4});
  x.set_requires_grad();
  autograd::backward(max(x));
  EXPECT_TENSOR_NEAR(x.grad(), f64({0, 1, 0, 0}, {4}), 0, 0);
}

}  // namespace
}  // namespace tt
