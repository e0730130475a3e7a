// The backend registry, the aligned CPU allocator and the CPU backend.
#include "tt/backend.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "tt/tensor.h"

namespace tt {

// ----- registry --------------------------------------------------------------------------

namespace {
std::array<DeviceBackend*, kNumDeviceTypes>& backends() {
  static std::array<DeviceBackend*, kNumDeviceTypes> table{};
  return table;
}
}  // namespace

void register_backend(DeviceType type, DeviceBackend* backend) {
  auto& slot = backends()[static_cast<int>(type)];
  TT_CHECK(slot == nullptr, "register_backend: a backend for ", device_type_name(type),
           " is already registered");
  slot = backend;
}

bool has_backend(DeviceType type) {
  return backends()[static_cast<int>(type)] != nullptr;
}

DeviceBackend& backend_for(DeviceType type) {
  DeviceBackend* b = backends()[static_cast<int>(type)];
  TT_CHECK(b != nullptr, "no backend registered for device type '", device_type_name(type),
           "' (CUDA needs a build with CUDA enabled; see chapter 06)");
  return *b;
}

// ----- the bfloat16 cast slot -------------------------------------------------------------

namespace {
std::atomic<BFloat16Cast>& bfloat16_cast_slot() {
  static std::atomic<BFloat16Cast> slot{nullptr};
  return slot;
}
}  // namespace

void set_bfloat16_cast(BFloat16Cast cast) {
  TT_CHECK(cast != nullptr, "set_bfloat16_cast: null cast");
  BFloat16Cast expected = nullptr;
  TT_CHECK(bfloat16_cast_slot().compare_exchange_strong(expected, cast) || expected == cast,
           "set_bfloat16_cast: another bfloat16 cast is already installed");
}

bool has_bfloat16_cast() {
  return bfloat16_cast_slot().load() != nullptr;
}

BFloat16Cast bfloat16_cast(const char* op, DType dst, DType src, Device device) {
  BFloat16Cast cast = bfloat16_cast_slot().load();
  TT_CHECK(cast != nullptr, op, ": ", dtype_name(src), " -> ", dtype_name(dst), " on ", device,
           " needs the bfloat16 cast of chapter 11 (rounding to nearest even, exercise ch11.1), ",
           "which this program does not link (link tt_ch11 or a later chapter)");
  return cast;
}

// ----- CPU allocator ---------------------------------------------------------------------

struct CpuAllocator::Counters {
  std::atomic<std::size_t> allocated{0};
  std::atomic<std::size_t> peak{0};
  std::atomic<std::size_t> num_allocs{0};
};

CpuAllocator::Counters& CpuAllocator::counters() {
  static Counters c;
  return c;
}

void* CpuAllocator::allocate(std::size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const std::size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  TT_CHECK(p != nullptr, "CpuAllocator: out of memory allocating ", nbytes, " bytes");
  auto& c = counters();
  const std::size_t now = c.allocated.fetch_add(nbytes) + nbytes;
  std::size_t peak = c.peak.load();
  while (now > peak && !c.peak.compare_exchange_weak(peak, now)) {
  }
  c.num_allocs.fetch_add(1);
  return p;
}

void CpuAllocator::deallocate(void* ptr, std::size_t nbytes) {
  if (ptr == nullptr) return;
  std::free(ptr);
  counters().allocated.fetch_sub(nbytes);
}

AllocatorStats CpuAllocator::stats() const {
  const auto& c = counters();
  AllocatorStats s;
  s.allocated = c.allocated.load();
  s.peak_allocated = c.peak.load();
  s.reserved = s.allocated;
  s.num_allocs = c.num_allocs.load();
  s.num_system_allocs = s.num_allocs;
  return s;
}

// ----- CPU copy ------------------------------------------------------------------------

void cpu_copy_strided(const Tensor& dst, const Tensor& src) {
  TT_CHECK(dst.shape() == src.shape(), "copy_: shape mismatch, dst ", dst.shape(), " vs src ",
           src.shape());
  TT_CHECK(dst.device().is_cpu() && src.device().is_cpu(),
           "cpu_copy_strided: expected CPU tensors, got ", dst.device(), " and ", src.device());
  if (dst.dtype() == DType::kBFloat16 && src.dtype() == DType::kBFloat16) {  // the bits
    cpu_map_strided<bfloat16, bfloat16>(dst, src, "copy_", [](bfloat16 v) { return v; });
    return;
  }
  dispatch_dtype(dst.dtype(), "copy_", [&]<typename D>() {
    dispatch_dtype(src.dtype(), "copy_", [&]<typename S>() {
      cpu_map_strided<D, S>(dst, src, "copy_", [](S v) { return static_cast<D>(v); });
    });
  });
}

// ----- CPU backend -----------------------------------------------------------------------

namespace {

class CpuBackend final : public DeviceBackend {
 public:
  Allocator& allocator(int index) override {
    TT_CHECK(index == 0, "CPU device index must be 0, got ", index);
    return allocator_;
  }
  void copy(const Tensor& dst, const Tensor& src) override { cpu_copy_strided(dst, src); }
  void copy_from_host(void* dst, const void* src, std::size_t nbytes, int) override {
    if (nbytes) std::memcpy(dst, src, nbytes);
  }
  void copy_to_host(void* dst, const void* src, std::size_t nbytes, int) override {
    if (nbytes) std::memcpy(dst, src, nbytes);
  }
  void fill(const Tensor& dst, double value) override {
    if (dst.is_contiguous()) {
      dispatch_dtype(dst.dtype(), "fill_", [&]<typename T>() {
        T* p = static_cast<T*>(dst.data_ptr());
        const T v = static_cast<T>(value);
        for (int64_t i = 0, n = dst.numel(); i < n; ++i) p[i] = v;
      });
      return;
    }
    // Non-contiguous: copy from a broadcast scalar (stride 0 everywhere).
    cpu_copy_strided(dst, scalar_tensor(value, {dst.dtype()}).expand(dst.shape()));
  }

 private:
  CpuAllocator allocator_;
};

const bool kCpuBackendRegistered = [] {
  static CpuBackend backend;
  register_backend(DeviceType::kCPU, &backend);
  return true;
}();

}  // namespace

}  // namespace tt
