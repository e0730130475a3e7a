// NVTX ranges (tt/nvtx.h): the op observer, the step ranges and the TT_NVTX=1 switch.
#include "tt/nvtx.h"

#include <cstdlib>
#include <cstring>

#if TT_WITH_CUDA
#include <nvtx3/nvToolsExt.h>
#endif

namespace tt::nvtx {

bool available() noexcept {
#if TT_WITH_CUDA
  return true;
#else
  return false;
#endif
}

void push(const char* name) noexcept {
#if TT_WITH_CUDA
  nvtxRangePushA(name);
#else
  (void)name;
#endif
}

void pop() noexcept {
#if TT_WITH_CUDA
  nvtxRangePop();
#endif
}

std::uint64_t NvtxObserver::on_kernel_begin(const KernelCall& call) {
  push(call.op.c_str());
  return 0;
}

void NvtxObserver::on_kernel_end(const KernelCall& /*call*/, std::uint64_t /*token*/) noexcept {
  pop();
}

bool requested_by_environment() noexcept {
  static const bool requested = [] {
    const char* v = std::getenv("TT_NVTX");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return requested;
}

KernelObserver* install() noexcept {
  // Never destroyed: it stays installed until the process ends, static destructors included.
  static NvtxObserver* const observer = new NvtxObserver;
  return set_kernel_observer(observer);
}

namespace {
// The start-up switch: every program linked with this library (whole-archive) runs it.
[[maybe_unused]] const bool g_installed_at_start = requested_by_environment() && (install(), true);
}  // namespace

}  // namespace tt::nvtx
