// The CUDA runtime layer: error checks, device guard, stream, allocators, and the DeviceBackend
// of DeviceType::kCUDA.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "tt/cuda_device.h"
#include "tt/cuda_ops.h"
#include "tt/cuda_probe.h"
#include "tt/tensor.h"

namespace tt::cuda {

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
  return cudaStreamLegacy;
}

int multiprocessor_count(int index) {
  check_device_index(index, "multiprocessor_count");
  static std::mutex mutex;
  static std::vector<int> cache;
  std::lock_guard<std::mutex> lock(mutex);
  if (cache.empty()) cache.assign(static_cast<std::size_t>(device_count()), 0);
  int& sms = cache[static_cast<std::size_t>(index)];
  if (sms == 0) {
    TT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, index));
  }
  return sms;
}

unsigned grid_size(int64_t n, int threads, int index) {
  constexpr int64_t kMaxThreadsPerSm = 2048;  // sm_70 .. sm_90
  const int64_t wanted = (n + threads - 1) / threads;
  const int64_t resident = int64_t{multiprocessor_count(index)} * (kMaxThreadsPerSm / threads);
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(wanted, resident)));
}

void synchronize(int index) {
  DeviceGuard guard(index);
  TT_CUDA_CHECK(cudaDeviceSynchronize());
}

// ----- allocators --------------------------------------------------------------------------

namespace {

// cudaMalloc / cudaFree of one device.
class CudaRawAllocator final : public RawAllocator {
 public:
  explicit CudaRawAllocator(int index) : index_(index) {}
  void* raw_allocate(std::size_t nbytes) override {
    DeviceGuard guard(index_);
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, nbytes);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;  // the caller may free its cache and retry
    }
    TT_CUDA_CHECK(status);
    return p;
  }
  void raw_free(void* ptr) noexcept override {
    int previous = -1;
    (void)cudaGetDevice(&previous);
    (void)cudaSetDevice(index_);
    (void)cudaFree(ptr);  // cannot report from here (called from destructors)
    (void)cudaSetDevice(previous);
    (void)cudaGetLastError();
  }
  std::string device_name() const override { return Device::cuda(index_).str(); }

 private:
  int index_;
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

DeviceAllocators& allocators(int index) {
  check_device_index(index, "CUDA allocator");
  static std::mutex mutex;
  // Deliberately never destroyed: tensors in other static objects may be freed after this
  // function's statics would have been, and the CUDA runtime may already be unloading at exit
  // (the driver reclaims device memory when the process ends).
  static auto& table =
      *std::make_unique<std::vector<std::unique_ptr<DeviceAllocators>>>().release();
  std::lock_guard<std::mutex> lock(mutex);
  if (table.empty()) table.resize(static_cast<std::size_t>(device_count()));
  auto& slot = table[static_cast<std::size_t>(index)];
  if (!slot) slot = std::make_unique<DeviceAllocators>(index);
  return *slot;
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

// ----- the DeviceBackend of kCUDA ------------------------------------------------------------

namespace {

class CudaBackend final : public DeviceBackend {
 public:
  Allocator& allocator(int index) override {
    DeviceAllocators& a = allocators(index);
    if (caching_enabled()) return a.caching;
    return a.uncached;
  }
  void copy(const Tensor& dst, const Tensor& src) override { cuda::copy(dst, src); }
  void copy_from_host(void* dst, const void* src, std::size_t nbytes, int index) override {
    if (nbytes == 0) return;
    DeviceGuard guard(index);
    TT_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, stream(index)));
    // The host buffer may be a temporary that dies when we return: wait for the transfer.
    TT_CUDA_CHECK(cudaStreamSynchronize(stream(index)));
  }
  void copy_to_host(void* dst, const void* src, std::size_t nbytes, int index) override {
    if (nbytes == 0) return;
    DeviceGuard guard(index);
    TT_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, stream(index)));
    TT_CUDA_CHECK(cudaStreamSynchronize(stream(index)));  // the caller reads dst next
  }
  void fill(const Tensor& dst, double value) override { cuda::fill(dst, value); }
  void synchronize(int index) override { cuda::synchronize(index); }
};

// Registration only stores a pointer: no CUDA call runs before main.
[[maybe_unused]] const bool kCudaBackendRegistered = [] {
  static CudaBackend backend;
  register_backend(DeviceType::kCUDA, &backend);
  return true;
}();

}  // namespace

}  // namespace tt::cuda
