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
#if TT_SOLUTION
  int64_t bytes = 0;  // of the current bucket
  for (int64_t i = static_cast<int64_t>(params.size()) - 1; i >= 0; --i) {
    const Tensor& p = params[static_cast<std::size_t>(i)];
    const int64_t nbytes = p.numel() * static_cast<int64_t>(dtype_size(p.dtype()));
    const bool fits =
        !buckets.empty() && buckets.back().dtype == p.dtype() && bytes + nbytes <= bucket_cap_bytes;
    if (!fits && (buckets.empty() || !buckets.back().entries.empty())) {
      buckets.push_back(Bucket{{}, 0, p.dtype()});
      bytes = 0;
    }
    Bucket& b = buckets.back();
    b.entries.push_back(BucketEntry{i, b.numel, p.numel()});
    b.numel += p.numel();
    bytes += nbytes;
  }
#else
  TT_TODO("ch12.2",
          "assign_buckets: every parameter in exactly one bucket, taken from params.back() to "
          "params.front(), at consecutive offsets; a new bucket when the next one would exceed "
          "bucket_cap_bytes (an oversized parameter alone) or has another dtype");
#endif
  return buckets;
}

}  // namespace tt::dist
