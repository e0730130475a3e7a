// Tests of the NCCL backend (collectives on CUDA tensors). They skip without NCCL, without a GPU,
// or when this machine has fewer GPUs than the job has ranks (each rank needs its own GPU:
// `mpirun -np 2` needs 2). Suites named *Mpi* also run under mpirun with 2 and 4 ranks.
#include <gtest/gtest.h>

#include <string>

#include "ch12_test_util.h"
#include "tt/cuda_probe.h"
#include "tt/ddp.h"
#include "tt/dist.h"
#include "tt/ops_elementwise.h"
#include "tt/testing.h"

namespace tt::dist {
namespace {

Device gpu(const ProcessGroup& g) {
  return Device::cuda(g.local_rank());
}

using ch12_test::rank_values;
using ch12_test::summed_values;

TEST(Ch12_CollectivesCudaMpi, AllReduceSumAndAvg) {
  ProcessGroup& g = world();
  SKIP_WITHOUT_NCCL(g);
  ch12_test::expect_all_reduce_sum_and_avg(g, gpu(g), 1001);  // avg through ncclAvg
}

TEST(Ch12_CollectivesCudaMpi, BroadcastReduceScatterAllGatherBarrier) {
  ProcessGroup& g = world();
  SKIP_WITHOUT_NCCL(g);
  ch12_test::expect_broadcast_reduce_scatter_all_gather(g, gpu(g));
}

TEST(Ch12_CollectivesCudaMpi, AsyncAllReduceIsOrderedBeforeLaterKernels) {
  ProcessGroup& g = world();
  SKIP_WITHOUT_NCCL(g);
  const int N = g.world_size();
  // A large buffer, so the collective is still running when the host goes on.
  const int64_t n = 1 << 22;
  Tensor t = rank_values(n, g.rank(), DType::kFloat32, gpu(g));
  std::unique_ptr<Work> work = g.all_reduce_async(t, ReduceOp::kAvg);
  work->wait();                // the compute stream now waits for NCCL
  Tensor doubled = add(t, t);  // a kernel on the compute stream: sees the average
  const Tensor expected =
      mul(div(summed_values(n, N, DType::kFloat64), N), 2.0).to(DType::kFloat32);
  EXPECT_TENSOR_NEAR(doubled.to(Device::cpu()), expected, 0, 1e-6);
  EXPECT_TRUE(work->is_completed());  // the copy to the host synchronized
  EXPECT_LE(work->started(), work->finished());
}

TEST(Ch12_ReducerCudaMpi, AveragesCudaGradientsThroughNccl) {
  ProcessGroup& g = world();
  SKIP_WITHOUT_NCCL(g);
  const int N = g.world_size();
  std::vector<Tensor> params;
  for (int64_t n : {3, 2, 4}) {
    Tensor p = zeros({n}, {.device = gpu(g)}).set_requires_grad(true);
    p.set_grad(rank_values(n, g.rank(), DType::kFloat32, gpu(g)));
    params.push_back(p);
  }
  // 12, 8 and 16 bytes with a 20-byte cap: buckets {2} and {1, 0}.
  Reducer reducer(params, assign_buckets(params, 20), g);
  ASSERT_EQ(reducer.buckets().size(), 2u);
  for (int64_t i : {2, 1, 0}) reducer.mark_grad_ready(i);
  reducer.finalize_backward();
  for (const Tensor& p : params) {
    EXPECT_TRUE(p.grad().device().is_cuda());
    EXPECT_TENSOR_NEAR(p.grad().to(Device::cpu()),
                       div(summed_values(p.numel(), N, DType::kFloat64), N).to(DType::kFloat32), 0,
                       0);
  }
}

TEST(Ch12_ReducerCudaMpi, DeviceTimelineOrdersTheBucketsOnTheGpu) {
  ProcessGroup& g = world();
  SKIP_WITHOUT_NCCL(g);
  std::vector<Tensor> params;
  for (int64_t n : {1 << 16, 1 << 16, 1 << 16}) {
    Tensor p = zeros({n}, {.device = gpu(g)}).set_requires_grad(true);
    p.set_grad(rank_values(n, g.rank(), DType::kFloat32, gpu(g)));
    params.push_back(p);
  }
  Reducer reducer(params, assign_buckets(params, 4 << 16), g);  // one bucket per parameter
  ASSERT_EQ(reducer.buckets().size(), 3u);
  const std::shared_ptr<DeviceMark> origin = g.mark(params[0]);
  ASSERT_NE(origin, nullptr);
  reducer.mark_grad_ready(2);  // bucket 0 starts before "backward" ends
  reducer.finalize_backward();
  ASSERT_NE(reducer.backward_end_mark(), nullptr);
  EXPECT_GE(reducer.backward_end_mark()->ms_since(*origin), 0.0);
  const auto& timeline = reducer.timeline();
  ASSERT_EQ(timeline.size(), 3u);
  double previous_end = 0;
  for (std::size_t b = 0; b < timeline.size(); ++b) {
    ASSERT_NE(timeline[b].device_begin, nullptr) << "bucket " << b;
    ASSERT_NE(timeline[b].device_end, nullptr) << "bucket " << b;
    const double begin = timeline[b].device_begin->ms_since(*origin);
    const double end = timeline[b].device_end->ms_since(*origin);
    // One NCCL stream: each all-reduce runs after the previous one, after the origin.
    EXPECT_GE(begin, previous_end) << "bucket " << b;
    EXPECT_GE(end, begin) << "bucket " << b;
    previous_end = end;
  }
  EXPECT_EQ(g.mark(zeros({1})), nullptr);  // no device timeline for CPU tensors
}

TEST(Ch12_ProcessGroupCuda, ErrorsNameTheCollectiveAndTheTensors) {
  ProcessGroup g(make_self_backend());
  SKIP_WITHOUT_NCCL(g);
  const Tensor on_gpu = zeros({4}, {.device = gpu(g)});
  testing::expect_errors({
      {"devices differ",
       [&] { g.reduce_scatter(zeros({4}), on_gpu); },
       {"reduce_scatter", "different devices", "rank 0 of 1"}},
      {"point-to-point", [&] { g.send(on_gpu, 0); }, {"send", "GPU", "CPU tensors only"}},
      {"avg of int64",
       [&] {
         g.all_reduce(zeros({2}, {.dtype = DType::kInt64, .device = gpu(g)}), ReduceOp::kAvg);
       },
       {"all_reduce", "avg", "int64"}},
  });
}

}  // namespace
}  // namespace tt::dist
