// Chapter 07 exercises ch07.5 (the AdamW element update) and ch07.6 (the deterministic global
// gradient norm). The multi-tensor machinery around them is given.
//
// Why "multi-tensor apply": GPT-2 small has ~150 parameter tensors. One AdamW launch per tensor
// (PyTorch's for-each-free path) means ~150 launches of a few microseconds each, most of them
// too small to fill the GPU. Here every step is ONE launch: a table of (p, g, m, v, numel)
// pointers and a list of fixed-size chunks go to the device, and each block walks the chunks.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "tt/cuda_device.h"
#include "tt/dispatcher.h"
#include "tt/fused_optim.h"
#include "tt/todo.h"

namespace tt {

// ----- ch07.5: the element update
// -----------------------------------------------------------------

TT_HOST_DEVICE void adamw_update(float& p, float g, float& m, float& v,
                                 const AdamWCoefficients& c) {
#if TT_SOLUTION
  p *= 1.0f - c.lr * c.weight_decay;            // decoupled weight decay, applied first
  m = c.beta1 * m + c.one_minus_beta1 * g;      // first moment
  v = c.beta2 * v + c.one_minus_beta2 * g * g;  // second moment
  const float denom = sqrtf(v) / c.bias_correction2_sqrt + c.eps;
  p -= (c.lr / c.bias_correction1) * (m / denom);
#else
#if !defined(__CUDA_ARCH__)
  TT_TODO("ch07.5",
          "AdamW element update: p *= 1 - lr*wd; m = b1*m + one_minus_beta1*g; "
          "v = b2*v + one_minus_beta2*g*g; "
          "p -= (lr / bias_correction1) * m / (sqrt(v) / bias_correction2_sqrt + eps)");
#endif
#endif
}

namespace cuda {
namespace {

// ----- the multi-tensor table (given) -----------------------------------------------------------

constexpr int kMaxLists = 4;
constexpr int kThreads = 256;

/// Tensor i of every list: up to four pointers (e.g. p, g, m, v) of numel floats each.
struct MtEntry {
  float* ptr[kMaxLists];
  int64_t numel;
  int64_t vec;  ///< 1 when every pointer is 16-byte aligned (float4 accesses allowed)
};
/// One chunk: kMultiTensorChunk elements of entry `entry` starting at `begin`.
struct MtChunk {
  int64_t entry;
  int64_t begin;
};
static_assert(sizeof(MtEntry) % sizeof(int64_t) == 0 && sizeof(MtChunk) == 2 * sizeof(int64_t));

/// The device copy of the table: entries, then chunks, in one int64 tensor. It may be freed as
/// soon as the launch is queued: all work of a device runs on one stream, so the allocator hands
/// the memory to later work only (chapter 06).
struct MultiTensorTable {
  Tensor buffer;
  const MtEntry* entries = nullptr;
  const MtChunk* chunks = nullptr;
  int64_t num_chunks = 0;
  int device = 0;
};

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

/// Validates `lists` (same length; tensor i of each list: defined, contiguous float32 of one
/// numel, all on one CUDA device), builds the table on the host and copies it to the device.
MultiTensorTable make_table(const char* op, std::initializer_list<const std::vector<Tensor>*> lists,
                            std::initializer_list<const char*> names) {
  const std::vector<const std::vector<Tensor>*> ls(lists);
  const std::vector<const char*> ns(names);
  const std::size_t count = ls[0]->size();
  MultiTensorTable table;
  std::vector<MtEntry> entries;
  std::vector<MtChunk> chunks;
  for (std::size_t i = 0; i < count; ++i) {
    MtEntry e{};
    e.vec = 1;
    for (std::size_t l = 0; l < ls.size(); ++l) {
      TT_CHECK(ls[l]->size() == count, op, ": ", ns[l], " has ", ls[l]->size(), " tensors but ",
               ns[0], " has ", count);
      const Tensor& t = (*ls[l])[i];
      TT_CHECK(t.defined(), op, ": ", ns[l], "[", i, "] is undefined");
      const Tensor& first = (*ls[0])[0];
      TT_CHECK(t.device().is_cuda() && t.device() == first.device(), op, ": ", ns[l], "[", i,
               "] must be on the CUDA device of ", ns[0], "[0] (", first.device().str(), "), got ",
               t.describe());
      TT_CHECK(t.dtype() == DType::kFloat32 && t.is_contiguous(), op, ": ", ns[l], "[", i,
               "] must be a contiguous float32 tensor, got ", t.describe());
      TT_CHECK(t.numel() == (*ls[0])[i].numel(), op, ": ", ns[l], "[", i, "] ", t.describe(),
               " does not match ", ns[0], "[", i, "] ", (*ls[0])[i].describe());
      e.ptr[l] = static_cast<float*>(t.data_ptr());
      if (!aligned16(e.ptr[l])) e.vec = 0;
    }
    e.numel = (*ls[0])[i].numel();
    for (int64_t b = 0; b < e.numel; b += kMultiTensorChunk) {
      chunks.push_back({static_cast<int64_t>(entries.size()), b});
    }
    entries.push_back(e);
  }
  table.num_chunks = static_cast<int64_t>(chunks.size());
  if (chunks.empty()) return table;
  table.device = (*ls[0])[0].device().index;
  const std::size_t entry_words = entries.size() * sizeof(MtEntry) / sizeof(int64_t);
  std::vector<int64_t> words(entry_words + chunks.size() * 2);
  std::memcpy(words.data(), entries.data(), entries.size() * sizeof(MtEntry));
  std::memcpy(words.data() + entry_words, chunks.data(), chunks.size() * sizeof(MtChunk));
  table.buffer = from_vector<int64_t>(words).to(Device::cuda(table.device));
  table.entries = reinterpret_cast<const MtEntry*>(table.buffer.data_ptr());
  table.chunks = reinterpret_cast<const MtChunk*>(table.buffer.data<int64_t>() + entry_words);
  return table;
}

/// Blocks of a grid-stride loop over the chunks: one per chunk, at most what fills the GPU once.
unsigned chunk_grid(const MultiTensorTable& t) {
  return grid_size(t.num_chunks * kThreads, kThreads, t.device);
}

// ----- AdamW (given) ------------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads)
    adamw_kernel(const MtEntry* __restrict__ entries, const MtChunk* __restrict__ chunks,
                 int64_t num_chunks, AdamWCoefficients c) {
  for (int64_t ci = blockIdx.x; ci < num_chunks; ci += gridDim.x) {  // 64-bit indices
    const MtChunk ch = chunks[ci];
    const MtEntry e = entries[ch.entry];
    float* p = e.ptr[0];
    const float* g = e.ptr[1];
    float* m = e.ptr[2];
    float* v = e.ptr[3];
    const int64_t end = std::min(ch.begin + kMultiTensorChunk, e.numel);
    // chunk starts are multiples of 4, so aligned tensors stay aligned at every float4
    const int64_t vec_end = e.vec ? ch.begin + (end - ch.begin) / 4 * 4 : ch.begin;
    for (int64_t i = ch.begin + 4 * threadIdx.x; i < vec_end; i += 4 * blockDim.x) {
      float4 p4 = *reinterpret_cast<const float4*>(p + i);
      const float4 g4 = *reinterpret_cast<const float4*>(g + i);
      float4 m4 = *reinterpret_cast<const float4*>(m + i);
      float4 v4 = *reinterpret_cast<const float4*>(v + i);
      adamw_update(p4.x, g4.x, m4.x, v4.x, c);
      adamw_update(p4.y, g4.y, m4.y, v4.y, c);
      adamw_update(p4.z, g4.z, m4.z, v4.z, c);
      adamw_update(p4.w, g4.w, m4.w, v4.w, c);
      *reinterpret_cast<float4*>(p + i) = p4;
      *reinterpret_cast<float4*>(m + i) = m4;
      *reinterpret_cast<float4*>(v + i) = v4;
    }
    for (int64_t i = vec_end + threadIdx.x; i < end; i += blockDim.x) {
      adamw_update(p[i], g[i], m[i], v[i], c);
    }
  }
}

// ----- clipping (given) ---------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads)
    scale_by_norm_kernel(const MtEntry* __restrict__ entries, const MtChunk* __restrict__ chunks,
                         int64_t num_chunks, const float* __restrict__ norm, float max_norm) {
  const float scale = max_norm / (*norm + 1e-6f);
  if (!(scale < 1.0f)) return;  // nothing to clip (a NaN norm leaves the grads untouched too)
  for (int64_t ci = blockIdx.x; ci < num_chunks; ci += gridDim.x) {
    const MtChunk ch = chunks[ci];
    float* g = entries[ch.entry].ptr[0];
    const int64_t end = std::min(ch.begin + kMultiTensorChunk, entries[ch.entry].numel);
    for (int64_t i = ch.begin + threadIdx.x; i < end; i += blockDim.x) g[i] *= scale;
  }
}

#if TT_SOLUTION
// ----- ch07.6: the global gradient norm
// -----------------------------------------------------------

/// Sum of `x` over the block (blockDim.x a multiple of 32, at most 1024), in a fixed order:
/// a shuffle tree in each warp, then warp 0 adds the warp sums. Valid in thread 0. `scratch`
/// holds 32 values; the leading barrier makes back-to-back calls safe.
template <typename T>
__device__ T block_sum(T x, T* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_down_sync(0xffffffffu, x, offset);
  __syncthreads();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  if (warp == 0) {
    x = lane < static_cast<int>(blockDim.x / 32) ? scratch[lane] : T(0);
    for (int offset = 16; offset > 0; offset /= 2) x += __shfl_down_sync(0xffffffffu, x, offset);
  }
  return x;
}

/// Pass 1: partials[c] = sum of g^2 over chunk c. One block per chunk at a time; each thread
/// adds a fixed, strided subset of the chunk, then the block tree combines them.
__global__ void __launch_bounds__(kThreads)
    sum_squares_kernel(const MtEntry* __restrict__ entries, const MtChunk* __restrict__ chunks,
                       int64_t num_chunks, float* __restrict__ partials) {
  __shared__ float scratch[32];
  for (int64_t ci = blockIdx.x; ci < num_chunks; ci += gridDim.x) {
    const MtChunk ch = chunks[ci];
    const MtEntry e = entries[ch.entry];
    const float* g = e.ptr[0];
    const int64_t end = std::min(ch.begin + kMultiTensorChunk, e.numel);
    const int64_t vec_end = e.vec ? ch.begin + (end - ch.begin) / 4 * 4 : ch.begin;
    float s = 0.0f;
    for (int64_t i = ch.begin + 4 * threadIdx.x; i < vec_end; i += 4 * blockDim.x) {
      const float4 g4 = *reinterpret_cast<const float4*>(g + i);
      s += g4.x * g4.x + g4.y * g4.y + g4.z * g4.z + g4.w * g4.w;
    }
    for (int64_t i = vec_end + threadIdx.x; i < end; i += blockDim.x) s += g[i] * g[i];
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) partials[ci] = s;
  }
}

/// Pass 2 (one block): out = sqrt(sum of the partials), added in double in a fixed order.
__global__ void __launch_bounds__(1024)
    finish_norm_kernel(const float* __restrict__ partials, int64_t n, float* __restrict__ out) {
  __shared__ double scratch[32];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += partials[i];
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) *out = static_cast<float>(sqrt(s));
}
#endif

void check_norm_tensor(const char* op, const Tensor& norm) {
  TT_CHECK(norm.defined() && norm.numel() == 1 && norm.dtype() == DType::kFloat32 &&
               norm.device().is_cuda(),
           op, ": the norm must be a one-element float32 CUDA tensor, got ",
           norm.defined() ? norm.describe() : std::string("an undefined tensor"));
}

}  // namespace

// ----- host wrappers ----------------------------------------------------------------------------

void adamw_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq,
                const AdamWConfig& config, int64_t step) {
  const AdamWCoefficients c = adamw_coefficients(config, step);
  {
    // Exercises throw only on the host: one update there makes an unfinished ch07.5 fail here,
    // before the launch, instead of leaving the parameters silently unchanged on the GPU.
    float p = 0.0f, m = 0.0f, v = 0.0f;
    adamw_update(p, 0.0f, m, v, c);
  }
  if (params.empty()) return;
  const MultiTensorTable t = make_table("adamw_step", {&params, &grads, &exp_avg, &exp_avg_sq},
                                        {"params", "grads", "exp_avg", "exp_avg_sq"});
  if (t.num_chunks == 0) return;
  DeviceGuard guard(t.device);
  adamw_kernel<<<chunk_grid(t), kThreads, 0, stream(t.device)>>>(t.entries, t.chunks, t.num_chunks,
                                                                 c);
  TT_CUDA_CHECK_LAUNCH("adamw_kernel");
}

void grad_norm(const Tensor& out, const std::vector<Tensor>& grads) {
#if TT_SOLUTION
  check_norm_tensor("grad_norm", out);
  if (grads.empty()) {
    out.fill_(0.0);
    return;
  }
  const MultiTensorTable t = make_table("grad_norm", {&grads}, {"grads"});
  TT_CHECK(t.num_chunks == 0 || out.device().index == t.device, "grad_norm: out ", out.describe(),
           " is not on the device of the grads (cuda:", t.device, ")");
  if (t.num_chunks == 0) {
    out.fill_(0.0);
    return;
  }
  const Tensor partials = empty({t.num_chunks}, {DType::kFloat32, out.device()});
  DeviceGuard guard(t.device);
  const cudaStream_t s = stream(t.device);
  sum_squares_kernel<<<chunk_grid(t), kThreads, 0, s>>>(t.entries, t.chunks, t.num_chunks,
                                                        partials.data<float>());
  TT_CUDA_CHECK_LAUNCH("sum_squares_kernel");
  finish_norm_kernel<<<1, 1024, 0, s>>>(partials.data<float>(), t.num_chunks, out.data<float>());
  TT_CUDA_CHECK_LAUNCH("finish_norm_kernel");
#else
  TT_TODO("ch07.6",
          "global grad norm: make_table; pass 1 writes one sum of squares per chunk (grid-stride "
          "over chunks, block_sum tree, no atomics) into a partials tensor; pass 2 (one block) "
          "adds the partials in double and writes sqrt into out");
#endif
}

void clip_grads(const std::vector<Tensor>& grads, const Tensor& total_norm, double max_norm) {
  check_norm_tensor("clip_grads", total_norm);
  TT_CHECK(max_norm > 0, "clip_grads: max_norm must be > 0, got ", max_norm);
  if (grads.empty()) return;
  const MultiTensorTable t = make_table("clip_grads", {&grads}, {"grads"});
  if (t.num_chunks == 0) return;
  TT_CHECK(total_norm.device().index == t.device, "clip_grads: total_norm ", total_norm.describe(),
           " is not on the device of the grads (cuda:", t.device, ")");
  DeviceGuard guard(t.device);
  scale_by_norm_kernel<<<chunk_grid(t), kThreads, 0, stream(t.device)>>>(
      t.entries, t.chunks, t.num_chunks, total_norm.data<float>(), static_cast<float>(max_norm));
  TT_CUDA_CHECK_LAUNCH("scale_by_norm_kernel");
}

TT_REGISTER_KERNEL("adamw_step", DeviceType::kCUDA, adamw_step);
TT_REGISTER_KERNEL("grad_norm", DeviceType::kCUDA, grad_norm);
TT_REGISTER_KERNEL("clip_grads", DeviceType::kCUDA, clip_grads);

}  // namespace cuda
}  // namespace tt
