// Exercise ch16.1: the log-sum-exp merge of two partial attention results (tt/ring_attention.h).
// Every ring step of the forward merges the attention of the block it just computed into the
// running result of the rows that saw the block.
#include "tt/autograd.h"
#include "tt/error.h"
#include "tt/ops_elementwise.h"
#include "tt/ops_view.h"
#include "tt/ring_attention.h"
#include "tt/todo.h"

namespace tt::cp {

AttentionPart merge_attention(const AttentionPart& a, const AttentionPart& b) {
  auto describe = [](const Tensor& t) { return t.defined() ? t.describe() : "(undefined)"; };
  TT_CHECK(a.out.defined() && a.lse.defined() && b.out.defined() && b.lse.defined() &&
               a.out.dim() == 4 && a.out.shape() == b.out.shape() &&
               a.lse.shape() == b.lse.shape() && a.lse.dim() == 3 &&
               a.lse.size(2) == a.out.size(2) && a.out.dtype() == b.out.dtype() &&
               a.lse.dtype() == b.lse.dtype() && a.out.device() == b.out.device() &&
               a.lse.device() == a.out.device() && b.lse.device() == b.out.device(),
           "cp::merge_attention: expected two parts of one geometry, out [B, NH, n, hs] and lse "
           "[B, NH, n], got out ",
           describe(a.out), " and ", describe(b.out), ", lse ", describe(a.lse), " and ",
           describe(b.lse));
#if TT_SOLUTION
  autograd::NoGradGuard no_grad;
  // log(e^La + e^Lb) = max + log(1 + e^-|La - Lb|), with max = (La + Lb + |La - Lb|) / 2: the
  // exponent is never positive, so nothing overflows.
  const Tensor d = sub(a.lse, b.lse);
  const Tensor abs_d = sqrt(mul(d, d));
  const Tensor lse = add(mul(add(add(a.lse, b.lse), abs_d), 0.5), log(add(exp(neg(abs_d)), 1.0)));
  // Each part's output was normalized by its own sum e^La: re-weight by e^La / e^L (<= 1).
  const Tensor wa = unsqueeze(exp(sub(a.lse, lse)), 3), wb = unsqueeze(exp(sub(b.lse, lse)), 3);
  return {add(mul(a.out, wa), mul(b.out, wb)), lse};
#else
  TT_TODO("ch16.1",
          "merge_attention: the attention over the union of two disjoint key sets from the two "
          "parts: lse = log(exp(La) + exp(Lb)) per row, out = the two outputs weighted by "
          "exp(La - lse) and exp(Lb - lse); no overflow for any finite La, Lb (e.g. 1e4 apart)");
#endif
}

}  // namespace tt::cp
