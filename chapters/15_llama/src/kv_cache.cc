// ============================================================================================
// YOUR EXERCISE FILE for chapter 15_llama. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch15
// Generated from solutions/15_llama/kv_cache.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
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
    (void)kc, (void)vc, (void)kn, (void)vn, (void)pq, (void)po, (void)NH, (void)NKV, (void)hs;
    TT_TODO("ch15.4",
            "kv_cache_attend: copy k_new, v_new [B, NKV, Tq, hs] into the caches at rows s[b] .. "
            "s[b] + Tq - 1, then out[b, h, t] = softmax over keys i <= s[b] + t of q . k_i / "
            "sqrt(hs), times v_i, with key/value head kv_head_of(h, NH, NKV)");
  });
}

}  // namespace tt::llama::cpu

TT_REGISTER_KERNEL("kv_cache_attend", tt::DeviceType::kCPU, tt::llama::cpu::kv_cache_attend);
