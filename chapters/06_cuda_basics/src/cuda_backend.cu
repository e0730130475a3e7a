// The CUDA runtime layer: error checks, device guard, stream, allocators, and the DeviceBackend
// of DeviceType::kCUDA.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tt/cuda_device.h"
#include "tt/cuda_ops.h"
#include "tt/cuda_probe.h"
#include "tt/tensor.h"

namespace tt::cuda {

namespace {
class GraphPool;

// What a CudaGraph capture of one device redirects: the stream, new allocations, host copies.
struct CaptureState {
  cudaStream_t stream = nullptr;
  GraphPool* pool = nullptr;
  std::vector<void*>* pinned = nullptr;  // staging buffers the graph keeps
};

constexpr int kMaxDevices = 64;

std::atomic<CaptureState*>& capture_slot(int index) {
  static std::atomic<CaptureState*> slots[kMaxDevices] = {};
  return slots[index];
}

// The capture in progress on device `index`, or nullptr.
CaptureState* capture_state(int index) {
  return index >= 0 && index < kMaxDevices ? capture_slot(index).load() : nullptr;
}

// Throws when device `index` is capturing: `what` would wait for the GPU.
void check_not_capturing(int index, const char* what) {
  TT_CHECK(capture_state(index) == nullptr, "cuda: ", what, " on cuda:", index,
           " during a CUDA graph capture: it would wait for the GPU, and a graph cannot hold a "
           "host decision (keep the value on the device, read it after replay())");
}
}  // namespace

bool is_capturing(int index) {
  return capture_state(index) != nullptr;
}

// ----- errors ------------------------------------------------------------------------------

std::string error_message(cudaError_t code, const char* expr, const char* file, int line) {
  return tt::detail::str("CUDA error ", cudaGetErrorName(code), " (", cudaGetErrorString(code),
                         ") in ", expr, " at ", file, ":", line);
}

namespace detail {
void throw_cuda_error(cudaError_t code, const char* expr, const char* file, int line) {
  (void)cudaGetLastError();  // reset the (non-sticky) last error that `code` also set
  throw Error(error_message(code, expr, file, line));
}
}  // namespace detail

// ----- devices and streams -----------------------------------------------------------------

int device_count() {
  return cuda_device_count();
}

void check_device_index(int index, const char* op) {
  const int n = device_count();
  TT_CHECK(index >= 0 && index < n, op, ": device cuda:", index, " is not available (",
           n == 0 ? std::string("no CUDA device is visible")
                  : tt::detail::str(n, " CUDA device(s): cuda:0..cuda:", n - 1),
           ")");
}

DeviceGuard::DeviceGuard(int index) {
  check_device_index(index, "DeviceGuard");
  TT_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != index) TT_CUDA_CHECK(cudaSetDevice(index));
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  // A destructor must not throw; restoring can only fail if the context is already broken.
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
  (void)cudaGetLastError();
}

cudaStream_t stream(int index) {
  check_device_index(index, "stream");
  if (const CaptureState* c = capture_state(index)) return c->stream;
  return cudaStreamLegacy;
}

namespace {
// Attribute `attr` of device `index`, asked of the driver once per device and attribute.
int cached_attribute(cudaDeviceAttr attr, int index, const char* op) {
  check_device_index(index, op);
  static std::mutex mutex;
  static std::map<std::pair<int, int>, int> cache;
  std::lock_guard<std::mutex> lock(mutex);
  const std::pair<int, int> key{static_cast<int>(attr), index};
  if (const auto it = cache.find(key); it != cache.end()) return it->second;
  int value = 0;
  TT_CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, index));
  return cache[key] = value;
}
}  // namespace

int multiprocessor_count(int index) {
  return cached_attribute(cudaDevAttrMultiProcessorCount, index, "multiprocessor_count");
}

int max_shared_memory_optin(int index) {
  return cached_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, index,
                          "max_shared_memory_optin");
}

bool allow_dynamic_shared_memory(const void* kernel, std::size_t bytes, int index) {
  if (bytes > static_cast<std::size_t>(max_shared_memory_optin(index))) return false;
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, std::size_t> allowed;  // what each kernel got
  std::lock_guard<std::mutex> lock(mutex);
  std::size_t& done = allowed[{kernel, index}];
  if (bytes > done) {
    TT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(bytes)));
    done = bytes;
  }
  return true;
}

unsigned grid_size(int64_t n, int threads, int index) {
  constexpr int64_t kMaxThreadsPerSm = 2048;  // sm_70 .. sm_90
  const int64_t wanted = (n + threads - 1) / threads;
  const int64_t resident = int64_t{multiprocessor_count(index)} * (kMaxThreadsPerSm / threads);
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(wanted, resident)));
}

// ----- host synchronizations ----------------------------------------------------------------

namespace {
std::atomic<int64_t>& sync_counter() {
  static std::atomic<int64_t> count{0};
  return count;
}
}  // namespace

int64_t host_sync_count() {
  return sync_counter().load();
}

void reset_host_sync_count() {
  sync_counter().store(0);
}

void count_host_sync() {
  sync_counter().fetch_add(1);
}

void synchronize(int index) {
  check_not_capturing(index, "synchronize()");
  DeviceGuard guard(index);
  count_host_sync();
  TT_CUDA_CHECK(cudaDeviceSynchronize());
}

// ----- allocators --------------------------------------------------------------------------

namespace {

// The bytes one device may hold from cudaMalloc: TT_CUDA_MEMORY_LIMIT_MIB (a positive integer)
// or no limit (0). Read once; a bad value throws at the first allocation.
std::size_t memory_limit_bytes() {
  static const std::size_t limit = [] {
    const char* env = std::getenv("TT_CUDA_MEMORY_LIMIT_MIB");
    if (env == nullptr || *env == '\0') return std::size_t{0};
    char* end = nullptr;
    const long long mib = std::strtoll(env, &end, 10);
    TT_CHECK(*end == '\0' && mib > 0,
             "TT_CUDA_MEMORY_LIMIT_MIB must be a positive number of MiB, "
             "got '",
             env, "'");
    return static_cast<std::size_t>(mib) << 20;
  }();
  return limit;
}

// cudaMalloc / cudaFree of one device. Under TT_CUDA_MEMORY_LIMIT_MIB a request that would take
// the device's cudaMalloc'ed bytes above the limit fails as a real out-of-memory does (nullptr):
// a smaller GPU, simulated (chapter 11 uses it to show what fits in 16 GiB).
class CudaRawAllocator final : public RawAllocator {
 public:
  explicit CudaRawAllocator(int index) : index_(index) {}
  void* raw_allocate(std::size_t nbytes) override {
    const std::size_t limit = memory_limit_bytes();
    const std::lock_guard<std::mutex> lock(mutex_);
    if (limit != 0 && held_ + nbytes > limit) return nullptr;  // the caller may free its cache
    DeviceGuard guard(index_);
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, nbytes);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;  // the caller may free its cache and retry
    }
    TT_CUDA_CHECK(status);
    held_ += nbytes;
    sizes_[p] = nbytes;
    return p;
  }
  void raw_free(void* ptr) noexcept override {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      const auto it = sizes_.find(ptr);
      if (it != sizes_.end()) {
        held_ -= it->second;
        sizes_.erase(it);
      }
    }
    int previous = -1;
    (void)cudaGetDevice(&previous);
    (void)cudaSetDevice(index_);
    count_host_sync();    // cudaFree waits for the device
    (void)cudaFree(ptr);  // cannot report from here (called from destructors)
    (void)cudaSetDevice(previous);
    (void)cudaGetLastError();
  }
  std::string device_name() const override {
    const std::size_t limit = memory_limit_bytes();
    return Device::cuda(index_).str() +
           (limit == 0 ? std::string()
                       : " (TT_CUDA_MEMORY_LIMIT_MIB=" + std::to_string(limit >> 20) + ")");
  }

 private:
  int index_;
  std::mutex mutex_;
  std::size_t held_ = 0;                          // bytes from cudaMalloc not yet freed
  std::unordered_map<void*, std::size_t> sizes_;  // their sizes
};

struct DeviceAllocators {
  explicit DeviceAllocators(int index) : raw(index) {}
  CudaRawAllocator raw;
  CachingAllocator caching{raw};
  UncachedAllocator uncached{raw};
};

std::atomic<bool>& caching_flag() {
  static std::atomic<bool> flag{[] {
    const char* env = std::getenv("TT_CUDA_CACHING");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }()};
  return flag;
}

// The T of device `index` (T(index) built on first use; `what` names it in errors).
// Deliberately never destroyed: tensors in other static objects may be freed after this
// function's statics would have been, and the CUDA runtime may already be unloading at exit
// (the driver reclaims device memory when the process ends).
template <typename T>
T& per_device(int index, const char* what) {
  check_device_index(index, what);
  static std::mutex mutex;
  static auto& table = *std::make_unique<std::vector<std::unique_ptr<T>>>().release();
  std::lock_guard<std::mutex> lock(mutex);
  if (table.empty()) table.resize(static_cast<std::size_t>(device_count()));
  auto& slot = table[static_cast<std::size_t>(index)];
  if (!slot) slot = std::make_unique<T>(index);
  return *slot;
}

DeviceAllocators& allocators(int index) {
  return per_device<DeviceAllocators>(index, "CUDA allocator");
}

}  // namespace

void set_caching_enabled(bool enabled) {
  caching_flag().store(enabled);
}

bool caching_enabled() {
  return caching_flag().load();
}

CachingAllocator& caching_allocator(int index) {
  return allocators(index).caching;
}

AllocatorStats memory_stats(int index) {
  DeviceAllocators& a = allocators(index);
  return caching_enabled() ? a.caching.stats() : a.uncached.stats();
}

void empty_cache() {
  for (int i = 0; i < device_count(); ++i) allocators(i).caching.empty_cache();
}

// ----- the private memory pools of CUDA graphs ------------------------------------------------

namespace {

/// The allocator of a capture: blocks come from the caching allocator, and a freed block goes to
/// this pool's free lists (reused by later allocations of the same capture, never by anyone
/// else), because every replay of the graph writes it again. release() (the graph is destroyed)
/// returns the free blocks to the caching allocator; blocks still held by tensors go back when
/// those are freed. Pools are never destroyed: a Storage keeps a pointer to its allocator.
class GraphPool final : public Allocator {
 public:
  explicit GraphPool(CachingAllocator& base) : base_(base) {}
  void* allocate(std::size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(size_class(nbytes));
      if (!released_ && it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        return p;
      }
    }
    return base_.allocate(nbytes);
  }
  void deallocate(void* ptr, std::size_t nbytes) override {
    if (ptr == nullptr) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!released_) {
        free_[size_class(nbytes)].push_back(ptr);
        return;
      }
    }
    base_.deallocate(ptr, nbytes);
  }
  AllocatorStats stats() const override { return base_.stats(); }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
    for (auto& [cls, blocks] : free_) {
      for (void* p : blocks) base_.deallocate(p, cls);
    }
    free_.clear();
  }

 private:
  CachingAllocator& base_;
  std::mutex mutex_;
  bool released_ = false;
  std::unordered_map<std::size_t, std::vector<void*>> free_;  // size class -> blocks
};

GraphPool& new_graph_pool(int index) {
  static std::mutex mutex;
  static auto& pools = *std::make_unique<std::vector<std::unique_ptr<GraphPool>>>().release();
  std::lock_guard<std::mutex> lock(mutex);
  pools.push_back(std::make_unique<GraphPool>(caching_allocator(index)));
  return *pools.back();
}

}  // namespace

void reset_peak_memory_stats(int index) {
  DeviceAllocators& a = allocators(index);
  a.caching.reset_peak();
  a.uncached.reset_peak();
}

// ----- the staging ring of host-to-device copies ---------------------------------------------

namespace {

/// Pinned host memory used as a ring: copy() writes the host data into the next slot, queues an
/// asynchronous copy from the slot and records an event behind it. A slot is written again only
/// after the events of every copy that used its bytes have completed (they complete in order:
/// one stream per device), so the caller's buffer may die at once and nothing waits in the
/// steady state.
class StagingRing {
 public:
  static constexpr std::size_t kBytes = std::size_t{32} << 20;
  static constexpr std::size_t kAlign = 256;

  explicit StagingRing(int index) : index_(index) {}
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;
  // Never destroyed (see allocators()): the driver reclaims pinned memory at exit.

  /// Copies `nbytes` from `src` (host) to `dst` (device index_) without waiting for the device;
  /// false (nothing done) when nbytes is larger than half the ring. DeviceGuard held by caller.
  bool copy(void* dst, const void* src, std::size_t nbytes) {
    if (nbytes > kBytes / 2) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    if (base_ == nullptr) TT_CUDA_CHECK(cudaHostAlloc(&base_, kBytes, cudaHostAllocDefault));
    const std::size_t size = (nbytes + kAlign - 1) / kAlign * kAlign;
    if (head_ + size > kBytes) head_ = 0;  // wrap: slots always lie in one piece
    const std::size_t begin = head_, end = head_ + size;
    // Drop the copies that are done (no waiting), then wait for the newest copy that still
    // reads [begin, end): the ones before it on the stream are then done too.
    while (!in_flight_.empty() && cudaEventQuery(in_flight_.front().done) == cudaSuccess) {
      retire_front();
    }
    (void)cudaGetLastError();  // cudaEventQuery's cudaErrorNotReady is not an error
    std::size_t last = in_flight_.size();
    for (std::size_t i = 0; i < in_flight_.size(); ++i) {
      if (in_flight_[i].begin < end && begin < in_flight_[i].end) last = i;
    }
    if (last < in_flight_.size()) {
      count_host_sync();
      TT_CUDA_CHECK(cudaEventSynchronize(in_flight_[last].done));
      for (std::size_t i = 0; i <= last; ++i) retire_front();
    }
    char* slot = static_cast<char*>(base_) + begin;
    std::memcpy(slot, src, nbytes);
    TT_CUDA_CHECK(cudaMemcpyAsync(dst, slot, nbytes, cudaMemcpyHostToDevice, stream(index_)));
    cudaEvent_t done = nullptr;
    if (spare_events_.empty()) {
      TT_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    } else {
      done = spare_events_.back();
      spare_events_.pop_back();
    }
    TT_CUDA_CHECK(cudaEventRecord(done, stream(index_)));
    in_flight_.push_back({begin, end, done});
    head_ = end;
    return true;
  }

 private:
  struct Slot {
    std::size_t begin, end;
    cudaEvent_t done;
  };
  void retire_front() {
    spare_events_.push_back(in_flight_.front().done);
    in_flight_.pop_front();
  }

  int index_;
  std::mutex mutex_;
  void* base_ = nullptr;
  std::size_t head_ = 0;
  std::deque<Slot> in_flight_;
  std::vector<cudaEvent_t> spare_events_;
};

StagingRing& staging_ring(int index) {
  return per_device<StagingRing>(index, "staging ring");
}

}  // namespace

// ----- the DeviceBackend of kCUDA ------------------------------------------------------------

namespace {

class CudaBackend final : public DeviceBackend {
 public:
  Allocator& allocator(int index) override {
    if (CaptureState* c = capture_state(index)) return *c->pool;
    DeviceAllocators& a = allocators(index);
    if (caching_enabled()) return a.caching;
    return a.uncached;
  }
  void copy(const Tensor& dst, const Tensor& src) override { cuda::copy(dst, src); }
  void copy_from_host(void* dst, const void* src, std::size_t nbytes, int index) override {
    if (nbytes == 0) return;
    DeviceGuard guard(index);
    if (CaptureState* c = capture_state(index)) {
      // The graph copies from this buffer at every replay: it lives as long as the graph.
      void* buffer = nullptr;
      TT_CUDA_CHECK(cudaHostAlloc(&buffer, nbytes, cudaHostAllocDefault));
      c->pinned->push_back(buffer);
      std::memcpy(buffer, src, nbytes);
      TT_CUDA_CHECK(cudaMemcpyAsync(dst, buffer, nbytes, cudaMemcpyHostToDevice, c->stream));
      return;
    }
    if (staging_ring(index).copy(dst, src, nbytes)) return;  // no waiting
    TT_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, stream(index)));
    // Too large to stage, and the host buffer may be a temporary that dies when we return:
    // wait for the transfer.
    count_host_sync();
    TT_CUDA_CHECK(cudaStreamSynchronize(stream(index)));
  }
  void copy_to_host(void* dst, const void* src, std::size_t nbytes, int index) override {
    if (nbytes == 0) return;
    check_not_capturing(index, "a copy to the host (e.g. Tensor::item())");
    DeviceGuard guard(index);
    TT_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, stream(index)));
    count_host_sync();
    TT_CUDA_CHECK(cudaStreamSynchronize(stream(index)));  // the caller reads dst next
  }
  void fill(const Tensor& dst, double value) override { cuda::fill(dst, value); }
  void synchronize(int index) override { cuda::synchronize(index); }
};

}  // namespace

// ----- CUDA graphs ---------------------------------------------------------------------------

CudaGraph::CudaGraph(int index) : index_(index) {
  check_device_index(index, "CudaGraph");
}

CudaGraph::~CudaGraph() {
  if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) (void)cudaGraphDestroy(graph_);
  if (!pinned_.empty()) {
    // A replay may still be reading them: wait (as cudaFreeHost itself would).
    count_host_sync();
    (void)cudaDeviceSynchronize();
    for (void* p : pinned_) (void)cudaFreeHost(p);
  }
  (void)cudaGetLastError();
}

void CudaGraph::capture(const std::function<void()>& work) {
  TT_CHECK(exec_ == nullptr, "CudaGraph::capture: cuda:", index_, " graph already captured");
  TT_CHECK(capture_state(index_) == nullptr,
           "CudaGraph::capture: another capture is in progress on cuda:", index_);
  TT_CHECK(index_ < kMaxDevices, "CudaGraph::capture: device index ", index_, " >= ", kMaxDevices);
  DeviceGuard guard(index_);
  GraphPool& pool = new_graph_pool(index_);
  pool_ = std::shared_ptr<void>(&pool, [](void* p) { static_cast<GraphPool*>(p)->release(); });
  cudaStream_t s = nullptr;
  TT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CaptureState state{s, &pool, &pinned_};
  std::string failure;
  cudaError_t begin = cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
  if (begin == cudaSuccess) {
    capture_slot(index_).store(&state);
    try {
      work();
    } catch (const std::exception& e) {
      failure = e.what();
    }
    capture_slot(index_).store(nullptr);
  } else {
    failure = error_message(begin, "cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed)",
                            __FILE__, __LINE__);
  }
  cudaGraph_t g = nullptr;
  if (begin == cudaSuccess) {
    const cudaError_t end = cudaStreamEndCapture(s, &g);
    if (failure.empty() && end != cudaSuccess) {
      failure = error_message(end, "cudaStreamEndCapture(s, &g)", __FILE__, __LINE__);
    }
  }
  (void)cudaStreamDestroy(s);
  (void)cudaGetLastError();
  if (failure.empty()) {
    const cudaError_t inst = cudaGraphInstantiate(&exec_, g, 0);
    if (inst != cudaSuccess) {
      exec_ = nullptr;
      failure = error_message(inst, "cudaGraphInstantiate(&exec_, g, 0)", __FILE__, __LINE__);
    }
  }
  if (!failure.empty()) {
    if (g != nullptr) (void)cudaGraphDestroy(g);
    (void)cudaGetLastError();
    pool_.reset();
    throw Error(tt::detail::str("CudaGraph::capture on cuda:", index_, " failed: ", failure));
  }
  graph_ = g;
  TT_CUDA_CHECK(cudaGraphGetNodes(g, nullptr, &num_nodes_));
}

void CudaGraph::replay() {
  TT_CHECK(exec_ != nullptr, "CudaGraph::replay: nothing captured on cuda:", index_);
  DeviceGuard guard(index_);
  TT_CUDA_CHECK(cudaGraphLaunch(exec_, stream(index_)));
}

namespace {

// Registration only stores a pointer: no CUDA call runs before main.
[[maybe_unused]] const bool kCudaBackendRegistered = [] {
  static CudaBackend backend;
  register_backend(DeviceType::kCUDA, &backend);
  return true;
}();

}  // namespace

}  // namespace tt::cuda
