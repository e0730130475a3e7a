// API misuse of chapter 04's public ops, table-driven: wrong shapes, wrong dtypes, undefined
// and mixed-device inputs must throw tt::Error whose message names the op and the offending
// shapes/dtypes/devices. Then the documented results for empty tensors (numel 0) and NaN/Inf
// inputs (see "Edge cases" in the chapter README).
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tt/functional.h"
#include "tt/second_device.h"
#include "tt/testing.h"

namespace tt {
namespace {

using testing::expect_errors;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor f32(const Shape& shape) {
  return zeros(shape);
}
Tensor f64(const Shape& shape) {
  return zeros(shape, {.dtype = DType::kFloat64});
}
Tensor i64(const Shape& shape) {
  return zeros(shape, {.dtype = DType::kInt64});
}
Tensor values(const std::vector<double>& v, Shape shape = {}) {
  return from_vector(v, std::move(shape));
}
/// A tensor of `shape` whose memory held NaNs just before: freeing a same-sized NaN block
/// first makes the allocator likely to hand it out again, so a kernel that forgets to write
/// its output (e.g. for K = 0) shows NaN instead of lucky zeros.
void dirty_allocator(const Shape& shape, DType dtype = DType::kFloat32) {
  Tensor junk = full(shape, kNaN, {.dtype = dtype});
}

TEST(Ch04_ApiMisuse, WrongShapesNameOpAndShapes) {
  const Tensor a = f32({2, 3});
  const Tensor idx = tensor_i64({0, 1});
  expect_errors({
      {"add", [&] { add(a, f32({4})); }, {"add", "[2, 3]", "[4]"}},
      {"sub",
       [&] {
         sub(f32({2, 3, 4}), f32({5, 4}));
       },
       {"sub", "[2, 3, 4]", "[5, 4]"}},
      {"mul",
       [&] {
         mul(a, f32({3, 2}));
       },
       {"mul", "[2, 3]", "[3, 2]"}},
      {"div", [&] { div(f32({0}), f32({2})); }, {"div", "[0]", "[2]"}},
      {"sum_to_shape", [&] { sum_to_shape(a, {4}); }, {"sum_to_shape", "[2, 3]", "[4]"}},
      {"sum dim", [&] { sum(a, {2}); }, {"sum", "dim 2", "[2, 3]"}},
      {"sum twice",
       [&] {
         sum(a, {0, -2});
       },
       {"sum", "appears twice", "[2, 3]"}},
      {"sum 0-d dim", [&] { sum(scalar_tensor(1), {1}); }, {"sum", "dim 1", "[]"}},
      {"mean dim", [&] { mean(a, {-3}); }, {"mean", "dim -3", "[2, 3]"}},
      {"max dim", [&] { max(a, 2); }, {"max", "dim 2", "[2, 3]"}},
      {"max empty dim",
       [&] {
         max(f32({2, 0}), 1);
       },
       {"max", "empty dim", "[2, 0]"}},
      {"max of nothing", [&] { max(f32({0})); }, {"max", "[0]"}},
      {"max 0-d dim", [&] { max(scalar_tensor(1), 1); }, {"max", "dim 1", "[]"}},
      {"matmul K",
       [&] {
         matmul(a, f32({4, 5}));
       },
       {"matmul", "[2, 3]", "[4, 5]"}},
      {"matmul batch",
       [&] {
         matmul(f32({2, 3, 4}), f32({3, 4, 5}));
       },
       {"matmul", "[2, 3, 4]", "[3, 4, 5]", "not broadcastable"}},
      {"matmul 0-d", [&] { matmul(scalar_tensor(2), a); }, {"matmul", "0-d", "[]", "[2, 3]"}},
      {"matmul vectors", [&] { matmul(f32({3}), f32({4})); }, {"matmul", "[1, 3]", "[4, 1]"}},
      {"matmul_forward 1-D", [&] { matmul_forward(f32({4}), a); }, {"matmul_forward", "[4]"}},
      {"view", [&] { view(a, {4}); }, {"view", "[4]", "6 elements"}},
      {"view strides", [&] { view(transpose(a, 0, 1), {6}); }, {"view", "[3, 2]", "reshape"}},
      {"reshape -1 twice",
       [&] {
         reshape(a, {-1, -1});
       },
       {"reshape", "[-1, -1]"}},
      {"reshape -1 of empty",
       [&] {
         reshape(f32({0, 3}), {0, -1});
       },
       {"reshape", "0 elements"}},
      {"flatten", [&] { flatten(a, 1, 0); }, {"flatten", "start_dim 1"}},
      {"permute count", [&] { permute(a, {0}); }, {"permute", "[2, 3]"}},
      {"permute twice",
       [&] {
         permute(a, {1, 1});
       },
       {"permute", "twice", "[2, 3]"}},
      {"transpose", [&] { transpose(a, 0, 2); }, {"transpose", "dim 2", "[2, 3]"}},
      {"slice dim", [&] { slice(a, 2, 0, 1); }, {"slice", "dim 2", "[2, 3]"}},
      {"slice step", [&] { slice(a, 1, 0, 3, 0); }, {"slice", "step", "0"}},
      {"slice 0-d", [&] { slice(scalar_tensor(1), 0, 0, 1); }, {"slice", "0-d"}},
      {"select index", [&] { select(a, 0, 2); }, {"select", "index 2", "[2, 3]"}},
      {"select 0-d", [&] { select(scalar_tensor(1), 0, 0); }, {"select", "0-d"}},
      {"narrow 0-d", [&] { scalar_tensor(1).narrow(0, 0, 1); }, {"narrow", "0-d"}},
      {"expand",
       [&] {
         expand(a, {4, 3});
       },
       {"expand", "[2, 3]", "[4, 3]"}},
      {"expand fewer dims", [&] { expand(a, {3}); }, {"expand", "[2, 3]", "[3]"}},
      {"squeeze", [&] { squeeze(a, 0); }, {"squeeze", "[2, 3]", "size 2"}},
      {"unsqueeze", [&] { unsqueeze(a, 3); }, {"unsqueeze", "dim 3", "[2, 3]"}},
      {"softmax dim", [&] { softmax(a, 2); }, {"softmax", "dim 2", "[2, 3]"}},
      {"log_softmax dim", [&] { log_softmax(a, -3); }, {"log_softmax", "dim -3", "[2, 3]"}},
      {"layernorm C", [&] { layernorm(a, f32({4}), f32({4})); }, {"layernorm", "[2, 3]", "[4]"}},
      {"layernorm C=0",
       [&] {
         layernorm(f32({2, 0}), f32({0}), f32({0}));
       },
       {"layernorm", "[2, 0]"}},
      {"layernorm 0-d",
       [&] { layernorm(scalar_tensor(1), f32({1}), f32({1})); },
       {"layernorm", "[]"}},
      {"layernorm eps 0",
       [&] { layernorm(a, f32({3}), f32({3}), 0.0); },
       {"layernorm", "eps", "0"}},
      {"layernorm eps NaN",
       [&] { layernorm(a, f32({3}), f32({3}), kNaN); },
       {"layernorm", "eps", "nan"}},
      {"embedding 1-D weight", [&] { embedding(f32({4}), idx); }, {"embedding", "weight", "[4]"}},
      {"embedding index",
       [&] {
         embedding(f32({5, 2}), tensor_i64({1, 5}));
       },
       {"embedding", "indices[1] = 5", "[0, 5)"}},
      {"embedding negative",
       [&] {
         embedding(f32({5, 2}), tensor_i64({-1}));
       },
       {"embedding", "indices[0] = -1", "[0, 5)"}},
      {"cross_entropy N",
       [&] {
         cross_entropy(a, tensor_i64({0, 1, 2}));
       },
       {"cross_entropy", "[2, 3]", "[3]"}},
      {"cross_entropy 1-D",
       [&] { cross_entropy(f32({3}), tensor_i64({0})); },
       {"cross_entropy", "[3]", "[1]"}},
      {"cross_entropy target",
       [&] {
         cross_entropy(a, tensor_i64({0, 3}));
       },
       {"cross_entropy", "targets[1] = 3", "[0, 3)"}},
      {"cross_entropy V=0",
       [&] {
         cross_entropy(f32({2, 0}), tensor_i64({-100, -100}));
       },
       {"cross_entropy", "V > 0", "[2, 0]"}},
      {"masked_fill",
       [&] {
         masked_fill(a, i64({2, 2}), 0);
       },
       {"masked_fill", "[2, 2]", "[2, 3]"}},
      {"masked_fill rank",
       [&] {
         masked_fill(a, i64({1, 2, 3}), 0);
       },
       {"masked_fill", "[1, 2, 3]", "[2, 3]"}},
      {"causal_mask", [&] { causal_mask(-1); }, {"causal_mask", "-1"}},
  });
}

TEST(Ch04_ApiMisuse, WrongDtypesNameOpAndDtypes) {
  const Tensor a = f32({2, 3}), b = f32({3, 2});
  const Tensor idx = tensor_i64({0, 1});
  expect_errors({
      {"add f64",
       [&] {
         add(a, f64({2, 3}));
       },
       {"add", "float32", "float64"}},
      {"mul i64", [&] { mul(a, i64({3})); }, {"mul", "float32", "int64"}},
      {"exp", [&] { exp(i64({2})); }, {"exp", "int64", "[2]"}},
      {"log", [&] { log(i64({2})); }, {"log", "int64"}},
      {"sqrt", [&] { sqrt(i64({2})); }, {"sqrt", "int64"}},
      {"tanh", [&] { tanh(i64({2})); }, {"tanh", "int64"}},
      {"pow", [&] { pow(i64({2}), 2.0); }, {"pow", "int64"}},
      {"add scalar", [&] { add(i64({2}), 1.0); }, {"add", "int64"}},
      {"sub scalar", [&] { sub(i64({2}), 1.0); }, {"sub", "int64"}},
      {"mul scalar", [&] { mul(i64({2}), 2.0); }, {"mul", "int64"}},
      {"div scalar", [&] { div(i64({2}), 2.0); }, {"div", "int64"}},
      {"int64 division by zero",
       [&] {
         div(tensor_i64({1, 2}), tensor_i64({1, 0}));
       },
       {"div", "division by zero", "int64"}},
      {"mean",
       [&] {
         mean(i64({2, 3}));
       },
       {"mean", "int64", "[2, 3]"}},
      {"matmul mixed",
       [&] {
         matmul(a, f64({3, 2}));
       },
       {"matmul", "float32", "float64"}},
      {"matmul int",
       [&] {
         matmul(i64({2, 3}), i64({3, 2}));
       },
       {"matmul", "int64"}},
      {"softmax",
       [&] {
         softmax(i64({2, 3}));
       },
       {"softmax", "int64", "[2, 3]"}},
      {"log_softmax",
       [&] {
         log_softmax(i64({2, 3}));
       },
       {"log_softmax", "int64"}},
      {"gelu", [&] { gelu(i64({2})); }, {"gelu", "int64"}},
      {"layernorm w",
       [&] { layernorm(a, f64({3}), f32({3})); },
       {"layernorm", "float64", "float32"}},
      {"layernorm x",
       [&] {
         layernorm(i64({2, 3}), f32({3}), f32({3}));
       },
       {"layernorm", "int64"}},
      {"embedding weight",
       [&] {
         embedding(i64({5, 2}), idx);
       },
       {"embedding", "weight", "int64"}},
      {"embedding indices",
       [&] {
         embedding(f32({5, 2}), f32({2}));
       },
       {"embedding", "indices", "float32"}},
      {"cross_entropy logits",
       [&] {
         cross_entropy(i64({2, 3}), idx);
       },
       {"cross_entropy", "logits", "int64"}},
      {"cross_entropy targets",
       [&] { cross_entropy(a, f32({2})); },
       {"cross_entropy", "targets", "float32"}},
      {"masked_fill x",
       [&] {
         masked_fill(i64({2, 3}), i64({2, 3}), 0);
       },
       {"masked_fill", "x", "int64"}},
      {"masked_fill mask",
       [&] {
         masked_fill(a, f32({2, 3}), 0);
       },
       {"masked_fill", "mask", "float32"}},
      {"set_requires_grad int",
       [&] { i64({2}).set_requires_grad(); },
       {"set_requires_grad", "int64", "[2]"}},
      {"matmul names both",
       [&] {
         matmul(b, f64({2, 2}));
       },
       {"matmul", "[3, 2]", "float64"}},
  });
}

TEST(Ch04_ApiMisuse, UndefinedInputsNameTheOp) {
  const Tensor a = f32({2, 3}), u;
  expect_errors({
      {"add", [&] { add(u, a); }, {"add", "undefined"}},
      {"div", [&] { div(a, u); }, {"div", "undefined"}},
      {"neg", [&] { neg(u); }, {"neg", "undefined"}},
      {"exp", [&] { exp(u); }, {"exp", "undefined"}},
      {"mul scalar", [&] { mul(u, 2.0); }, {"mul", "undefined"}},
      {"sum", [&] { sum(u); }, {"sum", "undefined"}},
      {"mean", [&] { mean(u); }, {"mean", "undefined"}},
      {"max", [&] { max(u, 0); }, {"max", "undefined"}},
      {"matmul", [&] { matmul(a, u); }, {"matmul", "undefined"}},
      {"view", [&] { view(u, {1}); }, {"view", "undefined"}},
      {"transpose", [&] { transpose(u, 0, 1); }, {"transpose", "undefined"}},
      {"softmax", [&] { softmax(u); }, {"softmax", "undefined"}},
      {"layernorm", [&] { layernorm(a, u, f32({3})); }, {"layernorm", "weight", "undefined"}},
      {"gelu", [&] { gelu(u); }, {"gelu", "undefined"}},
      {"embedding",
       [&] {
         embedding(f32({2, 2}), u);
       },
       {"embedding", "indices", "undefined"}},
      {"cross_entropy",
       [&] { cross_entropy(u, tensor_i64({0})); },
       {"cross_entropy", "logits", "undefined"}},
      {"masked_fill", [&] { masked_fill(a, u, 0); }, {"masked_fill", "mask", "undefined"}},
  });
}

TEST(Ch04_ApiMisuse, MixedDevicesNameBothDevices) {
  TT_SECOND_DEVICE_OR_SKIP(dev);
  const Tensor a = f32({2, 3});
  const Tensor a_dev = a.to(dev);
  expect_errors({
      {"add", [&] { add(a, a_dev); }, {"add", "cpu", "cuda:0"}},
      {"mul", [&] { mul(a_dev, f32({3})); }, {"mul", "cpu", "cuda:0"}},
      {"matmul",
       [&] {
         matmul(a, f32({3, 2}).to(dev));
       },
       {"matmul", "cpu", "cuda:0"}},
      {"layernorm",
       [&] { layernorm(a, f32({3}).to(dev), f32({3})); },
       {"layernorm", "cpu", "cuda:0"}},
      {"embedding",
       [&] {
         embedding(f32({4, 2}), tensor_i64({0}).to(dev));
       },
       {"embedding", "cpu", "cuda:0"}},
      {"cross_entropy",
       [&] {
         cross_entropy(a_dev, tensor_i64({0, 1}));
       },
       {"cross_entropy", "cpu", "cuda:0"}},
      {"masked_fill",
       [&] {
         masked_fill(a, i64({2, 3}).to(dev), 0);
       },
       {"masked_fill", "cpu", "cuda:0"}},
  });
}

// ----- empty tensors -----------------------------------------------------------------------

TEST(Ch04_EmptyTensors, ElementwiseAndViewsKeepTheShape) {
  EXPECT_EQ(add(f32({0, 3}), ones({3})).shape(), (Shape{0, 3}));
  EXPECT_EQ(mul(f32({2, 0}), f32({1, 0})).shape(), (Shape{2, 0}));
  EXPECT_EQ(exp(f32({0})).shape(), (Shape{0}));
  EXPECT_EQ(neg(i64({0, 2})).shape(), (Shape{0, 2}));
  EXPECT_EQ(pow(f32({0}), 3.0).shape(), (Shape{0}));
  EXPECT_EQ(reshape(f32({0, 3}), {3, 0}).shape(), (Shape{3, 0}));
  EXPECT_EQ(view(f32({0, 3}), {-1}).shape(), (Shape{0}));
  EXPECT_EQ(transpose(f32({0, 3}), 0, 1).shape(), (Shape{3, 0}));
  EXPECT_EQ(slice(f32({4, 3}), 0, 2, 2).shape(), (Shape{0, 3}));
  EXPECT_EQ(expand(f32({1, 0}), {5, 0}).shape(), (Shape{5, 0}));
}

TEST(Ch04_EmptyTensors, SumIsZeroMeanIsNaNMaxNeedsAnElement) {
  dirty_allocator({3});
  EXPECT_EQ(sum(f32({0, 3})).item(), 0.0);
  EXPECT_EQ(sum(f32({0, 3}), {0}).to_vector<float>(), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(sum(f32({0, 3}), {1}).shape(), (Shape{0}));
  EXPECT_EQ(sum(i64({0})).item(), 0.0);
  EXPECT_TRUE(std::isnan(mean(f32({0})).item()));  // 0 / 0, like PyTorch
  for (float v : mean(f32({0, 3}), {0}).to_vector<float>()) EXPECT_TRUE(std::isnan(v));
  EXPECT_EQ(mean(f32({0, 3}), {1}).shape(), (Shape{0}));
  const MaxResult m = max_with_indices(f32({0, 3}), 1);  // 0 rows of 3: nothing to reduce
  EXPECT_EQ(m.values.shape(), (Shape{0}));
  EXPECT_EQ(m.indices.shape(), (Shape{0}));
  // The gradient of an empty sum is an empty tensor.
  Tensor x = f32({0, 3}).set_requires_grad();
  autograd::backward(sum(x));
  EXPECT_EQ(x.grad().shape(), (Shape{0, 3}));
}

TEST(Ch04_EmptyTensors, MatmulWithKZeroIsZerosForEveryAlgorithm) {
  for (MatmulAlgo algo :
       {MatmulAlgo::kDefault, MatmulAlgo::kNaive, MatmulAlgo::kBlocked, MatmulAlgo::kEigen}) {
    SCOPED_TRACE(matmul_kernel_name(algo));
    dirty_allocator({2, 3});
    EXPECT_TENSOR_NEAR(matmul(f32({2, 0}), f32({0, 3}), algo), f32({2, 3}), 0, 0);
    dirty_allocator({4, 2, 3});
    EXPECT_TENSOR_NEAR(matmul(f32({4, 2, 0}), f32({4, 0, 3}), algo), f32({4, 2, 3}), 0, 0);
    EXPECT_EQ(matmul(f32({0, 4}), f32({4, 3}), algo).shape(), (Shape{0, 3}));
    EXPECT_EQ(matmul(f32({2, 4}), f32({4, 0}), algo).shape(), (Shape{2, 0}));
    EXPECT_EQ(matmul(f32({0, 2, 4}), f32({4, 3}), algo).shape(), (Shape{0, 2, 3}));
    // Backward of a K = 0 product: empty gradients of the inputs' shapes.
    Tensor a = f32({2, 0}).set_requires_grad(), b = f32({0, 3}).set_requires_grad();
    autograd::backward(sum(matmul(a, b, algo)));
    EXPECT_EQ(a.grad().shape(), (Shape{2, 0}));
    EXPECT_EQ(b.grad().shape(), (Shape{0, 3}));
  }
}

TEST(Ch04_EmptyTensors, NnOps) {
  EXPECT_EQ(softmax(f32({0, 5})).shape(), (Shape{0, 5}));
  EXPECT_EQ(softmax(f32({3, 0})).shape(), (Shape{3, 0}));
  EXPECT_EQ(log_softmax(f32({3, 0}), 0).shape(), (Shape{3, 0}));
  EXPECT_EQ(gelu(f32({0})).shape(), (Shape{0}));
  EXPECT_EQ(masked_fill(f32({0, 4, 4}), causal_mask(4), -kInf).shape(), (Shape{0, 4, 4}));
  EXPECT_EQ(causal_mask(0).shape(), (Shape{0, 0}));
  EXPECT_EQ(embedding(f32({5, 3}), i64({2, 0})).shape(), (Shape{2, 0, 3}));
  // LayerNorm over no rows: the weight and bias gradients are sums over no rows, zeros.
  Tensor x = f32({0, 4}).set_requires_grad();
  Tensor w = ones({4}).set_requires_grad(), b = f32({4}).set_requires_grad();
  dirty_allocator({4});
  const Tensor y = layernorm(x, w, b);
  EXPECT_EQ(y.shape(), (Shape{0, 4}));
  autograd::backward(sum(y));
  EXPECT_TENSOR_NEAR(w.grad(), f32({4}), 0, 0);
  EXPECT_TENSOR_NEAR(b.grad(), f32({4}), 0, 0);
  // Embedding of no tokens: the weight gradient is all zeros.
  Tensor table = ones({5, 3}).set_requires_grad();
  dirty_allocator({5, 3});
  autograd::backward(sum(embedding(table, i64({0}))));
  EXPECT_TENSOR_NEAR(table.grad(), f32({5, 3}), 0, 0);
  // Cross-entropy over no rows is the mean of nothing: NaN, like PyTorch.
  Tensor logits = f32({0, 5}).set_requires_grad();
  const Tensor loss = cross_entropy(logits, i64({0}));
  EXPECT_TRUE(std::isnan(loss.item()));
  autograd::backward(loss);
  EXPECT_EQ(logits.grad().shape(), (Shape{0, 5}));
}

// ----- NaN and Inf ------------------------------------------------------------------------

TEST(Ch04_NonFinite, ElementwiseAndReductionsPropagate) {
  const Tensor x = values({1, kNaN, kInf, -kInf});
  const auto sum_xy = add(x, values({1, 1, 1, 1})).to_vector<double>();
  EXPECT_EQ(sum_xy[0], 2);
  EXPECT_TRUE(std::isnan(sum_xy[1]));
  EXPECT_EQ(sum_xy[2], kInf);
  EXPECT_EQ(sum_xy[3], -kInf);
  EXPECT_EQ(exp(values({kInf})).item(), kInf);
  EXPECT_EQ(exp(values({-kInf})).item(), 0.0);
  EXPECT_EQ(log(values({0})).item(), -kInf);
  EXPECT_TRUE(std::isnan(log(values({-1})).item()));
  EXPECT_TRUE(std::isnan(sqrt(values({-1})).item()));
  EXPECT_EQ(div(values({1}), values({0})).item(), kInf);
  EXPECT_EQ(div(values({-1}), 0.0).item(), -kInf);
  EXPECT_TRUE(std::isnan(sum(values({1, kNaN})).item()));
  EXPECT_TRUE(std::isnan(sum(values({kInf, -kInf})).item()));
  EXPECT_EQ(sum(values({kInf, 1})).item(), kInf);
  EXPECT_TRUE(std::isnan(mean(values({2, kNaN})).item()));
  // max: NaN wins over every number (first NaN's index); -inf is an ordinary value.
  const MaxResult m = max_with_indices(values({1, kNaN, 3, kNaN}), 0);
  EXPECT_TRUE(std::isnan(m.values.item()));
  EXPECT_EQ(m.indices.item(), 1);
  EXPECT_EQ(max(values({-kInf, -kInf})).item(), -kInf);
}

TEST(Ch04_NonFinite, MatmulPoisonsOnlyTheRowsAndColumnsItTouches) {
  // a row 0 holds a NaN: row 0 of the product is NaN, row 1 stays finite. b column 1 holds an
  // Inf: column 1 of the product is +-Inf or NaN, column 0 stays finite.
  const Tensor a = values({1, kNaN, 2, 3}, {2, 2});
  const Tensor b = values({1, kInf, 1, 1}, {2, 2});
  for (MatmulAlgo algo :
       {MatmulAlgo::kDefault, MatmulAlgo::kNaive, MatmulAlgo::kBlocked, MatmulAlgo::kEigen}) {
    SCOPED_TRACE(matmul_kernel_name(algo));
    const auto c = matmul(a, b, algo).to_vector<double>();
    EXPECT_TRUE(std::isnan(c[0]) && std::isnan(c[1]));
    EXPECT_EQ(c[2], 5.0);
    EXPECT_EQ(c[3], kInf);
  }
}

TEST(Ch04_NonFinite, NnOpsPropagatePerRow) {
  // softmax: a NaN poisons its row; a fully masked row (all -inf) and a +inf logit give NaN
  // (inf - inf), like PyTorch; -inf next to finite values is probability 0.
  const auto s = softmax(values({1, kNaN, 2, -kInf, -kInf, -kInf, 0, -kInf, 0, kInf, 0, 0}, {4, 3}))
                     .to_vector<double>();
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(std::isnan(s[i])) << i;
  EXPECT_EQ(s[6], 0.5);
  EXPECT_EQ(s[7], 0.0);
  EXPECT_EQ(s[8], 0.5);
  for (int i = 9; i < 12; ++i) EXPECT_TRUE(std::isnan(s[i])) << i;
  // layernorm: an Inf makes its own row NaN, the other row is untouched.
  const auto ln = layernorm(values({1, kInf, 3, 1, 2, 3}, {2, 3}),
                            ones({3}, {.dtype = DType::kFloat64}), f64({3}))
                      .to_vector<double>();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(ln[i])) << i;
  for (int i = 3; i < 6; ++i) EXPECT_TRUE(std::isfinite(ln[i])) << i;
  // gelu: +inf stays +inf, NaN stays NaN.
  const auto g = gelu(values({kInf, kNaN})).to_vector<double>();
  EXPECT_EQ(g[0], kInf);
  EXPECT_TRUE(std::isnan(g[1]));
  // cross-entropy: a NaN logit gives a NaN loss; a -inf target logit an infinite loss; -inf
  // on another class is just probability 0.
  const Tensor t = tensor_i64({0});
  EXPECT_TRUE(std::isnan(cross_entropy(values({kNaN, 0}, {1, 2}), t).item()));
  EXPECT_EQ(cross_entropy(values({-kInf, 0}, {1, 2}), t).item(), kInf);
  EXPECT_EQ(cross_entropy(values({0, -kInf}, {1, 2}), t).item(), 0.0);
  // embedding copies rows as they are.
  EXPECT_TRUE(std::isnan(embedding(values({kNaN, 1}, {2, 1}), tensor_i64({0})).item()));
}

}  // namespace
}  // namespace tt
