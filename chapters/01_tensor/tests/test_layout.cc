// Tests of the chapter 01 exercises: element offsets, views, permute, slice, expand,
// squeeze/unsqueeze and the strided walk. Inputs are built with given code only (from_vector,
// explicit strides) so each test fails with its own exercise id on the starter.
#include <numeric>

#include "tt/tensor.h"
#include "tt/testing.h"

namespace tt {
namespace {

// 0, 1, ..., n-1 as float32 with the given shape (given code only: empty + memcpy).
Tensor iota(const Shape& shape) {
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  std::iota(v.begin(), v.end(), 0.0f);
  return from_vector(v, shape);
}

// ----- ch01.1 element_offset ------------------------------------------------------------------

TEST(Ch01_1_ElementOffset, RowMajorOffsets) {
  Tensor t = iota({2, 3, 4});
  EXPECT_EQ(t.element_offset({0, 0, 0}), 0);
  EXPECT_EQ(t.element_offset({1, 2, 3}), 12 + 8 + 3);
  EXPECT_EQ(t.element_offset({-1, -1, -1}), 23);  // negative indices count from the end
  EXPECT_EQ(t.at<float>({1, 0, 2}), 14.0f);
}

TEST(Ch01_1_ElementOffset, UsesStridesAndOffset) {
  // A hand-made transposed view of a 2x3 matrix, starting one element in.
  auto storage = iota({7}).storage();
  Tensor t(storage, {3, 2}, {1, 3}, 1, DType::kFloat32);
  EXPECT_EQ(t.element_offset({0, 0}), 1);
  EXPECT_EQ(t.element_offset({2, 1}), 1 + 2 + 3);
  EXPECT_EQ(t.at<float>({2, 1}), 6.0f);
}

TEST(Ch01_1_ElementOffset, RejectsBadIndicesNamingTheShape) {
  Tensor t = iota({2, 3});
  EXPECT_TT_ERROR(t.element_offset({2, 0}), "[2, 3]", "out of range");
  EXPECT_TT_ERROR(t.element_offset({0, -4}), "[2, 3]");
  EXPECT_TT_ERROR(t.element_offset({0}), "[2, 3]");
}

// ----- ch01.2 view ----------------------------------------------------------------------------

TEST(Ch01_2_View, ContiguousViewsShareStorage) {
  Tensor t = iota({2, 3, 4});
  Tensor v = t.view({6, 4});
  EXPECT_EQ(v.shape(), (Shape{6, 4}));
  EXPECT_EQ(v.strides(), (Strides{4, 1}));
  EXPECT_EQ(v.data_ptr(), t.data_ptr());
  Tensor w = t.view({4, -1});
  EXPECT_EQ(w.shape(), (Shape{4, 6}));
  EXPECT_EQ(w.storage(), t.storage());
}

TEST(Ch01_2_View, ComputeViewStridesOnNonContiguousInput) {
  // A [4, 6] matrix sliced to columns 0..2: shape [4, 3], strides [6, 1].
  auto st = compute_view_strides({4, 3}, {6, 1}, {2, 2, 3});
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(*st, (Strides{12, 6, 1}));
  // Merging the rows of that slice would need a copy.
  EXPECT_FALSE(compute_view_strides({4, 3}, {6, 1}, {12}).has_value());
  // A transposed [3, 2] (strides [1, 3]) cannot be flattened without a copy ...
  EXPECT_FALSE(compute_view_strides({3, 2}, {1, 3}, {6}).has_value());
  // ... but adding size-1 dims is always possible.
  auto st2 = compute_view_strides({3, 2}, {1, 3}, {3, 1, 2});
  ASSERT_TRUE(st2.has_value());
  EXPECT_EQ((*st2)[0], 1);
  EXPECT_EQ((*st2)[2], 3);
  // Expanded (stride 0) dims stay stride 0 when split.
  auto st3 = compute_view_strides({4, 6}, {0, 1}, {2, 2, 6});
  ASSERT_TRUE(st3.has_value());
  EXPECT_EQ(*st3, (Strides{0, 0, 1}));
}

TEST(Ch01_2_View, ErrorsNameShapes) {
  Tensor t = iota({2, 3});
  EXPECT_TT_ERROR(t.view({7}), "[7]", "6 elements");
  EXPECT_TT_ERROR(t.view({-1, -1}), "only one dimension can be -1");
  Tensor nc(t.storage(), {3, 2}, {1, 3}, 0, DType::kFloat32);  // transposed
  EXPECT_TT_ERROR(nc.view({6}), "view", "[6]", "[3, 2]", "reshape");
}

TEST(Ch01_2_View, ReshapeCopiesOnlyWhenNeeded) {
  Tensor t = iota({2, 3});
  EXPECT_EQ(t.reshape({3, 2}).data_ptr(), t.data_ptr());
  Tensor nc(t.storage(), {3, 2}, {1, 3}, 0, DType::kFloat32);  // transposed
  Tensor r = nc.reshape({6});
  EXPECT_NE(r.data_ptr(), t.data_ptr());
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

// ----- ch01.3 permute -------------------------------------------------------------------------

TEST(Ch01_3_Permute, ReordersShapeAndStridesWithoutCopy) {
  Tensor t = iota({2, 3, 4});
  Tensor p = t.permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Strides{1, 12, 4}));
  EXPECT_EQ(p.data_ptr(), t.data_ptr());
  EXPECT_FALSE(p.is_contiguous());
  Tensor tr = t.transpose(0, -1);
  EXPECT_EQ(tr.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(tr.strides(), (Strides{1, 4, 12}));
}

TEST(Ch01_3_Permute, ValuesFollowTheNewOrder) {
  Tensor t = iota({2, 3});
  Tensor p = t.permute({1, 0});
  EXPECT_EQ(p.contiguous().to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(Ch01_3_Permute, RejectsNonPermutations) {
  Tensor t = iota({2, 3});
  EXPECT_TT_ERROR(t.permute({0, 0}), "permute", "[2, 3]");
  EXPECT_TT_ERROR(t.permute({0}), "permute", "[2, 3]");
  EXPECT_TT_ERROR(t.permute({0, 2}), "permute", "out of range");
}

// ----- ch01.4 slice / narrow / select ----------------------------------------------------------

TEST(Ch01_4_Slice, OffsetSizeAndStride) {
  Tensor t = iota({4, 6});
  Tensor s = t.slice(1, 1, 6, 2);  // columns 1, 3, 5
  EXPECT_EQ(s.shape(), (Shape{4, 3}));
  EXPECT_EQ(s.strides(), (Strides{6, 2}));
  EXPECT_EQ(s.offset(), 1);
  EXPECT_EQ(s.storage(), t.storage());
  Tensor n = t.narrow(0, 1, 2);
  EXPECT_EQ(n.shape(), (Shape{2, 6}));
  EXPECT_EQ(n.offset(), 6);
  Tensor c = t.slice(0, -2, 100);  // negative start, end clamped
  EXPECT_EQ(c.shape(), (Shape{2, 6}));
  EXPECT_EQ(c.offset(), 12);
}

TEST(Ch01_4_Slice, SelectAndValues) {
  Tensor t = iota({3, 4});
  EXPECT_EQ(t.slice(1, 1, 3).contiguous().to_vector<float>(),
            (std::vector<float>{1, 2, 5, 6, 9, 10}));
  Tensor row = t.select(0, -1);
  EXPECT_EQ(row.shape(), (Shape{4}));
  EXPECT_EQ(row.to_vector<float>(), (std::vector<float>{8, 9, 10, 11}));
}

TEST(Ch01_4_Slice, WritesThroughAViewReachTheBase) {
  Tensor t = iota({2, 3});
  t.slice(1, 0, 1).fill_(-1);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{-1, 1, 2, -1, 4, 5}));
}

TEST(Ch01_4_Slice, Errors) {
  Tensor t = iota({2, 3});
  EXPECT_TT_ERROR(t.slice(0, 0, 1, 0), "step");
  EXPECT_TT_ERROR(t.slice(2, 0, 1), "dim 2", "out of range");
  EXPECT_TT_ERROR(t.narrow(1, 2, 2), "narrow", "[2, 3]");
}

// ----- ch01.5 expand --------------------------------------------------------------------------

TEST(Ch01_5_Expand, BroadcastDimsGetStrideZero) {
  Tensor t = iota({3, 1});
  Tensor e = t.expand({2, 3, 4});
  EXPECT_EQ(e.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(e.strides(), (Strides{0, 1, 0}));
  EXPECT_EQ(e.data_ptr(), t.data_ptr());
  Tensor k = t.expand({-1, 5});
  EXPECT_EQ(k.shape(), (Shape{3, 5}));
}

TEST(Ch01_5_Expand, ValuesRepeat) {
  Tensor row = iota({3});
  EXPECT_EQ(row.expand({2, 3}).contiguous().to_vector<float>(),
            (std::vector<float>{0, 1, 2, 0, 1, 2}));
}

TEST(Ch01_5_Expand, RejectsNonSingletonMismatch) {
  Tensor t = iota({2, 3});
  EXPECT_TT_ERROR(t.expand({2, 4}), "expand", "[2, 3]", "[2, 4]");
  EXPECT_TT_ERROR(t.expand({3}), "expand", "[2, 3]");
}

// ----- ch01.6 squeeze / unsqueeze -------------------------------------------------------------

TEST(Ch01_6_Squeeze, UnsqueezeThenSqueezeRoundTrips) {
  Tensor t = iota({2, 3});
  Tensor u = t.unsqueeze(1);
  EXPECT_EQ(u.shape(), (Shape{2, 1, 3}));
  EXPECT_TRUE(u.is_contiguous());
  EXPECT_EQ(u.data_ptr(), t.data_ptr());
  EXPECT_EQ(t.unsqueeze(-1).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(t.unsqueeze(0).shape(), (Shape{1, 2, 3}));
  Tensor s = u.squeeze(1);
  EXPECT_EQ(s.shape(), t.shape());
  EXPECT_EQ(s.strides(), t.strides());
  EXPECT_EQ(iota({1, 2, 1}).squeeze().shape(), (Shape{2}));
}

TEST(Ch01_6_Squeeze, RejectsNonSingleton) {
  Tensor t = iota({2, 3});
  EXPECT_TT_ERROR(t.squeeze(0), "squeeze", "[2, 3]", "size 2");
  EXPECT_TT_ERROR(t.unsqueeze(4), "unsqueeze", "out of range");
}

// ----- ch01.7 strided walk / copy -------------------------------------------------------------

TEST(Ch01_7_StridedOffsets, WalksAnyLayout) {
  // Shape [2, 3]: a row-major side and a transposed side.
  std::vector<int64_t> oa(6), ob(6);
  strided_offsets({2, 3}, {3, 1}, {1, 2}, 0, 6, oa.data(), ob.data());
  EXPECT_EQ(oa, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(ob, (std::vector<int64_t>{0, 2, 4, 1, 3, 5}));
  // Starting in the middle, with a broadcast (stride 0) dim.
  std::vector<int64_t> pa(3), pb(3);
  strided_offsets({2, 3}, {3, 1}, {0, 1}, 2, 3, pa.data(), pb.data());
  EXPECT_EQ(pa, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(pb, (std::vector<int64_t>{2, 0, 1}));
}

TEST(Ch01_7_StridedOffsets, CopyIntoNonContiguousDestination) {
  Tensor t = zeros({3, 2});
  Tensor dst(t.storage(), {2, 3}, {1, 2}, 0, DType::kFloat32);  // transposed view of t
  dst.copy_(iota({2, 3}));
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(Ch01_7_StridedOffsets, CopyConvertsDtypes) {
  Tensor d = empty({2, 2}, {.dtype = DType::kFloat64});
  Tensor src(iota({4}).storage(), {2, 2}, {1, 2}, 0, DType::kFloat32);
  d.copy_(src);
  EXPECT_EQ(d.to_vector<double>(), (std::vector<double>{0, 2, 1, 3}));
}

}  // namespace
}  // namespace tt
