// The NN kernels of GPT-2 training, CPU (chapter 04) against CUDA (chapter 06), at the shapes of
// GPT-2 124M: B = 8, T = 1024, C = 768, V = 50257, 12 heads. Both devices run the same kernel
// (the registry name) on the same shapes; names are  kernel/{cpu,cuda}/shape  (bench_common.h).
//
//   OMP_NUM_THREADS=2 build/bin/bench_nn                   (CPU part: 1.5 minutes on 2 cores)
//   build/bin/bench_nn --benchmark_filter=/cuda/               (CUDA part only)
//
// Each benchmark, its shape, and the compulsory bytes it counts per call (every input read once,
// every output written once; float32 = 4 bytes, int64 index = 8 bytes; N = elements of x):
//   layernorm_fwd         x [8192, 768]: x, out (R C each); weight, bias (C); mean, rstd (R)
//   layernorm_bwd         x [8192, 768]: dy, x, dx (R C); weight, dweight, dbias (C); mean, rstd
//   gelu_fwd, gelu_bwd    the MLP hidden [8192, 3072]: x, y (2N) / dy, x, dx (3N)
//   softmax_fwd, _bwd     attention scores [96, 1024, 1024] (B*NH matrices) with -inf above the
//                         diagonal (causal), along the last dim: x, y (2N) / dy, y, dx (3N)
//   masked_fill_fwd, _bwd the same scores and the int64 causal mask [1024, 1024] broadcast over
//                         the 96 matrices: x, out (2N) + the mask once (T^2 int64)
//   log_softmax_fwd, _bwd logits [8192, 50257]: x, y (2N) / dy, y, dx (3N)
//   cross_entropy_fwd     logits [8192, 50257], int64 targets [8192]: logits, targets, lse, loss
//   cross_entropy_bwd     the same: logits, dlogits, targets, lse
//   embedding_fwd         wte [50257, 768], 8192 int64 ids: ids, the 8192 rows read, out
//   embedding_bwd         the same: dweight written once (V C), dout, ids
//   matmul                kernel "matmul" (Eigen on the CPU, cuBLAS fp32, TF32 off, on CUDA) on
//                         the forward GEMMs of one layer (qkv, attn_proj, fc, fc_proj; the
//                         attention scores q k^T and values att v of the 96 heads) and of the LM
//                         head x wte^T; args name_[batch x]MxNxK; a, b, out once, and
//                         GFLOP/s = 2 batch M N K / time
// The NN kernels do a few flops per byte, so their rate is GB/s: compare it with the memory
// bandwidth (and, in bench_cuda_basics, with a device-to-device copy).
// Embedding and cross-entropy on CUDA read their int64 indices on the host (validation, grouping),
// so their CUDA time includes that copy and synchronization, as in training.
//
// Memory: the vocab-sized benchmarks hold up to three [8192, 50257] float tensors (5 GB) on either
// device. On 2 CPU cores each of those takes about a second per call (the LM head GEMM 5 s); the
// CPU variants stop after bench::kCpuMinTime (one call for them).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <limits>
#include <string>

#include "bench_common.h"
#include "tt/ops_matmul.h"
#include "tt/ops_nn.h"

namespace {

using tt::Device;
using tt::DType;
using tt::Tensor;
using tt::bench::filled;
using tt::bench::measure;

constexpr int64_t kB = 8, kT = 1024, kC = 768, kV = 50257, kNH = 12;
constexpr int64_t kRows = kB * kT;    // 8192 token rows
constexpr int64_t kHeads = kB * kNH;  // 96 attention matrices
constexpr double kF = 4.0;            // bytes of a float32
constexpr double kI = 8.0;            // bytes of an int64 index

/// An uninitialized float32 tensor on `device`.
Tensor out_tensor(const tt::Shape& shape, Device device) {
  return tt::empty(shape, {DType::kFloat32, device});
}

// ----- layernorm: rows [B*T, C] ------------------------------------------------------------------

struct LayerNormInputs {
  Tensor x, w, b, out, mean, rstd;
  explicit LayerNormInputs(Device d)
      : x(filled({kRows, kC}, 1, d)),
        w(filled({kC}, 2, d)),
        b(filled({kC}, 3, d)),
        out(out_tensor({kRows, kC}, d)),
        mean(out_tensor({kRows}, d)),
        rstd(out_tensor({kRows}, d)) {}
  void forward(Device d) const {
    tt::call_kernel<tt::LayerNormForwardKernel>("layernorm_forward", d, out, mean, rstd, x, w, b,
                                                1e-5);
  }
};

void layernorm_fwd(benchmark::State& state, Device d) {
  const LayerNormInputs in(d);
  measure(state, d, kF * (2 * kRows * kC + 2 * kC + 2 * kRows), [&] { in.forward(d); });
}

void layernorm_bwd(benchmark::State& state, Device d) {
  const LayerNormInputs in(d);
  in.forward(d);  // mean and rstd
  const Tensor dy = filled({kRows, kC}, 4, d), dx = out_tensor({kRows, kC}, d);
  const Tensor dw = out_tensor({kC}, d), db = out_tensor({kC}, d);
  measure(state, d, kF * (3 * kRows * kC + 3 * kC + 2 * kRows), [&] {
    tt::call_kernel<tt::LayerNormBackwardKernel>("layernorm_backward", d, dx, dw, db, dy, in.x,
                                                 in.w, in.mean, in.rstd);
  });
}

// ----- gelu: the MLP hidden layer [B*T, 4C] ----------------------------------------------------

const tt::Shape kHidden = {kRows, 4 * kC};

void gelu_fwd(benchmark::State& state, Device d) {
  const Tensor x = filled(kHidden, 5, d), y = out_tensor(kHidden, d);
  measure(state, d, kF * 2 * static_cast<double>(x.numel()),
          [&] { tt::call_kernel<tt::UnaryForwardKernel>("gelu_forward", d, y, x); });
}

void gelu_bwd(benchmark::State& state, Device d) {
  const Tensor x = filled(kHidden, 5, d), dy = filled(kHidden, 6, d), dx = out_tensor(kHidden, d);
  measure(state, d, kF * 3 * static_cast<double>(x.numel()),
          [&] { tt::call_kernel<tt::UnaryBackwardKernel>("gelu_backward", d, dx, dy, x); });
}

// ----- softmax / log_softmax along the last dim -------------------------------------------------

const tt::Shape kScores = {kHeads, kT, kT};  // attention scores of all heads
const tt::Shape kLogits = {kRows, kV};

/// The causal mask [T, T] (1 above the diagonal) as a broadcast view of kScores' shape.
Tensor causal_mask_view(Device d) {
  return tt::causal_mask(kT, d).expand(kScores);
}

/// Attention scores with -inf above the diagonal: what softmax sees in causal attention.
Tensor causal_scores(Device d) {
  const Tensor x = filled(kScores, 7, d), masked = out_tensor(kScores, d);
  tt::call_kernel<tt::MaskedFillForwardKernel>("masked_fill_forward", d, masked, x,
                                               causal_mask_view(d),
                                               -std::numeric_limits<double>::infinity());
  return masked;
}

/// op_forward ("softmax_forward" or "log_softmax_forward") of x along its last dim.
void softmax_forward_of(const char* op, Device d, const Tensor& y, const Tensor& x) {
  tt::call_kernel<tt::SoftmaxForwardKernel>(op, d, y, x, x.dim() - 1);
}

void softmax_fwd_bench(benchmark::State& state, Device d, const char* op, const Tensor& x) {
  const Tensor y = out_tensor(x.shape(), d);
  measure(state, d, kF * 2 * static_cast<double>(x.numel()),
          [&] { softmax_forward_of(op, d, y, x); });
}

/// Backward of `fwd_op` at y = fwd_op(x); x is released before the timing (memory).
void softmax_bwd_bench(benchmark::State& state, Device d, const char* fwd_op, const char* bwd_op,
                       Tensor x) {
  const Tensor y = out_tensor(x.shape(), d);
  softmax_forward_of(fwd_op, d, y, x);
  x = Tensor();
  const Tensor dy = filled(y.shape(), 8, d), dx = out_tensor(y.shape(), d);
  measure(state, d, kF * 3 * static_cast<double>(y.numel()),
          [&] { tt::call_kernel<tt::SoftmaxBackwardKernel>(bwd_op, d, dx, dy, y, y.dim() - 1); });
}

void softmax_fwd(benchmark::State& state, Device d) {
  softmax_fwd_bench(state, d, "softmax_forward", causal_scores(d));
}

void softmax_bwd(benchmark::State& state, Device d) {
  softmax_bwd_bench(state, d, "softmax_forward", "softmax_backward", causal_scores(d));
}

void log_softmax_fwd(benchmark::State& state, Device d) {
  softmax_fwd_bench(state, d, "log_softmax_forward", filled(kLogits, 9, d));
}

void log_softmax_bwd(benchmark::State& state, Device d) {
  softmax_bwd_bench(state, d, "log_softmax_forward", "log_softmax_backward", filled(kLogits, 9, d));
}

// ----- cross-entropy: logits [B*T, V], int64 targets [B*T] ------------------------------------

struct CrossEntropyInputs {
  Tensor logits, targets, loss, lse;
  explicit CrossEntropyInputs(Device d)
      : logits(filled(kLogits, 10, d)),
        targets(tt::bench::indices({kRows}, kV, 11, d)),
        loss(out_tensor({}, d)),
        lse(out_tensor({kRows}, d)) {}
  void forward(Device d) const {
    tt::call_kernel<tt::CrossEntropyForwardKernel>("cross_entropy_forward", d, loss, lse, logits,
                                                   targets, tt::kIgnoreIndex);
  }
};

void cross_entropy_fwd(benchmark::State& state, Device d) {
  const CrossEntropyInputs in(d);
  measure(state, d, kF * (kRows * kV + kRows + 1) + kI * kRows, [&] { in.forward(d); });
}

void cross_entropy_bwd(benchmark::State& state, Device d) {
  const CrossEntropyInputs in(d);
  in.forward(d);  // lse
  const Tensor dloss = tt::full({}, 1.0, {DType::kFloat32, d}), dlogits = out_tensor(kLogits, d);
  measure(state, d, kF * (2 * kRows * kV + kRows) + kI * kRows, [&] {
    tt::call_kernel<tt::CrossEntropyBackwardKernel>("cross_entropy_backward", d, dlogits, dloss,
                                                    in.logits, in.targets, in.lse,
                                                    tt::kIgnoreIndex);
  });
}

// ----- embedding: the token embedding wte [V, C] and a batch of B*T token ids -------------------

void embedding_fwd(benchmark::State& state, Device d) {
  const Tensor w = filled({kV, kC}, 12, d), idx = tt::bench::indices({kB, kT}, kV, 13, d);
  const Tensor out = out_tensor({kB, kT, kC}, d);
  measure(state, d, kI * kRows + kF * 2 * kRows * kC, [&] {
    tt::call_kernel<tt::EmbeddingForwardKernel>("embedding_forward", d, out, w, idx);
  });
}

void embedding_bwd(benchmark::State& state, Device d) {
  const Tensor dout = filled({kB, kT, kC}, 14, d), idx = tt::bench::indices({kB, kT}, kV, 13, d);
  const Tensor dw = out_tensor({kV, kC}, d);
  measure(state, d, kF * (kV * kC + kRows * kC) + kI * kRows, [&] {
    tt::call_kernel<tt::EmbeddingBackwardKernel>("embedding_backward", d, dw, dout, idx);
  });
}

// ----- masked fill: attention scores [B*NH, T, T] with the causal mask [T, T] broadcast --------

void masked_fill_fwd(benchmark::State& state, Device d) {
  const Tensor x = filled(kScores, 7, d), out = out_tensor(kScores, d);
  const Tensor mask = causal_mask_view(d);
  measure(state, d, kF * 2 * static_cast<double>(x.numel()) + kI * kT * kT, [&] {
    tt::call_kernel<tt::MaskedFillForwardKernel>("masked_fill_forward", d, out, x, mask,
                                                 -std::numeric_limits<double>::infinity());
  });
}

void masked_fill_bwd(benchmark::State& state, Device d) {
  const Tensor dout = filled(kScores, 8, d), dx = out_tensor(kScores, d);
  const Tensor mask = causal_mask_view(d);
  measure(state, d, kF * 2 * static_cast<double>(dout.numel()) + kI * kT * kT, [&] {
    tt::call_kernel<tt::MaskedFillBackwardKernel>("masked_fill_backward", d, dx, dout, mask);
  });
}

// ----- matmul: the forward GEMMs of one GPT-2 layer and of the LM head ------------------------
// Kernel "matmul": Eigen on the CPU, cuBLAS fp32 (TF32 off, the default) on CUDA.

/// out [batch, M, N] = a [batch, M, K] @ b, b given as [batch, N, K] transposed (a Linear
/// weight [out, in], or k in q @ k^T) or as [batch, K, N]. batch == 1 drops the batch dim.
struct Gemm {
  const char* name;
  int64_t batch, M, N, K;
  bool b_transposed;
  std::string args() const {
    return std::string(name) + "_" + (batch > 1 ? std::to_string(batch) + "x" : "") +
           std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
  }
};

const Gemm kGemms[] = {
    {"qkv", 1, kRows, 3 * kC, kC, true},               // x @ c_attn.weight^T
    {"attn_proj", 1, kRows, kC, kC, true},             // y @ attn.c_proj.weight^T
    {"fc", 1, kRows, 4 * kC, kC, true},                // x @ c_fc.weight^T
    {"fc_proj", 1, kRows, kC, 4 * kC, true},           // h @ mlp.c_proj.weight^T
    {"attn_scores", kHeads, kT, kT, kC / kNH, true},   // q @ k^T
    {"attn_values", kHeads, kT, kC / kNH, kT, false},  // att @ v
    {"lm_head", 1, kRows, kV, kC, true},               // x @ wte^T (tied head)
};

tt::Shape batched(int64_t batch, int64_t rows, int64_t cols) {
  return batch > 1 ? tt::Shape{batch, rows, cols} : tt::Shape{rows, cols};
}

void matmul(benchmark::State& state, Device d, const Gemm& g) {
  const Tensor a = filled(batched(g.batch, g.M, g.K), 15, d);
  const Tensor b = g.b_transposed ? filled(batched(g.batch, g.N, g.K), 16, d).transpose(-2, -1)
                                  : filled(batched(g.batch, g.K, g.N), 16, d);
  const Tensor c = out_tensor(batched(g.batch, g.M, g.N), d);
  const double flops = 2.0 * static_cast<double>(g.batch * g.M) * static_cast<double>(g.N * g.K);
  const double seconds = tt::bench::time_on(
      state, d, [&] { tt::call_kernel<tt::MatmulKernel>("matmul", d, c, a, b); });
  tt::bench::set_rates(state, seconds, kF * static_cast<double>(a.numel() + b.numel() + c.numel()),
                       flops);
}

}  // namespace

int main(int argc, char** argv) {
  using tt::bench::register_pair;
  const std::string rows = "8192x768", hidden = "8192x3072", scores = "96x1024x1024",
                    logits = "8192x50257", tokens = "8192x768_V50257";
  register_pair("layernorm_fwd", rows, layernorm_fwd);
  register_pair("layernorm_bwd", rows, layernorm_bwd);
  register_pair("gelu_fwd", hidden, gelu_fwd);
  register_pair("gelu_bwd", hidden, gelu_bwd);
  register_pair("softmax_fwd", scores, softmax_fwd);
  register_pair("softmax_bwd", scores, softmax_bwd);
  register_pair("masked_fill_fwd", scores, masked_fill_fwd);
  register_pair("masked_fill_bwd", scores, masked_fill_bwd);
  register_pair("log_softmax_fwd", logits, log_softmax_fwd);
  register_pair("log_softmax_bwd", logits, log_softmax_bwd);
  register_pair("cross_entropy_fwd", logits, cross_entropy_fwd);
  register_pair("cross_entropy_bwd", logits, cross_entropy_bwd);
  register_pair("embedding_fwd", tokens, embedding_fwd);
  register_pair("embedding_bwd", tokens, embedding_bwd);
  for (const Gemm& g : kGemms) {
    register_pair("matmul", g.args(), [g](benchmark::State& s, Device d) { matmul(s, d, g); });
  }
  return tt::bench::run_main(argc, argv, "bench_nn");
}
