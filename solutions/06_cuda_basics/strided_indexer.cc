// Chapter 06 exercise ch06.1: packing (shape, strides) of two operands into the StridedIndexer
// that every strided CUDA kernel of this chapter receives, merging dims where possible.
#include "tt/strided_indexer.h"

#include <vector>

#include "tt/todo.h"

namespace tt::cuda {

StridedIndexer make_strided_indexer(const Shape& shape, const Strides& a, const Strides& b) {
  TT_CHECK(a.size() == shape.size() && b.size() == shape.size(), "make_strided_indexer: shape ",
           shape, " has ", shape.size(), " dims but the strides ", a, " and ", b, " have ",
           a.size(), " and ", b.size());
#if TT_SOLUTION
  // Collect the dims innermost first. A dim of size 1 contributes nothing to any offset. A dim
  // merges into the current innermost run (size n, strides sa, sb) when stepping it once equals
  // stepping the run n times in both operands; broadcast dims (stride 0) merge with each other.
  std::vector<int64_t> sizes, sa, sb;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    if (shape[d] == 1) continue;
    if (!sizes.empty() && a[d] == sa.back() * sizes.back() && b[d] == sb.back() * sizes.back()) {
      sizes.back() *= shape[d];
      continue;
    }
    sizes.push_back(shape[d]);
    sa.push_back(a[d]);
    sb.push_back(b[d]);
  }
  TT_CHECK(sizes.size() <= static_cast<std::size_t>(kMaxIndexerDims),
           "make_strided_indexer: shape ", shape, " with strides ", a, " and ", b, " still has ",
           sizes.size(), " dims after merging; at most ", kMaxIndexerDims, " are supported");
  StridedIndexer idx;
  idx.ndim = static_cast<int>(sizes.size());
  for (int k = 0; k < idx.ndim; ++k) {
    const std::size_t from = sizes.size() - 1 - static_cast<std::size_t>(k);  // back to outer first
    idx.sizes[k] = sizes[from];
    idx.strides_a[k] = sa[from];
    idx.strides_b[k] = sb[from];
  }
  return idx;
#else
  TT_TODO("ch06.1",
          "make_strided_indexer: an indexer, outermost dim first, whose offsets(i) are the "
          "offsets in a and b of row-major element i of shape, with size-1 dims dropped and dims "
          "merged wherever both a and b step over them contiguously; tt::Error if more than "
          "kMaxIndexerDims remain");
#endif
}

}  // namespace tt::cuda
