// ============================================================================================
// YOUR EXERCISE FILE for chapter 12_data_parallel. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch12
// Generated from solutions/12_data_parallel/buckets.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 12 exercise ch12.2: gradient buckets in reverse registration order.
#include "tt/ddp.h"
#include "tt/todo.h"

namespace tt::dist {

std::vector<Bucket> assign_buckets(const std::vector<Tensor>& params, int64_t bucket_cap_bytes) {
  TT_CHECK(bucket_cap_bytes > 0, "assign_buckets: bucket_cap_bytes must be > 0, got ",
           bucket_cap_bytes);
  for (std::size_t i = 0; i < params.size(); ++i) {
    TT_CHECK(params[i].defined(), "assign_buckets: parameter ", i, " is undefined");
  }
  std::vector<Bucket> buckets;
  TT_TODO("ch12.2",
          "assign_buckets: every parameter in exactly one bucket, taken from params.back() to "
          "params.front(), at consecutive offsets; a new bucket when the next one would exceed "
          "bucket_cap_bytes (an oversized parameter alone) or has another dtype");
  return buckets;
}

}  // namespace tt::dist
