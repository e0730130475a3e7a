// ============================================================================================
// YOUR EXERCISE FILE for chapter 06_cuda_basics. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch06
// Generated from solutions/06_cuda_basics/strided_indexer.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
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
  TT_TODO("ch06.1",
          "make_strided_indexer: an indexer, outermost dim first, whose offsets(i) are the "
          "offsets in a and b of row-major element i of shape, with size-1 dims dropped and dims "
          "merged wherever both a and b step over them contiguously; tt::Error if more than "
          "kMaxIndexerDims remain");
}

}  // namespace tt::cuda
