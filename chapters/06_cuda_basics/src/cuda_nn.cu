// CUDA kernels of chapter 04's index-driven ops (given code): max over one dim and its
// backward, embedding (lookup and deterministic scatter-add) and the fused cross-entropy.
//
// These ops take indices that a kernel cannot validate with an exception. By default
// (IndexChecks::kHost) embedding and cross-entropy copy their indices to the host first (one
// synchronization, B*T int64 values) and throw tt::Error like the CPU kernels. With
// IndexChecks::kDevice a kernel checks them and records an error on the device instead (read by
// check_index_errors), so a training step runs without waiting for the GPU (chapter 10). Either
// way the kernels never dereference an out-of-range index, embedding's backward groups the
// tokens by row on the device (a stable radix sort), and cross-entropy counts its targets there.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "tt/cuda_block_reduce.h"
#include "tt/cuda_device.h"
#include "tt/cuda_ops.h"
#include "tt/dispatcher.h"
#include "tt/ops_nn.h"
#include "tt/ops_reduce.h"
#include "tt/strided_indexer.h"

namespace tt::cuda {

namespace {

// ----- max over one dim ------------------------------------------------------------------------

// values[j], indices[j] = max and first argmax of the n elements at kept.offsets(j).a + r * step.
template <typename T>
__global__ void max_dim_kernel(T* values, int64_t* indices, const T* in, int64_t n_out, int64_t n,
                               int64_t step, StridedIndexer kept) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t j = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < n_out; j += stride) {
    const T* x = in + kept.offsets(j).a;
    T best = x[0];
    int64_t arg = 0;
    for (int64_t r = 1; r < n; ++r) {
      const T y = x[r * step];
      bool take = y > best;
      if constexpr (std::is_floating_point_v<T>)
        take = take || (std::isnan(y) && !std::isnan(best));
      if (take) {
        best = y;
        arg = r;
      }
    }
    values[j] = best;
    indices[j] = arg;
  }
}

// grad_in[kept.offsets(j).a + indices[j] * step] = grad_values[j].
template <typename T>
__global__ void max_dim_backward_kernel(T* grad_in, const T* grad_values, const int64_t* indices,
                                        int64_t n_out, int64_t step, StridedIndexer kept) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t j = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < n_out; j += stride) {
    grad_in[kept.offsets(j).a + indices[j] * step] = grad_values[j];
  }
}

// The indexer over every dim of `t` but `dim` (the outputs of a max, row-major).
StridedIndexer kept_indexer(const Tensor& t, int64_t dim) {
  Shape shape;
  Strides strides;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d == dim) continue;
    shape.push_back(t.size(d));
    strides.push_back(t.stride(d));
  }
  return make_strided_indexer(shape, strides, strides);
}

// ----- embedding -------------------------------------------------------------------------------

// ----- index checks ----------------------------------------------------------------------------

// err[0] += 1 and err[1] = the value, for every idx[i] outside [0, size) that is not `allowed`.
__global__ void check_indices_kernel(unsigned long long* err, const int64_t* idx, int64_t n,
                                     int64_t size, bool has_allowed, int64_t allowed) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t v = idx[i];
    if ((v < 0 || v >= size) && !(has_allowed && v == allowed)) {
      atomicAdd(&err[0], 1ULL);
      err[1] = static_cast<unsigned long long>(v);
    }
  }
}

std::atomic<IndexChecks>& index_checks_mode() {
  static std::atomic<IndexChecks> mode{IndexChecks::kHost};
  return mode;
}

// The device record of index errors of device `dev`: int64 [2] = {count, one bad value}.
Tensor index_error_record(int dev) {
  static std::mutex mutex;
  static auto& table = *std::make_unique<std::vector<Tensor>>().release();  // never destroyed
  std::lock_guard<std::mutex> lock(mutex);
  if (table.empty()) table.resize(static_cast<std::size_t>(device_count()));
  Tensor& t = table[static_cast<std::size_t>(dev)];
  if (!t.defined()) t = zeros({2}, {DType::kInt64, Device::cuda(dev)});
  return t;
}

// ----- embedding -------------------------------------------------------------------------------

// out[i, c] = weight[idx[i], c] (0 for an index outside [0, V)), one thread per output element
// (grid-stride, coalesced in c).
template <typename T>
__global__ void embedding_forward_kernel(T* out, const T* weight, const int64_t* idx, int64_t n,
                                         int64_t V, int64_t C) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; e < n * C; e += stride) {
    const int64_t i = e / C, c = e - i * C;
    const int64_t r = idx[i];
    out[e] = r >= 0 && r < V ? weight[r * C + c] : T(0);
  }
}

// keys[i] = the row of token i (V for an index outside [0, V)), pos[i] = i: the pairs that a
// stable sort by key turns into the tokens of each row, in token order.
__global__ void embedding_keys_kernel(uint32_t* keys, int32_t* pos, const int64_t* idx, int64_t n,
                                      int64_t V) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t r = idx[i];
    keys[i] = static_cast<uint32_t>(r >= 0 && r < V ? r : V);
    pos[i] = static_cast<int32_t>(i);
  }
}

// keys/pos sorted by key (stably). Block b takes sorted positions s = b, + gridDim.x, ...; where
// a row's run of tokens starts (s == 0 or keys[s - 1] != keys[s]), dweight[row, c] = the sum of
// dout[token, c] over the run, in token order; threads split the columns. With `accumulate` the
// sum is added to dweight[row, c] instead (the same additions as writing it into a zeroed table
// and adding that table afterwards: the rows no token names are left as they are).
template <typename T>
__global__ void embedding_backward_kernel(T* dweight, const T* dout, const uint32_t* keys,
                                          const int32_t* pos, int64_t n, int64_t V, int64_t C,
                                          bool accumulate) {
  for (int64_t s = blockIdx.x; s < n; s += gridDim.x) {
    const uint32_t row = keys[s];
    if (row >= V || (s > 0 && keys[s - 1] == row)) continue;
    T* dw = dweight + int64_t{row} * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      T acc = 0;
      for (int64_t k = s; k < n && keys[k] == row; ++k) acc += dout[int64_t{pos[k]} * C + c];
      dw[c] = accumulate ? dw[c] + acc : acc;
    }
  }
}

// Checks that every int64 index lies in [0, size) or equals `allowed`: on the host (throws
// tt::Error naming `op`, the position and the value) or, with IndexChecks::kDevice, by a kernel
// that records errors for check_index_errors().
void check_indices(const char* op, const Tensor& indices, int64_t size,
                   std::optional<int64_t> allowed, const char* what);

// The int64 `indices` on the host, each checked to lie in [0, size) or equal `allowed`; throws
// tt::Error naming `op`, the position and the value otherwise.
std::vector<int64_t> host_indices(const char* op, const Tensor& indices, int64_t size,
                                  std::optional<int64_t> allowed, const char* what) {
  TT_CHECK(indices.dtype() == DType::kInt64, "cuda::", op, ": ", what, " must be int64, got ",
           indices.describe());
  const Tensor host = indices.contiguous().to(Device::cpu());
  const int64_t* p = host.data<int64_t>();
  std::vector<int64_t> v(p, p + host.numel());
  for (std::size_t i = 0; i < v.size(); ++i) {
    TT_CHECK((v[i] >= 0 && v[i] < size) || v[i] == allowed, "cuda::", op, ": ", what, "[", i,
             "] = ", v[i], " is out of range [0, ", size, ") (", what, " shape ", indices.shape(),
             " on ", indices.device(), ")");
  }
  return v;
}

void check_indices(const char* op, const Tensor& indices, int64_t size,
                   std::optional<int64_t> allowed, const char* what) {
  if (index_checks() == IndexChecks::kHost) {
    host_indices(op, indices, size, allowed, what);
    return;
  }
  TT_CHECK(indices.dtype() == DType::kInt64, "cuda::", op, ": ", what, " must be int64, got ",
           indices.describe());
  const int64_t n = indices.numel();
  if (n == 0) return;
  const int dev = indices.device().index;
  const Tensor record = index_error_record(dev);
  DeviceGuard guard(dev);
  const Tensor idx = indices.contiguous();
  check_indices_kernel<<<grid_size(n, kBlockThreads, dev), kBlockThreads, 0, stream(dev)>>>(
      static_cast<unsigned long long*>(record.data_ptr()), idx.data<int64_t>(), n, size,
      allowed.has_value(), allowed.value_or(0));
  TT_CUDA_CHECK_LAUNCH("check_indices_kernel");
}

void check_embedding(const char* op, const Tensor& table, const Tensor& rows,
                     const Tensor& indices) {
  TT_CHECK(table.device().is_cuda() && table.dim() == 2 && table.is_contiguous() &&
               rows.is_contiguous() && rows.dtype() == table.dtype() &&
               rows.device() == table.device() && indices.device() == table.device() &&
               rows.numel() == indices.numel() * table.size(1),
           "cuda::", op,
           ": expected a contiguous [V, C] table and contiguous rows [indices..., C] ",
           "on one CUDA device, got table ", table.describe(), ", rows ", rows.describe(),
           ", indices ", indices.describe());
}

// ----- cross-entropy ---------------------------------------------------------------------------

// One block per row n of logits [N, V]: lse[n] = m + log(sum exp(x - m)) and row_loss[n] =
// lse[n] - x[n, t[n]] (0 for an ignored row).
template <typename T>
__global__ void cross_entropy_rows_kernel(T* lse, T* row_loss, const T* x, const int64_t* t,
                                          int64_t N, int64_t V, int64_t ignore_index) {
  __shared__ T scratch[kWarpThreads];
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T* xr = x + n * V;
    T m = MaxOp::identity<T>();
    for_each_in_row(xr, V, [&](int64_t, T v) { m = std::fmax(m, v); });
    m = block_allreduce(m, MaxOp{}, scratch);
    T s = 0;
    for_each_in_row(xr, V, [&](int64_t, T v) { s += std::exp(v - m); });
    s = block_allreduce(s, SumOp{}, scratch);
    if (threadIdx.x == 0) {
      const T l = m + std::log(s);
      lse[n] = l;
      const int64_t target = t[n];
      row_loss[n] = target == ignore_index      ? T(0)
                    : target >= 0 && target < V ? l - xr[target]
                                                : T(NAN);  // recorded by the index check
    }
  }
}

// One block: *count = the number of targets that are not ignore_index (exact: sums of ones).
template <typename T>
__global__ void count_targets_kernel(T* count, const int64_t* t, int64_t N, int64_t ignore_index) {
  __shared__ T scratch[kWarpThreads];
  T c = 0;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) c += t[n] != ignore_index ? T(1) : T(0);
  c = block_allreduce(c, SumOp{}, scratch);
  if (threadIdx.x == 0) *count = c;
}

// One block: loss = (sum of the N row losses, fixed order) / *count.
template <typename T>
__global__ void cross_entropy_mean_kernel(T* loss, const T* row_loss, int64_t N, const T* count) {
  __shared__ T scratch[kWarpThreads];
  T acc = 0;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) acc += row_loss[n];
  acc = block_allreduce(acc, SumOp{}, scratch);
  if (threadIdx.x == 0) loss[0] = acc / *count;  // 0 / 0 = NaN when every row is ignored
}

// One block per row: dx = dloss / count * (exp(x - lse) - [v == t]), 0 for ignored rows.
template <typename T>
__global__ void cross_entropy_backward_kernel(T* dx, const T* dloss, const T* x, const int64_t* t,
                                              const T* lse, int64_t N, int64_t V, const T* count,
                                              int64_t ignore_index) {
  const T scale = dloss[0] / *count;
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T* xr = x + n * V;
    T* d = dx + n * V;
    const int64_t target = t[n];
    if (target == ignore_index) {
      for (int64_t v = threadIdx.x; v < V; v += blockDim.x) d[v] = T(0);
      continue;
    }
    const T l = lse[n];
    for_each_in_row(xr, V, [&](int64_t v, T xv) {
      d[v] = std::exp(xv - l) * scale - (v == target ? scale : T(0));
    });
  }
}

// Checks the targets (check_indices), then returns a 0-d tensor like `logits` (dtype, device)
// holding the number of targets that are not ignore_index, counted on the device.
Tensor count_targets(const char* op, const Tensor& logits, const Tensor& targets,
                     int64_t ignore_index) {
  check_indices(op, targets, logits.size(1), ignore_index, "targets");
  const Tensor count = empty({}, {logits.dtype(), logits.device()});
  const int dev = logits.device().index;
  DeviceGuard guard(dev);
  const Tensor tgt = targets.contiguous();
  dispatch_floating(logits.dtype(), op, [&]<typename T>() {
    count_targets_kernel<<<1, 1024, 0, stream(dev)>>>(count.data<T>(), tgt.data<int64_t>(),
                                                      targets.numel(), ignore_index);
    TT_CUDA_CHECK_LAUNCH("count_targets_kernel");
  });
  return count;
}

void check_cross_entropy(const char* op, const Tensor& logits, const Tensor& targets,
                         std::initializer_list<const Tensor*> like_logits, const Tensor& lse) {
  TT_CHECK(logits.device().is_cuda() && logits.dim() == 2 && targets.dim() == 1 &&
               targets.size(0) == logits.size(0) && targets.device() == logits.device(),
           "cuda::", op, ": expected logits [N, V] and targets [N] on one CUDA device, got ",
           logits.describe(), " and ", targets.describe());
  for (const Tensor* t : like_logits) {
    TT_CHECK(t->shape() == logits.shape() && t->dtype() == logits.dtype() &&
                 t->device() == logits.device() && t->is_contiguous(),
             "cuda::", op, ": expected a contiguous tensor like logits ", logits.describe(),
             ", got ", t->describe());
  }
  TT_CHECK(lse.shape() == Shape{logits.size(0)} && lse.dtype() == logits.dtype() &&
               lse.device() == logits.device() && lse.is_contiguous(),
           "cuda::", op, ": lse must be contiguous [N] like logits ", logits.describe(), ", got ",
           lse.describe());
}

}  // namespace

// ----- index checks ----------------------------------------------------------------------------

void set_index_checks(IndexChecks mode) {
  index_checks_mode().store(mode);
}

IndexChecks index_checks() {
  return index_checks_mode().load();
}

IndexChecksGuard::IndexChecksGuard(IndexChecks mode) : previous_(index_checks()) {
  set_index_checks(mode);
}

IndexChecksGuard::~IndexChecksGuard() {
  set_index_checks(previous_);
}

void check_index_errors(int index) {
  check_device_index(index, "check_index_errors");
  const Tensor record = index_error_record(index);
  const std::vector<int64_t> r = record.to(Device::cpu()).to_vector<int64_t>();
  if (r[0] == 0) return;
  record.fill_(0.0);
  throw Error(tt::detail::str("cuda::check_index_errors: ", r[0],
                              " index value(s) out of range were given to embedding or "
                              "cross_entropy on cuda:",
                              index, " (e.g. ", r[1],
                              "); the kernels used 0 (embedding) or NaN (cross-entropy) instead"));
}

// ----- max -------------------------------------------------------------------------------------

void max_dim(const Tensor& values, const Tensor& indices, const Tensor& in, int64_t dim) {
  TT_CHECK(in.device().is_cuda() && values.device() == in.device() &&
               indices.device() == in.device() && values.dtype() == in.dtype() &&
               indices.dtype() == DType::kInt64 && values.is_contiguous() &&
               indices.is_contiguous() && dim >= 0 && dim < in.dim() && in.size(dim) > 0 &&
               values.numel() == in.numel() / in.size(dim) && indices.numel() == values.numel(),
           "cuda::max_dim: expected contiguous values and int64 indices with in's shape but size "
           "1 at dim ",
           dim, " on in's CUDA device, got values ", values.describe(), ", indices ",
           indices.describe(), ", in ", in.describe());
  const int64_t n_out = values.numel();
  if (n_out == 0) return;
  const int dev = in.device().index;
  DeviceGuard guard(dev);
  const StridedIndexer kept = kept_indexer(in, dim);
  dispatch_dtype(in.dtype(), "cuda::max_dim", [&]<typename T>() {
    max_dim_kernel<<<grid_size(n_out, kBlockThreads, dev), kBlockThreads, 0, stream(dev)>>>(
        values.data<T>(), indices.data<int64_t>(), static_cast<const T*>(in.data_ptr()), n_out,
        in.size(dim), in.stride(dim), kept);
    TT_CUDA_CHECK_LAUNCH("max_dim_kernel");
  });
}

void max_dim_backward(const Tensor& grad_in, const Tensor& grad_values, const Tensor& indices,
                      int64_t dim) {
  TT_CHECK(grad_in.device().is_cuda() && grad_values.device() == grad_in.device() &&
               indices.device() == grad_in.device() && grad_values.dtype() == grad_in.dtype() &&
               indices.dtype() == DType::kInt64 && grad_values.is_contiguous() &&
               indices.is_contiguous() && dim >= 0 && dim < grad_in.dim() &&
               grad_values.numel() * grad_in.size(dim) == grad_in.numel() &&
               indices.numel() == grad_values.numel(),
           "cuda::max_dim_backward: expected grad_values and int64 indices with grad_in's shape "
           "but size 1 at dim ",
           dim, ", got grad_in ", grad_in.describe(), ", grad_values ", grad_values.describe(),
           ", indices ", indices.describe());
  const int64_t n_out = grad_values.numel();
  if (n_out == 0) return;
  const int dev = grad_in.device().index;
  DeviceGuard guard(dev);
  const StridedIndexer kept = kept_indexer(grad_in, dim);
  dispatch_floating(grad_in.dtype(), "cuda::max_dim_backward", [&]<typename T>() {
    max_dim_backward_kernel<<<grid_size(n_out, kBlockThreads, dev), kBlockThreads, 0,
                              stream(dev)>>>(grad_in.data<T>(), grad_values.data<T>(),
                                             indices.data<int64_t>(), n_out, grad_in.stride(dim),
                                             kept);
    TT_CUDA_CHECK_LAUNCH("max_dim_backward_kernel");
  });
}

// ----- embedding -------------------------------------------------------------------------------

void embedding_forward(const Tensor& out, const Tensor& weight, const Tensor& indices) {
  check_embedding("embedding_forward", weight, out, indices);
  const int64_t V = weight.size(0), C = weight.size(1), n = indices.numel();
  check_indices("embedding_forward", indices, V, std::nullopt, "indices");
  if (n * C == 0) return;
  const int dev = weight.device().index;
  DeviceGuard guard(dev);
  const Tensor idx = indices.contiguous();
  dispatch_floating(weight.dtype(), "cuda::embedding_forward", [&]<typename T>() {
    embedding_forward_kernel<<<grid_size(n * C, kBlockThreads, dev), kBlockThreads, 0,
                               stream(dev)>>>(out.data<T>(), weight.data<T>(), idx.data<int64_t>(),
                                              n, V, C);
    TT_CUDA_CHECK_LAUNCH("embedding_forward_kernel");
  });
}

namespace {

// "embedding_backward" (accumulate false: dweight zeroed first) and
// "embedding_backward_accumulate" (true: dweight += the scattered rows of dout).
void embedding_backward_into(const char* op, const Tensor& dweight, const Tensor& dout,
                             const Tensor& indices, bool accumulate) {
  check_embedding(op, dweight, dout, indices);
  const int64_t V = dweight.size(0), C = dweight.size(1), n = indices.numel();
  check_indices(op, indices, V, std::nullopt, "indices");
  if (!accumulate) fill(dweight, 0.0);
  if (n == 0 || C == 0) return;
  TT_CHECK(n <= INT32_MAX && V < UINT32_MAX, "cuda::", op, ": at most 2^31 - 1 indices ",
           "and 2^32 - 1 rows, got ", indices.describe(), " and ", dweight.describe());
  const Device device = dweight.device();
  const int dev = device.index;
  DeviceGuard guard(dev);
  const cudaStream_t s = stream(dev);
  const Tensor idx = indices.contiguous();
  // Group the tokens by row on the device: a stable radix sort of (row, token) pairs by row.
  // 32-bit keys and values, in int64 tensors of half the length (keeps the allocator's alignment).
  const int64_t words = (n + 1) / 2;
  const Tensor keys_in = empty({words}, {DType::kInt64, device}),
               keys_out = empty({words}, {DType::kInt64, device}),
               pos_in = empty({words}, {DType::kInt64, device}),
               pos_out = empty({words}, {DType::kInt64, device});
  auto* k_in = static_cast<uint32_t*>(keys_in.data_ptr());
  auto* k_out = static_cast<uint32_t*>(keys_out.data_ptr());
  auto* p_in = static_cast<int32_t*>(pos_in.data_ptr());
  auto* p_out = static_cast<int32_t*>(pos_out.data_ptr());
  embedding_keys_kernel<<<grid_size(n, kBlockThreads, dev), kBlockThreads, 0, s>>>(
      k_in, p_in, idx.data<int64_t>(), n, V);
  TT_CUDA_CHECK_LAUNCH("embedding_keys_kernel");
  int end_bit = 1;  // keys lie in [0, V]
  while ((uint64_t{1} << end_bit) <= static_cast<uint64_t>(V)) ++end_bit;
  std::size_t temp_bytes = 0;
  TT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, k_in, k_out, p_in, p_out,
                                                static_cast<int>(n), 0, end_bit, s));
  const Tensor temp = empty({static_cast<int64_t>((temp_bytes + 7) / 8)}, {DType::kInt64, device});
  TT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data_ptr(), temp_bytes, k_in, k_out, p_in,
                                                p_out, static_cast<int>(n), 0, end_bit, s));
  dispatch_floating(dweight.dtype(), op, [&]<typename T>() {
    const int threads = static_cast<int>(std::clamp<int64_t>((C + 31) / 32 * 32, 32, 1024));
    embedding_backward_kernel<<<grid_size(n * threads, threads, dev), threads, 0, s>>>(
        dweight.data<T>(), dout.data<T>(), k_out, p_out, n, V, C, accumulate);
    TT_CUDA_CHECK_LAUNCH("embedding_backward_kernel");
  });
}

}  // namespace

void embedding_backward(const Tensor& dweight, const Tensor& dout, const Tensor& indices) {
  embedding_backward_into("embedding_backward", dweight, dout, indices, false);
}

void embedding_backward_accumulate(const Tensor& dweight, const Tensor& dout,
                                   const Tensor& indices) {
  embedding_backward_into("embedding_backward_accumulate", dweight, dout, indices, true);
}

// ----- cross-entropy ---------------------------------------------------------------------------

void cross_entropy_forward(const Tensor& loss, const Tensor& lse, const Tensor& logits,
                           const Tensor& targets, int64_t ignore_index) {
  check_cross_entropy("cross_entropy_forward", logits, targets, {&logits}, lse);
  TT_CHECK(loss.dim() == 0 && loss.dtype() == logits.dtype() && loss.device() == logits.device(),
           "cuda::cross_entropy_forward: loss must be 0-d like logits ", logits.describe(),
           ", got ", loss.describe());
  const int64_t N = logits.size(0), V = logits.size(1);
  const Tensor count = count_targets("cross_entropy_forward", logits, targets, ignore_index);
  const int dev = logits.device().index;
  DeviceGuard guard(dev);
  const Tensor tgt = targets.contiguous();
  dispatch_floating(logits.dtype(), "cuda::cross_entropy_forward", [&]<typename T>() {
    const Tensor row_loss = empty({N}, {logits.dtype(), logits.device()});
    if (N > 0) {
      TT_CHECK(V > 0, "cuda::cross_entropy_forward: logits ", logits.describe(),
               " have no classes");
      const int threads = row_block_threads(V, sizeof(T));
      cross_entropy_rows_kernel<<<grid_size(N * threads, threads, dev), threads, 0, stream(dev)>>>(
          lse.data<T>(), row_loss.data<T>(), logits.data<T>(), tgt.data<int64_t>(), N, V,
          ignore_index);
      TT_CUDA_CHECK_LAUNCH("cross_entropy_rows_kernel");
    }
    cross_entropy_mean_kernel<<<1, 1024, 0, stream(dev)>>>(loss.data<T>(), row_loss.data<T>(), N,
                                                           count.data<T>());
    TT_CUDA_CHECK_LAUNCH("cross_entropy_mean_kernel");
  });
}

void cross_entropy_backward(const Tensor& dlogits, const Tensor& dloss, const Tensor& logits,
                            const Tensor& targets, const Tensor& lse, int64_t ignore_index) {
  check_cross_entropy("cross_entropy_backward", logits, targets, {&logits, &dlogits}, lse);
  TT_CHECK(
      dloss.numel() == 1 && dloss.dtype() == logits.dtype() && dloss.device() == logits.device(),
      "cuda::cross_entropy_backward: dloss must hold one value like logits ", logits.describe(),
      ", got ", dloss.describe());
  const int64_t N = logits.size(0), V = logits.size(1);
  if (N * V == 0) {
    check_indices("cross_entropy_backward", targets, V, ignore_index, "targets");
    return;
  }
  const Tensor count = count_targets("cross_entropy_backward", logits, targets, ignore_index);
  const int dev = logits.device().index;
  DeviceGuard guard(dev);
  const Tensor tgt = targets.contiguous();
  dispatch_floating(logits.dtype(), "cuda::cross_entropy_backward", [&]<typename T>() {
    const int threads = row_block_threads(V, sizeof(T));
    cross_entropy_backward_kernel<<<grid_size(N * threads, threads, dev), threads, 0,
                                    stream(dev)>>>(
        dlogits.data<T>(), static_cast<const T*>(dloss.data_ptr()), logits.data<T>(),
        tgt.data<int64_t>(), lse.data<T>(), N, V, count.data<T>(), ignore_index);
    TT_CUDA_CHECK_LAUNCH("cross_entropy_backward_kernel");
  });
}

TT_REGISTER_KERNEL("max_dim", DeviceType::kCUDA, cuda::max_dim);
TT_REGISTER_KERNEL("max_dim_backward", DeviceType::kCUDA, cuda::max_dim_backward);
TT_REGISTER_KERNEL("embedding_forward", DeviceType::kCUDA, cuda::embedding_forward);
TT_REGISTER_KERNEL("embedding_backward", DeviceType::kCUDA, cuda::embedding_backward);
TT_REGISTER_KERNEL("embedding_backward_accumulate", DeviceType::kCUDA,
                   cuda::embedding_backward_accumulate);
TT_REGISTER_KERNEL("cross_entropy_forward", DeviceType::kCUDA, cuda::cross_entropy_forward);
TT_REGISTER_KERNEL("cross_entropy_backward", DeviceType::kCUDA, cuda::cross_entropy_backward);

void check_index_range(const char* op, const Tensor& indices, int64_t size, const char* what) {
  check_indices(op, indices, size, std::nullopt, what);
}

}  // namespace tt::cuda
