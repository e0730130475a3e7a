// cuBLASLt GEMMs with epilogues for tt::linear_lt and tt::linear_gelu_lt (tt/fused_ops.h):
// "matmul_lt_forward" (bias, or bias + GELU storing the pre-activation) and "matmul_lt_wgrad"
// (the weight gradient and, in the same GEMM, the bias gradient).
//
// The GEMMs are described by tt::LtGemm (tt/lt_gemm.h, lt_gemm.cc: the row-major trick and the
// descriptors of the linear layer's GEMMs); cuda::run_lt here turns a description into
// cuBLASLt calls, for float32 (chapter 10) and bfloat16 (chapter 11) operands.
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
#include "tt/lt_gemm.h"

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
    for (auto& [index, h] : handles_) (void)TT_CUBLASLT(cublasLtDestroy)(h);
  }
  /// The handle and workspace of device `index` (current device).
  std::pair<cublasLtHandle_t, void*> get(int index) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = handles_.find(index);
    if (it == handles_.end()) {
      cublasLtHandle_t h = nullptr;
      TT_CUBLAS_CHECK(TT_CUBLASLT(cublasLtCreate)(&h));
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
    if (d != nullptr) (void)TT_CUBLASLT(cublasLtMatmulDescDestroy)(d);
  }
};
struct LtLayout {
  cublasLtMatrixLayout_t l = nullptr;
  ~LtLayout() {
    if (l != nullptr) (void)TT_CUBLASLT(cublasLtMatrixLayoutDestroy)(l);
  }
};
struct MatmulPreference {
  cublasLtMatmulPreference_t p = nullptr;
  ~MatmulPreference() {
    if (p != nullptr) (void)TT_CUBLASLT(cublasLtMatmulPreferenceDestroy)(p);
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

cudaDataType_t cuda_type(DType t) {
  return t == DType::kBFloat16 ? CUDA_R_16BF : CUDA_R_32F;
}

cublasLtEpilogue_t lt_epilogue(LtEpilogue e) {
  switch (e) {
    case LtEpilogue::kBias:
      return CUBLASLT_EPILOGUE_BIAS;
    case LtEpilogue::kGeluAuxBias:
      return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case LtEpilogue::kBGradB:
      return CUBLASLT_EPILOGUE_BGRADB;
    case LtEpilogue::kDefault:
      break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// True when `algo` forms each output element in one pass: no split-K (whose partial sums would
// meet beta C in another order than a separate add). Unknown counts as false.
bool one_pass(const cublasLtMatmulAlgo_t& algo) {
  int32_t splits = 0;
  std::size_t written = 0;
  return TT_CUBLASLT(cublasLtMatmulAlgoConfigGetAttribute)(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                                           &splits, sizeof(splits),
                                                           &written) == CUBLAS_STATUS_SUCCESS &&
         splits <= 1;
}

using AlgoKey =
    std::tuple<int, bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int,
               bool, bool, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t>;

}  // namespace

// The heuristic's answer is cached per problem (shape, types, epilogue, beta != 0, TF32,
// alignments): asking costs tens of microseconds of host time.
bool run_lt(const LtGemm& g, int dev) {
  if (g.m == 0 || g.n == 0 || g.k == 0) return false;    // callers handle empty problems
  if (g.aux != nullptr && g.ldd % 8 != 0) return false;  // cuBLASLt: aux ld a multiple of 8
  DeviceGuard guard(dev);
  static std::mutex cache_mutex;
  static std::map<AlgoKey, std::vector<cublasLtMatmulHeuristicResult_t>> cache;
  // TF32 applies to float32 operands only; bfloat16 ones always accumulate in float32.
  const bool tf32 = g.ab_type == DType::kFloat32 && allow_tf32();
  const uint32_t al_a = alignment(g.a), al_b = alignment(g.b), al_d = alignment(g.d),
                 al_bias = alignment(g.bias);
  const AlgoKey key{dev,
                    g.trans_a,
                    g.trans_b,
                    g.m,
                    g.n,
                    g.k,
                    g.lda,
                    g.ldb,
                    g.ldd,
                    static_cast<int>(g.epilogue),
                    static_cast<int>(g.ab_type),
                    static_cast<int>(g.d_type),
                    g.beta != 0.0f,
                    tf32,
                    al_a,
                    al_b,
                    al_d,
                    al_bias,
                    alignment(g.aux)};
  auto [lt, workspace] = lt_pool(dev).get(dev);

  MatmulDesc desc;
  TT_CUBLAS_CHECK(TT_CUBLASLT(cublasLtMatmulDescCreate)(
      &desc.d, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const auto set = [&](cublasLtMatmulDescAttributes_t attr, const auto& value) {
    TT_CUBLAS_CHECK(
        TT_CUBLASLT(cublasLtMatmulDescSetAttribute)(desc.d, attr, &value, sizeof(value)));
  };
  const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  set(CUBLASLT_MATMUL_DESC_TRANSA, ta);
  set(CUBLASLT_MATMUL_DESC_TRANSB, tb);
  set(CUBLASLT_MATMUL_DESC_EPILOGUE, lt_epilogue(g.epilogue));
  if (g.bias != nullptr) set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
  if (g.aux != nullptr) {
    set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.aux);
    set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, g.ldd);
  }
  LtLayout la, lb, ld;
  const auto rows = [](cublasOperation_t t, int64_t r, int64_t c) {
    return t == CUBLAS_OP_N ? r : c;
  };
  const cudaDataType_t ab = cuda_type(g.ab_type), dt = cuda_type(g.d_type);
  TT_CUBLAS_CHECK(TT_CUBLASLT(cublasLtMatrixLayoutCreate)(&la.l, ab, rows(ta, g.m, g.k),
                                                          rows(ta, g.k, g.m), g.lda));
  TT_CUBLAS_CHECK(TT_CUBLASLT(cublasLtMatrixLayoutCreate)(&lb.l, ab, rows(tb, g.k, g.n),
                                                          rows(tb, g.n, g.k), g.ldb));
  TT_CUBLAS_CHECK(TT_CUBLASLT(cublasLtMatrixLayoutCreate)(&ld.l, dt, g.m, g.n, g.ldd));

  std::vector<cublasLtMatmulHeuristicResult_t>* algos = nullptr;
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    auto it = cache.find(key);
    if (it == cache.end()) {
      MatmulPreference pref;
      TT_CUBLAS_CHECK(TT_CUBLASLT(cublasLtMatmulPreferenceCreate)(&pref.p));
      const auto set_pref = [&](cublasLtMatmulPreferenceAttributes_t attr, const auto& value) {
        TT_CUBLAS_CHECK(
            TT_CUBLASLT(cublasLtMatmulPreferenceSetAttribute)(pref.p, attr, &value, sizeof(value)));
      };
      set_pref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kLtWorkspaceBytes);
      set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, al_a);
      set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, al_b);
      set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, al_d);
      set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, al_d);
      cublasLtMatmulHeuristicResult_t result{};
      int found = 0;
      const cublasStatus_t st = TT_CUBLASLT(cublasLtMatmulAlgoGetHeuristic)(
          lt, desc.d, la.l, lb.l, ld.l, ld.l, pref.p, 1, &result, &found);
      std::vector<cublasLtMatmulHeuristicResult_t> v;
      if (st == CUBLAS_STATUS_SUCCESS && found > 0) v.push_back(result);
      it = cache.emplace(key, std::move(v)).first;
    }
    algos = &it->second;
  }
  if (algos->empty()) return false;
  if (g.one_pass_only && !one_pass(algos->front().algo)) return false;
  const float alpha = 1.0f, beta = g.beta;
  TT_CUBLAS_CHECK(TT_CUBLASLT(cublasLtMatmul)(lt, desc.d, &alpha, g.a, la.l, g.b, lb.l, &beta, g.d,
                                              ld.l, g.d, ld.l, &algos->front().algo, workspace,
                                              kLtWorkspaceBytes, stream(dev)));
  return true;
}

namespace {

// The kernels' tensors must be on a CUDA device (the builders check the rest).
void check_cuda(const char* op, const Tensor& t) {
  TT_CHECK(t.device().is_cuda(), "cuda::", op, ": expected CUDA tensors, got ", t.describe());
}

}  // namespace

bool matmul_lt_forward(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                       const Tensor& pre) {
  check_cuda("matmul_lt_forward", x);
  return run_lt(lt_linear_forward_gemm(y, x, w, b, pre), x.device().index);
}

bool matmul_lt_wgrad(const Tensor& dw, const Tensor& dy, const Tensor& x, const Tensor& db,
                     double beta) {
  check_cuda("matmul_lt_wgrad", x);
  return run_lt(lt_linear_wgrad_gemm(dw, dy, x, db, beta), x.device().index);
}

void matmul_lt_gemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha,
                    double beta) {
  check_cuda("matmul_lt_gemm", out);
  TT_CHECK(alpha == 1.0, "cuda::matmul_lt_gemm: alpha must be 1, got ", alpha);
  const LtGemm g = lt_rowmajor_gemm(out, a, b, beta);
  if (out.numel() == 0) return;
  TT_CHECK(run_lt(g, out.device().index), "cuda::matmul_lt_gemm: no cuBLASLt algorithm for out ",
           out.describe(), " = a ", a.describe(), " b ", b.describe());
}

TT_REGISTER_KERNEL("matmul_lt_forward", DeviceType::kCUDA, matmul_lt_forward);
TT_REGISTER_KERNEL("matmul_lt_gemm", DeviceType::kCUDA, matmul_lt_gemm);
TT_REGISTER_KERNEL("matmul_lt_wgrad", DeviceType::kCUDA, matmul_lt_wgrad);

}  // namespace tt::cuda

#endif  // TT_WITH_CUDA
