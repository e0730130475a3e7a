// The process group front end (argument checks, the cross-rank agreement check, the watchdog),
// the one-process backend and world(). The MPI backend is in dist_mpi.cc.
#include "tt/dist.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>

#include "tt/dispatcher.h"
#include "tt/optim.h"

namespace tt::dist {

// Defined in dist_mpi.cc: the MPI backend (nullptr when built without MPI).
std::unique_ptr<Backend> make_mpi_backend();

const char* reduce_op_name(ReduceOp op) {
  return op == ReduceOp::kSum ? "sum" : "avg";
}

bool built_with_mpi() {
#if TT_WITH_MPI
  return true;
#else
  return false;
#endif
}

// ----- watchdog ----------------------------------------------------------------------------

// One thread per group. A call arms it with a deadline and a description; if the call has not
// returned (disarmed) by then, the process reports what it waited for and exits with 124, which
// makes mpirun end the whole job. Exiting is the only safe reaction: the MPI call cannot be
// cancelled, and the peers are blocked in it too.
class ProcessGroup::Watchdog {
 public:
  explicit Watchdog(std::string where) : where_(std::move(where)), thread_([this] { loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Arms the watchdog for the lifetime of the scope.
  class Scope {
   public:
    Scope(Watchdog& w, std::string what, double seconds) : w_(w) {
      {
        std::lock_guard<std::mutex> lock(w_.mutex_);
        w_.what_ = std::move(what);
        w_.seconds_ = seconds;
        w_.deadline_ = std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(seconds));
        w_.armed_ = true;
      }
      w_.cv_.notify_all();
    }
    ~Scope() {
      std::lock_guard<std::mutex> lock(w_.mutex_);
      w_.armed_ = false;
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Watchdog& w_;
  };

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      if (!armed_) {
        cv_.wait(lock, [this] { return stop_ || armed_; });
        continue;
      }
      const auto deadline = deadline_;
      cv_.wait_until(lock, deadline,
                     [this, deadline] { return stop_ || !armed_ || deadline_ != deadline; });
      if (!stop_ && armed_ && deadline_ == deadline &&
          std::chrono::steady_clock::now() >= deadline) {
        std::fprintf(stderr,
                     "tt::dist: %s: %s did not complete within %.1f s: a peer rank has died, "
                     "hangs, or called a different collective. Exiting with status 124 "
                     "(TT_DIST_TIMEOUT_S sets the limit).\n",
                     where_.c_str(), what_.c_str(), seconds_);
        std::fflush(stderr);
        std::_Exit(124);
      }
    }
  }

  std::string where_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool armed_ = false;
  std::string what_;
  double seconds_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  std::thread thread_;
};

// ----- ProcessGroup ------------------------------------------------------------------------

namespace {

double timeout_from_env() {
  const char* env = std::getenv("TT_DIST_TIMEOUT_S");
  if (env == nullptr || *env == '\0') return 300.0;
  char* end = nullptr;
  const double s = std::strtod(env, &end);
  TT_CHECK(end != env && *end == '\0' && s > 0,
           "tt::dist: TT_DIST_TIMEOUT_S must be a number > 0, got '", env, "'");
  return s;
}

// Codes of the agreement check (every rank must call the same collective).
enum Call : int64_t { kAllReduce = 1, kBroadcast, kReduceScatter, kAllGather, kBarrier };

const char* call_name(int64_t call) {
  switch (call) {
    case kAllReduce:
      return "all_reduce";
    case kBroadcast:
      return "broadcast";
    case kReduceScatter:
      return "reduce_scatter";
    case kAllGather:
      return "all_gather";
    case kBarrier:
      return "barrier";
    default:
      return "?";
  }
}

std::string describe_elems(const Tensor& t) {
  return detail::str(t.numel(), " ", dtype_name(t.dtype()), " elements");
}

// Divides every element by n (the avg of a sum) with chapter 05's "scale_" kernel.
void divide_by(const Tensor& t, int n) {
  if (n == 1) return;
  call_kernel<optim::ScaleInplaceKernel>("scale_", t.device(), std::vector<Tensor>{t},
                                         1.0 / static_cast<double>(n));
}

}  // namespace

ProcessGroup::ProcessGroup(std::unique_ptr<Backend> backend)
    : backend_(std::move(backend)), timeout_s_(timeout_from_env()) {
  TT_CHECK(backend_ != nullptr, "ProcessGroup: no backend");
  rank_ = backend_->rank();
  world_size_ = backend_->world_size();
  local_rank_ = backend_->local_rank();
  watchdog_ = std::make_unique<Watchdog>(where());
}

ProcessGroup::~ProcessGroup() = default;

std::string ProcessGroup::backend_name() const {
  return backend_->name();
}

std::string ProcessGroup::where() const {
  return detail::str("rank ", rank_, " of ", world_size_);
}

void ProcessGroup::set_timeout_seconds(double seconds) {
  TT_CHECK(seconds > 0, "ProcessGroup::set_timeout_seconds: expected a limit > 0 s, got ", seconds);
  timeout_s_ = seconds;
}

bool ProcessGroup::built_with_nccl() {
#if TT_WITH_NCCL
  return true;
#else
  return false;
#endif
}

void ProcessGroup::check_tensor(const char* call, const Tensor& t, bool float_only,
                                bool cuda_ok) const {
  TT_CHECK(t.defined(), "tt::dist ", call, " (", where(), "): the tensor is undefined");
  if (t.device().is_cuda()) {
    TT_CHECK(cuda_ok, "tt::dist ", call, " (", where(), "): ", t.describe(),
             " is on a GPU; point-to-point calls move CPU tensors only");
    TT_CHECK(built_with_nccl(), "tt::dist ", call, " (", where(), "): ", t.describe(),
             " is on a GPU, but this build has no NCCL (CUDA tensors need the NCCL backend; "
             "configure with the CUDA toolkit's NCCL, see cmake/FindNCCL.cmake)");
  } else {
    TT_CHECK(t.device().is_cpu(), "tt::dist ", call, " (", where(), "): ", t.describe(),
             " is on a device no backend serves");
  }
  TT_CHECK(t.is_contiguous(), "tt::dist ", call, " (", where(), "): ", t.describe(),
           " is not contiguous (call .contiguous() and copy the result back)");
  TT_CHECK(!float_only || is_floating(t.dtype()), "tt::dist ", call, " (", where(),
           "): reduction avg needs a float tensor, got ", t.describe());
}

void ProcessGroup::check_peer(const char* call, int peer) const {
  TT_CHECK(peer >= 0 && peer < world_size_, "tt::dist ", call, " (", where(), "): peer rank ", peer,
           " is not in 0..", world_size_ - 1);
}

Backend& ProcessGroup::backend_for(const Tensor& t) {
  if (!t.device().is_cuda()) return *backend_;
  if (!cuda_backend_) cuda_backend_ = make_nccl_backend(*backend_);
  TT_CHECK(t.device().index == cuda_backend_->local_rank(), "tt::dist (", where(),
           "): ", t.describe(), " is on another GPU than this rank's NCCL communicator (cuda:",
           cuda_backend_->local_rank(), ", the rank on this machine)");
  return *cuda_backend_;
}

void ProcessGroup::check_agreement(int64_t code, const Tensor& t, int64_t root, int64_t op) {
  if (world_size_ == 1) return;
  const char* call = call_name(code);
  const int64_t device = t.defined() ? static_cast<int64_t>(t.device().type) : -1;
  const std::vector<int64_t> mine = {code,
                                     t.defined() ? static_cast<int64_t>(t.dtype()) : -1,
                                     t.defined() ? t.numel() : 0,
                                     root,
                                     op,
                                     device};
  std::vector<int64_t> lo, hi;
  {
    Watchdog::Scope scope(*watchdog_, detail::str(call, "'s agreement check"), timeout_s_);
    backend_->min_max(mine, lo, hi);
  }
  if (lo == hi) return;
  std::string msg = detail::str("tt::dist ", call, " (", where(), "): the ranks disagree: ");
  if (lo[0] != hi[0]) {
    msg +=
        detail::str("some ranks called ", call_name(lo[0]), " and others ", call_name(hi[0]), "; ");
  }
  if (t.defined()) msg += detail::str("this rank passes ", describe_elems(t));
  if (lo[1] != hi[1]) {
    msg += detail::str("; dtypes differ (", dtype_name(static_cast<DType>(lo[1])), " vs ",
                       dtype_name(static_cast<DType>(hi[1])), ")");
  }
  if (lo[2] != hi[2]) msg += detail::str("; element counts range over [", lo[2], ", ", hi[2], "]");
  if (lo[3] != hi[3]) msg += detail::str("; roots range over [", lo[3], ", ", hi[3], "]");
  if (lo[4] != hi[4]) msg += "; the reduction ops differ";
  if (lo[5] != hi[5]) msg += "; some ranks pass CPU tensors and others CUDA tensors";
  TT_THROW(msg);
}

// Counts a call on the full buffer t: its bytes, and (N-1)/N of them per ring phase.
void ProcessGroup::count(const Tensor& t, int64_t ring_phases) {
  const int64_t b = t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
  bytes_ += b;
  ring_bytes_ += ring_phases * b * (world_size_ - 1) / world_size_;
}

void ProcessGroup::check_all_reduce(const char* call, const Tensor& output, const Tensor& input,
                                    ReduceOp op) const {
  check_tensor(call, output, op == ReduceOp::kAvg);
  check_tensor(call, input, op == ReduceOp::kAvg);
  TT_CHECK(output.dtype() == input.dtype() && output.numel() == input.numel() &&
               output.device() == input.device(),
           "tt::dist ", call, " (", where(), "): output ", output.describe(), " and input ",
           input.describe(), " must have the same dtype, number of elements and device");
}

namespace {

// The handle of a collective that already completed (Backend::all_reduce_async's default).
class DoneWork final : public BackendWork {
 public:
  bool test() override { return true; }
  void wait() override {}
};

}  // namespace

std::unique_ptr<Work> ProcessGroup::start_all_reduce(const char* call, const Tensor& output,
                                                     const Tensor& input, ReduceOp op,
                                                     bool blocking) {
  check_all_reduce(call, output, input, op);
  Backend& backend = backend_for(output);
  check_agreement(kAllReduce, output, 0, static_cast<int64_t>(op));
  const bool divide = op == ReduceOp::kAvg && !backend.native_avg();
  const ReduceOp backend_op = divide ? ReduceOp::kSum : op;
  std::string what = detail::str(call, "(", reduce_op_name(op), ") of ", describe_elems(input));
  std::unique_ptr<BackendWork> work;
  const auto started = std::chrono::steady_clock::now();
  {
    Watchdog::Scope scope(*watchdog_, what, timeout_s_);
    if (blocking && output.data_ptr() == input.data_ptr()) {
      backend.all_reduce(output, backend_op);
      work = std::make_unique<DoneWork>();
    } else {
      work = backend.all_reduce_into_async(output, input, backend_op);
    }
  }
  count(output, 2);
  auto handle = std::make_unique<Work>(*this, std::move(work), output, divide, std::move(what),
                                       started, input);
  (void)handle->is_completed();  // a collective that completed at once gets its finish time now
  return handle;
}

void ProcessGroup::all_reduce(const Tensor& t, ReduceOp op) {
  start_all_reduce("all_reduce", t, t, op, true)->wait();
}

void ProcessGroup::all_reduce(const Tensor& output, const Tensor& input, ReduceOp op) {
  start_all_reduce("all_reduce", output, input, op, true)->wait();
}

std::unique_ptr<Work> ProcessGroup::all_reduce_async(const Tensor& t, ReduceOp op) {
  return start_all_reduce("all_reduce_async", t, t, op, false);
}

std::unique_ptr<Work> ProcessGroup::all_reduce_async(const Tensor& output, const Tensor& input,
                                                     ReduceOp op) {
  return start_all_reduce("all_reduce_async", output, input, op, false);
}

// ----- Work --------------------------------------------------------------------------------

std::unique_ptr<BackendWork> Backend::all_reduce_async(const Tensor& t, ReduceOp op) {
  all_reduce(t, op);
  return std::make_unique<DoneWork>();
}

std::unique_ptr<BackendWork> Backend::all_reduce_into_async(const Tensor& output,
                                                            const Tensor& input, ReduceOp op) {
  if (output.data_ptr() != input.data_ptr()) output.copy_(input.view(output.shape()));
  return all_reduce_async(output, op);
}

void Backend::batch_send_recv(const std::vector<P2POp>& ops) {
  TT_THROW("tt::dist batch_send_recv of ", ops.size(), " transfers: the '", name(),
           "' backend has no batched point-to-point calls");
}

std::unique_ptr<BackendWork> Backend::batch_send_recv_async(const std::vector<P2POp>& ops) {
  batch_send_recv(ops);
  return std::make_unique<DoneWork>();
}

std::unique_ptr<Backend> Backend::split(int color, int key) {
  TT_THROW("tt::dist split(color=", color, ", key=", key, "): the '", name(),
           "' backend cannot be split into sub-groups");
}

Work::Work(ProcessGroup& group, std::unique_ptr<BackendWork> work, Tensor t, bool divide,
           std::string what, std::chrono::steady_clock::time_point started, Tensor input)
    : group_(group),
      work_(std::move(work)),
      tensor_(std::move(t)),
      input_(std::move(input)),
      divide_(divide),
      what_(std::move(what)),
      started_(started) {
  TT_CHECK(work_ != nullptr, "tt::dist::Work: no backend work for ", what_);
}

Work::~Work() {
  if (waited_) return;
  try {
    wait();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tt::dist: %s: %s (while waiting in ~Work)\n", group_.where().c_str(),
                 e.what());
  }
}

bool Work::is_completed() {
  if (!completed_ && work_->test()) {
    completed_ = true;
    finished_ = std::chrono::steady_clock::now();
  }
  return completed_;
}

void Work::wait() {
  if (waited_) return;
  waited_ = true;
  {
    ProcessGroup::Watchdog::Scope scope(*group_.watchdog_, what_, group_.timeout_s_);
    work_->wait();
  }
  if (!completed_) {
    completed_ = true;
    finished_ = std::chrono::steady_clock::now();
  }
  if (divide_) divide_by(tensor_, group_.world_size());
  tensor_ = input_ = Tensor();  // the buffers may be reused or freed from now on
}

void ProcessGroup::broadcast(const Tensor& t, int root) {
  check_tensor("broadcast", t, false);
  Backend& backend = backend_for(t);
  check_peer("broadcast", root);
  check_agreement(kBroadcast, t, root, 0);
  Watchdog::Scope scope(
      *watchdog_, detail::str("broadcast from rank ", root, " of ", describe_elems(t)), timeout_s_);
  backend.broadcast(t, root);
  count(t, 0);
}

void ProcessGroup::reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) {
  check_tensor("reduce_scatter", output, op == ReduceOp::kAvg);
  check_tensor("reduce_scatter", input, op == ReduceOp::kAvg);
  TT_CHECK(output.dtype() == input.dtype() &&
               input.numel() == output.numel() * static_cast<int64_t>(world_size_),
           "tt::dist reduce_scatter (", where(), "): input ", input.describe(),
           " must hold world_size (", world_size_, ") x output ", output.describe(),
           " elements of the same dtype");
  TT_CHECK(output.device() == input.device(), "tt::dist reduce_scatter (", where(), "): input ",
           input.describe(), " and output ", output.describe(), " are on different devices");
  Backend& backend = backend_for(input);
  const bool divide = op == ReduceOp::kAvg && !backend.native_avg();
  check_agreement(kReduceScatter, output, 0, static_cast<int64_t>(op));
  {
    Watchdog::Scope scope(
        *watchdog_,
        detail::str("reduce_scatter(", reduce_op_name(op), ") of ", describe_elems(input)),
        timeout_s_);
    backend.reduce_scatter(output, input, divide ? ReduceOp::kSum : op);
  }
  if (divide) divide_by(output, world_size_);
  count(input, 1);
}

void ProcessGroup::all_gather(const Tensor& output, const Tensor& input) {
  check_tensor("all_gather", output, false);
  check_tensor("all_gather", input, false);
  TT_CHECK(output.dtype() == input.dtype() &&
               output.numel() == input.numel() * static_cast<int64_t>(world_size_),
           "tt::dist all_gather (", where(), "): output ", output.describe(),
           " must hold world_size (", world_size_, ") x input ", input.describe(),
           " elements of the same dtype");
  TT_CHECK(output.device() == input.device(), "tt::dist all_gather (", where(), "): input ",
           input.describe(), " and output ", output.describe(), " are on different devices");
  Backend& backend = backend_for(input);
  check_agreement(kAllGather, input, 0, 0);
  Watchdog::Scope scope(*watchdog_, detail::str("all_gather of ", describe_elems(output)),
                        timeout_s_);
  backend.all_gather(output, input);
  count(output, 1);
}

void ProcessGroup::barrier() {
  check_agreement(kBarrier, Tensor(), 0, 0);
  Watchdog::Scope scope(*watchdog_, "barrier", timeout_s_);
  backend_->barrier();
  if (cuda_backend_) cuda_backend_->barrier();
}

std::shared_ptr<DeviceMark> ProcessGroup::mark(const Tensor& t) {
  TT_CHECK(t.defined(), "ProcessGroup::mark (", where(), "): undefined tensor");
  return t.device().is_cuda() ? backend_for(t).mark() : nullptr;
}

void ProcessGroup::send_recv(const Tensor& send, int dst, const Tensor& recv, int src, int tag) {
  check_tensor("send_recv", send, false, false);
  check_tensor("send_recv", recv, false, false);
  check_peer("send_recv", dst);
  check_peer("send_recv", src);
  TT_CHECK(send.dtype() == recv.dtype(), "tt::dist send_recv (", where(), "): send ",
           send.describe(), " and recv ", recv.describe(), " have different dtypes");
  Watchdog::Scope scope(*watchdog_,
                        detail::str("send_recv (", describe_elems(send), " to rank ", dst, ", ",
                                    describe_elems(recv), " from rank ", src, ")"),
                        timeout_s_);
  backend_->send_recv(send, dst, recv, src, tag);
  count(send, 0);
  ring_bytes_ += send.numel() * static_cast<int64_t>(dtype_size(send.dtype()));
}

void ProcessGroup::send(const Tensor& t, int dst, int tag) {
  check_tensor("send", t, false, false);
  check_peer("send", dst);
  Watchdog::Scope scope(*watchdog_, detail::str("send of ", describe_elems(t), " to rank ", dst),
                        timeout_s_);
  backend_->send(t, dst, tag);
  count(t, 0);
  ring_bytes_ += t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
}

void ProcessGroup::recv(const Tensor& t, int src, int tag) {
  check_tensor("recv", t, false, false);
  check_peer("recv", src);
  Watchdog::Scope scope(*watchdog_, detail::str("recv of ", describe_elems(t), " from rank ", src),
                        timeout_s_);
  backend_->recv(t, src, tag);
}

void ProcessGroup::batch_send_recv(const std::vector<P2POp>& ops) {
  batch_send_recv_async(ops)->wait();
}

std::unique_ptr<Work> ProcessGroup::batch_send_recv_async(const std::vector<P2POp>& ops) {
  const auto started = std::chrono::steady_clock::now();
  if (ops.empty()) {
    return std::make_unique<Work>(*this, std::make_unique<DoneWork>(), Tensor(), false,
                                  "an empty batch_send_recv", started);
  }
  int64_t sent = 0, received = 0;
  for (const P2POp& op : ops) {
    const bool send = op.kind == P2POp::Kind::kSend;
    check_tensor(send ? "batch_send_recv (send)" : "batch_send_recv (recv)", op.tensor, false);
    check_peer("batch_send_recv", op.peer);
    TT_CHECK(op.tensor.device() == ops.front().tensor.device(), "tt::dist batch_send_recv (",
             where(), "): ", op.tensor.describe(), " and ", ops.front().tensor.describe(),
             " are on different devices (one batch moves tensors of one device)");
    (send ? sent : received) +=
        op.tensor.numel() * static_cast<int64_t>(dtype_size(op.tensor.dtype()));
  }
  Backend& backend = backend_for(ops.front().tensor);
  std::string what = detail::str("batch_send_recv of ", ops.size(), " transfers (", sent,
                                 " bytes sent, ", received, " bytes received)");
  std::unique_ptr<BackendWork> work;
  {
    Watchdog::Scope scope(*watchdog_, what, timeout_s_);
    work = backend.batch_send_recv_async(ops);
  }
  bytes_ += sent;
  ring_bytes_ += sent;
  return std::make_unique<Work>(*this, std::move(work), Tensor(), false, std::move(what), started);
}

std::unique_ptr<ProcessGroup> ProcessGroup::split(int color, int key) {
  TT_CHECK(color >= 0, "tt::dist split (", where(), "): color must be >= 0, got ", color);
  std::unique_ptr<Backend> sub;
  {
    Watchdog::Scope scope(*watchdog_, detail::str("split(color=", color, ", key=", key, ")"),
                          timeout_s_);
    sub = backend_->split(color, key);
  }
  auto group = std::make_unique<ProcessGroup>(std::move(sub));
  group->set_timeout_seconds(timeout_s_);
  if (cuda_backend_) {  // every rank of this group has it: all take part in ncclCommSplit
    Watchdog::Scope scope(
        *watchdog_, detail::str("ncclCommSplit(color=", color, ", key=", key, ")"), timeout_s_);
    group->cuda_backend_ = split_nccl_backend(*cuda_backend_, *group->backend_, color, key);
  }
  return group;
}

void ProcessGroup::init_cuda() {
  if (cuda_backend_) return;
  Watchdog::Scope scope(*watchdog_, "init_cuda (ncclCommInitRank)", timeout_s_);
  cuda_backend_ = make_nccl_backend(*backend_);
}

void ProcessGroup::release_cuda() {
  cuda_backend_.reset();
}

std::string ProcessGroup::cuda_backend_name() const {
  return cuda_backend_ ? cuda_backend_->name() : std::string();
}

// ----- the one-process backend -------------------------------------------------------------

namespace {

class SelfBackend final : public Backend {
 public:
  std::string name() const override { return "self"; }
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  int local_rank() const override { return 0; }
  void min_max(const std::vector<int64_t>& values, std::vector<int64_t>& mins,
               std::vector<int64_t>& maxs) override {
    mins = values;
    maxs = values;
  }
  void all_reduce(const Tensor&, ReduceOp) override {}
  void broadcast(const Tensor&, int) override {}
  void reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp) override {
    output.copy_(input.view(output.shape()));
  }
  void all_gather(const Tensor& output, const Tensor& input) override {
    output.copy_(input.view(output.shape()));
  }
  void barrier() override {}
  std::unique_ptr<Backend> split(int, int) override { return make_self_backend(); }
  void send_recv(const Tensor& send, int, const Tensor& recv, int, int) override {
    TT_CHECK(send.numel() == recv.numel(), "tt::dist send_recv (rank 0 of 1): sent ",
             send.describe(), " but receives into ", recv.describe());
    recv.copy_(send.view(recv.shape()));
  }
  void send(const Tensor& t, int, int) override {
    TT_THROW("tt::dist send (rank 0 of 1): ", t.describe(),
             ": a blocking send to itself never completes in a world of one process");
  }
  void recv(const Tensor& t, int, int) override {
    TT_THROW("tt::dist recv (rank 0 of 1): ", t.describe(),
             ": a blocking receive from itself never completes in a world of one process");
  }
  // Every receive takes the first unused send of the same tag (a transfer to itself).
  void batch_send_recv(const std::vector<P2POp>& ops) override {
    std::vector<bool> used(ops.size(), false);
    for (const P2POp& r : ops) {
      if (r.kind != P2POp::Kind::kRecv) continue;
      bool found = false;
      for (std::size_t i = 0; i < ops.size() && !found; ++i) {
        const P2POp& s = ops[i];
        if (used[i] || s.kind != P2POp::Kind::kSend || s.tag != r.tag) continue;
        TT_CHECK(s.tensor.numel() == r.tensor.numel() && s.tensor.dtype() == r.tensor.dtype(),
                 "tt::dist batch_send_recv (rank 0 of 1): sends ", s.tensor.describe(),
                 " with tag ", s.tag, " but receives into ", r.tensor.describe());
        r.tensor.copy_(s.tensor.view(r.tensor.shape()));
        used[i] = found = true;
      }
      TT_CHECK(found, "tt::dist batch_send_recv (rank 0 of 1): a receive into ",
               r.tensor.describe(), " with tag ", r.tag,
               " has no send in the same batch (it would never complete)");
    }
    for (std::size_t i = 0; i < ops.size(); ++i) {
      TT_CHECK(used[i] || ops[i].kind == P2POp::Kind::kRecv,
               "tt::dist batch_send_recv (rank 0 of 1): a send of ", ops[i].tensor.describe(),
               " with tag ", ops[i].tag, " has no receive in the same batch");
    }
  }
};

// The process's group; destroying it finalizes MPI (after its watchdog thread has stopped).
struct World {
  std::mutex mutex;
  std::unique_ptr<ProcessGroup> group;
  bool finalized = false;
  // At exit without finalize(): an MPI group is left alive on purpose. The exit may be an error
  // exit (std::exit(3)) while the peers wait in a collective, and MPI_Finalize would then block
  // until the watchdog fires; without it, mpirun sees the missing finalize and ends the job at
  // once.
  ~World() {
    if (group && group->backend_name() == "mpi") (void)group.release();
  }
  void finalize() {
    std::lock_guard<std::mutex> lock(mutex);
    finalized = true;
    group.reset();
  }
};

World& the_world() {
  static World w;
  return w;
}

// Started by mpirun (OpenMPI sets OMPI_COMM_WORLD_SIZE; PMI launchers set PMI_SIZE).
bool launched_by_mpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr;
}

}  // namespace

std::unique_ptr<Backend> make_self_backend() {
  return std::make_unique<SelfBackend>();
}

ProcessGroup& world() {
  World& w = the_world();
  std::lock_guard<std::mutex> lock(w.mutex);
  TT_CHECK(!w.finalized, "tt::dist::world: called after tt::dist::finalize()");
  if (!w.group) {
    std::unique_ptr<Backend> backend;
    if (launched_by_mpi()) {
      backend = make_mpi_backend();
      // Each process would otherwise silently train alone on the same data.
      TT_CHECK(backend != nullptr,
               "tt::dist::world: started by mpirun, but this program was built without MPI "
               "(install libopenmpi-dev openmpi-bin and configure again)");
    } else {
      backend = make_self_backend();
    }
    w.group = std::make_unique<ProcessGroup>(std::move(backend));
  }
  return *w.group;
}

void finalize() {
  the_world().finalize();
}

int run_on_every_rank(const char* program, const std::function<int()>& body) {
  int rc = 1;
  try {
    rc = body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s (rank %d): %s\n", program, world().rank(), e.what());
    return 1;  // mpirun ends the other ranks
  }
  finalize();
  return rc;
}

}  // namespace tt::dist
