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
/// Overlap: DistributedDataParallel registers a post-accumulate-grad hook (chapter 03's
/// register_post_accumulate_grad_hook) on every parameter; it calls Reducer::mark_grad_ready(i)
/// as soon as parameter i's gradient is final (its last AccumulateGrad node of this backward
/// ran). When that completes a bucket, the bucket's all-reduce is STARTED (nonblocking:
/// ProcessGroup::all_reduce_async) while backward goes on; sync_gradients() after backward waits
/// for them all and copies the averages back (Reducer::finalize_backward). Reducer::timeline()
/// tells, per bucket, when it became ready and when its communication started and finished.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "tt/autograd.h"
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

/// When one bucket's events happened in a backward (steady_clock; see Reducer::timeline()).
struct BucketTiming {
  std::chrono::steady_clock::time_point ready;     ///< its last gradient was marked ready
  std::chrono::steady_clock::time_point started;   ///< its all-reduce was started
  std::chrono::steady_clock::time_point finished;  ///< its all-reduce was first seen complete
  /// On a GPU (NCCL): where its all-reduce began in the device's own timeline (read with
  /// DeviceMark::ms_since); nullptr on the CPU.
  std::shared_ptr<DeviceMark> device_begin;
  /// On a GPU (NCCL): where its all-reduce ended in the device's timeline; nullptr on the CPU.
  std::shared_ptr<DeviceMark> device_end;
};

/// The fraction (0..1) of a communication running from `begin` to `end` that is hidden behind
/// computation ending at `compute_end` (all in the same clock): the part of [begin, end] before
/// compute_end, over end - begin. A communication of zero length counts as hidden (1) when it
/// ends no later than compute_end, else 0. Throws tt::Error when end < begin.
double hidden_fraction(double begin, double end, double compute_end);

/// Averages gradients over a ProcessGroup, one all-reduce per bucket, in bucket order.
///
/// Protocol per backward: mark_grad_ready(i) once for each parameter whose gradient is final
/// (the autograd hook, in any order), then finalize_backward(). Bucket b's all-reduce is started
/// as soon as all its parameters are ready AND buckets 0..b-1 have been started: every rank then
/// issues the same all-reduces in the same order, even if their gradients become ready in
/// another order (a different order would pair unrelated buffers across ranks). The all-reduces
/// are nonblocking (ProcessGroup::all_reduce_async); finalize_backward() waits for them and
/// leaves each .grad a view of its bucket, which holds the averages. Each mark_grad_ready() also
/// polls the oldest all-reduce in flight (with MPI, a nonblocking collective progresses while
/// MPI is being called).
class Reducer {
 public:
  /// Checks that `buckets` place every parameter exactly once, contiguously, with the
  /// parameter's numel and dtype, and allocates one flat buffer per bucket. `op`: what each
  /// bucket's all-reduce computes, the average for data parallelism (chapter 13's sequence
  /// parallelism sums its replicated gradients with kSum).
  Reducer(std::vector<Tensor> params, std::vector<Bucket> buckets, ProcessGroup& group,
          ReduceOp op = ReduceOp::kAvg);

  /// Parameter `param`'s gradient is final for this backward (exercise ch12.3): counts it in
  /// its bucket and starts the all-reduce (reduce_bucket) of every bucket, in order, from the
  /// next one not yet started up to the first that is still incomplete. Does nothing when
  /// disabled (no_sync). Throws tt::Error when `param` is out of range or marked twice in one
  /// backward.
  void mark_grad_ready(int64_t param);
  /// Ends a backward: marks the parameters not yet ready (in reverse order, which starts every
  /// remaining bucket), checks that every bucket was started, waits for every all-reduce in
  /// bucket order and makes each .grad its view of its bucket (which holds the averages),
  /// records the timeline, and resets for the next backward. Does nothing when disabled.
  void finalize_backward();
  /// Clears the gradients for the next step IN the buckets: every bucket is filled with zeros
  /// and every parameter of at least `min_view_numel` elements gets its view of its bucket as
  /// .grad (again). Backward then adds into the buckets in place (chapter 03's AccumulateGrad,
  /// or an op that accumulates into .grad itself: gradient-accumulation fusion), so
  /// reduce_bucket has no gradient to copy in. Smaller parameters' gradients are set to none:
  /// for them an in-place add costs a kernel launch each (~8 us on an H200 however small),
  /// more than AccumulateGrad's copy of their first gradient and reduce_bucket's packing copy.
  /// The alternative for every parameter, zero_grad(set_to_none), frees nothing (the buckets
  /// stay allocated) and makes every backward's gradients be copied into the buckets.
  void zero_grad(int64_t min_view_numel = 0);

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
  /// Per bucket, when it became ready and when its all-reduce started and finished, in the last
  /// completed backward (empty before the first one, and after one inside no_sync).
  const std::vector<BucketTiming>& timeline() const { return last_timeline_; }
  /// When finalize_backward() of the last completed backward was called (the end of backward
  /// when it is called right after it) and when it returned.
  std::chrono::steady_clock::time_point finalize_called() const { return finalize_called_; }
  /// See finalize_called().
  std::chrono::steady_clock::time_point finalize_returned() const { return finalize_returned_; }
  /// On a GPU: the DeviceMark recorded on the compute stream when finalize_backward() of the
  /// last completed backward was called, before it queued anything: the GPU reaches it when
  /// backward's kernels have run (the end of backward on the GPU). nullptr on the CPU.
  const std::shared_ptr<DeviceMark>& backward_end_mark() const { return backward_end_mark_; }

 private:
  /// Starts bucket b's all-reduce (part of ch12.3): packs its gradients into the flat buffer
  /// (an undefined gradient counts as zeros and becomes a zero tensor) and starts one
  /// nonblocking all-reduce (op_: the average for DDP) of the buffer over the group, kept in
  /// works_[b]; finish_bucket(b) hands the result to the gradients. A gradient that already is its view of the buffer
  /// (left so by finish_bucket and accumulated into in place since) is not copied.
  void reduce_bucket(int64_t b);
  /// Waits for bucket b's all-reduce and makes each parameter's .grad its view of the bucket,
  /// which now holds the averages (given; no copy back: PyTorch's gradient_as_bucket_view).
  void finish_bucket(int64_t b);
  /// Polls the oldest all-reduce in flight, and the later ones while they are complete (records
  /// their finish time; lets MPI progress them all).
  void poll();
  void reset();

  std::vector<Tensor> params_;
  std::vector<Tensor> grad_views_;  // parameter -> its view of its bucket
  std::vector<Bucket> buckets_;
  ProcessGroup& group_;
  ReduceOp op_;                               // what each bucket's all-reduce computes
  std::vector<Tensor> buffers_;               // one flat buffer per bucket
  std::vector<int64_t> bucket_of_;            // parameter -> bucket
  std::vector<int64_t> pending_;              // bucket -> parameters not yet ready
  std::vector<char> ready_;                   // parameter -> marked in this backward
  int64_t next_bucket_ = 0;                   // first bucket not yet reduced
  int64_t polled_ = 0;                        // first bucket not yet seen complete by poll()
  std::vector<int64_t> reduced_order_;        // this backward (reduce_bucket appends)
  std::vector<int64_t> last_reduced_order_;   // the last completed backward
  std::vector<std::unique_ptr<Work>> works_;  // bucket -> its all-reduce in flight
  std::vector<BucketTiming> timeline_;        // this backward
  std::vector<BucketTiming> last_timeline_;   // the last completed backward
  std::chrono::steady_clock::time_point finalize_called_, finalize_returned_;
  std::shared_ptr<DeviceMark> backward_end_mark_;
  int64_t num_reductions_ = 0;
  bool enabled_ = true;
};

/// Options of DistributedDataParallel.
struct DdpOptions {
  int64_t bucket_cap_bytes = kDefaultBucketCapBytes;  ///< bucket capacity (assign_buckets)
  /// DistributedDataParallel::zero_grad leaves the gradients of parameters of at least this many
  /// elements in the buckets (Reducer::zero_grad); smaller ones (biases, LayerNorm) go the copy
  /// path. 0: every gradient lives in its bucket.
  int64_t bucket_view_min_numel = 65536;
};

/// Wraps a module for data-parallel training: at construction every parameter and buffer is
/// broadcast from rank 0 (all ranks start identical) and a post-accumulate-grad hook is
/// registered on every parameter, so each bucket's all-reduce starts during backward as soon as
/// its gradients are final; after each backward, sync_gradients() waits for them (Reducer).
/// Use with any optimizer built on module().parameters(): every rank then takes the same step.
/// Call sync_gradients() after every backward outside no_sync (a second backward before it
/// marks the parameters twice, which is an error). Not copyable or movable (the hooks point to
/// it); destroying it removes the hooks.
///
/// Gradient accumulation: backwards inside `auto guard = ddp.no_sync();` only accumulate
/// locally; the first sync_gradients() after the guard averages the accumulated sum once.
class DistributedDataParallel {
 public:
  /// Broadcasts `module`'s parameters and buffers from rank 0 and builds the buckets.
  DistributedDataParallel(std::shared_ptr<nn::Module> module, ProcessGroup& group,
                          DdpOptions options = {});
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;
  /// module().forward(input).
  Tensor forward(const Tensor& input) { return module_->forward(input); }
  /// The wrapped module.
  nn::Module& module() const { return *module_; }
  /// The reducer (buckets, statistics).
  Reducer& reducer() { return reducer_; }
  /// The process group.
  ProcessGroup& group() const { return group_; }
  /// Call after loss.backward(): starts the all-reduces of buckets not started during backward
  /// (those of unused parameters), waits for all, and leaves the averages in the gradients
  /// (nothing inside no_sync).
  void sync_gradients() { reducer_.finalize_backward(); }
  /// Zeroes the gradients for the next step in place, as views of the buckets
  /// (Reducer::zero_grad with DdpOptions::bucket_view_min_numel): use it instead of the
  /// optimizer's zero_grad(set_to_none), which would make every step copy its gradients into
  /// the buckets.
  void zero_grad() { reducer_.zero_grad(options_.bucket_view_min_numel); }

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
  DdpOptions options_;
  Reducer reducer_;
  std::vector<autograd::RemovableHandle> hooks_;  // last: removed before the reducer dies
};

/// Broadcasts every tensor of `tensors` from `root` in place (parameters at start-up).
void broadcast_tensors(ProcessGroup& group, const std::vector<Tensor>& tensors, int root = 0);

}  // namespace tt::dist
