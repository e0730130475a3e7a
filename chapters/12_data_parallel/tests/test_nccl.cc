// Tests of the NCCL backend (collectives on CUDA tensors). They skip without NCCL, without a GPU,
// or when this machine has fewer GPUs than the job has ranks (each rank needs its own GPU:
// `mpirun -np 2` needs 2). Suites named *Mpi* also run under mpirun with 2 and 4 ranks.
#include <gtest/gtest.h>

#include <string>

#include "tt/cuda_probe.h"
#include "tt/ddp.h"
#include "tt/dist.h"
#include "tt/ops_elementwise.h"
#include "tt/testing.h"

namespace tt::dist {
namespace {

/// Why this rank cannot run CUDA collectives, or "" when it can.
std::string local_reason(const ProcessGroup& g) {
  if (!ProcessGroup::built_with_nccl()) return "built without NCCL";
  const int gpus = cuda_device_count();
  if (gpus == 0) return "no CUDA device";
  if (g.local_rank() >= gpus) {
    return "this machine has " + std::to_string(gpus) + " GPU(s) but rank " +
           std::to_string(g.rank()) + " is local rank " + std::to_string(g.local_rank()) +
           ": NCCL needs one GPU per rank (run with -np <= " + std::to_string(gpus) + ")";
  }
  return "";
}

/// Why `g` cannot run CUDA collectives, or "" when every rank can. The ranks decide together
/// (a CPU all-reduce), so that they all skip or all run: a rank that skipped alone would leave
/// the others waiting in a collective.
std::string why_no_nccl(ProcessGroup& g) {
  const std::string mine = local_reason(g);
  Tensor able = full({1}, mine.empty() ? 1.0 : 0.0, {.dtype = DType::kInt64});
  g.all_reduce(able);
  if (able.at<int64_t>({0}) == g.world_size()) return "";
  return mine.empty() ? "another rank has no GPU of its own (NCCL needs one GPU per rank)" : mine;
}

#define SKIP_WITHOUT_NCCL(g)                 \
  do {                                       \
    const std::string why_ = why_no_nccl(g); \
    if (!why_.empty()) GTEST_SKIP() << why_; \
  } while (0)

Device gpu(const ProcessGroup& g) {
  return Device::cuda(g.local_rank());
}

/// t[i] = 1000 * (rank + 1) + i as `dtype`, on `device`.
Tensor rank_values(int64_t n, int rank, DType dtype, Device device) {
  return add(arange(0, static_cast<double>(n)), 1000.0 * (rank + 1)).to(dtype).to(device);
}

/// The sum over `world` ranks of rank_values (on the CPU).
Tensor summed_values(int64_t n, int world, DType dtype) {
  return add(mul(arange(0, static_cast<double>(n)), static_cast<double>(world)),
             1000.0 * world * (world + 1) / 2)
      .to(dtype);
}

TEST(Ch12_CollectivesCudaMpi, AllReduceSumAndAvg) {
  ProcessGroup& g = world();
  SKIP_WITHOUT_NCCL(g);
  const int N = g.world_size();
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kInt64}) {
    Tensor t = rank_values(1001, g.rank(), dtype, gpu(g));
    g.all_reduce(t, ReduceOp::kSum);
    EXPECT_TENSOR_NEAR(t.to(Device::cpu()), summed_values(1001, N, dtype), 0, 0)
        << dtype_name(dtype);
  }
  Tensor a = rank_values(5, g.rank(), DType::kFloat64, gpu(g)).view({5, 1});
  g.all_reduce(a, ReduceOp::kAvg);  // ncclAvg
  EXPECT_TENSOR_NEAR(a.to(Device::cpu()), div(summed_values(5, N, DType::kFloat64), N).view({5, 1}),
                     0, 1e-15);
}

TEST(Ch12_CollectivesCudaMpi, BroadcastReduceScatterAllGatherBarrier) {
  ProcessGroup& g = world();
  SKIP_WITHOUT_NCCL(g);
  const int N = g.world_size(), r = g.rank();
  Tensor b = rank_values(6, r, DType::kFloat32, gpu(g));
  g.broadcast(b, N - 1);
  EXPECT_TENSOR_NEAR(b.to(Device::cpu()), rank_values(6, N - 1, DType::kFloat32, Device::cpu()), 0,
                     0);
  Tensor in = rank_values(3 * N, r, DType::kFloat64, gpu(g));
  Tensor out = zeros({3}, {.dtype = DType::kFloat64, .device = gpu(g)});
  g.reduce_scatter(out, in, ReduceOp::kSum);
  EXPECT_TENSOR_NEAR(out.to(Device::cpu()),
                     summed_values(3 * N, N, DType::kFloat64).narrow(0, 3 * r, 3), 0, 0);
  g.reduce_scatter(out, in, ReduceOp::kAvg);
  EXPECT_TENSOR_NEAR(out.to(Device::cpu()),
                     div(summed_values(3 * N, N, DType::kFloat64), N).narrow(0, 3 * r, 3), 0,
                     1e-15);
  Tensor mine = full({2}, r, {.dtype = DType::kInt64, .device = gpu(g)});
  Tensor all = zeros({2 * N}, {.dtype = DType::kInt64, .device = gpu(g)});
  g.all_gather(all, mine);
  const Tensor host = all.to(Device::cpu());
  for (int q = 0; q < N; ++q) {
    EXPECT_EQ(host.at<int64_t>({2 * q}), q);
    EXPECT_EQ(host.at<int64_t>({2 * q + 1}), q);
  }
  g.barrier();
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
