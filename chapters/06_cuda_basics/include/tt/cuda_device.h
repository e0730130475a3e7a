/// @file cuda_device.h
/// @brief The CUDA runtime as this project uses it: error checks that name the failing call,
/// the device guard, the one stream per device, launch sizing, and the memory allocators.
///
/// Only for CUDA builds (TT_WITH_CUDA): it includes the CUDA runtime API. Code that must also
/// build without CUDA uses Tensor::to(Device::cuda()) and the kernel registry instead.
///
/// **Streams.** All work of a device — kernels, copies, memsets — goes to one stream per device,
/// which is the *legacy default stream* (`cudaStreamLegacy`) of that device. Reasons: (1) one
/// stream orders everything, so the caching allocator may hand a freed block to the next
/// kernel without events; (2) the legacy stream synchronizes with every other blocking stream,
/// so libraries that use their own default (cuBLAS handles, NCCL, a user's `cudaMemcpy`)
/// interleave correctly without extra synchronization; (3) the same code works whether or not
/// it is compiled with `--default-stream per-thread`, because the handle is named explicitly.
/// The price is no overlap of copies with kernels, which this project does not need yet;
/// stream() is the one place to change when it does. (It changes during a CudaGraph capture:
/// the legacy stream cannot be captured, so stream() then returns the capture's own stream.)
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "tt/backend.h"
#include "tt/caching_allocator.h"

namespace tt::cuda {

/// "CUDA error <name> (<description>) in <expr> at <file>:<line>", e.g.
/// "CUDA error cudaErrorMemoryAllocation (out of memory) in cudaMalloc(&p, n) at x.cu:12".
std::string error_message(cudaError_t code, const char* expr, const char* file, int line);

namespace detail {
/// Throws tt::Error with error_message(code, expr, file, line). Clears the runtime's
/// last-error state first, so one failure is not reported again by the next check.
[[noreturn]] void throw_cuda_error(cudaError_t code, const char* expr, const char* file, int line);
}  // namespace detail

/// Number of CUDA devices (0 without a driver or GPU; never throws).
int device_count();

/// Throws tt::Error naming `op` when `index` is not a valid CUDA device number.
void check_device_index(int index, const char* op);

/// Makes `index` the current device for the lifetime of the guard and restores the previous
/// current device afterwards (CUDA's current device is per host thread).
class DeviceGuard {
 public:
  /// Switches to device `index` (no call when it already is current); throws on a bad index.
  explicit DeviceGuard(int index);
  /// Restores the device that was current at construction.
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

/// The stream all work of device `index` runs on: the legacy default stream (see the file
/// comment for why). Valid for the current device; use it under a DeviceGuard.
cudaStream_t stream(int index);

/// Number of streaming multiprocessors of device `index` (cached after the first query).
int multiprocessor_count(int index);

/// Bytes of dynamic shared memory one block may use on device `index` once its kernel opts in
/// (cudaDevAttrMaxSharedMemoryPerBlockOptin: 227 KiB on an H100; cached after the first query).
int max_shared_memory_optin(int index);

/// Lets `kernel` be launched with `bytes` of dynamic shared memory on device `index` (current).
/// Above 48 KiB a kernel must opt in with cudaFuncSetAttribute, a driver call that is made here
/// once per kernel and device (and again only for a larger size), not at every launch. Returns
/// false, changing nothing, when the device allows less (max_shared_memory_optin); the caller
/// then declines the launch or throws an error that names its op and shapes.
bool allow_dynamic_shared_memory(const void* kernel, std::size_t bytes, int index);

/// Threads per block of the element-wise and reduction kernels of this chapter.
inline constexpr int kBlockThreads = 256;

/// Blocks for a grid-stride loop over `n` work items with `threads` threads per block: enough
/// to cover `n`, at most what fills device `index` once (SMs x 2048 / threads resident
/// threads), and at least 1. Each thread then loops over items i, i + gridDim*blockDim, ...
unsigned grid_size(int64_t n, int threads, int index);

/// Turns the caching allocator on (the default) or off for allocations made after this call
/// (each Storage frees into the allocator it came from, so switching is always safe). Off means
/// one cudaMalloc/cudaFree per tensor: slower, but compute-sanitizer then sees every tensor's
/// exact bounds. The environment variable TT_CUDA_CACHING=0 switches it off at start.
void set_caching_enabled(bool enabled);
/// True when new CUDA allocations go through the caching allocator.
///
/// The environment variable TT_CUDA_MEMORY_LIMIT_MIB=N (read once) caps what each device may
/// hold from cudaMalloc at N MiB: a request above the cap fails as an out-of-memory does (the
/// caching allocator frees its cache, retries, then throws tt::Error "out of memory" naming the
/// cap), so a large GPU can show what fits on a smaller one.
bool caching_enabled();
/// The caching allocator of device `index`.
CachingAllocator& caching_allocator(int index);
/// Statistics of the allocator new allocations of device `index` currently go to.
AllocatorStats memory_stats(int index);
/// Returns the cached blocks of every device to the driver (cudaFree).
void empty_cache();
/// Restarts the peak of memory_stats(index): `peak_allocated` becomes the bytes allocated now.
/// With `num_system_allocs` (cudaMalloc calls) this measures one phase, e.g. one training step:
/// @code
///   cuda::reset_peak_memory_stats(0);
///   const auto before = cuda::memory_stats(0);
///   step();
///   const auto after = cuda::memory_stats(0);
///   // after.peak_allocated: the step's peak; after.num_system_allocs - before.num_system_allocs:
///   // its cudaMalloc calls (0 in a steady state)
/// @endcode
void reset_peak_memory_stats(int index);
/// Waits for all work queued on device `index` (counted as a host synchronization).
void synchronize(int index);

/// Host synchronizations of all devices since the start or the last reset.
///
/// Every place where this project's CUDA code makes the host wait for the GPU counts one *host
/// synchronization*: synchronize() (cudaDeviceSynchronize); a copy to the host (a device-to-host
/// cudaMemcpyAsync followed by cudaStreamSynchronize, e.g. Tensor::item()); a copy from the host
/// that cannot be staged (see below); a wait for a staging slot that is still being copied; a
/// cudaFree (which synchronizes the device); and the blocking calls that other code reports with
/// count_host_sync() (the profiler's cudaEventSynchronize). While the host waits, it queues no
/// work, so the GPU runs dry when the wait ends: a steady training step should do none until it
/// reads its results at the end (chapter 10, "A step without waste").
///
/// **Copies from the host do not synchronize.** The CUDA backend copies host data into a pinned
/// staging ring (32 MiB per device) on the host, queues an asynchronous copy from the ring to
/// the device, and returns: the caller's buffer may die at once, and the ring slot is reused
/// only after an event recorded behind its copy has completed. Copies larger than half the ring
/// are made synchronously (and counted).
int64_t host_sync_count();
/// Sets host_sync_count() to 0.
void reset_host_sync_count();
/// Counts one host synchronization made outside the CUDA backend (code that calls
/// cudaEventSynchronize, cudaStreamSynchronize, ... itself reports it here).
void count_host_sync();

/// A CUDA graph of the work one piece of host code queues on a device: captured once, replayed
/// with one launch (no per-kernel launch cost, no host work in between).
///
/// During capture() the device's work goes to a private capture stream (stream() returns it),
/// so nothing runs: the kernels, copies and memsets are recorded with their arguments, pointers
/// included. Three things make that safe:
///  - **Memory**: CUDA tensors allocated during the capture come from the graph's private pool,
///    and their blocks stay reserved for the graph when they are freed (a replay writes them
///    again); tensors that outlive the capture (e.g. gradients) keep their addresses, so the
///    host reads the replay's results through them. The pool goes back to the caching
///    allocator when the graph is destroyed.
///  - **Host data**: copies from the host are staged in pinned buffers that the graph keeps, so
///    each replay copies the same bytes again. Inputs that change from replay to replay must be
///    copied (outside the capture) into device tensors that the captured work reads.
///  - **No waiting**: anything that waits for the GPU during the capture (Tensor::item(), a copy
///    to the host, synchronize()) throws tt::Error: a graph cannot contain a host decision.
/// Replays run on the device's usual stream, ordered with all other work.
class CudaGraph {
 public:
  /// An empty graph of device `index`.
  explicit CudaGraph(int index);
  /// Destroys the graph, frees its staging buffers and returns its pool to the allocator.
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  /// Records what `work` queues on the device (nothing runs). Throws tt::Error when a graph is
  /// already captured, another capture is in progress, or `work` throws or does something a
  /// graph cannot hold (the message names the cause); the graph stays empty then.
  void capture(const std::function<void()>& work);
  /// Queues one replay on the device's stream (does not wait). Throws when nothing is captured.
  void replay();
  /// True after a successful capture().
  bool captured() const { return exec_ != nullptr; }
  /// Nodes (kernels, copies, memsets) in the captured graph.
  std::size_t num_nodes() const { return num_nodes_; }

 private:
  int index_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  std::size_t num_nodes_ = 0;
  std::shared_ptr<void> pool_;  // the private memory pool (cuda_backend.cu)
  std::vector<void*> pinned_;   // staging buffers of the captured host copies
};

/// True while a CudaGraph of device `index` is capturing.
bool is_capturing(int index);

}  // namespace tt::cuda

/// Evaluates a CUDA runtime call and throws tt::Error naming the error, the call text, the file
/// and the line when it does not return cudaSuccess:
/// `TT_CUDA_CHECK(cudaMalloc(&p, n));`
#define TT_CUDA_CHECK(expr)                                                             \
  do {                                                                                  \
    const cudaError_t tt_cuda_status_ = (expr);                                         \
    if (tt_cuda_status_ != cudaSuccess) [[unlikely]] {                                  \
      ::tt::cuda::detail::throw_cuda_error(tt_cuda_status_, #expr, __FILE__, __LINE__); \
    }                                                                                   \
  } while (0)

/// Checks the launch that was just made, naming the kernel (a string literal):
/// `kernel<<<grid, block, 0, stream>>>(...); TT_CUDA_CHECK_LAUNCH("binary_vec16_kernel");`.
/// A bad configuration (too many threads, too much shared memory) is reported here. Errors
/// raised while the kernel runs surface at the next synchronizing call; run with
/// CUDA_LAUNCH_BLOCKING=1 to make every launch synchronous and pin such errors to their launch.
#define TT_CUDA_CHECK_LAUNCH(kernel_name)                                                       \
  do {                                                                                          \
    const cudaError_t tt_cuda_status_ = cudaGetLastError();                                     \
    if (tt_cuda_status_ != cudaSuccess) [[unlikely]] {                                          \
      ::tt::cuda::detail::throw_cuda_error(tt_cuda_status_, "launch of " kernel_name, __FILE__, \
                                           __LINE__);                                           \
    }                                                                                           \
  } while (0)
