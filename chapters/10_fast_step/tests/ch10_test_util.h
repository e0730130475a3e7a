// Helpers shared by the chapter 10 tests: seeded attention inputs and the float64 reference
// (chapter 04's naive composition, with autograd) that every FlashAttention test compares to.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>

#include "tt/autograd.h"
#include "tt/flash_attention.h"
#include "tt/functional.h"
#include "tt/testing.h"

namespace tt::test10 {

/// Seeded N(0, 1) values of `shape` in `dtype` (CPU).
inline Tensor randn_t(const Shape& shape, uint64_t seed, DType dtype) {
  Generator gen(seed);
  return randn(shape, gen, {dtype});
}

/// Everything the tests compare with: the forward output and log-sum-exp and the gradients of
/// sum(out * dout), all float64 on the CPU, from causal_attention_naive.
struct AttentionReference {
  Tensor out, lse, dq, dk, dv;
};

/// Row log-sum-exp of the scaled causal scores, L[b, h, i] = log sum_{j<=i} exp(q_i.k_j /
/// sqrt(hs)), computed directly in float64 (q, k: float64, contiguous, CPU).
inline Tensor reference_lse(const Tensor& q, const Tensor& k) {
  const int64_t heads = q.size(0) * q.size(1), n = q.size(2), hs = q.size(3);
  Tensor lse = empty({q.size(0), q.size(1), n}, {DType::kFloat64});
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  const double* pq = q.data<double>();
  const double* pk = k.data<double>();
  double* pl = lse.data<double>();
  std::vector<double> s(static_cast<std::size_t>(n));
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < n; ++i) {
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j <= i; ++j) {
        double d = 0;
        for (int64_t c = 0; c < hs; ++c) d += pq[(h * n + i) * hs + c] * pk[(h * n + j) * hs + c];
        s[j] = d * scale;
        m = std::max(m, s[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j <= i; ++j) sum += std::exp(s[j] - m);
      pl[h * n + i] = m + std::log(sum);
    }
  }
  return lse;
}

/// The float64 reference for inputs of any float dtype and device.
inline AttentionReference reference_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                              const Tensor& dout) {
  auto leaf = [](const Tensor& t) {
    Tensor c = t.to(Device::cpu()).to(DType::kFloat64).contiguous().clone();
    c.set_requires_grad();
    return c;
  };
  const Tensor q64 = leaf(q), k64 = leaf(k), v64 = leaf(v);
  AttentionReference r;
  r.out = causal_attention_naive(q64, k64, v64);
  autograd::backward(r.out, dout.to(Device::cpu()).to(DType::kFloat64).contiguous());
  r.out = r.out.detach();
  r.dq = q64.grad();
  r.dk = k64.grad();
  r.dv = v64.grad();
  r.lse = reference_lse(q64.detach(), k64.detach());
  return r;
}

/// ||a - ref|| / ||ref|| (Frobenius norms, in float64 on the CPU).
inline double relative_error(const Tensor& a, const Tensor& ref) {
  const Tensor x = a.to(Device::cpu()).to(DType::kFloat64).contiguous();
  const Tensor y = ref.to(Device::cpu()).to(DType::kFloat64).contiguous();
  double num = 0, den = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double d = x.data<double>()[i] - y.data<double>()[i];
    num += d * d;
    den += y.data<double>()[i] * y.data<double>()[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

/// "B=2 NH=3 T=17 hs=64" for failure messages.
inline std::string shape_name(const Shape& s) {
  std::ostringstream os;
  os << "B=" << s[0] << " NH=" << s[1] << " T=" << s[2] << " hs=" << s[3];
  return os.str();
}

}  // namespace tt::test10
