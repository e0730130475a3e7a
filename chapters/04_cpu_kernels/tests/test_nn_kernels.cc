// Tests of the NN kernels called directly (exercises ch04.10 - ch04.16): small hand-checked
// cases, numerically hard inputs, registration under the dispatcher names, and bitwise
// independence of the thread count. Inputs are built with given code only (from_vector, zeros),
// so on a starter each test fails with its own exercise id.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "tt/ops_nn.h"
#include "tt/testing.h"

namespace tt {
namespace {

Tensor f32(std::vector<float> v, Shape shape) {
  return from_vector<float>(v, std::move(shape));
}
Tensor f64(std::vector<double> v, Shape shape) {
  return from_vector<double>(v, std::move(shape));
}
Tensor i64(std::vector<int64_t> v, Shape shape) {
  return from_vector<int64_t>(v, std::move(shape));
}

/// Deterministic pseudo-random values in [-scale, scale) without the tensor RNG.
std::vector<float> wave(int64_t n, float scale, int seed) {
  std::vector<float> v(n);
  uint32_t s = 2654435761u * (seed + 1);
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = scale * (static_cast<float>(s >> 8) / 8388608.0f - 1.0f);
  }
  return v;
}

/// Runs `fn` with 1 and with 3 OpenMP threads and expects bitwise equal results.
template <typename Fn>
void expect_same_bits_for_thread_counts(Fn fn) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<Tensor> one = fn();
  omp_set_num_threads(3);
  const std::vector<Tensor> three = fn();
  omp_set_num_threads(saved);
  ASSERT_EQ(one.size(), three.size());
  for (std::size_t i = 0; i < one.size(); ++i) {
    ASSERT_EQ(one[i].numel(), three[i].numel());
    EXPECT_EQ(std::memcmp(one[i].data_ptr(), three[i].data_ptr(),
                          one[i].numel() * dtype_size(one[i].dtype())),
              0)
        << "output " << i << " differs between 1 and 3 threads";
  }
}

// ----- ch04.10 softmax / log_softmax forward --------------------------------------------------

TEST(Ch04_10_SoftmaxForward, RowsSumToOneAndMatchFormula) {
  Tensor x = f32({1, 2, 3, -1, 0, 1}, {2, 3});
  Tensor y = zeros({2, 3});
  cpu::softmax_forward(y, x, 1);
  const double e = std::exp(1.0), z = 1 + e + e * e;
  Tensor expected = f32(
      {float(1 / z), float(e / z), float(e * e / z), float(1 / z), float(e / z), float(e * e / z)},
      {2, 3});
  EXPECT_TENSOR_NEAR(y, expected, 1e-7, 1e-6);
}

TEST(Ch04_10_SoftmaxForward, LargeLogitsDoNotOverflow) {
  // Without subtracting the row max, exp(1000) is inf and the result NaN.
  Tensor x = f32({1000, 1000, 999, -1000}, {1, 4});
  Tensor y = zeros({1, 4});
  cpu::softmax_forward(y, x, -1);
  const double e = std::exp(-1.0), z = 2 + e;
  EXPECT_TENSOR_NEAR(y, f32({float(1 / z), float(1 / z), float(e / z), 0.f}, {1, 4}), 1e-7, 1e-6);
}

TEST(Ch04_10_SoftmaxForward, MiddleDimIsStrided) {
  // Softmax over dim 0 of [2, 2]: columns, elements 2 apart.
  Tensor x = f64({0, 5, std::log(3.0), 5}, {2, 2});
  Tensor y = zeros({2, 2}, {.dtype = DType::kFloat64});
  cpu::softmax_forward(y, x, 0);
  EXPECT_TENSOR_NEAR(y, f64({0.25, 0.5, 0.75, 0.5}, {2, 2}), 1e-15, 1e-14);
}

TEST(Ch04_10_SoftmaxForward, LogSoftmaxIsStable) {
  Tensor x = f64({1000, 0, -1000}, {1, 3});
  Tensor y = zeros({1, 3}, {.dtype = DType::kFloat64});
  cpu::log_softmax_forward(y, x, 1);
  const double lse = 1000 + std::log1p(std::exp(-1000.0) + std::exp(-2000.0));
  EXPECT_TENSOR_NEAR(y, f64({1000 - lse, -lse, -1000 - lse}, {1, 3}), 1e-12, 1e-14);
}

/// Two rows of 11 (Eigen: SIMD body plus a scalar head or tail) with -inf entries at the start,
/// middle and end and one finite entry far below the row maximum: their softmax is exactly 0 and
/// their log-softmax -inf (resp. finite), on the contiguous path (dim 1) and on the strided one
/// (dim 0 of the transpose). Eigen's SIMD exp alone gives exp(-inf) = 5.56e-309 (double) or
/// 2.94e-39 (float): a masked probability must be 0 on every CPU (tt/safe_exp.h).
template <typename T>
void check_masked_softmax() {
  constexpr T kInf = std::numeric_limits<T>::infinity();
  const T far = std::is_same_v<T, float> ? T(-200) : T(-2000);  // exp underflows to 0 in T
  const int64_t R = 2, C = 11;
  std::vector<T> v(R * C), vt(R * C);
  for (int64_t i = 0; i < R * C; ++i) v[i] = T(0.25) * static_cast<T>(i % 7);
  for (const int64_t i : {0, 3, 5, 10, 12, 19, 21}) v[i] = -kInf;
  v[15] = far;
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t c = 0; c < C; ++c) vt[c * R + r] = v[r * C + c];
  }
  const TensorOptions opt{.dtype = std::is_same_v<T, float> ? DType::kFloat32 : DType::kFloat64};
  const Tensor x = from_vector<T>(v, {R, C}), xt = from_vector<T>(vt, {C, R});
  Tensor p = zeros({R, C}, opt), lp = zeros({R, C}, opt), pt = zeros({C, R}, opt);
  Tensor lpt = zeros({C, R}, opt);
  cpu::softmax_forward(p, x, 1);
  cpu::log_softmax_forward(lp, x, 1);
  cpu::softmax_forward(pt, xt, 0);
  cpu::log_softmax_forward(lpt, xt, 0);
  const std::vector<T> pv = p.to_vector<T>(), lpv = lp.to_vector<T>();
  const std::vector<T> ptv = pt.to_vector<T>(), lptv = lpt.to_vector<T>();
  for (int64_t r = 0; r < R; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < C; ++c) {
      const int64_t i = r * C + c, it = c * R + r;
      SCOPED_TRACE(::testing::Message() << "row " << r << " column " << c << " x = " << v[i]);
      sum += static_cast<double>(pv[i]);
      if (v[i] == -kInf || v[i] == far) {
        EXPECT_EQ(pv[i], T(0));
        EXPECT_EQ(ptv[it], T(0));
      } else {
        EXPECT_GT(pv[i], T(0));
        EXPECT_NEAR(pv[i], ptv[it], 4 * std::numeric_limits<T>::epsilon());
      }
      if (v[i] == -kInf) {
        EXPECT_EQ(lpv[i], -kInf);
        EXPECT_EQ(lptv[it], -kInf);
      } else {
        EXPECT_TRUE(std::isfinite(lpv[i]) && std::isfinite(lptv[it]));
      }
    }
    EXPECT_NEAR(sum, 1.0, 8 * std::numeric_limits<T>::epsilon());
  }
}

TEST(Ch04_10_SoftmaxForward, MaskedEntriesAreExactlyZeroFloatAndDouble) {
  check_masked_softmax<float>();
  check_masked_softmax<double>();
}

TEST(Ch04_10_SoftmaxForward, RegisteredAndRejectsInt64) {
  Tensor x = f32({1, 2}, {1, 2}), y = zeros({1, 2});
  call_kernel<SoftmaxForwardKernel>("softmax_forward", Device::cpu(), y, x, 1);
  EXPECT_NEAR(y.to_vector<float>()[1], 1 / (1 + std::exp(-1.0)), 1e-6);
  call_kernel<SoftmaxForwardKernel>("log_softmax_forward", Device::cpu(), y, x, 1);
  EXPECT_NEAR(y.to_vector<float>()[0], -std::log1p(std::exp(1.0)), 1e-6);
  Tensor xi = i64({1, 2}, {1, 2});
  EXPECT_TT_ERROR(cpu::softmax_forward(xi, xi, 1), "softmax_forward", "int64");
}

// ----- ch04.11 softmax / log_softmax backward -------------------------------------------------

TEST(Ch04_11_SoftmaxBackward, MatchesJacobianProduct) {
  // dx_i = sum_j dy_j * dy_j/dx_i with J_ji = y_j (delta_ij - y_i).
  const std::vector<double> y{0.1, 0.2, 0.7}, dy{1, -2, 0.5};
  std::vector<double> expected(3, 0);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) expected[i] += dy[j] * y[j] * ((i == j) - y[i]);
  }
  Tensor dx = zeros({1, 3}, {.dtype = DType::kFloat64});
  cpu::softmax_backward(dx, f64(dy, {1, 3}), f64(y, {1, 3}), -1);
  EXPECT_TENSOR_NEAR(dx, f64(expected, {1, 3}), 1e-15, 1e-14);
}

TEST(Ch04_11_SoftmaxBackward, LogSoftmaxBackwardAndStridedDim) {
  // log-softmax: dx_i = dy_i - softmax_i * sum(dy); over dim 0 of a [3, 1] tensor.
  const std::vector<double> p{0.2, 0.3, 0.5}, dy{1, 2, -1};
  std::vector<double> logp, expected;
  for (int i = 0; i < 3; ++i) {
    logp.push_back(std::log(p[i]));
    expected.push_back(dy[i] - p[i] * 2);
  }
  Tensor dx = zeros({3, 1}, {.dtype = DType::kFloat64});
  cpu::log_softmax_backward(dx, f64(dy, {3, 1}), f64(logp, {3, 1}), 0);
  EXPECT_TENSOR_NEAR(dx, f64(expected, {3, 1}), 1e-15, 1e-14);
  call_kernel<SoftmaxBackwardKernel>("softmax_backward", Device::cpu(), dx, f64(dy, {3, 1}),
                                     f64(p, {3, 1}), 0);
  EXPECT_NEAR(dx.to_vector<double>()[0], 0.2 * (1 - (0.2 + 0.6 - 0.5)), 1e-15);
}

// ----- ch04.12 layernorm forward --------------------------------------------------------------

TEST(Ch04_12_LayerNormForward, NormalizesEachRowAndStoresStats) {
  Tensor x = f64({1, 2, 3, 4, -2, 0, 2, 4}, {2, 4});
  Tensor w = f64({1, 2, 1, 1}, {4}), b = f64({0, 0, 1, 0}, {4});
  Tensor out = zeros({2, 4}, {.dtype = DType::kFloat64});
  Tensor mean = zeros({2}, {.dtype = DType::kFloat64}),
         rstd = zeros({2}, {.dtype = DType::kFloat64});
  cpu::layernorm_forward(out, mean, rstd, x, w, b, 1e-5);
  const double r0 = 1 / std::sqrt(1.25 + 1e-5), r1 = 1 / std::sqrt(5.0 + 1e-5);
  EXPECT_TENSOR_NEAR(mean, f64({2.5, 1}, {2}), 1e-15, 0);
  EXPECT_TENSOR_NEAR(rstd, f64({r0, r1}, {2}), 0, 1e-14);
  EXPECT_TENSOR_NEAR(out,
                     f64({-1.5 * r0, -0.5 * r0 * 2, 0.5 * r0 + 1, 1.5 * r0, -3 * r1, -1 * r1 * 2,
                          1 * r1 + 1, 3 * r1},
                         {2, 4}),
                     1e-14, 1e-14);
}

TEST(Ch04_12_LayerNormForward, LargeOffsetDoesNotCancel) {
  // E[x^2] - E[x]^2 in float32 would lose everything at an offset of 1e4.
  std::vector<float> v = wave(64, 1, 3);
  for (auto& e : v) e += 1e4f;
  Tensor x = f32(v, {1, 64}), out = zeros({1, 64}), mean = zeros({1}), rstd = zeros({1});
  cpu::layernorm_forward(out, mean, rstd, x, f32(std::vector<float>(64, 1), {64}), zeros({64}),
                         1e-5);
  double s = 0, s2 = 0;
  for (float y : out.to_vector<float>()) {
    s += y;
    s2 += double(y) * y;
  }
  EXPECT_NEAR(s / 64, 0, 1e-3);
  EXPECT_NEAR(s2 / 64, 1, 1e-2);
}

// ----- ch04.13 layernorm backward -------------------------------------------------------------

TEST(Ch04_13_LayerNormBackward, MatchesFiniteDifferences) {
  // f(x, w, b) = sum(layernorm(x) * dy); compare each analytic gradient with central differences.
  const int64_t R = 3, C = 5;
  std::vector<double> xv(R * C), wv(C), bv(C), dyv(R * C);
  const auto wx = wave(R * C, 2, 1), ww = wave(C, 1, 2), wb = wave(C, 1, 3), wd = wave(R * C, 1, 4);
  for (int64_t i = 0; i < R * C; ++i) xv[i] = wx[i], dyv[i] = wd[i];
  for (int64_t i = 0; i < C; ++i) wv[i] = ww[i], bv[i] = wb[i];
  auto f = [&](const std::vector<double>& x, const std::vector<double>& w,
               const std::vector<double>& b) {
    Tensor out = zeros({R, C}, {.dtype = DType::kFloat64});
    Tensor m = zeros({R}, {.dtype = DType::kFloat64}), r = zeros({R}, {.dtype = DType::kFloat64});
    cpu::layernorm_forward(out, m, r, f64(x, {R, C}), f64(w, {C}), f64(b, {C}), 1e-5);
    double s = 0;
    const auto o = out.to_vector<double>();
    for (int64_t i = 0; i < R * C; ++i) s += o[i] * dyv[i];
    return s;
  };
  Tensor out = zeros({R, C}, {.dtype = DType::kFloat64});
  Tensor m = zeros({R}, {.dtype = DType::kFloat64}), r = zeros({R}, {.dtype = DType::kFloat64});
  cpu::layernorm_forward(out, m, r, f64(xv, {R, C}), f64(wv, {C}), f64(bv, {C}), 1e-5);
  Tensor dx = zeros({R, C}, {.dtype = DType::kFloat64});
  Tensor dw = zeros({C}, {.dtype = DType::kFloat64}), db = zeros({C}, {.dtype = DType::kFloat64});
  cpu::layernorm_backward(dx, dw, db, f64(dyv, {R, C}), f64(xv, {R, C}), f64(wv, {C}), m, r);
  const double h = 1e-6;
  auto numeric = [&](std::vector<double>& v, int64_t i) {
    const double keep = v[i];
    v[i] = keep + h;
    const double up = f(xv, wv, bv);
    v[i] = keep - h;
    const double down = f(xv, wv, bv);
    v[i] = keep;
    return (up - down) / (2 * h);
  };
  std::vector<double> ndx(R * C), ndw(C), ndb(C);
  for (int64_t i = 0; i < R * C; ++i) ndx[i] = numeric(xv, i);
  for (int64_t i = 0; i < C; ++i) ndw[i] = numeric(wv, i), ndb[i] = numeric(bv, i);
  EXPECT_TENSOR_NEAR(dx, f64(ndx, {R, C}), 1e-7, 1e-6);
  EXPECT_TENSOR_NEAR(dw, f64(ndw, {C}), 1e-7, 1e-6);
  EXPECT_TENSOR_NEAR(db, f64(ndb, {C}), 1e-7, 1e-6);
}

TEST(Ch04_13_LayerNormBackward, SameBitsForAnyThreadCount) {
  const int64_t R = 97, C = 200;  // several column blocks, rows not a multiple of 3
  Tensor x = f32(wave(R * C, 3, 5), {R, C}), dy = f32(wave(R * C, 1, 6), {R, C});
  Tensor w = f32(wave(C, 1, 7), {C}), b = f32(wave(C, 1, 8), {C});
  Tensor out = zeros({R, C}), m = zeros({R}), r = zeros({R});
  cpu::layernorm_backward(zeros({R, C}), zeros({C}), zeros({C}), dy, x, w, m, r);  // fail fast
  cpu::layernorm_forward(out, m, r, x, w, b, 1e-5);
  expect_same_bits_for_thread_counts([&] {
    Tensor dx = zeros({R, C}), dw = zeros({C}), db = zeros({C});
    cpu::layernorm_backward(dx, dw, db, dy, x, w, m, r);
    return std::vector<Tensor>{dx, dw, db};
  });
}

// ----- ch04.14 gelu ---------------------------------------------------------------------------

TEST(Ch04_14_Gelu, ForwardMatchesTanhFormula) {
  const std::vector<double> xs{-3, -1, -0.1, 0, 0.5, 2, 10};
  std::vector<double> expected;
  for (double v : xs) {
    expected.push_back(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
  }
  Tensor y = zeros({7}, {.dtype = DType::kFloat64});
  cpu::gelu_forward(y, f64(xs, {7}));
  EXPECT_TENSOR_NEAR(y, f64(expected, {7}), 1e-15, 1e-14);
}

TEST(Ch04_14_Gelu, BackwardMatchesFiniteDifferences) {
  const std::vector<double> xs{-3, -1, -0.1, 0, 0.5, 2, 4}, dy{1, 2, -1, 0.5, 1, -3, 1};
  Tensor dx = zeros({7}, {.dtype = DType::kFloat64});
  cpu::gelu_backward(dx, f64(dy, {7}), f64(xs, {7}));
  const double h = 1e-6;
  std::vector<double> expected;
  for (int i = 0; i < 7; ++i) {
    Tensor y = zeros({2}, {.dtype = DType::kFloat64});
    cpu::gelu_forward(y, f64({xs[i] + h, xs[i] - h}, {2}));
    const auto v = y.to_vector<double>();
    expected.push_back(dy[i] * (v[0] - v[1]) / (2 * h));
  }
  EXPECT_TENSOR_NEAR(dx, f64(expected, {7}), 1e-8, 1e-7);
}

// ----- ch04.15 embedding backward -------------------------------------------------------------

TEST(Ch04_15_EmbeddingBackward, RepeatedIndicesAccumulate) {
  Tensor idx = i64({2, 0, 2, 2}, {2, 2});
  Tensor dy = f32({1, 10, 2, 20, 3, 30, 4, 40}, {2, 2, 2});
  Tensor dw = full({3, 2}, 99.0);  // must be overwritten, not added to
  cpu::embedding_backward(dw, dy, idx);
  EXPECT_TENSOR_NEAR(dw, f32({2, 20, 0, 0, 8, 80}, {3, 2}), 0, 0);
}

TEST(Ch04_15_EmbeddingBackward, RejectsOutOfRangeIndex) {
  EXPECT_TT_ERROR(cpu::embedding_backward(zeros({3, 2}), zeros({2, 2}), i64({0, 3}, {2})),
                  "embedding_backward", "indices[1] = 3", "[0, 3)", "[2]", "int64");
}

TEST(Ch04_15_EmbeddingBackward, SameBitsForAnyThreadCount) {
  const int64_t V = 7, C = 300, N = 64;
  std::vector<int64_t> iv(N);
  for (int64_t i = 0; i < N; ++i) iv[i] = (i * i) % V;
  Tensor idx = i64(iv, {N}), dy = f32(wave(N * C, 1, 9), {N, C});
  expect_same_bits_for_thread_counts([&] {
    Tensor dw = zeros({V, C});
    cpu::embedding_backward(dw, dy, idx);
    return std::vector<Tensor>{dw};
  });
}

// ----- ch04.16 cross-entropy ------------------------------------------------------------------

TEST(Ch04_16_CrossEntropy, ForwardIsMeanNegativeLogLikelihood) {
  Tensor x = f64({0, 0, std::log(2.0), 1000, 1000, 1000}, {2, 3});
  Tensor loss = zeros({}, {.dtype = DType::kFloat64}), lse = zeros({2}, {.dtype = DType::kFloat64});
  cpu::cross_entropy_forward(loss, lse, x, i64({2, 1}, {2}), kIgnoreIndex);
  // Row 0: p = [1/4, 1/4, 1/2], target 2 -> log 2; row 1: uniform -> log 3.
  EXPECT_NEAR(loss.item(), (std::log(2.0) + std::log(3.0)) / 2, 1e-12);  // ulp(1000) ~ 1e-13
  EXPECT_TENSOR_NEAR(lse, f64({std::log(4.0), 1000 + std::log(3.0)}, {2}), 1e-13, 0);
}

TEST(Ch04_16_CrossEntropy, IgnoredRowsLeaveSumAndCount) {
  Tensor x = f64({0, 0, std::log(2.0), 5, -7, 1}, {2, 3});
  Tensor loss = zeros({}, {.dtype = DType::kFloat64}), lse = zeros({2}, {.dtype = DType::kFloat64});
  Tensor t = i64({2, -1}, {2});
  cpu::cross_entropy_forward(loss, lse, x, t, -1);
  EXPECT_NEAR(loss.item(), std::log(2.0), 1e-14);
  Tensor dx = full({2, 3}, 9.0, {.dtype = DType::kFloat64});
  cpu::cross_entropy_backward(dx, scalar_tensor(2.0, {.dtype = DType::kFloat64}), x, t, lse, -1);
  // d/dx of 2 * (lse - x_t) over 1 row: 2 * (softmax - onehot); ignored row: 0.
  EXPECT_TENSOR_NEAR(dx, f64({0.5, 0.5, -1, 0, 0, 0}, {2, 3}), 1e-15, 1e-14);
  // Every row ignored: 0 / 0, NaN like PyTorch.
  cpu::cross_entropy_forward(loss, lse, x, i64({-1, -1}, {2}), -1);
  EXPECT_TRUE(std::isnan(loss.item()));
}

TEST(Ch04_16_CrossEntropy, RejectsOutOfRangeTarget) {
  Tensor loss = zeros({}), lse = zeros({2});
  EXPECT_TT_ERROR(cpu::cross_entropy_forward(loss, lse, zeros({2, 3}), i64({0, 3}, {2}), -100),
                  "cross_entropy", "targets[1] = 3", "[0, 3)", "[2]", "int64");
  EXPECT_TT_ERROR(cpu::cross_entropy_forward(loss, lse, zeros({2, 3}), i64({-5, 0}, {2}), -100),
                  "cross_entropy", "targets[0] = -5");
}

/// Cross-entropy over a vocabulary with masked (-inf) logits, e.g. tokens a model may not emit:
/// the loss is that of the unmasked logits and the gradient of every masked logit is exactly 0
/// (Eigen's SIMD exp alone gives exp(-inf - lse) = 5.56e-309 or 2.94e-39: tt/safe_exp.h).
template <typename T>
void check_masked_cross_entropy() {
  constexpr T kInf = std::numeric_limits<T>::infinity();
  const int64_t N = 3, V = 13;
  std::vector<T> x(N * V);
  for (int64_t i = 0; i < N * V; ++i) x[i] = T(0.5) * static_cast<T>((i * 5) % 9) - T(1);
  for (const int64_t i : {0, 4, 7, 12, 13, 20, 30, 38}) x[i] = -kInf;
  const std::vector<int64_t> t = {2, 5, 1};
  const TensorOptions opt{.dtype = std::is_same_v<T, float> ? DType::kFloat32 : DType::kFloat64};
  Tensor loss = zeros({}, opt), lse = zeros({N}, opt), dx = zeros({N, V}, opt);
  const Tensor logits = from_vector<T>(x, {N, V}), targets = i64(t, {N});
  cpu::cross_entropy_forward(loss, lse, logits, targets, kIgnoreIndex);
  cpu::cross_entropy_backward(dx, scalar_tensor(1.0, opt), logits, targets, lse, kIgnoreIndex);
  double want_loss = 0;
  const std::vector<T> lv = lse.to_vector<T>(), dv = dx.to_vector<T>();
  for (int64_t n = 0; n < N; ++n) {
    double s = 0;  // log-sum-exp of the finite logits (all within [-1, 3]: no shift needed)
    for (int64_t v = 0; v < V; ++v) {
      if (x[n * V + v] != -kInf) s += std::exp(static_cast<double>(x[n * V + v]));
    }
    EXPECT_NEAR(static_cast<double>(lv[n]), std::log(s), 8 * std::numeric_limits<T>::epsilon());
    want_loss += std::log(s) - static_cast<double>(x[n * V + t[n]]);
    for (int64_t v = 0; v < V; ++v) {
      if (x[n * V + v] == -kInf) {
        EXPECT_EQ(dv[n * V + v], T(0)) << "row " << n << " masked logit " << v;
      }
    }
  }
  EXPECT_NEAR(loss.item(), want_loss / N, 8 * std::numeric_limits<T>::epsilon());
}

TEST(Ch04_16_CrossEntropy, MaskedLogitsGetExactlyZeroGradientFloatAndDouble) {
  check_masked_cross_entropy<float>();
  check_masked_cross_entropy<double>();
}

TEST(Ch04_16_CrossEntropy, SameBitsForAnyThreadCount) {
  const int64_t N = 33, V = 50;
  std::vector<int64_t> tv(N);
  for (int64_t i = 0; i < N; ++i) tv[i] = i % 5 == 0 ? kIgnoreIndex : (i * 7) % V;
  Tensor x = f32(wave(N * V, 4, 10), {N, V}), t = i64(tv, {N});
  expect_same_bits_for_thread_counts([&] {
    Tensor loss = zeros({}), lse = zeros({N}), dx = zeros({N, V});
    cpu::cross_entropy_forward(loss, lse, x, t, kIgnoreIndex);
    cpu::cross_entropy_backward(dx, scalar_tensor(1.0), x, t, lse, kIgnoreIndex);
    return std::vector<Tensor>{loss, lse, dx};
  });
}

// ----- given kernels: embedding forward, masked fill ------------------------------------------

TEST(Ch04_NnKernels, EmbeddingForwardGathersRows) {
  Tensor w = f32({0, 1, 10, 11, 20, 21}, {3, 2}), out = zeros({2, 2});
  cpu::embedding_forward(out, w, i64({2, 0}, {2}));
  EXPECT_TENSOR_NEAR(out, f32({20, 21, 0, 1}, {2, 2}), 0, 0);
  EXPECT_TT_ERROR(cpu::embedding_forward(out, w, i64({-1, 0}, {2})), "embedding_forward",
                  "indices[0] = -1");
}

TEST(Ch04_NnKernels, MaskedFillWithBroadcastMask) {
  // A [2, 2] mask viewed as [2, 2, 2] with stride 0 on dim 0 (no ch01 exercise needed).
  Tensor mask(i64({0, 1, 0, 0}, {4}).storage(), {2, 2, 2}, {0, 2, 1}, 0, DType::kInt64);
  Tensor x = f32({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}), out = zeros({2, 2, 2});
  cpu::masked_fill_forward(out, x, mask, -5);
  EXPECT_TENSOR_NEAR(out, f32({1, -5, 3, 4, 5, -5, 7, 8}, {2, 2, 2}), 0, 0);
  Tensor dx = zeros({2, 2, 2});
  cpu::masked_fill_backward(dx, x, mask);
  EXPECT_TENSOR_NEAR(dx, f32({1, 0, 3, 4, 5, 0, 7, 8}, {2, 2, 2}), 0, 0);
}

TEST(Ch04_NnKernels, EveryOpHasForwardAndBackwardRegistered) {
  for (const char* op : {"softmax", "log_softmax", "layernorm", "gelu", "embedding",
                         "cross_entropy", "masked_fill"}) {
    for (const char* pass : {"_forward", "_backward"}) {
      EXPECT_TRUE(KernelRegistry::instance().has(std::string(op) + pass, DeviceType::kCPU))
          << op << pass;
    }
  }
}

}  // namespace
}  // namespace tt
