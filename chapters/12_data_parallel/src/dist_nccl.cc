// The NCCL backend of tt::dist: collectives on CUDA tensors. One communicator per group, on GPU
// local_rank(), bootstrapped by broadcasting rank 0's ncclUniqueId through the group's CPU
// backend (MPI, or nothing in a world of one). NCCL runs on its own non-blocking stream; an event
// recorded on the device's compute stream (tt::cuda::stream) orders each collective after the
// kernels that produced its input, and the compute stream waits on an event recorded after the
// collective, so the kernels that use the result (and the caching allocator, which reuses memory
// in compute-stream order) come after it. Built only when CMake found NCCL (TT_WITH_NCCL).
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "tt/dist.h"

#if TT_WITH_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "tt/cuda_device.h"
#endif

namespace tt::dist {

#if TT_WITH_NCCL
namespace {

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kFloat64:
      return ncclFloat64;
    case DType::kInt64:
      return ncclInt64;
    case DType::kBFloat16:
      return ncclBfloat16;
  }
  TT_THROW("tt::dist nccl: no NCCL datatype for ", dtype_name(dtype));
}

// The NCCL operation for `op` over `ranks` ranks. The average over one rank is the value itself,
// i.e. the sum: NCCL runs an in-place one-rank ncclSum as no work at all, whereas ncclAvg (a
// PreMulSum by 1/ranks) runs a kernel that reads and writes the whole buffer (at world size 1:
// every gradient, every step).
ncclRedOp_t nccl_op(ReduceOp op, int ranks) {
  return op == ReduceOp::kAvg && ranks > 1 ? ncclAvg : ncclSum;
}

// The unique id travels as int64 elements through the CPU backend's broadcast.
constexpr int64_t kIdWords =
    static_cast<int64_t>((sizeof(ncclUniqueId) + sizeof(int64_t) - 1) / sizeof(int64_t));

// A timing event recorded on a stream of `device` (DeviceMark).
class CudaMark final : public DeviceMark {
 public:
  CudaMark(int device, cudaStream_t stream) : device_(device) {
    cuda::DeviceGuard guard(device_);
    TT_CUDA_CHECK(cudaEventCreate(&event_));  // with timing (unlike the ordering events)
    TT_CUDA_CHECK(cudaEventRecord(event_, stream));
  }
  ~CudaMark() override {
    cuda::DeviceGuard guard(device_);
    cudaEventDestroy(event_);  // released once it has been reached
  }
  CudaMark(const CudaMark&) = delete;
  CudaMark& operator=(const CudaMark&) = delete;
  double ms_since(const DeviceMark& origin) const override {
    const auto* from = dynamic_cast<const CudaMark*>(&origin);
    TT_CHECK(from != nullptr && from->device_ == device_,
             "tt::dist DeviceMark::ms_since: the "
             "origin is not a mark of cuda:",
             device_);
    cuda::DeviceGuard guard(device_);
    cuda::count_host_sync();
    TT_CUDA_CHECK(cudaEventSynchronize(from->event_));
    TT_CUDA_CHECK(cudaEventSynchronize(event_));
    float ms = 0;
    TT_CUDA_CHECK(cudaEventElapsedTime(&ms, from->event_, event_));
    return static_cast<double>(ms);
  }
  /// True once the device has reached the mark; never blocks.
  bool reached() const {
    cuda::DeviceGuard guard(device_);
    const cudaError_t rc = cudaEventQuery(event_);
    if (rc == cudaErrorNotReady) {
      (void)cudaGetLastError();  // not an error: clear it
      return false;
    }
    TT_CUDA_CHECK(rc);
    return true;
  }
  /// Makes `stream` wait until the device has reached the mark.
  void order_before(cudaStream_t stream) const {
    cuda::DeviceGuard guard(device_);
    TT_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
  }

 private:
  int device_;
  cudaEvent_t event_ = nullptr;
};

// A collective on the NCCL stream between two marks: done when `end` has been reached; wait()
// makes the compute stream wait for it (the host does not block).
class NcclWork final : public BackendWork {
 public:
  NcclWork(int device, std::shared_ptr<CudaMark> begin, std::shared_ptr<CudaMark> end)
      : device_(device), begin_(std::move(begin)), end_(std::move(end)) {}
  bool test() override { return end_->reached(); }
  void wait() override { end_->order_before(cuda::stream(device_)); }
  std::shared_ptr<DeviceMark> device_begin() const override { return begin_; }
  std::shared_ptr<DeviceMark> device_end() const override { return end_; }

 private:
  int device_;
  std::shared_ptr<CudaMark> begin_, end_;
};

class NcclBackend final : public Backend {
 public:
  explicit NcclBackend(Backend& bootstrap)
      : bootstrap_(bootstrap),
        rank_(bootstrap.rank()),
        size_(bootstrap.world_size()),
        device_(bootstrap.local_rank()) {
    check_device();
    // NVLink SHARP (multicast) is not available on every multi-GPU machine and makes
    // ncclCommInitRank fail there; the user's own setting wins.
    setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
    ncclUniqueId id;
    std::memset(&id, 0, sizeof(id));
    if (rank_ == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId", "");
    Tensor words = zeros({kIdWords}, {.dtype = DType::kInt64});
    std::memcpy(words.data_ptr(), &id, sizeof(id));
    bootstrap_.broadcast(words, 0);
    std::memcpy(&id, words.data_ptr(), sizeof(id));

    cuda::DeviceGuard guard(device_);
    check(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank",
          detail::str(size_, " ranks on cuda:", device_));
    create_stream();
  }
  // A sub-group's communicator: ncclCommSplit of `parent`'s (a collective of parent's ranks),
  // over the ranks of `bootstrap` (the sub-group's CPU backend, split with the same color and
  // key, so that both order the ranks alike).
  NcclBackend(NcclBackend& parent, Backend& bootstrap, int color, int key)
      : bootstrap_(bootstrap),
        rank_(bootstrap.rank()),
        size_(bootstrap.world_size()),
        device_(parent.device_),
        split_(true) {
    cuda::DeviceGuard guard(device_);
    check(ncclCommSplit(parent.comm_, color, key, &comm_, nullptr), "ncclCommSplit",
          detail::str("color ", color, ", key ", key, " of ", parent.size_, " ranks"));
    int n = 0, r = 0;
    check(ncclCommCount(comm_, &n), "ncclCommCount", "");
    check(ncclCommUserRank(comm_, &r), "ncclCommUserRank", "");
    TT_CHECK(n == size_ && r == rank_, "tt::dist nccl: ncclCommSplit(color ", color, ", key ", key,
             ") gave rank ", r, " of ", n, ", but the CPU backend's split gave rank ", rank_,
             " of ", size_);
    create_stream();
  }
  ~NcclBackend() override {
    cuda::DeviceGuard guard(device_);
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(comm_);
    cudaFree(scratch_);
    cudaEventDestroy(inputs_ready_);
    cudaStreamDestroy(stream_);
  }
  NcclBackend(const NcclBackend&) = delete;
  NcclBackend& operator=(const NcclBackend&) = delete;

  std::string name() const override { return split_ ? "nccl (ncclCommSplit)" : "nccl"; }

 private:
  void check_device() const {
    const int gpus = cuda::device_count();
    TT_CHECK(device_ < gpus, "tt::dist nccl (rank ", rank_, " of ", size_,
             "): this rank is number ", device_, " on its machine and needs GPU ", device_,
             ", but the machine has ", gpus, " GPU(s); start at most ", gpus,
             " rank(s) per machine for CUDA tensors");
  }
  // The communication stream, its ordering event and the barrier's scratch (device_ current).
  void create_stream() {
    TT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    TT_CUDA_CHECK(cudaEventCreateWithFlags(&inputs_ready_, cudaEventDisableTiming));
    TT_CUDA_CHECK(cudaMalloc(&scratch_, sizeof(float)));
    TT_CUDA_CHECK(cudaMemset(scratch_, 0, sizeof(float)));
  }

 public:
  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  int local_rank() const override { return device_; }
  bool native_avg() const override { return true; }

  void min_max(const std::vector<int64_t>& values, std::vector<int64_t>& mins,
               std::vector<int64_t>& maxs) override {
    bootstrap_.min_max(values, mins, maxs);
  }
  void all_reduce(const Tensor& t, ReduceOp op) override { all_reduce_async(t, op)->wait(); }
  std::unique_ptr<BackendWork> all_reduce_async(const Tensor& t, ReduceOp op) override {
    return all_reduce_into_async(t, t, op);
  }
  std::unique_ptr<BackendWork> all_reduce_into_async(const Tensor& output, const Tensor& input,
                                                     ReduceOp op) override {
    return run("ncclAllReduce", describe("all_reduce", input, op), [&] {
      return ncclAllReduce(input.data_ptr(), output.data_ptr(), static_cast<size_t>(input.numel()),
                           nccl_type(input.dtype()), nccl_op(op, size_), comm_, stream_);
    });
  }
  void broadcast(const Tensor& t, int root) override {
    run("ncclBroadcast", detail::str("broadcast from rank ", root, " of ", t.describe()), [&] {
      return ncclBroadcast(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()),
                           nccl_type(t.dtype()), root, comm_, stream_);
    })->wait();
  }
  void reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) override {
    run("ncclReduceScatter",
        detail::str(describe("reduce_scatter", input, op), " into ", output.describe()),
        [&] {
          return ncclReduceScatter(input.data_ptr(), output.data_ptr(),
                                   static_cast<size_t>(output.numel()), nccl_type(output.dtype()),
                                   nccl_op(op, size_), comm_, stream_);
        })
        ->wait();
  }
  void all_gather(const Tensor& output, const Tensor& input) override {
    run("ncclAllGather",
        detail::str("all_gather of ", input.describe(), " into ", output.describe()),
        [&] {
          return ncclAllGather(input.data_ptr(), output.data_ptr(),
                               static_cast<size_t>(input.numel()), nccl_type(input.dtype()), comm_,
                               stream_);
        })
        ->wait();
  }
  // A one-element all-reduce every rank must join, then the host waits for the NCCL stream.
  void barrier() override {
    run("ncclAllReduce", "barrier", [&] {
      return ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_);
    })->wait();
    cuda::DeviceGuard guard(device_);
    TT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  std::shared_ptr<DeviceMark> mark() override {
    return std::make_shared<CudaMark>(device_, cuda::stream(device_));
  }
  // One NCCL group: the transfers progress together, so a pair of ranks that send to each
  // other in the same batch does not wait on the order of the calls.
  void batch_send_recv(const std::vector<P2POp>& ops) override {
    batch_send_recv_async(ops)->wait();
  }
  std::unique_ptr<BackendWork> batch_send_recv_async(const std::vector<P2POp>& ops) override {
    return run("ncclGroupEnd", detail::str("batch_send_recv of ", ops.size(), " transfers"), [&] {
      check(ncclGroupStart(), "ncclGroupStart", "batch_send_recv");
      for (const P2POp& op : ops) {
        const auto n = static_cast<size_t>(op.tensor.numel());
        const ncclDataType_t type = nccl_type(op.tensor.dtype());
        if (op.kind == P2POp::Kind::kSend) {
          check(ncclSend(op.tensor.data_ptr(), n, type, op.peer, comm_, stream_), "ncclSend",
                detail::str(op.tensor.describe(), " to rank ", op.peer));
        } else {
          check(ncclRecv(op.tensor.data_ptr(), n, type, op.peer, comm_, stream_), "ncclRecv",
                detail::str(op.tensor.describe(), " from rank ", op.peer));
        }
      }
      return ncclGroupEnd();
    });
  }
  void send_recv(const Tensor& send, int, const Tensor&, int, int) override { cpu_only(send); }
  void send(const Tensor& t, int, int) override { cpu_only(t); }
  void recv(const Tensor& t, int, int) override { cpu_only(t); }

 private:
  std::string describe(const char* call, const Tensor& t, ReduceOp op) const {
    return detail::str(call, "(", reduce_op_name(op), ") of ", t.describe());
  }
  [[noreturn]] void cpu_only(const Tensor& t) const {
    TT_THROW("tt::dist nccl (rank ", rank_, " of ", size_, "): point-to-point calls move CPU ",
             "tensors only, got ", t.describe());
  }
  void check(ncclResult_t rc, const char* call, const std::string& what) const {
    if (rc == ncclSuccess) return;
    const char* last = comm_ != nullptr ? ncclGetLastError(comm_) : nullptr;
    TT_THROW("tt::dist nccl: ", call, " failed on rank ", rank_, " of ", size_, " (cuda:", device_,
             what.empty() ? "" : ", ", what, "): ", ncclGetErrorString(rc),
             last != nullptr && *last != '\0' ? detail::str(" (", last, ")") : std::string());
  }
  // Orders `launch` (an NCCL call on stream_) after the compute stream's queued work and returns
  // the handle whose wait() orders the compute stream after it.
  template <typename Launch>
  std::unique_ptr<BackendWork> run(const char* call, const std::string& what, Launch launch) {
    cuda::DeviceGuard guard(device_);
    cudaStream_t compute = cuda::stream(device_);
    TT_CUDA_CHECK(cudaEventRecord(inputs_ready_, compute));
    TT_CUDA_CHECK(cudaStreamWaitEvent(stream_, inputs_ready_, 0));
    auto begin = std::make_shared<CudaMark>(device_, stream_);  // reached when it can start
    check(launch(), call, what);
    return std::make_unique<NcclWork>(device_, std::move(begin),
                                      std::make_shared<CudaMark>(device_, stream_));
  }

  Backend& bootstrap_;
  int rank_, size_, device_;
  bool split_ = false;  // made by ncclCommSplit
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t inputs_ready_ = nullptr;
  void* scratch_ = nullptr;
};

}  // namespace

std::unique_ptr<Backend> make_nccl_backend(Backend& bootstrap) {
  return std::make_unique<NcclBackend>(bootstrap);
}

std::unique_ptr<Backend> split_nccl_backend(Backend& parent, Backend& bootstrap, int color,
                                            int key) {
  auto* nccl = dynamic_cast<NcclBackend*>(&parent);
  TT_CHECK(nccl != nullptr, "tt::dist split_nccl_backend: the parent backend '", parent.name(),
           "' is not an NCCL backend");
  return std::make_unique<NcclBackend>(*nccl, bootstrap, color, key);
}

#else

std::unique_ptr<Backend> make_nccl_backend(Backend& bootstrap) {
  TT_THROW("tt::dist (rank ", bootstrap.rank(), " of ", bootstrap.world_size(),
           "): this build has no NCCL, so collectives cannot take CUDA tensors (configure a CUDA "
           "build where cmake/FindNCCL.cmake finds nccl.h and libnccl)");
}

std::unique_ptr<Backend> split_nccl_backend(Backend& parent, Backend&, int, int) {
  TT_THROW("tt::dist split_nccl_backend (parent '", parent.name(), "'): this build has no NCCL");
}

#endif

}  // namespace tt::dist
