// Exercise ch06.1: make_strided_indexer, tested on the host (StridedIndexer::offsets is the
// same code the kernels run), so these tests run on machines without a GPU.
#include <string>
#include <vector>

#include "tt/strided_indexer.h"
#include "tt/testing.h"

namespace tt {
namespace {

using cuda::make_strided_indexer;
using cuda::StridedIndexer;

// Reference offsets by the definition: multi-index of the row-major linear index, dotted with
// each operand's strides (independent of the code under test and of chapter 01's exercises).
std::vector<std::pair<int64_t, int64_t>> reference_offsets(const Shape& shape, const Strides& a,
                                                           const Strides& b) {
  std::vector<std::pair<int64_t, int64_t>> out;
  const int64_t n = shape_numel(shape);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, oa = 0, ob = 0;
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      const int64_t idx = rem % shape[d];
      rem /= shape[d];
      oa += idx * a[d];
      ob += idx * b[d];
    }
    out.emplace_back(oa, ob);
  }
  return out;
}

// Checks offsets(i) against the reference for every i, reporting the first difference.
void expect_offsets_match(const Shape& shape, const Strides& a, const Strides& b) {
  const StridedIndexer idx = make_strided_indexer(shape, a, b);
  const auto ref = reference_offsets(shape, a, b);
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const cuda::StridedOffsets off = idx.offsets(static_cast<int64_t>(i));
    const cuda::StridedOffsets off32 = idx.offsets(static_cast<uint32_t>(i));  // 32-bit divisions
    if (off.a != ref[i].first || off.b != ref[i].second || off32.a != off.a || off32.b != off.b) {
      ADD_FAILURE() << "shape " << shape_str(shape) << ", strides a " << shape_str(a) << ", b "
                    << shape_str(b) << " (indexer ndim " << idx.ndim << "): linear index " << i
                    << " gives offsets (" << off.a << ", " << off.b << "), with 32-bit index ("
                    << off32.a << ", " << off32.b << "), expected (" << ref[i].first << ", "
                    << ref[i].second << ")";
      return;
    }
  }
}

std::string dims_of(const StridedIndexer& idx) {
  std::string s;
  for (int k = 0; k < idx.ndim; ++k) {
    s += "(" + std::to_string(idx.sizes[k]) + ": " + std::to_string(idx.strides_a[k]) + ", " +
         std::to_string(idx.strides_b[k]) + ")";
  }
  return s;
}

TEST(Ch06_1_StridedIndexer, ContiguousMergesIntoOneDim) {
  const StridedIndexer idx = make_strided_indexer({2, 3, 4}, {12, 4, 1}, {12, 4, 1});
  EXPECT_EQ(dims_of(idx), "(24: 1, 1)") << "a contiguous layout needs no division per element";
}

TEST(Ch06_1_StridedIndexer, BroadcastLastDimKeepsTwoDims) {
  // [2, 3, 4] + [4] expanded: b's rows repeat, so the outer two dims merge but not with the last.
  const StridedIndexer idx = make_strided_indexer({2, 3, 4}, {12, 4, 1}, {0, 0, 1});
  EXPECT_EQ(dims_of(idx), "(6: 4, 0)(4: 1, 1)");
}

TEST(Ch06_1_StridedIndexer, SizeOneDimsAreDropped) {
  const StridedIndexer idx = make_strided_indexer({1, 5, 1, 3}, {99, 3, 7, 1}, {0, 1, 0, 5});
  EXPECT_EQ(dims_of(idx), "(5: 3, 1)(3: 1, 5)");
}

TEST(Ch06_1_StridedIndexer, TransposeDoesNotMerge) {
  const StridedIndexer idx = make_strided_indexer({4, 3}, {1, 4}, {3, 1});
  EXPECT_EQ(dims_of(idx), "(4: 1, 3)(3: 4, 1)");
}

TEST(Ch06_1_StridedIndexer, ZeroDimAndSingleElement) {
  EXPECT_EQ(make_strided_indexer({}, {}, {}).ndim, 0);
  EXPECT_EQ(make_strided_indexer({1, 1}, {5, 9}, {0, 0}).ndim, 0);
  const cuda::StridedOffsets off = make_strided_indexer({}, {}, {}).offsets(0);
  EXPECT_EQ(off.a, 0);
  EXPECT_EQ(off.b, 0);
}

TEST(Ch06_1_StridedIndexer, OffsetsMatchDefinition) {
  struct Case {
    Shape shape;
    Strides a, b;
  };
  const std::vector<Case> cases = {
      {{7}, {1}, {1}},
      {{129}, {2}, {0}},                              // step slice vs broadcast scalar
      {{3, 5}, {5, 1}, {1, 3}},                       // contiguous vs transposed
      {{4, 3, 5}, {15, 5, 1}, {0, 5, 0}},             // [4,3,5] + [1,3,1]
      {{2, 3, 4, 5}, {60, 20, 5, 1}, {0, 0, 0, 1}},   // bias over the last dim
      {{2, 3, 4, 5}, {1, 2, 6, 24}, {60, 20, 5, 1}},  // fully reversed vs contiguous
      {{3, 1, 4}, {4, 100, 1}, {8, 0, 2}},            // size-1 dim with an odd stride; sliced b
      {{6, 7}, {14, 2}, {0, 1}},                      // every other column
  };
  for (const Case& c : cases) expect_offsets_match(c.shape, c.a, c.b);
}

TEST(Ch06_1_StridedIndexer, TooManyDimsThrows) {
  // Nine dims of size 2 in reversed order: nothing can merge.
  Shape shape(9, 2);
  Strides rev(9), contig(9);
  for (int d = 0; d < 9; ++d) {
    rev[d] = int64_t{1} << d;
    contig[d] = int64_t{1} << (8 - d);
  }
  EXPECT_TT_ERROR(make_strided_indexer(shape, rev, contig), "make_strided_indexer", "9 dims",
                  "at most 8");
}

TEST(Ch06_1_StridedIndexer, MergedNineDimsFit) {
  // Nine dims that collapse (contiguous in both) are fine.
  Shape shape(9, 2);
  Strides contig(9);
  for (int d = 0; d < 9; ++d) contig[d] = int64_t{1} << (8 - d);
  EXPECT_EQ(make_strided_indexer(shape, contig, contig).ndim, 1);
}

TEST(Ch06_StridedIndexer, LengthMismatchThrows) {
  EXPECT_TT_ERROR(make_strided_indexer({2, 3}, {3, 1}, {1}), "make_strided_indexer", "[2, 3]",
                  "[3, 1]", "[1]");
}

TEST(Ch06_StridedIndexer, ContiguousIndexerIsOneDim) {
  const StridedIndexer idx = cuda::contiguous_indexer(10);
  EXPECT_EQ(dims_of(idx), "(10: 1, 1)");
  EXPECT_EQ(idx.offsets(7).a, 7);
}

}  // namespace
}  // namespace tt
