// The CPU KV-cache step (exercise ch15.4): append this step's keys and values to the cache,
// then attend every query to the cached positions it may see.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tt/dispatcher.h"
#include "tt/llama.h"
#include "tt/parallel.h"
#include "tt/todo.h"

namespace tt::llama::cpu {

void kv_cache_attend(const Tensor& out, const Tensor& q, const Tensor& k_new, const Tensor& v_new,
                     const Tensor& k_cache, const Tensor& v_cache, const Tensor& start) {
  for (const Tensor* t : {&out, &q, &k_new, &v_new, &k_cache, &v_cache}) {
    TT_CHECK(t->defined() && t->device().is_cpu() && t->is_contiguous() && t->dim() == 4 &&
                 t->dtype() == q.dtype(),
             "kv_cache_attend: expected contiguous 4-D CPU tensors of q's dtype, got ",
             t->defined() ? t->describe() : std::string("an undefined tensor"));
  }
  const int64_t B = q.size(0), NH = q.size(1), Tq = q.size(2), hs = q.size(3);
  const int64_t NKV = k_cache.size(1), Tmax = k_cache.size(2);
  TT_CHECK(start.dtype() == DType::kInt64 && start.numel() == B && start.device().is_cpu(),
           "kv_cache_attend: start must be int64 [", B, "] on the CPU, got ", start.describe());
  const int64_t* s = start.data<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    TT_CHECK(s[b] >= 0 && s[b] + Tq <= Tmax, "kv_cache_attend: row ", b, " appends positions [",
             s[b], ", ", s[b] + Tq, ") to a cache of max_len ", Tmax);
  }
  dispatch_floating(q.dtype(), "kv_cache_attend", [&]<typename T>() {
    T* kc = k_cache.data<T>();
    T* vc = v_cache.data<T>();
    const T* kn = k_new.data<T>();
    const T* vn = v_new.data<T>();
    const T* pq = q.data<T>();
    T* po = out.data<T>();
#if TT_SOLUTION
    // 1. Append: row t of k_new[b, j] goes to row s[b] + t of k_cache[b, j].
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t j = 0; j < NKV; ++j) {
        for (int64_t t = 0; t < Tq; ++t) {
          const int64_t src = ((b * NKV + j) * Tq + t) * hs;
          const int64_t dst = ((b * NKV + j) * Tmax + s[b] + t) * hs;
          std::copy(kn + src, kn + src + hs, kc + dst);
          std::copy(vn + src, vn + src + hs, vc + dst);
        }
      }
    }
    // 2. Attend: query t of (b, h) sees keys [0, s[b] + t] of head kv_head_of(h).
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hs)));
    parallel_for(0, B * NH, 1, [&](int64_t bh0, int64_t bh1) {
      std::vector<T> p(static_cast<std::size_t>(Tmax));
      for (int64_t bh = bh0; bh < bh1; ++bh) {
        const int64_t b = bh / NH, h = bh % NH;
        const int64_t j = kv_head_of(h, NH, NKV);
        const T* K = kc + (b * NKV + j) * Tmax * hs;
        const T* V = vc + (b * NKV + j) * Tmax * hs;
        for (int64_t t = 0; t < Tq; ++t) {
          const T* qr = pq + (bh * Tq + t) * hs;
          T* orow = po + (bh * Tq + t) * hs;
          const int64_t n = s[b] + t + 1;
          T mx = -std::numeric_limits<T>::infinity();
          for (int64_t i = 0; i < n; ++i) {
            T dot = 0;
            for (int64_t c = 0; c < hs; ++c) dot += qr[c] * K[i * hs + c];
            p[i] = dot * scale;
            mx = std::max(mx, p[i]);
          }
          T sum = 0;
          for (int64_t i = 0; i < n; ++i) {
            p[i] = std::exp(p[i] - mx);
            sum += p[i];
          }
          for (int64_t c = 0; c < hs; ++c) orow[c] = 0;
          for (int64_t i = 0; i < n; ++i) {
            const T w = p[i] / sum;
            for (int64_t c = 0; c < hs; ++c) orow[c] += w * V[i * hs + c];
          }
        }
      }
    });
#else
    (void)kc, (void)vc, (void)kn, (void)vn, (void)pq, (void)po, (void)NH, (void)NKV, (void)hs;
    TT_TODO("ch15.4",
            "kv_cache_attend: copy k_new, v_new [B, NKV, Tq, hs] into the caches at rows s[b] .. "
            "s[b] + Tq - 1, then out[b, h, t] = softmax over keys i <= s[b] + t of q . k_i / "
            "sqrt(hs), times v_i, with key/value head kv_head_of(h, NH, NKV)");
#endif
  });
}

}  // namespace tt::llama::cpu

TT_REGISTER_KERNEL("kv_cache_attend", tt::DeviceType::kCPU, tt::llama::cpu::kv_cache_attend);
