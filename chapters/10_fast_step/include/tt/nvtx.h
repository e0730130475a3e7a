/// @file nvtx.h
/// @brief NVTX ranges: names on the timeline of NVIDIA's tools (Nsight Compute, Nsight Systems)
/// for every dispatched op and every step.
///
/// NVTX is header-only in the CUDA toolkit (nvtx3/nvToolsExt.h): a range costs a function call
/// that does nothing until a tool injects itself (ncu, nsys). This file compiles it only in CUDA
/// builds; in a CPU build every function here is a no-op and available() is false.
///
/// One line turns ops into ranges: an NvtxObserver installed as the KernelObserver
/// (tt/dispatcher.h) pushes a range named after the op before each dispatched kernel and pops it
/// after. Every program linked with chapter 10 or later installs one at start-up when the
/// environment sets TT_NVTX=1 (train_gpt2, bench_gpt2_step, tt_ddp_demo, ...):
/// @code
/// TT_NVTX=1 ncu --nvtx --nvtx-include "flash_attention_forward/" -k regex:flash ./prog
/// @endcode
/// Steps are ranges too: `nvtx::ScopedRange range("step 3");` (tt/trace.h's TraceWriter opens
/// one per traced step). Only one KernelObserver is installed at a time: a Profiler or a
/// TraceWriter replaces the NvtxObserver while it records, and restores it after.
#pragma once

#include <cstdint>

#include "tt/dispatcher.h"

namespace tt::nvtx {

/// True in a build that emits NVTX ranges (CUDA builds); false where every call is a no-op.
bool available() noexcept;

/// Opens a range named `name` on this thread's NVTX stack (no-op without NVTX).
void push(const char* name) noexcept;
/// Closes the innermost range of this thread (no-op without NVTX).
void pop() noexcept;

/// A range for the lifetime of the object.
class ScopedRange {
 public:
  /// Opens `name`.
  explicit ScopedRange(const char* name) noexcept { push(name); }
  /// Closes it.
  ~ScopedRange() { pop(); }
  ScopedRange(const ScopedRange&) = delete;
  ScopedRange& operator=(const ScopedRange&) = delete;
};

/// A KernelObserver that wraps every dispatched kernel in an NVTX range named after its op.
class NvtxObserver final : public KernelObserver {
 public:
  /// KernelObserver: opens the op's range.
  std::uint64_t on_kernel_begin(const KernelCall& call) override;
  /// KernelObserver: closes it.
  void on_kernel_end(const KernelCall& call, std::uint64_t token) noexcept override;
};

/// True when the environment variable TT_NVTX is "1" (read once, at start-up).
bool requested_by_environment() noexcept;

/// Installs the process-wide NvtxObserver (the one line); returns the observer it replaced.
/// Done at start-up when requested_by_environment(); a program may call it itself.
KernelObserver* install() noexcept;

}  // namespace tt::nvtx
