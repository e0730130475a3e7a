// NVTX ranges through the kernel observer (tt/nvtx.h) and the kernels' start times that a
// timeline places them by (Profiler's KernelRecord::start_seconds, used by chapter 12's trace).
#include <gtest/gtest.h>

#include "tt/functional.h"
#include "tt/nvtx.h"
#include "tt/profiler.h"
#include "tt/testing.h"

namespace tt {
namespace {

TEST(Ch10_Nvtx, ObserverWrapsKernelsAndInstallGivesBackThePrevious) {
#if TT_WITH_CUDA
  EXPECT_TRUE(nvtx::available());
#else
  EXPECT_FALSE(nvtx::available()) << "a CPU build has no NVTX: every call is a no-op";
#endif
  KernelObserver* const before = kernel_observer();
  KernelObserver* const previous = nvtx::install();
  EXPECT_EQ(previous, before);
  KernelObserver* const installed = kernel_observer();
  ASSERT_NE(installed, nullptr);
  EXPECT_NE(dynamic_cast<nvtx::NvtxObserver*>(installed), nullptr);
  // Kernels run as before inside their ranges; step ranges nest around them.
  {
    nvtx::ScopedRange step("step 0");
    const Tensor y = add(ones({3}), full({3}, 2.0));
    EXPECT_TENSOR_NEAR(y, full({3}, 3.0), 0, 0);
  }
  // A profiler takes the observer over while it records and gives it back.
  {
    prof::Profiler profiler;
    prof::ProfileScope scope(profiler);
    EXPECT_EQ(kernel_observer(), &profiler);
  }
  EXPECT_EQ(kernel_observer(), installed);
  set_kernel_observer(previous);
}

TEST(Ch10_Profiler, StartSecondsPlaceKernelsInDispatchOrderInsideTheStep) {
  prof::Profiler profiler;
  {
    prof::ProfileScope scope(profiler);
    Tensor x = ones({64, 64});
    for (int i = 0; i < 4; ++i) x = matmul(x, ones({64, 64}));
  }
  const auto& records = profiler.records();
  ASSERT_EQ(records.size(), 4u);
  double previous_end = 0;
  for (const prof::KernelRecord& r : records) {
    EXPECT_GE(r.start_seconds, previous_end) << r.op << ": kernels on one thread do not overlap";
    previous_end = r.start_seconds + r.seconds;
  }
  EXPECT_LE(previous_end, profiler.step_seconds()) << "the last kernel ends inside the step";
}

}  // namespace
}  // namespace tt
