// Tests of exercises ch04.1 (broadcast_shapes) and ch04.2 (sum_to_shape).
#include "ch04_test_util.h"
#include "tt/functional.h"

namespace tt {
namespace {

using test04::f64;

// ----- ch04.1 broadcast_shapes -----------------------------------------------------------------

TEST(Ch04_1_BroadcastShapes, NumpyRules) {
  EXPECT_EQ(broadcast_shapes({2, 3}, {2, 3}, "add"), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes({4, 1, 3}, {2, 1}, "add"), (Shape{4, 2, 3}));
  EXPECT_EQ(broadcast_shapes({3}, {2, 1}, "add"), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes({}, {5, 4}, "add"), (Shape{5, 4}));
  EXPECT_EQ(broadcast_shapes({1}, {}, "add"), (Shape{1}));
  EXPECT_EQ(broadcast_shapes({0, 1}, {1, 7}, "add"), (Shape{0, 7}));
}

TEST(Ch04_1_BroadcastShapes, IncompatibleShapesNameOpAndShapes) {
  EXPECT_TT_ERROR(broadcast_shapes({2, 3}, {4}, "mul"), "mul", "[2, 3]", "[4]");
  EXPECT_TT_ERROR(broadcast_shapes({2, 1, 3}, {5, 2}, "matmul"), "matmul", "[2, 1, 3]", "[5, 2]");
}

// ----- ch04.2 sum_to_shape ---------------------------------------------------------------------

TEST(Ch04_2_SumToShape, SumsLeadingAndExpandedDims) {
  // [2, 2, 3] -> [2, 1]: dim 0 was added by broadcasting, dim 2 was expanded from size 1.
  Tensor g = f64({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 2, 3});
  Tensor r = sum_to_shape(g, {2, 1});
  EXPECT_TENSOR_NEAR(r, f64({1 + 2 + 3 + 7 + 8 + 9, 4 + 5 + 6 + 10 + 11 + 12}, {2, 1}), 0, 0);
  EXPECT_TENSOR_NEAR(sum_to_shape(g, {3}), f64({22, 26, 30}, {3}), 0, 0);
  EXPECT_TENSOR_NEAR(sum_to_shape(g, {}), f64({78}, {}), 0, 0);
}

TEST(Ch04_2_SumToShape, SameShapeIsUnchangedAndBadShapesThrow) {
  Tensor g = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TENSOR_NEAR(sum_to_shape(g, {2, 3}), g, 0, 0);
  EXPECT_TENSOR_NEAR(sum_to_shape(g, {1, 3}), f64({5, 7, 9}, {1, 3}), 0, 0);
  // Leading dims of size 1 added by broadcasting (a batch of one row): nothing to add, so the
  // result is a view of grad, not a sum that copies every element (chapter 14's one-row
  // micro-batches reduce a [1, T, C] gradient to the [T, C] position embedding this way).
  const Tensor g1 = g.reshape({1, 1, 2, 3});
  const Tensor r1 = sum_to_shape(g1, {2, 3});
  EXPECT_EQ(r1.shape(), (Shape{2, 3}));
  EXPECT_EQ(r1.data_ptr(), g1.data_ptr()) << "summed where a view would do";
  EXPECT_TENSOR_NEAR(r1, g, 0, 0);
  EXPECT_TT_ERROR(sum_to_shape(g, {2}), "sum_to_shape", "[2, 3]", "[2]");
  EXPECT_TT_ERROR(sum_to_shape(g, {1, 2, 3, 4}), "sum_to_shape");
}

}  // namespace
}  // namespace tt
