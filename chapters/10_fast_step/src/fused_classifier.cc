// The fused classifier (tt/fused_classifier.h): front-end, the autograd Function with its chunk
// loop, and the CPU kernels "classifier_xent_rows" (around exercise ch10.7, in
// fused_classifier_cpu.cc) and "gemm". The CUDA kernels are in fused_classifier_cuda.cu and
// chapter 07's cublas_matmul.cu.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tt/autograd.h"
#include "tt/cpu_gemm.h"
#include "tt/eigen.h"
#include "tt/functional.h"
#include "tt/fused_classifier.h"
#if TT_WITH_CUDA
#include "tt/cuda_ops.h"
#endif
#include "tt/parallel.h"
#include "tt/safe_exp.h"

namespace tt {

namespace {

constexpr const char* kOp = "fused_classifier_loss";

// Checks the front-end's inputs; returns N, the number of rows (tokens).
// A part of a split vocabulary may hold no token (V = 0); the whole vocabulary holds at least one.
int64_t check_inputs(const Tensor& x, const Tensor& wte, int64_t vocab_size, const Tensor& targets,
                     bool part = false) {
  TT_CHECK(x.defined() && wte.defined() && targets.defined(), kOp,
           ": x, wte and targets must be defined tensors");
  // float32 or float64 x with wte of its dtype; or bfloat16 x with float32 wte (mixed precision).
  const DType wte_dtype = x.dtype() == DType::kBFloat16 ? DType::kFloat32 : x.dtype();
  TT_CHECK(x.dim() >= 1 && is_floating(x.dtype()) && wte.dim() == 2 && wte.dtype() == wte_dtype &&
               wte.size(1) == x.size(-1),
           kOp, ": expected x [..., C] and wte [Vp, C] of one float dtype (or bfloat16 x and ",
           "float32 wte), got x ", x.describe(), ", wte ", wte.describe());
  TT_CHECK(vocab_size >= (part ? 0 : 1) && vocab_size <= wte.size(0), kOp, ": vocab_size ",
           vocab_size, " must be in [", part ? 0 : 1, ", Vp] for wte ", wte.describe());
  const Shape rows_shape(x.shape().begin(), x.shape().end() - 1);
  TT_CHECK(targets.dtype() == DType::kInt64 && targets.shape() == rows_shape, kOp,
           ": targets must be int64 of x's leading shape ", rows_shape, ", got ",
           targets.describe());
  TT_CHECK(wte.device() == x.device() && targets.device() == x.device(), kOp,
           ": x, wte and targets must be on one device, got x ", x.describe(), ", wte ",
           wte.describe(), ", targets ", targets.describe());
  return targets.numel();
}

// Throws tt::Error naming the op, the position and the value of the first target outside
// [0, V). Reads the targets on the host (a copy, hence a synchronization, on CUDA).
void check_target_range(const Tensor& targets, int64_t vocab_size) {
  const Tensor host = targets.contiguous().to(Device::cpu());
  const int64_t* t = host.data<int64_t>();
  for (int64_t i = 0; i < host.numel(); ++i) {
    TT_CHECK(t[i] >= 0 && t[i] < vocab_size, kOp, ": targets[", i, "] = ", t[i],
             " is out of range [0, ", vocab_size, ") (targets ", targets.describe(), ")");
  }
}

/// The fused classifier. forward computes the loss and, when a gradient is needed, dx and dW
/// (for a loss gradient of 1); backward scales them by the actual gradient.
struct FusedClassifierFn : autograd::Function {
  FusedClassifierFn(int64_t vocab_size, Tensor targets, FusedClassifierOptions options,
                    bool need_grad)
      : vocab_size_(vocab_size),
        targets_(std::move(targets)),
        options_(options),
        need_grad_(need_grad) {}

  std::string name() const override { return "FusedClassifierBackward"; }

  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor& x_in = in[0];
    const int64_t V = vocab_size_, C = x_in.size(-1), N = targets_.numel();
    // Mixed precision (bfloat16 x): logits and dx in bfloat16 GEMMs with float32 accumulation,
    // the loss and dW in float32; wte is cast to bfloat16 once per call.
    const bool mixed = x_in.dtype() == DType::kBFloat16;
    const TensorOptions opts{x_in.dtype(), x_in.device()};
    const TensorOptions acc_opts{mixed ? DType::kFloat32 : x_in.dtype(), x_in.device()};
    const Tensor x = x_in.reshape({N, C}).contiguous();
    // A part of a split vocabulary without tokens (V = 0) still multiplies one aligned block of
    // its (padding) rows, so that no GEMM is empty; their gradient is zero.
    const ClassifierVocabPart& part = options_.part;
    const int64_t ld = classifier_padded_stride(std::max<int64_t>(V, 1)), rows_in = in[1].size(0);
    Tensor wte;
    if (mixed && rows_in < ld) {
      // An unpadded head (LLaMA's lm_head [V, C]): the cast goes into ld rows, the extra ones
      // zero, so that the GEMMs stay aligned (see Alignment in the header).
      // copy_ rounds through chapter 11's "cast", as to() does below.
      wte = empty({ld, C}, opts);
      wte.narrow(0, 0, rows_in).copy_(in[1]);
      wte.narrow(0, rows_in, ld - rows_in).fill_(0.0);
    } else {
      wte = mixed ? in[1].to(DType::kBFloat16) : in[1].contiguous();
    }
    // G >= V columns: all of the padded row when wte has the rows (see Alignment in the header).
    const int64_t G = std::min(wte.size(0), ld);
    const Tensor w = wte.narrow(0, 0, G);  // the rows that are multiplied (>= V predicted)
    const Tensor w_t = w.transpose(0, 1);  // [C, G], column-major: no copy
    const Tensor row_loss = empty({N}, acc_opts);
    if (need_grad_) {
      dx_ = empty({N, C}, acc_opts);       // scaled in backward, then rounded (mixed)
      dw_ = zeros(wte.shape(), acc_opts);  // rows >= V keep a zero gradient
    }
    const int64_t R = classifier_chunk_rows(N, V, x.dtype(), options_);
    const Tensor buffer = empty({std::min(R, N), ld}, opts);
    const double scale = 1.0 / static_cast<double>(N);
    const Device dev = x.device();
    // "gemm" (one dtype) or, mixed, cuBLASLt's bfloat16 GEMM into bfloat16 or float32.
    const char* gemm = mixed ? "matmul_lt_gemm" : "gemm";
    for (int64_t r0 = 0; r0 < N; r0 += R) {
      const int64_t rows = std::min(R, N - r0);
      const Tensor xr = x.narrow(0, r0, rows);
      const Tensor z = buffer.narrow(0, 0, rows).narrow(1, 0, G);  // [rows, G], padded rows
      call_kernel<GemmKernel>(gemm, dev, z, xr, w_t, 1.0, 0.0);
      const Tensor tr = targets_.narrow(0, r0, rows);
      if (part.combine) {
        // A split vocabulary: this part's statistics, made whole by combine (a collective in
        // chapter 13), then the gradient from the whole log-sum-exp.
        const Tensor stats = empty({2, rows}, acc_opts);
        call_kernel<ClassifierRowStatsKernel>("classifier_row_stats", dev, z, stats, tr, part.first,
                                              V);
        part.combine(stats);
        const Tensor lse = stats.select(0, 0);
        row_loss.narrow(0, r0, rows).copy_(sub(lse, stats.select(0, 1)));
        call_kernel<ClassifierRowGradKernel>("classifier_row_grad", dev, z, lse, tr, part.first, V,
                                             scale);
      } else {
        call_kernel<ClassifierXentKernel>("classifier_xent_rows", dev, z,
                                          row_loss.narrow(0, r0, rows), tr, V, scale);
      }
      if (!need_grad_) continue;
      // z now holds dL/dz of these rows (for dL = 1), zero in the columns [V, G).
      call_kernel<GemmKernel>(gemm, dev, dx_.narrow(0, r0, rows), z, w, 1.0, 0.0);
      call_kernel<GemmKernel>(gemm, dev, dw_.narrow(0, 0, G), z.transpose(0, 1), xr, 1.0, 1.0);
    }
    if (need_grad_ && dw_.size(0) != rows_in) dw_ = dw_.narrow(0, 0, rows_in);  // wte's rows
    return {div(sum(row_loss), static_cast<double>(N))};  // fixed-order sum; NaN for N = 0
  }

  std::vector<Tensor> backward(const std::vector<Tensor>& grads) override {
    TT_CHECK(dx_.defined() && dw_.defined(), "FusedClassifierBackward: no saved gradients");
    const Tensor& g = grads[0];  // 0-d, on the device: the multiply broadcasts it, no sync
    Tensor dx, dw;
    if (needs_input_grad(0)) dx = mul(dx_, g).view(x_shape_).to(x_dtype_);
    if (needs_input_grad(1)) dw = mul(dw_, g);
    return {dx, dw};
  }

  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>&) override {
    x_shape_ = in[0].shape();
    x_dtype_ = in[0].dtype();
  }

  void release_saved() override {
    Function::release_saved();
    dx_ = Tensor();
    dw_ = Tensor();
  }

  int64_t vocab_size_;
  Tensor targets_;  // int64 [N], contiguous
  FusedClassifierOptions options_;
  bool need_grad_;
  Shape x_shape_;
  DType x_dtype_ = DType::kFloat32;
  Tensor dx_, dw_;  // plain tensors without history: no reference cycle
};

}  // namespace

void check_classifier_xent_args(const char* op, const Tensor& logits, const Tensor& row_loss,
                                const Tensor& targets, int64_t vocab_size) {
  // The split kernels' checks (on the logits' own device type; the kernels check that it is
  // theirs), with a whole vocabulary of at least one token.
  TT_CHECK(vocab_size >= 1, op, ": vocab_size ", vocab_size, " must be >= 1");
  const bool rows = logits.defined() && logits.dim() >= 1;
  check_classifier_part_args(op, rows ? logits.device().type : DeviceType::kCPU, logits, row_loss,
                             Shape{rows ? logits.size(0) : 0}, targets, vocab_size);
}

void check_classifier_part_args(const char* op, DeviceType device_type, const Tensor& logits,
                                const Tensor& stats, const Shape& stats_shape,
                                const Tensor& targets, int64_t vocab_size) {
  TT_CHECK(logits.defined() && stats.defined() && targets.defined() && logits.dim() == 2 &&
               logits.stride(1) == 1 && logits.stride(0) >= logits.size(1) && vocab_size >= 0 &&
               vocab_size <= logits.size(1) && stats.is_contiguous() &&
               stats.shape() == stats_shape &&
               stats.dtype() ==
                   (logits.dtype() == DType::kBFloat16 ? DType::kFloat32 : logits.dtype()) &&
               logits.device().type == device_type && stats.device() == logits.device() &&
               targets.is_contiguous() && targets.dtype() == DType::kInt64 &&
               targets.shape() == Shape{logits.size(0)} && targets.device() == logits.device(),
           op, ": expected logits [R, G >= V = ", vocab_size, "] with padded rows, per-row values ",
           stats_shape, " of their dtype (float32 for bfloat16) and int64 targets [R], all on ",
           "one ", device_type_name(device_type), " device, got ", logits.describe(), ", ",
           stats.describe(), ", ", targets.describe());
}

int64_t classifier_padded_stride(int64_t vocab_size) {
  return (vocab_size + kClassifierRowAlign - 1) / kClassifierRowAlign * kClassifierRowAlign;
}

int64_t classifier_chunk_rows(int64_t rows, int64_t vocab_size, DType dtype,
                              const FusedClassifierOptions& options) {
  const int64_t n = std::max<int64_t>(rows, 1);
  if (options.chunk_rows > 0) return std::min(options.chunk_rows, n);
  // A part of a split vocabulary without tokens (V = 0) still has rows of one aligned block.
  const int64_t row_bytes = classifier_padded_stride(std::max<int64_t>(vocab_size, 1)) *
                            static_cast<int64_t>(dtype_size(dtype));
  const int64_t fit = std::clamp<int64_t>(options.max_chunk_bytes / row_bytes, 1, n);
  const int64_t chunks = (n + fit - 1) / fit;
  return (n + chunks - 1) / chunks;  // balanced: no small last chunk
}

Tensor fused_classifier_loss(const Tensor& x, const Tensor& wte, int64_t vocab_size,
                             const Tensor& targets, const FusedClassifierOptions& options) {
  const ClassifierVocabPart& part = options.part;
  check_inputs(x, wte, vocab_size, targets, static_cast<bool>(part.combine));
  // The targets are ids of the whole vocabulary (of which wte may hold one part).
  int64_t whole = vocab_size;
  if (part.combine) {
    // A part of only padding may start anywhere (chapter 13's last ranks).
    TT_CHECK(
        part.first >= 0 && (vocab_size == 0 || part.first + vocab_size <= part.whole_vocab_size),
        kOp, ": the vocabulary part [", part.first, ", ", part.first + vocab_size,
        ") is not inside the whole vocabulary of ", part.whole_vocab_size, " tokens");
    whole = part.whole_vocab_size;
  }
  if (x.device().is_cpu()) {
    check_target_range(targets, whole);
  } else if (options.check_targets) {
#if TT_WITH_CUDA
    // On the host (one synchronization) or, under cuda::IndexChecks::kDevice (chapter 10's
    // sync-free step, CUDA graphs), recorded on the device for cuda::check_index_errors().
    cuda::check_index_range("fused_classifier_loss", targets, whole, "targets");
#endif
  }
  const bool need_grad = autograd::is_grad_enabled() && (x.requires_grad() || wte.requires_grad());
  return autograd::Function::apply<FusedClassifierFn>(
      {x, wte}, vocab_size, targets.reshape({-1}).contiguous(), options, need_grad)[0];
}

Tensor classifier_loss_unfused(const Tensor& x, const Tensor& wte, int64_t vocab_size,
                               const Tensor& targets) {
  check_inputs(x, wte, vocab_size, targets);
  const Tensor logits = matmul(x, transpose(slice(wte, 0, 0, vocab_size), 0, 1));
  return cross_entropy(reshape(logits, {-1, vocab_size}), targets.reshape({-1}));
}

namespace cpu {

void classifier_xent_rows(const Tensor& logits, const Tensor& row_loss, const Tensor& targets,
                          int64_t vocab_size, double scale) {
  check_classifier_xent_args("cpu::classifier_xent_rows", logits, row_loss, targets, vocab_size);
  TT_CHECK(logits.device().is_cpu(), "cpu::classifier_xent_rows: expected CPU tensors, got ",
           logits.describe());
  const int64_t R = logits.size(0), V = vocab_size, G = logits.size(1), ld = logits.stride(0);
  const int64_t* t = targets.data<int64_t>();
  for (int64_t r = 0; r < R; ++r) {
    TT_CHECK(t[r] >= 0 && t[r] < V, "cpu::classifier_xent_rows: targets[", r, "] = ", t[r],
             " is out of range [0, ", V, ")");
  }
  if (logits.dtype() == DType::kBFloat16) {
    // Widened exactly to float32, the float32 rows, then rounded back (the bfloat16 cast).
    const Tensor wide = logits.to(DType::kFloat32);
    classifier_xent_rows(wide, row_loss, targets, vocab_size, scale);
    logits.copy_(wide);
    return;
  }
  dispatch_floating(logits.dtype(), "cpu::classifier_xent_rows", [&]<typename T>() {
    T* z = logits.data<T>();
    T* loss = row_loss.data<T>();
    const T s = static_cast<T>(scale);
    // Rows are independent; each is written by one thread.
    parallel_for(0, R, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        T* row = z + r * ld;
        loss[r] = classifier_row_xent<T>(row, V, t[r], s);
        std::fill(row + V, row + G, T(0));  // padding columns: no gradient
      }
    });
  });
}

void classifier_row_stats(const Tensor& logits, const Tensor& stats, const Tensor& targets,
                          int64_t first, int64_t vocab_size) {
  const int64_t R = logits.size(0);
  check_classifier_part_args("cpu::classifier_row_stats", DeviceType::kCPU, logits, stats,
                             Shape{2, R}, targets, vocab_size);
  if (logits.dtype() == DType::kBFloat16) {  // widened exactly to float32
    classifier_row_stats(logits.to(DType::kFloat32), stats, targets, first, vocab_size);
    return;
  }
  const int64_t ld = logits.stride(0);
  const int64_t* t = targets.data<int64_t>();
  dispatch_floating(logits.dtype(), "cpu::classifier_row_stats", [&]<typename T>() {
    const T* z = logits.data<T>();
    T* lse = stats.data<T>();
    T* zt = lse + R;
    parallel_for(0, R, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* row = z + r * ld;
        const T m = max_ignoring_nan(row, vocab_size);
        double s = 0;
        for (int64_t v = 0; v < vocab_size && m != -std::numeric_limits<T>::infinity(); ++v)
          s += static_cast<double>(safe_exp(row[v] - m));
        lse[r] = m == -std::numeric_limits<T>::infinity() ? m : m + static_cast<T>(std::log(s));
        const int64_t local = t[r] - first;
        zt[r] = local >= 0 && local < vocab_size ? row[local] : T(0);
      }
    });
  });
}

void classifier_row_grad(const Tensor& logits, const Tensor& lse, const Tensor& targets,
                         int64_t first, int64_t vocab_size, double scale) {
  check_classifier_part_args("cpu::classifier_row_grad", DeviceType::kCPU, logits, lse,
                             Shape{logits.size(0)}, targets, vocab_size);
  if (logits.dtype() == DType::kBFloat16) {  // computed in float32, rounded once
    const Tensor wide = logits.to(DType::kFloat32);
    classifier_row_grad(wide, lse, targets, first, vocab_size, scale);
    logits.copy_(wide);
    return;
  }
  const int64_t R = logits.size(0), G = logits.size(1), ld = logits.stride(0);
  const int64_t* t = targets.data<int64_t>();
  dispatch_floating(logits.dtype(), "cpu::classifier_row_grad", [&]<typename T>() {
    T* z = logits.data<T>();
    const T* l = lse.data<T>();
    const T s = static_cast<T>(scale);
    parallel_for(0, R, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        T* row = z + r * ld;
        for (int64_t v = 0; v < vocab_size; ++v) row[v] = safe_exp(row[v] - l[r]) * s;
        const int64_t local = t[r] - first;
        if (local >= 0 && local < vocab_size) row[local] -= s;
        std::fill(row + vocab_size, row + G, T(0));  // padding columns: no gradient
      }
    });
  });
}

void gemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta) {
  TT_CHECK(out.device().is_cpu() && a.device().is_cpu() && b.device().is_cpu() && out.dim() == 2 &&
               a.dim() == 2 && b.dim() == 2 && a.dtype() == out.dtype() &&
               b.dtype() == out.dtype() && a.size(0) == out.size(0) && b.size(1) == out.size(1) &&
               a.size(1) == b.size(0) && out.stride(1) == 1 && out.stride(0) >= out.size(1),
           "cpu::gemm: expected 2-D CPU out [M, N] (rows may be padded) = a [M, K] @ b [K, N] of "
           "one dtype, got out ",
           out.describe(), ", a ", a.describe(), ", b ", b.describe());
  dispatch_floating(out.dtype(), "cpu::gemm", [&]<typename T>() {
    if (gemm_fma_is_native() && alpha == 1 && (beta == 0 || beta == 1)) {
      // The classifier's two cases (out = a @ b, out += a @ b): chapter 04's GEMM, any strides.
      gemm_fma<T>(out.size(0), out.size(1), a.size(1), {a.data<T>(), a.stride(0), a.stride(1)},
                  {b.data<T>(), b.stride(0), b.stride(1)}, out.data<T>(), out.stride(0), beta == 1);
      return;
    }
    using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using ColMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
    using Stride = Eigen::OuterStride<>;
    const int64_t M = out.size(0), N = out.size(1);
    if (M == 0 || N == 0) return;
    Eigen::Map<RowMajor, Eigen::Unaligned, Stride> c(out.data<T>(), M, N,
                                                     Stride(std::max(out.stride(0), N)));
    if (beta == 0) {
      c.setZero();  // BLAS semantics: the old values (even NaN) are not read
    } else if (beta != 1) {
      c *= static_cast<T>(beta);
    }
    if (a.size(1) == 0) return;
    // f(view) with an Eigen view of a 2-D operand: row-major when its rows are contiguous,
    // column-major otherwise (a transposed view); anything else is copied first.
    auto with_view = [](const Tensor& t, auto&& f) {
      const int64_t r = t.size(0), k = t.size(1);
      if (t.stride(1) == 1 && (t.stride(0) >= k || r <= 1)) {
        f(Eigen::Map<const RowMajor, Eigen::Unaligned, Stride>(t.data<T>(), r, k,
                                                               Stride(std::max(t.stride(0), k))));
      } else if (t.stride(0) == 1 && (t.stride(1) >= r || k <= 1)) {
        f(Eigen::Map<const ColMajor, Eigen::Unaligned, Stride>(t.data<T>(), r, k,
                                                               Stride(std::max(t.stride(1), r))));
      } else {
        const Tensor dense = t.contiguous();
        f(Eigen::Map<const RowMajor>(dense.data<T>(), r, k));
      }
    };
    const T al = static_cast<T>(alpha);
    with_view(a, [&](const auto& A) {
      with_view(b, [&](const auto& B) { c.noalias() += (al * A) * B; });
    });
  });
}

TT_REGISTER_KERNEL("classifier_xent_rows", DeviceType::kCPU, cpu::classifier_xent_rows);
TT_REGISTER_KERNEL("classifier_row_stats", DeviceType::kCPU, cpu::classifier_row_stats);
TT_REGISTER_KERNEL("classifier_row_grad", DeviceType::kCPU, cpu::classifier_row_grad);
TT_REGISTER_KERNEL("gemm", DeviceType::kCPU, cpu::gemm);

}  // namespace cpu

}  // namespace tt
