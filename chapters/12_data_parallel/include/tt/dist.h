/// @file dist.h
/// @brief The process group: rank, world size and collectives over MPI (chapter 12).
///
/// Every process of a data-parallel job runs the same program; `mpirun -np N prog` starts N of
/// them and gives each a rank 0..N-1. tt::dist::world() returns this process's group:
/// - started by OpenMPI's mpirun (environment OMPI_COMM_WORLD_SIZE is set) and built with MPI:
///   an MPI group over MPI_COMM_WORLD (MPI_Init on the first call, MPI_Finalize in finalize(),
///   which every rank must call before returning from main; a process that exits without it,
///   e.g. std::exit(3) on an error, makes mpirun end the whole job);
/// - otherwise a group of one process ("self"), where every collective is the identity.
///
/// Collectives work on contiguous CPU tensors (float32, float64, int64) IN PLACE or into a given
/// output; every rank must call the same collectives in the same order with matching sizes.
/// Before each collective the group checks that this holds: a small MPI_Allreduce of
/// (collective, dtype, element count, root, op) with MIN and MAX. When the ranks disagree every
/// rank throws tt::Error naming the collective, its rank and the sizes (so no rank hangs).
///
/// A rank that dies (crash, uncaught exception, exit) makes mpirun kill the others within a
/// second or two (OpenMPI 4.1). A rank that hangs, or waits for a peer that never calls the
/// collective, is ended by the watchdog: when one collective or point-to-point call takes longer
/// than timeout_seconds() (environment TT_DIST_TIMEOUT_S, default 300 s), the process prints
/// what it was waiting for to stderr and exits with status 124; mpirun then ends the job.
///
/// CUDA tensors go through NCCL when the build found it (TT_WITH_NCCL): the group creates an
/// NCCL communicator on the first collective with a CUDA tensor (rank 0 makes the ncclUniqueId,
/// the CPU backend broadcasts it), on GPU local_rank(). NCCL runs on its own stream; events
/// order it after the work already queued on the device's compute stream
/// (tt::cuda::stream()) and the compute stream after it, so callers see the result as if the
/// collective were one more kernel: the host does not wait (the watchdog does not cover NCCL).
/// NCCL_NVLS_ENABLE is set to 0 before the communicator is created unless the environment sets
/// it (NVLink SHARP multicast is not available on every multi-GPU machine).
///
/// Batched point-to-point transfers (batch_send_recv, chapter 14's pipeline stages): the sends
/// and receives of one batch are all started, then all completed (MPI_Isend/MPI_Irecv and
/// MPI_Waitall on the CPU; ncclSend/ncclRecv between ncclGroupStart and ncclGroupEnd on CUDA,
/// the compute stream ordered after them). A batch that both sends to and receives from a peer
/// cannot deadlock on the order of the two, as a blocking send then receive can.
///
/// Nonblocking all-reduce: all_reduce_async() starts the collective and returns a Work; the
/// result is in the tensor after Work::wait() (MPI_Iallreduce on the CPU; on CUDA the compute
/// stream waits on the NCCL stream). DistributedDataParallel uses it to overlap each bucket's
/// communication with the rest of backward.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tt/tensor.h"

namespace tt::dist {

/// Reduction of all_reduce / reduce_scatter.
enum class ReduceOp {
  kSum,  ///< elementwise sum over the ranks
  kAvg,  ///< sum divided by world_size() (float tensors only)
};

/// "sum" or "avg".
const char* reduce_op_name(ReduceOp op);

/// One transfer of a batch of point-to-point calls (ProcessGroup::batch_send_recv).
struct P2POp {
  /// Whether this rank sends its tensor or receives into it.
  enum class Kind {
    kSend,  ///< send `tensor` to `peer`
    kRecv,  ///< receive into `tensor` from `peer`
  };
  Kind kind = Kind::kSend;  ///< send or receive
  Tensor tensor;            ///< the data sent, or the buffer that receives (the exact size)
  int peer = 0;             ///< the other rank, in the group
  int tag = 0;              ///< matches a send with a receive (MPI); NCCL matches them in order
};

/// A point in the queue of one device's work (CUDA: a timing event recorded on a stream). It is
/// reached when the device has run everything queued before it on that stream; the GPU's own
/// time between two marks of the same device can be read once both were reached. Made by
/// ProcessGroup::mark() and by the NCCL backend's collectives (Work::device_begin/device_end).
class DeviceMark {
 public:
  virtual ~DeviceMark() = default;
  /// Milliseconds of device time from `origin` to this mark (negative when this one came
  /// first); waits until both were reached (a host synchronization). Throws tt::Error when
  /// `origin` is a mark of another kind or device.
  virtual double ms_since(const DeviceMark& origin) const = 0;
};

/// A collective a Backend has started and not yet finished (Backend::all_reduce_async).
class BackendWork {
 public:
  virtual ~BackendWork() = default;
  /// True once the collective has completed (never blocks; with MPI it also drives progress).
  virtual bool test() = 0;
  /// Returns when the result may be used: on the CPU when the data is there; on CUDA when the
  /// device's compute stream has been ordered after the collective.
  virtual void wait() = 0;
  /// Where the collective began in the device's queue (when its inputs were ready and it could
  /// start), or nullptr when it does not run on a device (MPI on the CPU).
  virtual std::shared_ptr<DeviceMark> device_begin() const { return nullptr; }
  /// Where the collective ended in the device's queue, or nullptr (see device_begin()).
  virtual std::shared_ptr<DeviceMark> device_end() const { return nullptr; }
};

/// What a transport implements: the collectives on contiguous tensors of one device type, with
/// arguments already checked by ProcessGroup. MPI implements it for CPU tensors (its destructor
/// calls MPI_Finalize); a world of one process implements it with copies; NCCL implements it for
/// CUDA tensors (dist_nccl.cc).
class Backend {
 public:
  virtual ~Backend() = default;
  /// "mpi", "self", "nccl", ...
  virtual std::string name() const = 0;
  /// This process's rank.
  virtual int rank() const = 0;
  /// Number of processes.
  virtual int world_size() const = 0;
  /// Rank among the processes of this machine (selects the GPU).
  virtual int local_rank() const = 0;
  /// True when all_reduce and reduce_scatter compute ReduceOp::kAvg themselves (NCCL's ncclAvg);
  /// otherwise ProcessGroup passes kSum and divides the result by world_size().
  virtual bool native_avg() const { return false; }
  /// Elementwise MIN and MAX of int64 `values` over the ranks, written to `mins` and `maxs`
  /// (all of the same length): the agreement check before each collective.
  virtual void min_max(const std::vector<int64_t>& values, std::vector<int64_t>& mins,
                       std::vector<int64_t>& maxs) = 0;
  /// In place: `t` = `op` over the ranks of `t` (op is kSum unless native_avg()).
  virtual void all_reduce(const Tensor& t, ReduceOp op) = 0;
  /// Starts all_reduce(t, op) and returns its handle; `t` must stay untouched until wait().
  /// The default runs the blocking all_reduce and returns a completed handle.
  virtual std::unique_ptr<BackendWork> all_reduce_async(const Tensor& t, ReduceOp op);
  /// Out of place: `output` = `op` over the ranks of `input` (the same numel and dtype; they may
  /// be the same tensor), `input` unchanged; returns the handle like all_reduce_async (`output`
  /// untouched and `input` unchanged until wait()). The default copies input into output and
  /// runs all_reduce_async(output); NCCL reads input and writes output in one collective.
  virtual std::unique_ptr<BackendWork> all_reduce_into_async(const Tensor& output,
                                                             const Tensor& input, ReduceOp op);
  /// `t` on every rank becomes `t` of rank `root`.
  virtual void broadcast(const Tensor& t, int root) = 0;
  /// `output` (n elements) = rank's slice [rank*n, (rank+1)*n) of `op` over the ranks of
  /// `input` (N*n elements; op is kSum unless native_avg()).
  virtual void reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) = 0;
  /// `output` (N*n) = the `input`s (n each) of ranks 0..N-1, concatenated.
  virtual void all_gather(const Tensor& output, const Tensor& input) = 0;
  /// Returns when every rank has called it.
  virtual void barrier() = 0;
  /// A mark recorded now at the end of the device's compute stream (the GPU reaches it when the
  /// kernels queued so far have run), or nullptr when the backend has no device (the default).
  virtual std::shared_ptr<DeviceMark> mark() { return nullptr; }
  /// Sends `send` to rank `dst` while receiving `recv` from rank `src` (deadlock-free pair);
  /// throws when the received message has another size than `recv`.
  virtual void send_recv(const Tensor& send, int dst, const Tensor& recv, int src, int tag) = 0;
  /// Blocking send of `t` to rank `dst`.
  virtual void send(const Tensor& t, int dst, int tag) = 0;
  /// Blocking receive into `t` from rank `src`; throws when the message has another size.
  virtual void recv(const Tensor& t, int src, int tag) = 0;
  /// Starts every transfer of `ops` (all CPU tensors, or all CUDA tensors of this backend's
  /// device) and returns when all have completed (CUDA: when the compute stream is ordered
  /// after them); throws when a received message has another size than its buffer. The
  /// default throws tt::Error (a backend without batched point-to-point calls).
  virtual void batch_send_recv(const std::vector<P2POp>& ops);
  /// Starts every transfer of `ops` as batch_send_recv does and returns its handle without
  /// waiting: sent tensors must stay unchanged and received ones unread until wait() (and alive:
  /// the handle does not own them). MPI: MPI_Isend/MPI_Irecv, MPI_Waitall in wait(); NCCL: the
  /// group on the NCCL stream, wait() orders the compute stream after it. The default runs
  /// batch_send_recv and returns a completed handle.
  virtual std::unique_ptr<BackendWork> batch_send_recv_async(const std::vector<P2POp>& ops);
  /// A backend over the ranks that pass the same `color`, ordered by (`key`, rank); a
  /// collective of this backend's ranks (MPI_Comm_split). It keeps local_rank() (the GPU).
  /// The default throws tt::Error (a backend that cannot be split).
  virtual std::unique_ptr<Backend> split(int color, int key);
};

class ProcessGroup;

/// A collective in flight, returned by ProcessGroup::all_reduce_async. wait() makes the result
/// usable (and applies the division of ReduceOp::kAvg where the backend does not); the
/// destructor waits when nobody did (a collective cannot be abandoned: the peers take part in
/// it). It records when it started and when it was first seen complete, for timelines.
class Work {
 public:
  /// Wraps a backend collective on `t` started at `started`; `divide`: wait() divides `t` by
  /// the world size (ProcessGroup::all_reduce_async builds it). `input`: what an out-of-place
  /// collective reads, kept alive until wait().
  Work(ProcessGroup& group, std::unique_ptr<BackendWork> work, Tensor t, bool divide,
       std::string what, std::chrono::steady_clock::time_point started, Tensor input = Tensor());
  /// Waits when wait() was not called; an error is printed to stderr, not thrown.
  ~Work();
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  /// True once the collective has completed; never blocks. Records finished() the first time.
  bool is_completed();
  /// Blocks until the result is in the tensor (CPU) or ordered before later kernels (CUDA);
  /// a second call does nothing. Guarded by the group's watchdog.
  void wait();
  /// When the collective was started.
  std::chrono::steady_clock::time_point started() const { return started_; }
  /// When it was first seen complete (by is_completed() or wait()).
  std::chrono::steady_clock::time_point finished() const { return finished_; }
  /// On a device (NCCL): the mark where the collective began on the GPU, else nullptr.
  std::shared_ptr<DeviceMark> device_begin() const { return work_->device_begin(); }
  /// On a device (NCCL): the mark where the collective ended on the GPU, else nullptr.
  std::shared_ptr<DeviceMark> device_end() const { return work_->device_end(); }

 private:
  ProcessGroup& group_;
  std::unique_ptr<BackendWork> work_;
  Tensor tensor_;
  Tensor input_;
  bool divide_;
  std::string what_;
  bool completed_ = false;
  bool waited_ = false;
  std::chrono::steady_clock::time_point started_, finished_;
};

/// A group of processes (ranks) and the collectives between them. Obtain it with world().
///
/// Every call validates its tensors (defined, contiguous, float32/float64/int64, on the CPU or,
/// for collectives in an NCCL build, on CUDA device local_rank(); sizes consistent with
/// world_size()) and, for collectives, that all ranks agree (see the file comment); errors are
/// tt::Error naming the call, the rank and the sizes. Calls come from one thread at a time (MPI
/// is initialised with MPI_THREAD_FUNNELED).
class ProcessGroup {
 public:
  /// A group on `backend` (world() builds the right one; tests may build their own).
  explicit ProcessGroup(std::unique_ptr<Backend> backend);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  /// This process's rank, 0..world_size()-1.
  int rank() const { return rank_; }
  /// Number of processes.
  int world_size() const { return world_size_; }
  /// Rank on this machine (OMPI_COMM_WORLD_LOCAL_RANK): the GPU a rank uses.
  int local_rank() const { return local_rank_; }
  /// "mpi" or "self": the backend of CPU tensors.
  std::string backend_name() const;
  /// True when this build has the NCCL backend (collectives on CUDA tensors).
  static bool built_with_nccl();
  /// "rank r of N" for messages.
  std::string where() const;

  /// In place: t = op over the ranks of t.
  void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::kSum);
  /// Out of place: output = op over the ranks of input, input unchanged (the same dtype, numel
  /// and device; on NCCL one collective, no copy). Chapter 13's f and g sum into new tensors.
  void all_reduce(const Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::kSum);
  /// Starts all_reduce(t, op) without waiting for it (the agreement check still runs first);
  /// `t` holds the result after the returned Work's wait(). Nonblocking collectives are
  /// matched across ranks in the order they are started, like blocking ones.
  [[nodiscard]] std::unique_ptr<Work> all_reduce_async(const Tensor& t,
                                                       ReduceOp op = ReduceOp::kSum);
  /// Starts all_reduce(output, input, op) without waiting for it: output holds the result after
  /// the returned Work's wait(); input must stay unchanged until then.
  [[nodiscard]] std::unique_ptr<Work> all_reduce_async(const Tensor& output, const Tensor& input,
                                                       ReduceOp op = ReduceOp::kSum);
  /// In place: t = t of rank `root`.
  void broadcast(const Tensor& t, int root = 0);
  /// output = this rank's 1/N slice of (op over the ranks of input); input.numel() must be
  /// world_size() * output.numel() (both flat in memory, same dtype).
  void reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::kSum);
  /// output = concatenation of every rank's input; output.numel() = world_size() *
  /// input.numel().
  void all_gather(const Tensor& output, const Tensor& input);
  /// Waits for every rank (and, when the NCCL backend exists, for its queued collectives).
  void barrier();
  /// A DeviceMark recorded now on the compute stream of `t`'s device when `t` is a CUDA tensor
  /// (through the NCCL backend, created if needed); nullptr for a CPU tensor. Local: the other
  /// ranks take no part. Times GPU work against collectives (Reducer's device timeline).
  std::shared_ptr<DeviceMark> mark(const Tensor& t);
  /// Sends `send` to `dst` and receives `recv` from `src` at the same time (the ring step).
  void send_recv(const Tensor& send, int dst, const Tensor& recv, int src, int tag = 0);
  /// Blocking point-to-point send.
  void send(const Tensor& t, int dst, int tag = 0);
  /// Blocking point-to-point receive; its size must match what the peer sent.
  void recv(const Tensor& t, int src, int tag = 0);
  /// Runs the sends and receives of `ops` as one batch (see the file comment): all CPU tensors
  /// (MPI) or all CUDA tensors of this rank's GPU (NCCL), contiguous, float32, float64, int64
  /// or (NCCL only) bfloat16. Every send must meet a receive of the same size (and tag) on its
  /// peer, in a batch that the peer can reach; NCCL pairs the transfers between two ranks in
  /// the order they are listed. Guarded by the watchdog on the CPU. An empty batch does
  /// nothing.
  void batch_send_recv(const std::vector<P2POp>& ops);
  /// batch_send_recv() without waiting (chapter 16's ring attention overlaps the transfer of the
  /// next K/V block with the attention of the current one): the same checks, then the transfers
  /// start and the returned Work's wait() completes them (guarded by the watchdog). Until then
  /// the sent tensors must not change and the received ones must not be read; the caller keeps
  /// them alive. An empty batch returns a completed Work.
  [[nodiscard]] std::unique_ptr<Work> batch_send_recv_async(const std::vector<P2POp>& ops);
  /// A new group of the ranks of this group that pass the same `color` (>= 0), ranked by
  /// (`key`, rank in this group): chapter 13's data- and tensor-parallel groups. Every rank of
  /// this group must call it (a collective: MPI_Comm_split on the CPU backend). When this group
  /// already has its NCCL communicator (init_cuda(), or a CUDA collective before), the new group
  /// gets its own now, by ncclCommSplit; otherwise on its first CUDA collective (a fresh
  /// ncclUniqueId broadcast over the new group, ncclCommInitRank). Destroy the new group before
  /// finalize().
  std::unique_ptr<ProcessGroup> split(int color, int key);
  /// Creates this group's NCCL communicator now (on the GPU local_rank()) instead of at the first
  /// CUDA collective, so that groups split from it afterwards use ncclCommSplit. A collective of
  /// the group's ranks; nothing when it exists. Throws as the first CUDA collective would (no
  /// NCCL, no such GPU).
  void init_cuda();
  /// Destroys this group's NCCL communicator (after the work queued on it), freeing its buffers;
  /// the next CUDA collective makes a new one. Groups split from it keep theirs. Nothing when
  /// there is none.
  void release_cuda();
  /// The name of the NCCL backend of this group's CUDA tensors ("nccl", "nccl (ncclCommSplit)"),
  /// or "" before it exists.
  std::string cuda_backend_name() const;

  /// The watchdog limit of one call, in seconds.
  double timeout_seconds() const { return timeout_s_; }
  /// Sets the watchdog limit (> 0).
  void set_timeout_seconds(double seconds);
  /// Bytes of tensor data this rank passed to collectives and sends so far (buffer sizes: an
  /// all_reduce of B bytes counts B, a reduce_scatter its input, an all_gather its output).
  int64_t bytes_communicated() const { return bytes_; }
  /// Bytes this rank sends on the wire when all_reduce, reduce_scatter and all_gather use the
  /// bandwidth-optimal ring algorithms (the alpha-beta model): 2(N-1)/N B per all_reduce,
  /// (N-1)/N B per reduce_scatter or all_gather of a B-byte full buffer; sends count B.
  int64_t ring_bytes() const { return ring_bytes_; }

 private:
  friend class Work;
  class Watchdog;
  void check_tensor(const char* call, const Tensor& t, bool float_only, bool cuda_ok = true) const;
  void check_all_reduce(const char* call, const Tensor& output, const Tensor& input,
                        ReduceOp op) const;
  std::unique_ptr<Work> start_all_reduce(const char* call, const Tensor& output,
                                         const Tensor& input, ReduceOp op, bool blocking);
  Backend& backend_for(const Tensor& t);
  void check_agreement(int64_t call, const Tensor& t, int64_t root, int64_t op);
  void check_peer(const char* call, int peer) const;
  void count(const Tensor& t, int64_t ring_phases);

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Backend> cuda_backend_;  // NCCL, created by the first CUDA collective
  int rank_, world_size_, local_rank_;
  double timeout_s_;
  int64_t bytes_ = 0;
  int64_t ring_bytes_ = 0;
  std::unique_ptr<Watchdog> watchdog_;
};

/// The group of this process (created on the first call; see the file comment).
ProcessGroup& world();
/// Finalizes MPI when world() started it: call it on every rank before returning from main
/// (not at exit: an error exit must not wait in MPI_Finalize for peers that wait for it).
/// world() may not be called afterwards.
void finalize();
/// The main of a program every rank runs: returns `body()`'s status after finalize(); when
/// `body` throws, prints "<program> (rank r): <message>" to stderr and returns 1 without
/// finalizing (mpirun then ends the other ranks, which may wait in a collective).
int run_on_every_rank(const char* program, const std::function<int()>& body);
/// True when this build can run multi-process (compiled with MPI).
bool built_with_mpi();
/// The backend of a one-process world: every collective is the identity (avg divides by 1),
/// send_recv to itself copies.
std::unique_ptr<Backend> make_self_backend();
/// The NCCL backend for CUDA tensors of a group whose CPU backend is `bootstrap` (used to
/// broadcast the ncclUniqueId): one communicator of bootstrap.world_size() ranks on CUDA device
/// bootstrap.local_rank(). Throws tt::Error when the build has no NCCL, when the device does
/// not exist (more ranks on this machine than GPUs), or when NCCL fails, naming the call, rank
/// and device.
std::unique_ptr<Backend> make_nccl_backend(Backend& bootstrap);
/// The NCCL backend of a sub-group: ncclCommSplit(`parent`'s communicator, color, key), a
/// collective of parent's ranks (NCCL shares the parent's topology and connections instead of
/// bootstrapping a new communicator). `bootstrap` is the sub-group's CPU backend, split from
/// parent's bootstrap with the same color and key; the two must agree on the rank (checked).
/// Name "nccl (ncclCommSplit)". Throws tt::Error when parent is not an NCCL backend, when the
/// build has no NCCL, or when NCCL fails.
std::unique_ptr<Backend> split_nccl_backend(Backend& parent, Backend& bootstrap, int color,
                                            int key);

}  // namespace tt::dist
