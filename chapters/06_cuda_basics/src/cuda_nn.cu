// CUDA kernels of chapter 04's index-driven ops (given code): max over one dim and its
// backward, embedding (lookup and deterministic scatter-add) and the fused cross-entropy.
//
// These ops take indices that a kernel cannot validate with an exception. Embedding and
// cross-entropy copy their indices to the host first (one synchronization, B*T int64 values) and
// throw tt::Error like the CPU kernels; embedding's backward needs the indices on the host anyway
// to group the tokens by row.
#include <algorithm>
#include <cmath>
#include <cstdint>
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

// out[i, c] = weight[idx[i], c], one thread per output element (grid-stride, coalesced in c).
template <typename T>
__global__ void embedding_forward_kernel(T* out, const T* weight, const int64_t* idx, int64_t n,
                                         int64_t C) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; e < n * C; e += stride) {
    const int64_t i = e / C, c = e - i * C;
    out[e] = weight[idx[i] * C + c];
  }
}

// Block b takes used row u = b, + gridDim.x, ...: dweight[rows[u], c] = sum over the tokens
// tokens[start[u] .. start[u+1]) of dout[token, c], in token order; threads split the columns.
template <typename T>
__global__ void embedding_backward_kernel(T* dweight, const T* dout, const int64_t* rows,
                                          const int64_t* start, const int64_t* tokens,
                                          int64_t n_rows, int64_t C) {
  for (int64_t u = blockIdx.x; u < n_rows; u += gridDim.x) {
    T* dw = dweight + rows[u] * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      T acc = 0;
      for (int64_t k = start[u]; k < start[u + 1]; ++k) acc += dout[tokens[k] * C + c];
      dw[c] = acc;
    }
  }
}

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

// An int64 tensor on `device` holding `v`.
Tensor device_int64(const std::vector<int64_t>& v, Device device) {
  return from_vector(v, {static_cast<int64_t>(v.size())}).to(device);
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
      row_loss[n] = t[n] == ignore_index ? T(0) : l - xr[t[n]];
    }
  }
}

// One block: loss = (sum of the N row losses, fixed order) / count.
template <typename T>
__global__ void cross_entropy_mean_kernel(T* loss, const T* row_loss, int64_t N, T count) {
  __shared__ T scratch[kWarpThreads];
  T acc = 0;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) acc += row_loss[n];
  acc = block_allreduce(acc, SumOp{}, scratch);
  if (threadIdx.x == 0) loss[0] = acc / count;  // 0 / 0 = NaN when every row is ignored
}

// One block per row: dx = dloss / count * (exp(x - lse) - [v == t]), 0 for ignored rows.
template <typename T>
__global__ void cross_entropy_backward_kernel(T* dx, const T* dloss, const T* x, const int64_t* t,
                                              const T* lse, int64_t N, int64_t V, T count,
                                              int64_t ignore_index) {
  const T scale = dloss[0] / count;
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

// The number of targets that are not ignore_index, after checking them all on the host.
int64_t count_targets(const char* op, const Tensor& targets, int64_t V, int64_t ignore_index) {
  const std::vector<int64_t> t = host_indices(op, targets, V, ignore_index, "targets");
  return std::count_if(t.begin(), t.end(), [&](int64_t v) { return v != ignore_index; });
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
  host_indices("embedding_forward", indices, V, std::nullopt, "indices");
  if (n * C == 0) return;
  const int dev = weight.device().index;
  DeviceGuard guard(dev);
  const Tensor idx = indices.contiguous();
  dispatch_floating(weight.dtype(), "cuda::embedding_forward", [&]<typename T>() {
    embedding_forward_kernel<<<grid_size(n * C, kBlockThreads, dev), kBlockThreads, 0,
                               stream(dev)>>>(out.data<T>(), weight.data<T>(), idx.data<int64_t>(),
                                              n, C);
    TT_CUDA_CHECK_LAUNCH("embedding_forward_kernel");
  });
}

void embedding_backward(const Tensor& dweight, const Tensor& dout, const Tensor& indices) {
  check_embedding("embedding_backward", dweight, dout, indices);
  const int64_t V = dweight.size(0), C = dweight.size(1);
  const std::vector<int64_t> idx =
      host_indices("embedding_backward", indices, V, std::nullopt, "indices");
  fill(dweight, 0.0);
  if (idx.empty() || C == 0) return;
  // Stable counting sort of the tokens by row: tokens[start[u] .. start[u+1]) are the tokens of
  // row rows[u], in token order.
  std::vector<int64_t> count(static_cast<std::size_t>(V), 0);
  for (int64_t v : idx) ++count[static_cast<std::size_t>(v)];
  std::vector<int64_t> rows, start{0}, first(static_cast<std::size_t>(V), 0);
  for (int64_t v = 0; v < V; ++v) {
    if (count[static_cast<std::size_t>(v)] == 0) continue;
    first[static_cast<std::size_t>(v)] = start.back();
    rows.push_back(v);
    start.push_back(start.back() + count[static_cast<std::size_t>(v)]);
  }
  std::vector<int64_t> tokens(idx.size());
  for (std::size_t i = 0; i < idx.size(); ++i) {
    tokens[static_cast<std::size_t>(first[static_cast<std::size_t>(idx[i])]++)] =
        static_cast<int64_t>(i);
  }
  const Device device = dweight.device();
  const Tensor d_rows = device_int64(rows, device), d_start = device_int64(start, device),
               d_tokens = device_int64(tokens, device);
  const int dev = device.index;
  DeviceGuard guard(dev);
  const auto n_rows = static_cast<int64_t>(rows.size());
  dispatch_floating(dweight.dtype(), "cuda::embedding_backward", [&]<typename T>() {
    const int threads = static_cast<int>(std::clamp<int64_t>((C + 31) / 32 * 32, 32, 1024));
    embedding_backward_kernel<<<grid_size(n_rows * threads, threads, dev), threads, 0,
                                stream(dev)>>>(dweight.data<T>(), dout.data<T>(),
                                               d_rows.data<int64_t>(), d_start.data<int64_t>(),
                                               d_tokens.data<int64_t>(), n_rows, C);
    TT_CUDA_CHECK_LAUNCH("embedding_backward_kernel");
  });
}

// ----- cross-entropy ---------------------------------------------------------------------------

void cross_entropy_forward(const Tensor& loss, const Tensor& lse, const Tensor& logits,
                           const Tensor& targets, int64_t ignore_index) {
  check_cross_entropy("cross_entropy_forward", logits, targets, {&logits}, lse);
  TT_CHECK(loss.dim() == 0 && loss.dtype() == logits.dtype() && loss.device() == logits.device(),
           "cuda::cross_entropy_forward: loss must be 0-d like logits ", logits.describe(),
           ", got ", loss.describe());
  const int64_t N = logits.size(0), V = logits.size(1);
  const int64_t count = count_targets("cross_entropy_forward", targets, V, ignore_index);
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
                                                           static_cast<T>(count));
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
  const int64_t count = count_targets("cross_entropy_backward", targets, V, ignore_index);
  if (N * V == 0) return;
  const int dev = logits.device().index;
  DeviceGuard guard(dev);
  const Tensor tgt = targets.contiguous();
  dispatch_floating(logits.dtype(), "cuda::cross_entropy_backward", [&]<typename T>() {
    const int threads = row_block_threads(V, sizeof(T));
    cross_entropy_backward_kernel<<<grid_size(N * threads, threads, dev), threads, 0,
                                    stream(dev)>>>(
        dlogits.data<T>(), static_cast<const T*>(dloss.data_ptr()), logits.data<T>(),
        tgt.data<int64_t>(), lse.data<T>(), N, V, static_cast<T>(count), ignore_index);
    TT_CUDA_CHECK_LAUNCH("cross_entropy_backward_kernel");
  });
}

TT_REGISTER_KERNEL("max_dim", DeviceType::kCUDA, cuda::max_dim);
TT_REGISTER_KERNEL("max_dim_backward", DeviceType::kCUDA, cuda::max_dim_backward);
TT_REGISTER_KERNEL("embedding_forward", DeviceType::kCUDA, cuda::embedding_forward);
TT_REGISTER_KERNEL("embedding_backward", DeviceType::kCUDA, cuda::embedding_backward);
TT_REGISTER_KERNEL("cross_entropy_forward", DeviceType::kCUDA, cuda::cross_entropy_forward);
TT_REGISTER_KERNEL("cross_entropy_backward", DeviceType::kCUDA, cuda::cross_entropy_backward);

}  // namespace tt::cuda
