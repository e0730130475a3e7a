// Given code of chapter 06 that chapter 10's "step without waste" relies on: the host
// synchronization counter, staged (non-blocking) host-to-device copies, device-side index
// checks, and CUDA graphs (capture, private memory pool, replay).
#include <cmath>
#include <string>
#include <vector>

#include "ch06_test_util.h"
#include "tt/functional.h"
#include "tt/ops_nn.h"

#if TT_WITH_CUDA
#include "tt/cuda_device.h"
#include "tt/cuda_ops.h"
#endif

namespace tt {
namespace {

#if TT_WITH_CUDA

// With the caching allocator, as in training (without it every free is a cudaFree, which
// waits for the device and is counted as such).
class Ch06_CudaSyncFree : public test06::CudaTest {
 protected:
  bool use_caching() const override { return true; }
};

TEST_F(Ch06_CudaSyncFree, UncachedFreesAreCountedAsWaits) {
  cuda::set_caching_enabled(false);
  { const Tensor t = empty({256}, {DType::kFloat32, Device::cuda(0)}); }
  cuda::reset_host_sync_count();
  { const Tensor t = empty({256}, {DType::kFloat32, Device::cuda(0)}); }
  EXPECT_EQ(cuda::host_sync_count(), 1) << "cudaFree synchronizes the device";
  cuda::set_caching_enabled(true);
}

TEST_F(Ch06_CudaSyncFree, CounterSeesWaitsAndStagedCopiesDoNotWait) {
  const Tensor x = full({1000}, 2.0, {DType::kFloat32, Device::cuda(0)});
  cuda::reset_host_sync_count();
  std::vector<float> host(1000, 1.0f);
  Tensor y = from_vector(host).to(Device::cuda(0));
  host.assign(1000, 5.0f);  // the staged copy took the values at the call
  EXPECT_EQ(cuda::host_sync_count(), 0) << "a staged host-to-device copy must not wait";
  EXPECT_EQ(sum(add(x, y)).item(), 3000.0) << "the staged copy delivered the values of the call";
  EXPECT_EQ(cuda::host_sync_count(), 1) << "item() waits once";
  cuda::synchronize(0);
  EXPECT_EQ(cuda::host_sync_count(), 2);
  // Many staged copies wrap the ring; every value must still arrive.
  for (int i = 0; i < 300; ++i) {
    std::vector<float> v(50000, static_cast<float>(i));
    y = from_vector(v).to(Device::cuda(0));
  }
  EXPECT_EQ(sum(y).item(), 50000.0 * 299);
  cuda::reset_host_sync_count();
  EXPECT_EQ(cuda::host_sync_count(), 0);
}

TEST_F(Ch06_CudaSyncFree, PeakAndMallocCountsOfAPhase) {
  cuda::reset_peak_memory_stats(0);
  const AllocatorStats before = cuda::memory_stats(0);
  EXPECT_EQ(before.peak_allocated, before.allocated);
  {
    const Tensor big = empty({(int64_t{1} << 20) * 37 + 3}, {DType::kFloat32, Device::cuda(0)});
    const AllocatorStats during = cuda::memory_stats(0);
    EXPECT_GE(during.peak_allocated, before.allocated + static_cast<std::size_t>(big.numel()) * 4);
  }
  const AllocatorStats after = cuda::memory_stats(0);
  EXPECT_GT(after.peak_allocated, after.allocated) << "the peak remembers the freed tensor";
}

TEST_F(Ch06_CudaSyncFree, DeviceIndexChecksReportAtTheEnd) {
  const Tensor w = test06::random_tensor({10, 4}, DType::kFloat32, 1).to(Device::cuda(0));
  const Tensor idx = from_vector(std::vector<int64_t>{1, 12, 3}).to(Device::cuda(0));
  // The default: the embedding throws at the call.
  EXPECT_TT_ERROR(embedding(w, idx), "embedding_forward", "12");
  Tensor rows;
  {
    cuda::IndexChecksGuard device_checks(cuda::IndexChecks::kDevice);
    EXPECT_EQ(cuda::index_checks(), cuda::IndexChecks::kDevice);
    cuda::reset_host_sync_count();
    rows = embedding(w, idx);  // no throw, no wait
    EXPECT_EQ(cuda::host_sync_count(), 0);
  }
  EXPECT_EQ(cuda::index_checks(), cuda::IndexChecks::kHost) << "the guard restores the mode";
  const std::vector<float> r = rows.to(Device::cpu()).to_vector<float>();
  for (int c = 0; c < 4; ++c) EXPECT_EQ(r[static_cast<std::size_t>(4 + c)], 0.0f) << "bad row";
  EXPECT_TT_ERROR(cuda::check_index_errors(0), "check_index_errors", "1 index", "12");
  EXPECT_NO_THROW(cuda::check_index_errors(0)) << "reported once, then cleared";
}

TEST_F(Ch06_CudaSyncFree, GraphReplaysWithNewInputsAndKeepsItsMemory) {
  const Device d = Device::cuda(0);
  const Tensor a = zeros({4096}, {DType::kFloat32, d});
  Tensor out;
  cuda::CudaGraph graph(0);
  EXPECT_FALSE(graph.captured());
  graph.capture([&] {
    const Tensor t = mul(add(a, 1.0), 3.0);  // a temporary of the pool, freed in the capture
    out = add(t, from_vector(std::vector<float>(4096, 0.5f)).to(d));  // a captured host copy
  });
  ASSERT_TRUE(graph.captured());
  EXPECT_GE(graph.num_nodes(), 4u);
  for (int i = 0; i < 3; ++i) {
    a.copy_(full({4096}, static_cast<double>(i), {DType::kFloat32}));
    // A tensor allocated between replays must not share memory with the graph's.
    const Tensor other = full({4096}, -7.0, {DType::kFloat32, d});
    cuda::reset_host_sync_count();
    graph.replay();
    EXPECT_EQ(cuda::host_sync_count(), 0);
    EXPECT_EQ(sum(out).item(), 4096.0 * ((i + 1) * 3.0 + 0.5)) << "replay " << i;
    EXPECT_EQ(sum(other).item(), -7.0 * 4096) << "the replay wrote into another tensor";
  }
}

TEST_F(Ch06_CudaSyncFree, CaptureRejectsHostWaits) {
  const Tensor a = ones({16}, {DType::kFloat32, Device::cuda(0)});
  cuda::CudaGraph graph(0);
  EXPECT_TT_ERROR(graph.capture([&] { (void)sum(a).item(); }), "CudaGraph::capture",
                  "during a CUDA graph capture");
  EXPECT_FALSE(graph.captured());
  EXPECT_FALSE(cuda::is_capturing(0));
  EXPECT_EQ(sum(a).item(), 16.0) << "the device works normally after a failed capture";
  EXPECT_TT_ERROR(graph.replay(), "nothing captured");
}

#else

TEST(Ch06_CudaSyncFree, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#endif

}  // namespace
}  // namespace tt
