// The CPU GEMM (chapter 04, given code; README "A fourth kernel: the FMA micro-kernel").
//
// Exercise ch04.6's algorithm, written the way BLAS libraries write it:
//   - The micro-kernel keeps an MR x NR block of C in vector registers (AVX-512: 12 rows of 2
//     vectors, 24 of the 32 registers; AVX2: 6 rows of 2, 12 of 16) and, per k, loads two
//     vectors of the packed B panel, broadcasts MR values of the packed A panel and issues
//     2*MR fused multiply-adds. The intrinsics make each product one FMA instruction: nothing is
//     left to the compiler's choice of contraction.
//   - The loops around it (BLIS's order): for each NC-column block of B and KC-row slice of K,
//     pack that B block once (KC x NC: 512 KiB in float, it stays in L2); for each MC-row block
//     of A, pack it into MR-row panels; then each A panel (MR x KC, in L1) meets every B panel.
//   - A K slice after the first loads the partial sums back from C and continues their chains,
//     so every element is the same FMA chain in k order whatever the blocking (cpu_gemm.h).
//   - Threads: the rows (or, when N > M, the columns) are split into one task per thread; each
//     task packs what it reads itself. No thread ever combines another's partial sums, so the
//     thread count cannot change a bit.
#include "tt/cpu_gemm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "tt/dispatcher.h"
#include "tt/ops_matmul.h"
#include "tt/parallel.h"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

namespace tt::cpu {

MatmulGeometry::MatmulGeometry(const Tensor& out, const Tensor& a, const Tensor& b)
    : M(out.size(-2)),
      N(out.size(-1)),
      K(a.size(-1)),
      a_rs(a.stride(-2)),
      a_cs(a.stride(-1)),
      b_rs(b.stride(-2)),
      b_cs(b.stride(-1)) {
  const Shape batch_shape(out.shape().begin(), out.shape().end() - 2);
  const Strides sa(a.strides().begin(), a.strides().end() - 2);
  const Strides sb(b.strides().begin(), b.strides().end() - 2);
  batch = shape_numel(batch_shape);
  a_off.resize(static_cast<std::size_t>(batch));
  b_off.resize(static_cast<std::size_t>(batch));
  if (batch > 0) strided_offsets(batch_shape, sa, sb, 0, batch, a_off.data(), b_off.data());
}

namespace {

// ----- the vector type of each instruction set ------------------------------------------------
// Simd<T>: V (a vector of W lanes), zero(), load(p), store(p, v), set1(x), fma(a, b, acc) = a*b+acc
// rounded once. kMR rows of two vectors are the accumulators.
#if defined(__AVX512F__)
constexpr const char* kIsa = "avx512";
constexpr bool kNative = true;
constexpr int kMR = 12;
template <typename T>
struct Simd;
template <>
struct Simd<float> {
  using V = __m512;
  static constexpr int W = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
};
template <>
struct Simd<double> {
  using V = __m512d;
  static constexpr int W = 8;
  static V zero() { return _mm512_setzero_pd(); }
  static V load(const double* p) { return _mm512_loadu_pd(p); }
  static void store(double* p, V v) { _mm512_storeu_pd(p, v); }
  static V set1(double x) { return _mm512_set1_pd(x); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
};
#elif defined(__AVX2__) && defined(__FMA__)
constexpr const char* kIsa = "avx2";
constexpr bool kNative = true;
constexpr int kMR = 6;
template <typename T>
struct Simd;
template <>
struct Simd<float> {
  using V = __m256;
  static constexpr int W = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
};
template <>
struct Simd<double> {
  using V = __m256d;
  static constexpr int W = 4;
  static V zero() { return _mm256_setzero_pd(); }
  static V load(const double* p) { return _mm256_loadu_pd(p); }
  static void store(double* p, V v) { _mm256_storeu_pd(p, v); }
  static V set1(double x) { return _mm256_set1_pd(x); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
};
#else
// No FMA instructions: 4 lanes of std::fma (a library call on such a CPU), the same bits.
constexpr const char* kIsa = "portable";
constexpr bool kNative = false;
constexpr int kMR = 4;
template <typename T>
struct Simd {
  static constexpr int W = 4;
  struct V {
    T v[W];
  };
  static V zero() { return V{}; }
  static V load(const T* p) {
    V r;
    std::memcpy(r.v, p, sizeof(r.v));
    return r;
  }
  static void store(T* p, V x) { std::memcpy(p, x.v, sizeof(x.v)); }
  static V set1(T x) { return V{{x, x, x, x}}; }
  static V fma(V a, V b, V c) {
    for (int l = 0; l < W; ++l) c.v[l] = std::fma(a.v[l], b.v[l], c.v[l]);
    return c;
  }
};
#endif

template <typename T>
constexpr int kNR = 2 * Simd<T>::W;  // two vectors of columns
// Block sizes: an A panel (MR x KC, 12 KiB in float) stays in L1, the packed B block (KC x NC,
// 512 KiB) in L2, the packed A block (MC x KC) in L2/L3. MC is a multiple of every MR, NC of
// every NR.
constexpr int64_t kKC = 256, kMC = 120, kNC = 512;
/// Below this many multiply-adds a product runs as one task (a thread's start costs more).
constexpr int64_t kMinTaskMacs = int64_t{1} << 18;

/// A 64-byte-aligned scratch buffer of at least n elements, one per thread and slot, kept
/// between calls (the packing buffers: allocated once per thread, not once per product).
template <typename T>
T* scratch(int slot, int64_t n) {
  thread_local std::vector<T> buffers[2];
  std::vector<T>& buf = buffers[slot];
  const std::size_t need = static_cast<std::size_t>(n) + 64 / sizeof(T);
  if (buf.size() < need) buf.resize(need);
  void* p = buf.data();
  std::size_t space = buf.size() * sizeof(T);
  return static_cast<T*>(std::align(64, static_cast<std::size_t>(n) * sizeof(T), p, space));
}

/// Packs rows [0, mc) x columns [0, kc) of a (from `a`) into MR-row panels, each k-major
/// (MR values of column k together), the last panel zero-padded.
template <typename T>
void pack_a(const T* a, int64_t rs, int64_t cs, int64_t mc, int64_t kc, T* dst) {
  for (int64_t ip = 0; ip < mc; ip += kMR) {
    const int64_t m = std::min<int64_t>(kMR, mc - ip);
    const T* src = a + ip * rs;
    for (int64_t k = 0; k < kc; ++k) {
      for (int64_t i = 0; i < m; ++i) dst[k * kMR + i] = src[i * rs + k * cs];
      for (int64_t i = m; i < kMR; ++i) dst[k * kMR + i] = T(0);
    }
    dst += kMR * kc;
  }
}

/// Packs rows [0, kc) x columns [0, nc) of b into NR-column panels, each k-major (NR values of
/// row k together), the last panel zero-padded.
template <typename T>
void pack_b(const T* b, int64_t rs, int64_t cs, int64_t kc, int64_t nc, T* dst) {
  constexpr int64_t NR = kNR<T>;
  for (int64_t jp = 0; jp < nc; jp += NR) {
    const int64_t n = std::min<int64_t>(NR, nc - jp);
    const T* src = b + jp * cs;
    for (int64_t k = 0; k < kc; ++k) {
      T* d = dst + k * NR;
      if (cs == 1 && n == NR) {
        std::memcpy(d, src + k * rs, NR * sizeof(T));
      } else {
        for (int64_t j = 0; j < n; ++j) d[j] = src[k * rs + j * cs];
        for (int64_t j = n; j < NR; ++j) d[j] = T(0);
      }
    }
    dst += NR * kc;
  }
}

/// The MR x NR block c (rows ldc apart) continues its FMA chains over kc values of k from the
/// packed panels ap (MR per k) and bp (NR per k); from zero when !load_c.
template <typename T>
void micro_kernel(int64_t kc, const T* __restrict ap, const T* __restrict bp, T* c, int64_t ldc,
                  bool load_c) {
  using S = Simd<T>;
  typename S::V acc[kMR][2];
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) {
    acc[i][0] = load_c ? S::load(c + i * ldc) : S::zero();
    acc[i][1] = load_c ? S::load(c + i * ldc + S::W) : S::zero();
  }
  for (int64_t k = 0; k < kc; ++k) {
    const typename S::V b0 = S::load(bp), b1 = S::load(bp + S::W);
#pragma GCC unroll 12
    for (int i = 0; i < kMR; ++i) {
      const typename S::V ai = S::set1(ap[i]);
      acc[i][0] = S::fma(ai, b0, acc[i][0]);
      acc[i][1] = S::fma(ai, b1, acc[i][1]);
    }
    ap += kMR;
    bp += kNR<T>;
  }
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) {
    S::store(c + i * ldc, acc[i][0]);
    S::store(c + i * ldc + S::W, acc[i][1]);
  }
}

/// One task: c rows [m0, m1) x columns [n0, n1) (m0 a multiple of MR, n0 of NR).
template <typename T>
void gemm_block(int64_t K, StridedMatrix<T> a, StridedMatrix<T> b, T* c, int64_t ldc,
                bool accumulate, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  constexpr int64_t NR = kNR<T>;
  T* const bpack = scratch<T>(0, kKC * kNC);
  T* const apack = scratch<T>(1, kKC * kMC);
  alignas(64) T edge[kMR * NR];
  for (int64_t jc = n0; jc < n1; jc += kNC) {
    const int64_t nc = std::min(kNC, n1 - jc);
    for (int64_t pc = 0; pc < K; pc += kKC) {
      const int64_t kc = std::min(kKC, K - pc);
      const bool load_c = accumulate || pc > 0;
      pack_b(b.data + pc * b.rs + jc * b.cs, b.rs, b.cs, kc, nc, bpack);
      for (int64_t ic = m0; ic < m1; ic += kMC) {
        const int64_t mc = std::min(kMC, m1 - ic);
        pack_a(a.data + ic * a.rs + pc * a.cs, a.rs, a.cs, mc, kc, apack);
        for (int64_t ir = 0; ir < mc; ir += kMR) {
          const int64_t m = std::min<int64_t>(kMR, mc - ir);
          for (int64_t jr = 0; jr < nc; jr += NR) {
            const int64_t n = std::min(NR, nc - jr);
            T* cb = c + (ic + ir) * ldc + jc + jr;
            if (m == kMR && n == NR) {
              micro_kernel<T>(kc, apack + ir * kc, bpack + jr * kc, cb, ldc, load_c);
              continue;
            }
            // An edge block: through a full-size buffer, only the valid part read and written.
            std::fill(edge, edge + kMR * NR, T(0));
            if (load_c) {
              for (int64_t i = 0; i < m; ++i)
                std::copy(cb + i * ldc, cb + i * ldc + n, edge + i * NR);
            }
            micro_kernel<T>(kc, apack + ir * kc, bpack + jr * kc, edge, NR, load_c);
            for (int64_t i = 0; i < m; ++i)
              std::copy(edge + i * NR, edge + i * NR + n, cb + i * ldc);
          }
        }
      }
    }
  }
}

}  // namespace

const char* gemm_fma_isa() {
  return kIsa;
}

bool gemm_fma_is_native() {
  return kNative;
}

template <typename T>
void gemm_fma(int64_t M, int64_t N, int64_t K, StridedMatrix<T> a, StridedMatrix<T> b, T* c,
              int64_t ldc, bool accumulate) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (!accumulate) {
      for (int64_t i = 0; i < M; ++i) std::fill(c + i * ldc, c + i * ldc + N, T(0));
    }
    return;
  }
  // Split the longer side of C, so that the operand every task packs again is the smaller one.
  const bool split_n = N > M;
  const int64_t unit = split_n ? kNR<T> : kMR;
  const int64_t panels = ((split_n ? N : M) + unit - 1) / unit;
  int64_t tasks = omp_in_parallel() ? 1 : num_threads();
  tasks = std::clamp<int64_t>(std::min(tasks, M * N * K / kMinTaskMacs), 1, panels);
  const int64_t grain = (panels + tasks - 1) / tasks;
  parallel_for(0, panels, grain, [&](int64_t p0, int64_t p1) {
    if (split_n) {
      gemm_block(K, a, b, c, ldc, accumulate, 0, M, p0 * unit, std::min(N, p1 * unit));
    } else {
      gemm_block(K, a, b, c, ldc, accumulate, p0 * unit, std::min(M, p1 * unit), 0, N);
    }
  });
}

template void gemm_fma<float>(int64_t, int64_t, int64_t, StridedMatrix<float>, StridedMatrix<float>,
                              float*, int64_t, bool);
template void gemm_fma<double>(int64_t, int64_t, int64_t, StridedMatrix<double>,
                               StridedMatrix<double>, double*, int64_t, bool);

void matmul_fma(const Tensor& out, const Tensor& a, const Tensor& b) {
  dispatch_floating(out.dtype(), "matmul_fma", [&]<typename T>() {
    const MatmulGeometry g(out, a, b);
    T* pc = static_cast<T*>(out.data_ptr());
    if (g.M == 0 || g.N == 0 || g.batch == 0) return;
    if (g.K == 0) {  // a and b may have no storage: no pointer arithmetic on them
      std::fill(pc, pc + out.numel(), T(0));
      return;
    }
    const T* pa = static_cast<const T*>(a.data_ptr());
    const T* pb = static_cast<const T*>(b.data_ptr());
    auto one = [&](int64_t p) {
      gemm_fma<T>(g.M, g.N, g.K, {pa + g.a_off[p], g.a_rs, g.a_cs},
                  {pb + g.b_off[p], g.b_rs, g.b_cs}, pc + p * g.M * g.N, g.N, false);
    };
    if (g.batch == 1) {
      one(0);  // threaded inside
    } else {
      // Many matrices: one task each (inside the parallel region each product is one task).
      parallel_for(0, g.batch, 1, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) one(p);
      });
    }
  });
}

namespace {
/// "matmul", the default CPU kernel: gemm_fma on FMA hardware, Eigen's GEMM (exercise ch04.7)
/// in a build without FMA instructions, where gemm_fma's portable lanes would be slow.
void matmul_default(const Tensor& out, const Tensor& a, const Tensor& b) {
  if constexpr (kNative) {
    matmul_fma(out, a, b);
  } else {
    matmul_eigen(out, a, b);
  }
}
}  // namespace

TT_REGISTER_KERNEL("matmul_fma", DeviceType::kCPU, matmul_fma);
TT_REGISTER_KERNEL("matmul", DeviceType::kCPU, matmul_default);

}  // namespace tt::cpu
