// Chapter 05 exercises ch05.2 (the SGD update) and ch05.3 (the AdamW update): the CPU kernels
// "sgd_step" and "adamw_step". The front-ends (optim.cc) have checked that every list entry j
// has params[j], grads[j] and its state with the same shape, dtype and device, all contiguous.
// The helper kernels "sum_of_squares" and "scale_" of gradient clipping are given.
#include <algorithm>
#include <cmath>
#include <vector>

#include "tt/dispatcher.h"
#include "tt/optim.h"
#include "tt/parallel.h"
#include "tt/todo.h"

namespace tt::cpu {

using optim::AdamWStepArgs;
using optim::SgdStepArgs;

/// CPU kernel "sgd_step" (exercise ch05.2), the arithmetic of torch.optim.SGD per element:
/// d = g + wd p; b = d (first step) or b = mu b + (1 - dampening) d; d = d + mu b (Nesterov)
/// or d = b; p = p - lr d.
void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_buffers, const SgdStepArgs& args) {
#if TT_SOLUTION
  for (std::size_t j = 0; j < params.size(); ++j) {
    dispatch_floating(params[j].dtype(), "sgd_step", [&]<typename T>() {
      T* p = params[j].data<T>();
      const T* g = grads[j].data<T>();
      T* buf = momentum_buffers.empty() ? nullptr : momentum_buffers[j].data<T>();
      const T lr = static_cast<T>(args.lr), mu = static_cast<T>(args.momentum);
      const T wd = static_cast<T>(args.weight_decay);
      const T keep = static_cast<T>(1.0 - args.dampening);
      const int64_t n = params[j].numel();
      for (int64_t i = 0; i < n; ++i) {
        T d = g[i];
        if (args.weight_decay != 0) d = d + wd * p[i];
        if (buf != nullptr) {
          buf[i] = args.first_step ? d : buf[i] * mu + keep * d;
          d = args.nesterov ? d + mu * buf[i] : buf[i];
        }
        p[i] = p[i] - lr * d;
      }
    });
  }
#else
  TT_TODO("ch05.2",
          "sgd_step: each params[j] (float32 or float64) updated in place from grads[j] exactly "
          "as torch.optim.SGD does: weight decay, momentum (momentum_buffers empty when there is "
          "none; the buffer starts as d on args.first_step), dampening and Nesterov from args");
#endif
}

/// CPU kernel "adamw_step" (exercise ch05.3), the arithmetic of torch.optim.AdamW per element
/// (same operation order, in T): p *= 1 - lr wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
/// p -= (lr / (1-b1^t)) m / (sqrt(v) / sqrt(1-b2^t) + eps).
void adamw_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                const AdamWStepArgs& args) {
#if TT_SOLUTION
  constexpr int64_t kAdamWChunk = int64_t{1} << 15;  // elements per parallel chunk (~0.9 MB moved)
  // Scalars are computed once in double, like PyTorch's Python-side arithmetic.
  const double bias_correction1 = 1.0 - std::pow(args.beta1, static_cast<double>(args.step));
  const double bias_correction2 = 1.0 - std::pow(args.beta2, static_cast<double>(args.step));
  for (std::size_t j = 0; j < params.size(); ++j) {
    dispatch_floating(params[j].dtype(), "adamw_step", [&]<typename T>() {
      T* p = params[j].data<T>();
      const T* g = grads[j].data<T>();
      T* m = exp_avgs[j].data<T>();
      T* v = exp_avg_sqs[j].data<T>();
      const T decay = static_cast<T>(1.0 - args.lr * args.weight_decay);
      const T b1 = static_cast<T>(args.beta1), b2 = static_cast<T>(args.beta2);
      const T one_minus_b1 = static_cast<T>(1.0 - args.beta1);
      const T one_minus_b2 = static_cast<T>(1.0 - args.beta2);
      const T neg_step_size = static_cast<T>(-args.lr / bias_correction1);
      const T bc2_sqrt = static_cast<T>(std::sqrt(bias_correction2));
      const T eps = static_cast<T>(args.eps);
      // Each element on its own: chunks in parallel, and SIMD within a chunk, give the same bits.
      parallel_for(0, params[j].numel(), kAdamWChunk, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          p[i] = p[i] * decay;                               // decoupled weight decay
          m[i] = m[i] * b1 + one_minus_b1 * g[i];            // first moment
          v[i] = v[i] * b2 + one_minus_b2 * g[i] * g[i];     // second moment
          const T denom = std::sqrt(v[i]) / bc2_sqrt + eps;  // sqrt(v_hat) + eps
          p[i] = p[i] + neg_step_size * m[i] / denom;        // - lr * m_hat / denom
        }
      });
    });
  }
#else
  TT_TODO("ch05.3",
          "adamw_step: each params[j] (float32 or float64) updated in place from grads[j] "
          "exactly as torch.optim.AdamW does at step args.step >= 1 (decay outside the moments, "
          "eps after the bias correction); exp_avgs[j], exp_avg_sqs[j] hold the new uncorrected "
          "moments");
#endif
}

/// CPU kernel "sum_of_squares": sum of t^2 over all tensors, in double, in a fixed order: each
/// tensor in chunks of kSumsqChunk elements, a chunk in 8 partial sums (element i into sum
/// i mod 8, added pairwise at the end), the chunks' sums added in list then chunk order. The
/// chunks run in parallel; the order, hence the result, depends on no thread count. (One chain
/// of adds over 14 million elements waits on each add's latency: 4 cycles an element.)
double sum_of_squares(const std::vector<Tensor>& tensors) {
  constexpr int64_t kSumsqChunk = int64_t{1} << 15;
  struct Chunk {
    std::size_t tensor;
    int64_t begin, end;
  };
  std::vector<Chunk> chunks;
  for (std::size_t j = 0; j < tensors.size(); ++j) {
    for (int64_t b = 0, n = tensors[j].numel(); b < n; b += kSumsqChunk) {
      chunks.push_back({j, b, std::min(n, b + kSumsqChunk)});
    }
  }
  std::vector<double> sums(chunks.size());
  parallel_for(0, static_cast<int64_t>(chunks.size()), 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const Chunk& ch = chunks[static_cast<std::size_t>(c)];
      const Tensor& t = tensors[ch.tensor];
      dispatch_floating(t.dtype(), "sum_of_squares", [&]<typename T>() {
        const T* x = t.data<T>();
        double part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t i = ch.begin;
        for (; i + 8 <= ch.end; i += 8) {
          for (int l = 0; l < 8; ++l) {
            const double v = static_cast<double>(x[i + l]);
            part[l] += v * v;
          }
        }
        for (int l = 0; i < ch.end; ++i, ++l) {
          const double v = static_cast<double>(x[i]);
          part[l] += v * v;
        }
        sums[static_cast<std::size_t>(c)] = ((part[0] + part[1]) + (part[2] + part[3])) +
                                            ((part[4] + part[5]) + (part[6] + part[7]));
      });
    }
  });
  double total = 0;
  for (const double s : sums) total += s;
  return total;
}

/// CPU kernel "scale_": t *= factor for every tensor.
void scale_(const std::vector<Tensor>& tensors, double factor) {
  for (const Tensor& t : tensors) {
    dispatch_floating(t.dtype(), "scale_", [&]<typename T>() {
      T* x = t.data<T>();
      const T f = static_cast<T>(factor);
      for (int64_t i = 0, n = t.numel(); i < n; ++i) x[i] = x[i] * f;
    });
  }
}

/// CPU kernel "adamw_step_unless": adamw_step unless skip != 0.
void adamw_step_unless(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                       const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                       const optim::AdamWStepArgs& args, const Tensor& skip) {
  if (skip.item() != 0.0) return;
  adamw_step(params, grads, exp_avgs, exp_avg_sqs, args);
}

/// CPU kernel "sum_of_squares_device": sum_of_squares as a 0-d float64 tensor.
Tensor sum_of_squares_device(const std::vector<Tensor>& tensors) {
  return scalar_tensor(sum_of_squares(tensors), {.dtype = DType::kFloat64});
}

/// CPU kernel "clip_and_check_" (see optim::ClipAndCheckKernel).
void clip_and_check_(const std::vector<Tensor>& grads, const Tensor& sumsq, double max_norm,
                     const Tensor& loss, const Tensor& status) {
  const double norm = std::sqrt(sumsq.item());
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) scale_(grads, coef);
  const double l = loss.item();
  double* s = status.data<double>();
  s[0] = l;
  s[1] = norm;
  s[2] = std::isfinite(l) && std::isfinite(norm) ? 0.0 : 1.0;
}

TT_REGISTER_KERNEL("sgd_step", DeviceType::kCPU, sgd_step);
TT_REGISTER_KERNEL("adamw_step", DeviceType::kCPU, adamw_step);
TT_REGISTER_KERNEL("sum_of_squares", DeviceType::kCPU, sum_of_squares);
TT_REGISTER_KERNEL("scale_", DeviceType::kCPU, scale_);
TT_REGISTER_KERNEL("adamw_step_unless", DeviceType::kCPU, adamw_step_unless);
TT_REGISTER_KERNEL("sum_of_squares_device", DeviceType::kCPU, sum_of_squares_device);
TT_REGISTER_KERNEL("clip_and_check_", DeviceType::kCPU, clip_and_check_);

}  // namespace tt::cpu
