// The descriptors of a linear layer's cuBLASLt GEMMs (tt/lt_gemm.h): plain host code, compiled
// in every build (chapter 11 runs the same descriptors through its CPU emulation).
//
// Row-major tensors are column-major transposes (chapter 07's trick): y [M, N] row-major is the
// column-major N x M matrix y^T = W x^T, so the forward is D (N x M) = op(A) op(B) with A = W
// (stored K x N column-major, transposed), B = x^T (K x M, as stored), and the bias runs along
// D's rows (N of them), which is what CUBLASLT_EPILOGUE_BIAS broadcasts. The weight gradient
// dW [N, K] row-major is the column-major K x N matrix x^T dy: A = x^T (K x M, as stored),
// B = dy (stored N x M, transposed to M x N), and CUBLASLT_EPILOGUE_BGRADB sums op(B) over the
// GEMM's k = M dimension: db = the column sums of dy.
#include "tt/lt_gemm.h"

#include <algorithm>
#include <string>
#include <utility>

namespace tt {

namespace {

bool gemm_dtype(DType t) {
  return t == DType::kFloat32 || t == DType::kBFloat16;
}

// One operand of lt_rowmajor_gemm as cuBLASLt sees it: a row-major [r, c] view is the
// column-major c x r matrix (ld = its row stride) used transposed relative to a column-major
// one. Returns {transposed as stored, leading dimension}; throws when neither is contiguous.
std::pair<bool, int64_t> operand_layout(const char* name, const Tensor& t) {
  const int64_t r = t.size(0), c = t.size(1);
  if (t.stride(1) == 1 && (t.stride(0) >= c || r <= 1)) return {false, std::max(t.stride(0), c)};
  if (t.stride(0) == 1 && (t.stride(1) >= r || c <= 1)) return {true, std::max(t.stride(1), r)};
  TT_THROW("lt_rowmajor_gemm: operand ", name, " ", t.describe(),
           " has neither contiguous rows nor contiguous columns");
}

}  // namespace

LtGemm lt_rowmajor_gemm(const Tensor& out, const Tensor& a, const Tensor& b, double beta) {
  bool ok = out.defined() && a.defined() && b.defined() && out.dim() == 2 && a.dim() == 2 &&
            b.dim() == 2 && a.size(0) == out.size(0) && b.size(1) == out.size(1) &&
            a.size(1) == b.size(0) && out.stride(1) == 1 && out.stride(0) >= out.size(1) &&
            a.dtype() == b.dtype() && gemm_dtype(a.dtype()) &&
            (out.dtype() == a.dtype() || out.dtype() == DType::kFloat32);
  for (const Tensor* t : {&a, &b}) ok = ok && t->device() == out.device();
  TT_CHECK(ok, "lt_rowmajor_gemm: expected out [M, N] (unit column stride, rows may be padded) ",
           "= a [M, K] b [K, N], a and b of one dtype (float32 or bfloat16), out of theirs or ",
           "float32, on one device, got out ", out.describe(), ", a ", a.describe(), ", b ",
           b.describe());
  const int64_t M = out.size(0), N = out.size(1), K = a.size(1);
  // D = out^T (N x M, ld = out's row stride) = b^T (N x K) a^T (K x M). A row-major operand is
  // its transpose as stored (no op), a column-major one needs the op.
  const auto [b_cols, ldb] = operand_layout("b", b);
  const auto [a_cols, lda] = operand_layout("a", a);
  return LtGemm{.trans_a = b_cols,
                .trans_b = a_cols,
                .m = N,
                .n = M,
                .k = K,
                .ab_type = a.dtype(),
                .a = b.data_ptr(),
                .lda = ldb,
                .b = a.data_ptr(),
                .ldb = lda,
                .d_type = out.dtype(),
                .d = out.data_ptr(),
                .ldd = out.stride(0),
                .beta = static_cast<float>(beta)};
}

std::tuple<int64_t, int64_t, int64_t> check_lt_operands(const char* op, const Tensor& x,
                                                        const Tensor& w, const Tensor& out,
                                                        const Tensor& vec, const Tensor& pre) {
  const bool dims = x.defined() && w.defined() && out.defined() && x.dim() == 2 && w.dim() == 2;
  const int64_t M = dims ? x.size(0) : -1, K = dims ? x.size(1) : -1, N = dims ? w.size(0) : -1;
  bool ok = dims && w.size(1) == K && out.shape() == Shape{M, N} &&
            (!vec.defined() || vec.shape() == Shape{N}) &&
            (!pre.defined() || pre.shape() == Shape{M, N});
  for (const Tensor* t : {&x, &w, &out, &vec, &pre}) {
    if (!t->defined()) continue;
    ok = ok && t->device() == x.device() && t->is_contiguous() && gemm_dtype(t->dtype());
  }
  const auto show = [](const Tensor& t) {
    return t.defined() ? t.describe() : std::string("undefined");
  };
  TT_CHECK(ok, op, ": expected contiguous float32 or bfloat16 tensors on one device: x [M, K], ",
           "w [N, K], out [M, N] and the optional [N] and [M, N], got x ", show(x), ", w ", show(w),
           ", out ", show(out), vec.defined() ? ", vector " + vec.describe() : "",
           pre.defined() ? ", pre-activation " + pre.describe() : "");
  return {M, N, K};
}

LtGemm lt_linear_forward_gemm(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                              const Tensor& pre) {
  const auto [M, N, K] = check_lt_operands("lt_linear_forward_gemm", x, w, y, b, pre);
  const bool same_d =
      (!b.defined() || b.dtype() == y.dtype()) && (!pre.defined() || pre.dtype() == y.dtype());
  TT_CHECK(x.dtype() == w.dtype() && same_d && (!pre.defined() || b.defined()),
           "lt_linear_forward_gemm: x and w must share a dtype, y, b and pre another (the GELU ",
           "epilogue needs a bias), got x ", x.describe(), ", w ", w.describe(), ", y ",
           y.describe(), b.defined() ? ", b " + b.describe() : "",
           pre.defined() ? ", pre " + pre.describe() : "");
  // D (N x M) = W (stored K x N, transposed) x^T (K x M, as stored).
  return LtGemm{.trans_a = true,
                .trans_b = false,
                .m = N,
                .n = M,
                .k = K,
                .ab_type = x.dtype(),
                .a = w.data_ptr(),
                .lda = K,
                .b = x.data_ptr(),
                .ldb = K,
                .d_type = y.dtype(),
                .d = y.data_ptr(),
                .ldd = N,
                .epilogue = pre.defined() ? LtEpilogue::kGeluAuxBias
                            : b.defined() ? LtEpilogue::kBias
                                          : LtEpilogue::kDefault,
                .bias = b.defined() ? b.data_ptr() : nullptr,
                .aux = pre.defined() ? pre.data_ptr() : nullptr};
}

LtGemm lt_linear_wgrad_gemm(const Tensor& dw, const Tensor& dy, const Tensor& x, const Tensor& db,
                            double beta) {
  TT_CHECK(dy.defined() && dy.dim() == 2, "lt_linear_wgrad_gemm: dy must be [M, N], got ",
           dy.defined() ? dy.describe() : std::string("undefined"));
  const auto [M, N, K] = check_lt_operands("lt_linear_wgrad_gemm", x, dw, dy, db, Tensor());
  TT_CHECK(dy.dtype() == x.dtype() && (!db.defined() || db.dtype() == dw.dtype()),
           "lt_linear_wgrad_gemm: dy and x must share a dtype, dw and db another (float32 or ",
           "bfloat16), got dy ", dy.describe(), ", x ", x.describe(), ", dw ", dw.describe(),
           db.defined() ? ", db " + db.describe() : "");
  // D (K x N) = x^T (K x M, as stored) dy (stored N x M, transposed); BGRADB sums op(B) = dy
  // over k = M.
  return LtGemm{.trans_a = false,
                .trans_b = true,
                .m = K,
                .n = N,
                .k = M,
                .ab_type = x.dtype(),
                .a = x.data_ptr(),
                .lda = K,
                .b = dy.data_ptr(),
                .ldb = N,
                .d_type = dw.dtype(),
                .d = dw.data_ptr(),
                .ldd = K,
                .beta = static_cast<float>(beta),
                .epilogue = db.defined() ? LtEpilogue::kBGradB : LtEpilogue::kDefault,
                .bias = db.defined() ? db.data_ptr() : nullptr,
                .one_pass_only = beta != 0.0};
}

}  // namespace tt
