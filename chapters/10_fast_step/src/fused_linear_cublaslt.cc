// cuBLASLt GEMMs with epilogues for tt::linear_lt and tt::linear_gelu_lt (tt/fused_ops.h):
// "matmul_lt_forward" (bias, or bias + GELU storing the pre-activation) and "matmul_lt_wgrad"
// (the weight gradient and, in the same GEMM, the bias gradient).
//
// Row-major tensors are column-major transposes (chapter 07's trick): y [M, N] row-major is the
// column-major N x M matrix y^T = W x^T, so the forward is D (N x M) = op(A) op(B) with A = W
// (stored K x N column-major, transposed), B = x^T (K x M, as stored), and the bias runs along
// D's rows (N of them), which is what CUBLASLT_EPILOGUE_BIAS broadcasts. The weight gradient
// dW [N, K] row-major is the column-major K x N matrix x^T dy: A = x^T (K x M, as stored),
// B = dy (stored N x M, transposed to M x N), and CUBLASLT_EPILOGUE_BGRADB sums op(B) over the
// GEMM's k = M dimension: db = the column sums of dy.
//
// Host code only (cuBLASLt launches its own kernels), compiled in CUDA builds.
#if TT_WITH_CUDA
#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "tt/cuda_blas.h"
#include "tt/cuda_device.h"
#include "tt/cuda_matmul.h"
#include "tt/dispatcher.h"
#include "tt/fused_ops.h"

namespace tt::cuda {

namespace {

// Workspace cuBLASLt may use per GEMM (NVIDIA recommends 32 MiB on Hopper).
constexpr std::size_t kLtWorkspaceBytes = std::size_t{32} << 20;

// One cuBLASLt handle and one workspace per device, created on first use. The workspace comes
// from the caching allocator once, not per call. The pool is constructed after the runtime is
// initialized, so its destructor runs before the runtime's exit handler (as chapter 07's
// cuBLAS handles).
class LtPool {
 public:
  ~LtPool() {
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return;
    for (auto& [index, h] : handles_) (void)cublasLtDestroy(h);
  }
  /// The handle and workspace of device `index` (current device).
  std::pair<cublasLtHandle_t, void*> get(int index) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = handles_.find(index);
    if (it == handles_.end()) {
      cublasLtHandle_t h = nullptr;
      TT_CUBLAS_CHECK(cublasLtCreate(&h));
      it = handles_.emplace(index, h).first;
      workspaces_.emplace(index, empty({static_cast<int64_t>(kLtWorkspaceBytes / sizeof(float))},
                                       {DType::kFloat32, Device::cuda(index)}));
    }
    return {it->second, workspaces_.at(index).data_ptr()};
  }

 private:
  std::mutex mutex_;
  std::map<int, cublasLtHandle_t> handles_;
  std::map<int, Tensor> workspaces_;
};

LtPool& lt_pool(int index) {
  DeviceGuard guard(index);  // initializes the runtime before the pool exists
  static LtPool pool;
  return pool;
}

// RAII owners of cuBLASLt descriptors.
struct MatmulDesc {
  cublasLtMatmulDesc_t d = nullptr;
  ~MatmulDesc() {
    if (d != nullptr) (void)cublasLtMatmulDescDestroy(d);
  }
};
struct MatrixLayout {
  cublasLtMatrixLayout_t l = nullptr;
  ~MatrixLayout() {
    if (l != nullptr) (void)cublasLtMatrixLayoutDestroy(l);
  }
};
struct MatmulPreference {
  cublasLtMatmulPreference_t p = nullptr;
  ~MatmulPreference() {
    if (p != nullptr) (void)cublasLtMatmulPreferenceDestroy(p);
  }
};

// The largest power of two (at most 256) that divides the address: cuBLASLt assumes 256-byte
// aligned pointers unless told otherwise, and picks vectorized kernels accordingly.
uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

// One float32 GEMM D (m x n, column-major, ldd) = op(A) op(B) with an epilogue.
struct LtGemm {
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  int64_t m = 0, n = 0, k = 0;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  float* d = nullptr;
  int64_t ldd = 0;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  void* bias = nullptr;  // bias (forward) or bias gradient (BGRAD*) vector
  void* aux = nullptr;   // GELU pre-activation, ld = ldd
};

using AlgoKey = std::tuple<int, int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int,
                           bool, uint32_t, uint32_t, uint32_t, uint32_t>;

// Runs `g` on device `dev`'s stream; false (nothing launched) when cuBLASLt has no algorithm.
// The heuristic's answer is cached per problem (shape, epilogue, TF32, alignments): asking costs
// tens of microseconds of host time.
bool run_lt(const LtGemm& g, int dev) {
  static std::mutex cache_mutex;
  static std::map<AlgoKey, std::vector<cublasLtMatmulHeuristicResult_t>> cache;
  const bool tf32 = allow_tf32();
  const uint32_t al_a = alignment(g.a), al_b = alignment(g.b), al_d = alignment(g.d),
                 al_bias = alignment(g.bias);
  const AlgoKey key{dev,
                    static_cast<int>(g.ta),
                    static_cast<int>(g.tb),
                    g.m,
                    g.n,
                    g.k,
                    g.lda,
                    g.ldb,
                    g.ldd,
                    static_cast<int>(g.epilogue),
                    tf32,
                    al_a,
                    al_b,
                    al_d,
                    al_bias};
  auto [lt, workspace] = lt_pool(dev).get(dev);

  MatmulDesc desc;
  TT_CUBLAS_CHECK(cublasLtMatmulDescCreate(
      &desc.d, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const auto set = [&](cublasLtMatmulDescAttributes_t attr, const auto& value) {
    TT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.d, attr, &value, sizeof(value)));
  };
  set(CUBLASLT_MATMUL_DESC_TRANSA, g.ta);
  set(CUBLASLT_MATMUL_DESC_TRANSB, g.tb);
  set(CUBLASLT_MATMUL_DESC_EPILOGUE, g.epilogue);
  if (g.bias != nullptr) set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
  if (g.aux != nullptr) {
    set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.aux);
    set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, g.ldd);
  }
  MatrixLayout la, lb, ld;
  const auto rows = [](cublasOperation_t t, int64_t r, int64_t c) {
    return t == CUBLAS_OP_N ? r : c;
  };
  TT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la.l, CUDA_R_32F, rows(g.ta, g.m, g.k),
                                             rows(g.ta, g.k, g.m), g.lda));
  TT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb.l, CUDA_R_32F, rows(g.tb, g.k, g.n),
                                             rows(g.tb, g.n, g.k), g.ldb));
  TT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld.l, CUDA_R_32F, g.m, g.n, g.ldd));

  std::vector<cublasLtMatmulHeuristicResult_t>* algos = nullptr;
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    auto it = cache.find(key);
    if (it == cache.end()) {
      MatmulPreference pref;
      TT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref.p));
      const auto set_pref = [&](cublasLtMatmulPreferenceAttributes_t attr, const auto& value) {
        TT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref.p, attr, &value, sizeof(value)));
      };
      set_pref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kLtWorkspaceBytes);
      set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, al_a);
      set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, al_b);
      set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, al_d);
      set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, al_d);
      cublasLtMatmulHeuristicResult_t result{};
      int found = 0;
      const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt, desc.d, la.l, lb.l, ld.l, ld.l,
                                                               pref.p, 1, &result, &found);
      std::vector<cublasLtMatmulHeuristicResult_t> v;
      if (st == CUBLAS_STATUS_SUCCESS && found > 0) v.push_back(result);
      it = cache.emplace(key, std::move(v)).first;
    }
    algos = &it->second;
  }
  if (algos->empty()) return false;
  const float alpha = 1.0f, beta = 0.0f;
  TT_CUBLAS_CHECK(cublasLtMatmul(lt, desc.d, &alpha, g.a, la.l, g.b, lb.l, &beta, g.d, ld.l, g.d,
                                 ld.l, &algos->front().algo, workspace, kLtWorkspaceBytes,
                                 stream(dev)));
  return true;
}

// x [M, K], w [N, K], y and pre [M, N], b and db [N]: contiguous float32 tensors on one CUDA
// device. Returns {M, N, K}.
std::tuple<int64_t, int64_t, int64_t> check_lt(const char* op, const Tensor& x, const Tensor& w,
                                               const Tensor& y, const Tensor& vec,
                                               const Tensor& pre) {
  const int64_t M = x.dim() == 2 ? x.size(0) : -1, K = x.dim() == 2 ? x.size(1) : -1;
  const int64_t N = w.dim() == 2 ? w.size(0) : -1;
  bool ok = M >= 0 && N >= 0 && w.size(1) == K && y.shape() == Shape{M, N} &&
            (!vec.defined() || vec.shape() == Shape{N}) &&
            (!pre.defined() || pre.shape() == Shape{M, N});
  for (const Tensor* t : {&x, &w, &y, &vec, &pre}) {
    if (!t->defined()) continue;
    ok = ok && t->dtype() == DType::kFloat32 && t->device() == x.device() &&
         t->device().is_cuda() && t->is_contiguous();
  }
  TT_CHECK(ok, "cuda::", op, ": expected contiguous float32 CUDA tensors x [M, K], w [N, K], ",
           "out [M, N] and optional [N] and [M, N] on one device, got x ", x.describe(), ", w ",
           w.describe(), ", out ", y.describe(), vec.defined() ? ", vector " + vec.describe() : "",
           pre.defined() ? ", pre-activation " + pre.describe() : "");
  return {M, N, K};
}

}  // namespace

bool matmul_lt_forward(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                       const Tensor& pre) {
  const auto [M, N, K] = check_lt("matmul_lt_forward", x, w, y, b, pre);
  if (M == 0 || N == 0 || K == 0) return false;  // the composition handles empty problems
  // The pre-activation's leading dimension must be a multiple of 8 (cuBLASLt).
  if (pre.defined() && N % 8 != 0) return false;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (b.defined()) {
    epilogue = pre.defined() ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_BIAS;
  } else if (pre.defined()) {
    epilogue = CUBLASLT_EPILOGUE_GELU_AUX;
  }
  // D (N x M) = W (stored K x N, transposed) x^T (K x M, as stored).
  const LtGemm g{.ta = CUBLAS_OP_T,
                 .tb = CUBLAS_OP_N,
                 .m = N,
                 .n = M,
                 .k = K,
                 .a = w.data<float>(),
                 .lda = K,
                 .b = x.data<float>(),
                 .ldb = K,
                 .d = y.data<float>(),
                 .ldd = N,
                 .epilogue = epilogue,
                 .bias = b.defined() ? b.data<float>() : nullptr,
                 .aux = pre.defined() ? pre.data<float>() : nullptr};
  return run_lt(g, dev);
}

bool matmul_lt_wgrad(const Tensor& dw, const Tensor& dy, const Tensor& x, const Tensor& db) {
  TT_CHECK(dy.dim() == 2, "cuda::matmul_lt_wgrad: dy must be [M, N], got ", dy.describe());
  const auto [M, N, K] = check_lt("matmul_lt_wgrad", x, dw, dy, db, Tensor());
  if (M == 0 || N == 0 || K == 0) return false;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  // D (K x N) = x^T (K x M, as stored) dy (stored N x M, transposed); BGRADB sums op(B) = dy
  // over k = M.
  const LtGemm g{.ta = CUBLAS_OP_N,
                 .tb = CUBLAS_OP_T,
                 .m = K,
                 .n = N,
                 .k = M,
                 .a = x.data<float>(),
                 .lda = K,
                 .b = dy.data<float>(),
                 .ldb = N,
                 .d = dw.data<float>(),
                 .ldd = K,
                 .epilogue = db.defined() ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_DEFAULT,
                 .bias = db.defined() ? db.data<float>() : nullptr};
  return run_lt(g, dev);
}

TT_REGISTER_KERNEL("matmul_lt_forward", DeviceType::kCUDA, matmul_lt_forward);
TT_REGISTER_KERNEL("matmul_lt_wgrad", DeviceType::kCUDA, matmul_lt_wgrad);

}  // namespace tt::cuda

#endif  // TT_WITH_CUDA
