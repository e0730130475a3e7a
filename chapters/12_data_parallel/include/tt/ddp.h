/// @file ddp.h
/// @brief Data-parallel training: gradient buckets, the bucket reducer and
/// DistributedDataParallel with no_sync (exercises ch12.2 and ch12.3).
///
/// Every rank holds the whole model and computes gradients on its own part of the global
/// batch; averaging the gradients over the ranks gives every rank the gradient of the global
/// batch, so the ranks' optimizer steps stay identical. Averaging parameter by parameter would
/// send many small messages (each pays the latency alpha), so gradients are packed into
/// buckets of ~25 MB, one all-reduce each. Backward produces the last layers' gradients first,
/// so buckets are filled in REVERSE registration order: the first bucket is complete earliest
/// and its all-reduce can start while backward still runs (overlap).
///
/// Overlap needs a hook in the autograd engine that calls Reducer::mark_grad_ready(i) as soon as
/// parameter i's gradient is final (after its AccumulateGrad node ran). Until chapter 03 has that
/// hook, DistributedDataParallel::sync_gradients() marks every parameter after backward, in
/// reverse order: the same code path, with no overlap.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tt/dist.h"
#include "tt/module.h"

namespace tt::dist {

/// Where one parameter's gradient lives in its bucket's flat buffer.
struct BucketEntry {
  int64_t param;   ///< index in the parameter list
  int64_t offset;  ///< first element in the bucket buffer
  int64_t numel;   ///< number of elements
};

/// A group of gradients all-reduced together as one flat buffer.
struct Bucket {
  std::vector<BucketEntry> entries;  ///< in packing order (reverse registration order)
  int64_t numel = 0;                 ///< elements of the flat buffer (sum of entries' numel)
  DType dtype = DType::kFloat32;     ///< dtype shared by every gradient of the bucket
};

/// Default bucket capacity of DistributedDataParallel (PyTorch's bucket_cap_mb = 25).
inline constexpr int64_t kDefaultBucketCapBytes = 25 * 1024 * 1024;

/// Groups `params` into buckets (exercise ch12.2): parameters are taken in REVERSE order
/// (params.back() first) and appended to the current bucket at consecutive offsets; a new bucket
/// starts when the next parameter would push the current one past `bucket_cap_bytes` (a
/// parameter larger than the cap gets a bucket of its own) or has another dtype. Every parameter
/// is in exactly one bucket. bucket_cap_bytes must be > 0.
std::vector<Bucket> assign_buckets(const std::vector<Tensor>& params, int64_t bucket_cap_bytes);

/// Averages gradients over a ProcessGroup, one all-reduce per bucket, in bucket order.
///
/// Protocol per backward: mark_grad_ready(i) once for each parameter whose gradient is final
/// (the autograd hook, in any order), then finalize_backward(). Bucket b is all-reduced as soon
/// as all its parameters are ready AND buckets 0..b-1 have been launched: every rank then issues
/// the same all-reduces in the same order, even if their gradients become ready in another
/// order (a different order would pair unrelated buffers across ranks).
class Reducer {
 public:
  /// Checks that `buckets` place every parameter exactly once, contiguously, with the
  /// parameter's numel and dtype, and allocates one flat buffer per bucket.
  Reducer(std::vector<Tensor> params, std::vector<Bucket> buckets, ProcessGroup& group);

  /// Parameter `param`'s gradient is final for this backward (exercise ch12.3): counts it in
  /// its bucket and all-reduces (reduce_bucket) every bucket, in order, from the next one not
  /// yet reduced up to the first that is still incomplete. Does nothing when disabled
  /// (no_sync). Throws tt::Error when `param` is out of range or marked twice in one backward.
  void mark_grad_ready(int64_t param);
  /// Ends a backward: marks the parameters not yet ready (in reverse order, which reduces every
  /// remaining bucket), checks that every bucket was reduced, and resets for the next backward.
  /// Does nothing when disabled.
  void finalize_backward();

  /// Enables or disables communication (DistributedDataParallel::no_sync disables it).
  void set_enabled(bool enabled) { enabled_ = enabled; }
  /// False inside no_sync.
  bool enabled() const { return enabled_; }
  /// The buckets.
  const std::vector<Bucket>& buckets() const { return buckets_; }
  /// Bucket indices in the order they were all-reduced during the last completed backward.
  const std::vector<int64_t>& reduced_order() const { return last_reduced_order_; }
  /// All-reduces issued since construction.
  int64_t num_reductions() const { return num_reductions_; }

 private:
  /// All-reduces bucket b (part of ch12.3): packs its gradients into the flat buffer (an
  /// undefined gradient counts as zeros and becomes a zero tensor), averages the buffer over
  /// the group, and copies the averages back into every gradient.
  void reduce_bucket(int64_t b);
  void reset();

  std::vector<Tensor> params_;
  std::vector<Bucket> buckets_;
  ProcessGroup& group_;
  std::vector<Tensor> buffers_;              // one flat buffer per bucket
  std::vector<int64_t> bucket_of_;           // parameter -> bucket
  std::vector<int64_t> pending_;             // bucket -> parameters not yet ready
  std::vector<char> ready_;                  // parameter -> marked in this backward
  int64_t next_bucket_ = 0;                  // first bucket not yet reduced
  std::vector<int64_t> reduced_order_;       // this backward (reduce_bucket appends)
  std::vector<int64_t> last_reduced_order_;  // the last completed backward
  int64_t num_reductions_ = 0;
  bool enabled_ = true;
};

/// Options of DistributedDataParallel.
struct DdpOptions {
  int64_t bucket_cap_bytes = kDefaultBucketCapBytes;  ///< bucket capacity (assign_buckets)
};

/// Wraps a module for data-parallel training: at construction every parameter and buffer is
/// broadcast from rank 0 (all ranks start identical); after each backward, sync_gradients()
/// averages the gradients over the group (Reducer). Use with any optimizer built on
/// module().parameters(): every rank then takes the same step.
///
/// Gradient accumulation: backwards inside `auto guard = ddp.no_sync();` only accumulate
/// locally; the first sync_gradients() after the guard averages the accumulated sum once.
class DistributedDataParallel {
 public:
  /// Broadcasts `module`'s parameters and buffers from rank 0 and builds the buckets.
  DistributedDataParallel(std::shared_ptr<nn::Module> module, ProcessGroup& group,
                          DdpOptions options = {});
  /// module().forward(input).
  Tensor forward(const Tensor& input) { return module_->forward(input); }
  /// The wrapped module.
  nn::Module& module() const { return *module_; }
  /// The reducer (buckets, statistics).
  Reducer& reducer() { return reducer_; }
  /// The process group.
  ProcessGroup& group() const { return group_; }
  /// Call after loss.backward(): averages the gradients over the ranks (nothing inside
  /// no_sync). With an autograd post-accumulate-grad hook this only reduces what is left.
  void sync_gradients() { reducer_.finalize_backward(); }

  /// Disables gradient synchronisation for its lifetime (restores the previous state).
  class NoSyncGuard {
   public:
    /// Disables `reducer`.
    explicit NoSyncGuard(Reducer& reducer) : reducer_(reducer), prev_(reducer.enabled()) {
      reducer_.set_enabled(false);
    }
    ~NoSyncGuard() { reducer_.set_enabled(prev_); }
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    Reducer& reducer_;
    bool prev_;
  };
  /// `{ auto guard = ddp.no_sync(); loss.backward(); ddp.sync_gradients(); }` accumulates
  /// without communicating.
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(reducer_); }

 private:
  std::shared_ptr<nn::Module> module_;
  ProcessGroup& group_;
  Reducer reducer_;
};

/// Broadcasts every tensor of `tensors` from `root` in place (parameters at start-up).
void broadcast_tensors(ProcessGroup& group, const std::vector<Tensor>& tensors, int root = 0);

}  // namespace tt::dist
