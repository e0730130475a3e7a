// The MPI backend of tt::dist: MPI_COMM_WORLD (or a communicator split from it), CPU tensors, errors returned (not fatal) and
// turned into tt::Error. Without MPI (TT_WITH_MPI unset) make_mpi_backend returns nullptr and
// world() falls back to the one-process group.
#include <cstdlib>
#include <limits>
#include <string>

#include "tt/dist.h"

#if TT_WITH_MPI
// The C API only: mpi.h would otherwise pull in the deprecated C++ bindings (libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <climits>
#endif

namespace tt::dist {

#if TT_WITH_MPI
namespace {

// Throws tt::Error naming the MPI function, the rank and MPI's own message when rc is an error.
void check_mpi(int rc, const char* fn, int rank) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  TT_THROW("tt::dist: ", fn, " failed on rank ", rank, ": ", std::string(text, len));
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return MPI_FLOAT;
    case DType::kFloat64:
      return MPI_DOUBLE;
    case DType::kInt64:
      return MPI_INT64_T;
    case DType::kBFloat16:
      break;  // MPI has no bfloat16 datatype (and no reduction on it)
  }
  TT_THROW("tt::dist: no MPI datatype for ", dtype_name(dtype));
}

// MPI counts are int: larger tensors must be split by the caller (DDP buckets are far smaller).
int count_of(const Tensor& t, const char* fn) {
  TT_CHECK(t.numel() <= INT_MAX, "tt::dist: ", fn, ": ", t.describe(), " has more than INT_MAX (",
           INT_MAX, ") elements; split it");
  return static_cast<int>(t.numel());
}

// A nonblocking MPI collective: MPI_Test polls it (and lets MPI progress it), MPI_Wait ends it.
class MpiWork final : public BackendWork {
 public:
  MpiWork(int rank, const char* fn) : rank_(rank), fn_(fn) {}
  ~MpiWork() override {
    if (request != MPI_REQUEST_NULL) MPI_Wait(&request, MPI_STATUS_IGNORE);
  }
  MpiWork(const MpiWork&) = delete;
  MpiWork& operator=(const MpiWork&) = delete;
  bool test() override {
    if (request == MPI_REQUEST_NULL) return true;
    int done = 0;
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test", rank_);
    return done != 0;
  }
  void wait() override {
    if (request == MPI_REQUEST_NULL) return;
    check_mpi(MPI_Wait(&request, MPI_STATUS_IGNORE), fn_, rank_);
  }
  MPI_Request request = MPI_REQUEST_NULL;  ///< set by the starting call

 private:
  int rank_;
  const char* fn_;
};

class MpiBackend final : public Backend {
 public:
  MpiBackend() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      // The watchdog thread never calls MPI, so FUNNELED (only the main thread calls) suffices.
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      owns_mpi_ = true;
    }
    // Errors come back as return codes (then tt::Error) instead of aborting the job at once.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    if (const char* env = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) {
      local_rank_ = std::atoi(env);
    } else {  // another launcher: rank among the processes that share this node's memory
      MPI_Comm node;
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
      MPI_Comm_rank(node, &local_rank_);
      MPI_Comm_free(&node);
    }
  }
  ~MpiBackend() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (comm_ != MPI_COMM_WORLD && !finalized) MPI_Comm_free(&comm_);
    if (owns_mpi_ && !finalized) MPI_Finalize();
  }
  MpiBackend(const MpiBackend&) = delete;
  MpiBackend& operator=(const MpiBackend&) = delete;

  std::string name() const override { return "mpi"; }
  // MPI_Comm_split: a collective over this communicator; the sub-backend keeps this process's
  // local rank (it selects the GPU) and never finalizes MPI.
  std::unique_ptr<Backend> split(int color, int key) override {
    MPI_Comm sub = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split", rank_);
    return std::unique_ptr<Backend>(new MpiBackend(sub, local_rank_));
  }
  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  int local_rank() const override { return local_rank_; }

  void min_max(const std::vector<int64_t>& values, std::vector<int64_t>& mins,
               std::vector<int64_t>& maxs) override {
    // One collective for both (it runs before every collective of a group): the minima of the
    // values and of their negations, max(v) = -min(-v). The values are codes and sizes, never
    // INT64_MIN (whose negation overflows).
    const std::size_t n = values.size();
    std::vector<int64_t> both(2 * n);
    for (std::size_t i = 0; i < n; ++i) {
      TT_CHECK(values[i] != std::numeric_limits<int64_t>::min(),
               "tt::dist mpi min_max: INT64_MIN cannot be negated");
      both[i] = values[i];
      both[n + i] = -values[i];
    }
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, both.data(), static_cast<int>(2 * n), MPI_INT64_T,
                            MPI_MIN, comm_),
              "MPI_Allreduce(MIN) of the agreement check", rank_);
    mins.assign(both.begin(), both.begin() + static_cast<std::ptrdiff_t>(n));
    maxs.resize(n);
    for (std::size_t i = 0; i < n; ++i) maxs[i] = -both[n + i];
  }
  void all_reduce(const Tensor& t, ReduceOp) override {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, t.data_ptr(), count_of(t, "all_reduce"),
                            mpi_type(t.dtype()), MPI_SUM, comm_),
              "MPI_Allreduce", rank_);
  }
  std::unique_ptr<BackendWork> all_reduce_async(const Tensor& t, ReduceOp) override {
    auto work = std::make_unique<MpiWork>(rank_, "MPI_Iallreduce");
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, t.data_ptr(), count_of(t, "all_reduce_async"),
                             mpi_type(t.dtype()), MPI_SUM, comm_, &work->request),
              "MPI_Iallreduce", rank_);
    return work;
  }
  void broadcast(const Tensor& t, int root) override {
    check_mpi(MPI_Bcast(t.data_ptr(), count_of(t, "broadcast"), mpi_type(t.dtype()), root, comm_),
              "MPI_Bcast", rank_);
  }
  void reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp) override {
    count_of(input, "reduce_scatter");
    check_mpi(MPI_Reduce_scatter_block(input.data_ptr(), output.data_ptr(),
                                       count_of(output, "reduce_scatter"), mpi_type(output.dtype()),
                                       MPI_SUM, comm_),
              "MPI_Reduce_scatter_block", rank_);
  }
  void all_gather(const Tensor& output, const Tensor& input) override {
    count_of(output, "all_gather");
    const int n = count_of(input, "all_gather");
    check_mpi(MPI_Allgather(input.data_ptr(), n, mpi_type(input.dtype()), output.data_ptr(), n,
                            mpi_type(output.dtype()), comm_),
              "MPI_Allgather", rank_);
  }
  void barrier() override { check_mpi(MPI_Barrier(comm_), "MPI_Barrier", rank_); }
  void send_recv(const Tensor& send, int dst, const Tensor& recv, int src, int tag) override {
    MPI_Status status;
    check_mpi(MPI_Sendrecv(send.data_ptr(), count_of(send, "send_recv"), mpi_type(send.dtype()),
                           dst, tag, recv.data_ptr(), count_of(recv, "send_recv"),
                           mpi_type(recv.dtype()), src, tag, comm_, &status),
              "MPI_Sendrecv", rank_);
    check_received(status, recv, src, "send_recv");
  }
  void send(const Tensor& t, int dst, int tag) override {
    check_mpi(MPI_Send(t.data_ptr(), count_of(t, "send"), mpi_type(t.dtype()), dst, tag, comm_),
              "MPI_Send", rank_);
  }
  void recv(const Tensor& t, int src, int tag) override {
    MPI_Status status;
    check_mpi(
        MPI_Recv(t.data_ptr(), count_of(t, "recv"), mpi_type(t.dtype()), src, tag, comm_, &status),
        "MPI_Recv (a larger message than the buffer is MPI_ERR_TRUNCATE)", rank_);
    check_received(status, t, src, "recv");
  }
  void batch_send_recv(const std::vector<P2POp>& ops) override {
    batch_send_recv_async(ops)->wait();
  }
  std::unique_ptr<BackendWork> batch_send_recv_async(const std::vector<P2POp>& ops) override {
    auto work = std::make_unique<P2PWork>(*this, ops);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const P2POp& op = ops[i];
      const int n = count_of(op.tensor, "batch_send_recv");
      const MPI_Datatype type = mpi_type(op.tensor.dtype());
      if (op.kind == P2POp::Kind::kSend) {
        check_mpi(
            MPI_Isend(op.tensor.data_ptr(), n, type, op.peer, op.tag, comm_, &work->requests[i]),
            "MPI_Isend", rank_);
      } else {
        check_mpi(
            MPI_Irecv(op.tensor.data_ptr(), n, type, op.peer, op.tag, comm_, &work->requests[i]),
            "MPI_Irecv", rank_);
      }
    }
    return work;
  }

 private:
  // The transfers of one batch in flight: wait() completes them all (MPI_Waitall) and checks
  // the received sizes.
  class P2PWork final : public BackendWork {
   public:
    P2PWork(const MpiBackend& backend, const std::vector<P2POp>& ops)
        : requests(ops.size(), MPI_REQUEST_NULL),
          backend_(backend),
          ops_(ops),
          statuses_(ops.size()) {}
    bool test() override {
      if (checked_) return true;
      int done = 0;
      check_mpi(
          MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, statuses_.data()),
          "MPI_Testall of batch_send_recv", backend_.rank_);
      if (done != 0) check_sizes();
      return done != 0;
    }
    void wait() override {
      if (checked_) return;
      check_mpi(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), statuses_.data()),
                "MPI_Waitall of batch_send_recv (a larger message than the buffer is "
                "MPI_ERR_TRUNCATE)",
                backend_.rank_);
      check_sizes();
    }

    std::vector<MPI_Request> requests;  // one per transfer, filled by batch_send_recv_async

   private:
    void check_sizes() {
      checked_ = true;
      for (std::size_t i = 0; i < ops_.size(); ++i) {
        if (ops_[i].kind == P2POp::Kind::kRecv) {
          backend_.check_received(statuses_[i], ops_[i].tensor, ops_[i].peer, "batch_send_recv");
        }
      }
    }

    const MpiBackend& backend_;
    std::vector<P2POp> ops_;
    std::vector<MPI_Status> statuses_;
    bool checked_ = false;
  };

  // A message shorter than the buffer is legal in MPI; here it is a mismatched pair of calls.
  void check_received(MPI_Status& status, const Tensor& t, int src, const char* fn) const {
    int got = 0;
    MPI_Get_count(&status, mpi_type(t.dtype()), &got);
    TT_CHECK(got == t.numel(), "tt::dist ", fn, " (rank ", rank_, " of ", size_, "): received ",
             got, " elements from rank ", src, " into ", t.describe());
  }

  // A backend over `comm` (from split), owning it.
  MpiBackend(MPI_Comm comm, int local_rank) : local_rank_(local_rank), comm_(comm) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }

  int rank_ = 0, size_ = 1, local_rank_ = 0;
  bool owns_mpi_ = false;
  MPI_Comm comm_ = MPI_COMM_WORLD;
};

}  // namespace

std::unique_ptr<Backend> make_mpi_backend() {
  return std::make_unique<MpiBackend>();
}

#else

std::unique_ptr<Backend> make_mpi_backend() {
  return nullptr;
}

#endif

}  // namespace tt::dist
