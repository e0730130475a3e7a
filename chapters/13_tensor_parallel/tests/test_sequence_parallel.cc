// Exercise ch13.5: the sequence-parallel all-gather and reduce-scatter and their backward
// passes, on integer-valued data (every sum exact, so the checks are bitwise), and a
// sequence-parallel MLP block (LayerNorm on this rank's tokens, all-gather, column, GELU, row,
// reduce-scatter) against the plain one.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ch13_test_util.h"
#include "tt/ops_matmul.h"
#include "tt/sequence_parallel.h"

namespace {

using namespace ch13_test;  // the shared helpers (ch13_test_util.h)
using tt::Tensor;
namespace dist = tt::dist;

// [B, T, C] with element (b, t, c) = 100 b + 10 t + c + 1000 * salt: integers, exact in sums.
Tensor labelled(int64_t B, int64_t T, int64_t C, double salt) {
  std::vector<float> v;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t c = 0; c < C; ++c)
        v.push_back(static_cast<float>(100 * b + 10 * t + c + 1000 * salt));
    }
  }
  return tt::from_vector(v, {B, T, C});
}

// Tokens [r*n, (r+1)*n) of every sequence of x [B, T, C].
Tensor tokens_of(const Tensor& x, int rank, int64_t n) {
  return x.detach().narrow(1, rank * n, n).contiguous();
}

TEST(Ch13_5_SequenceParallel, GatherConcatenatesAndReduceScattersBackMpi) {
  constexpr int64_t kB = 2, kT = 8, kC = 3;
  for_each_tp([&](int tp, dist::ProcessGroup& group) {
    const int64_t n = kT / tp;
    const Tensor whole = labelled(kB, kT, kC, 0);
    Tensor mine = tokens_of(whole, group.rank(), n).set_requires_grad();
    Tensor gathered = tt::tp::gather_from_sequence(mine, group);
    ASSERT_EQ(gathered.shape(), whole.shape());
    EXPECT_TRUE(bitwise_equal(gathered, whole)) << "rank r's tokens at [r*T/tp, (r+1)*T/tp)";
    // Backward: every rank sends a different gradient; each receives its tokens of their sum.
    const Tensor w = labelled(kB, kT, kC, group.rank() + 1);
    tt::autograd::backward(tt::sum(tt::mul(gathered, w)));
    Tensor expected = tt::zeros({kB, kT, kC});
    for (int r = 0; r < tp; ++r) expected = tt::add(expected, labelled(kB, kT, kC, r + 1));
    ASSERT_TRUE(mine.grad().defined());
    EXPECT_TRUE(bitwise_equal(mine.grad(), tokens_of(expected, group.rank(), n)))
        << "the gradient of a gather is the reduce-scatter (sum) of the gradients";
  });
}

TEST(Ch13_5_SequenceParallel, ReduceScatterSumsAndGathersBackMpi) {
  constexpr int64_t kB = 2, kT = 8, kC = 3;
  for_each_tp([&](int tp, dist::ProcessGroup& group) {
    const int64_t n = kT / tp;
    // Each rank holds a different partial sum (a row-parallel layer's output).
    Tensor partial = labelled(kB, kT, kC, group.rank()).set_requires_grad();
    Tensor y = tt::tp::reduce_scatter_to_sequence(partial, group);
    Tensor total = tt::zeros({kB, kT, kC});
    for (int r = 0; r < tp; ++r) total = tt::add(total, labelled(kB, kT, kC, r));
    ASSERT_EQ(y.shape(), (tt::Shape{kB, n, kC}));
    EXPECT_TRUE(bitwise_equal(y, tokens_of(total, group.rank(), n)));
    // Backward: rank r's gradient covers its tokens; the input gradient is all of them.
    const Tensor w = labelled(kB, kT, kC, 7);
    tt::autograd::backward(tt::sum(tt::mul(y, tokens_of(w, group.rank(), n))));
    ASSERT_TRUE(partial.grad().defined());
    EXPECT_TRUE(bitwise_equal(partial.grad(), w))
        << "the gradient of a reduce-scatter is the all-gather of the gradients";
  });
}

// dim 0: each rank holds B/tp whole sequences; the gather stacks the ranks' rows in rank order
// and the reduce-scatter hands rank r the rows [r*B/tp, (r+1)*B/tp) of the sum, with the same
// conjugate backward passes.
TEST(Ch13_5_SequenceParallel, WholeSequencesAlongDimZeroMpi) {
  constexpr int64_t kT = 3, kC = 2;
  for_each_tp([&](int tp, dist::ProcessGroup& group) {
    const int64_t B = 2 * tp, n = 2;
    const Tensor whole = labelled(B, kT, kC, 0);
    const auto rows_of = [&](const Tensor& x) {
      return x.detach().narrow(0, n * group.rank(), n).contiguous();
    };
    Tensor mine = rows_of(whole).set_requires_grad();
    Tensor gathered = tt::tp::gather_from_sequence(mine, group, 0);
    ASSERT_EQ(gathered.shape(), whole.shape());
    EXPECT_TRUE(bitwise_equal(gathered, whole)) << "rank r's sequences at rows [r*B/tp, ...)";
    tt::autograd::backward(tt::sum(tt::mul(gathered, labelled(B, kT, kC, group.rank() + 1))));
    Tensor sum_w = tt::zeros({B, kT, kC});
    for (int r = 0; r < tp; ++r) sum_w = tt::add(sum_w, labelled(B, kT, kC, r + 1));
    ASSERT_TRUE(mine.grad().defined());
    EXPECT_TRUE(bitwise_equal(mine.grad(), rows_of(sum_w)));

    Tensor partial = labelled(B, kT, kC, group.rank()).set_requires_grad();
    Tensor y = tt::tp::reduce_scatter_to_sequence(partial, group, 0);
    Tensor total = tt::zeros({B, kT, kC});
    for (int r = 0; r < tp; ++r) total = tt::add(total, labelled(B, kT, kC, r));
    ASSERT_EQ(y.shape(), (tt::Shape{n, kT, kC}));
    EXPECT_TRUE(bitwise_equal(y, rows_of(total)));
    const Tensor w = labelled(B, kT, kC, 7);
    tt::autograd::backward(tt::sum(tt::mul(y, rows_of(w))));
    ASSERT_TRUE(partial.grad().defined());
    EXPECT_TRUE(bitwise_equal(partial.grad(), w));
  });
}

TEST(Ch13_5_SequenceParallel, RejectsSequenceNotDivisibleMpi) {
  for_each_tp([&](int tp, dist::ProcessGroup& group) {
    if (tp == 1) return;
    try {
      tt::tp::reduce_scatter_to_sequence(tt::zeros({2, 2 * tp + 1, 3}), group);
      ADD_FAILURE() << "T = " << 2 * tp + 1 << " accepted at tp=" << tp;
    } catch (const tt::Error& e) {
      EXPECT_NE(std::string(e.what()).find("not divisible by the tensor-parallel size"),
                std::string::npos)
          << e.what();
    }
    try {
      tt::tp::reduce_scatter_to_sequence(tt::zeros({tp + 1, 4, 3}), group, 0);
      ADD_FAILURE() << "B = " << tp + 1 << " accepted along dim 0 at tp=" << tp;
    } catch (const tt::Error& e) {
      EXPECT_NE(std::string(e.what()).find("the batch"), std::string::npos) << e.what();
    }
    dist::world().barrier();
  });
}

// LayerNorm on this rank's tokens, then the Megatron MLP with the all-gather in front and the
// reduce-scatter behind: the plain LayerNorm + MLP's output tokens and every gradient.
TEST(Ch13_5_SequenceParallel, MlpBlockMatchesPlainMpi) {
  constexpr int64_t kB = 2, kT = 4, kC = 8, kH = 32;
  for_each_tp([&](int tp, dist::ProcessGroup& group) {
    const int64_t n = kT / tp;
    tt::nn::Linear fc = make_linear(kC, kH, 41), proj = make_linear(kH, kC, 42);
    tt::nn::LayerNorm ln(kC), ln_sp(kC);
    const Tensor w = make_input(kB * kT, kC, 43).view({kB, kT, kC});
    Tensor x = make_input(kB * kT, kC, 44).view({kB, kT, kC}).contiguous().set_requires_grad();
    Tensor ref = tt::add(x, proj.forward(tt::gelu(fc.forward(ln.forward(x)))));
    tt::autograd::backward(tt::sum(tt::mul(ref, w)));

    tt::tp::ColumnParallelLinear col(fc, group);
    tt::tp::RowParallelLinear row(proj, group);
    Tensor xs = tokens_of(x, group.rank(), n).set_requires_grad();
    const Tensor h = tt::tp::gather_from_sequence(ln_sp.forward(xs), group);
    // The parallel layers' own f / g are the identity at the ends here: use the raw matmuls.
    const Tensor hidden =
        tt::gelu(tt::add(tt::matmul(h, tt::transpose(col.weight, 0, 1)), col.bias));
    const Tensor partial = tt::matmul(hidden, tt::transpose(row.weight, 0, 1));
    Tensor y = tt::add(xs, tt::add(tt::tp::reduce_scatter_to_sequence(partial, group), row.bias));
    EXPECT_LE(max_abs_diff(y, tokens_of(ref, group.rank(), n)), 1e-5);
    tt::autograd::backward(tt::sum(tt::mul(y, tokens_of(w, group.rank(), n))));
    EXPECT_LE(max_abs_diff(xs.grad(), tokens_of(x.grad(), group.rank(), n)), 1e-5);
    // LayerNorm's weight gradient covers this rank's tokens only: summed over the group it is
    // the plain one (TensorParallelGPT2::finish_backward does this for the model).
    Tensor ln_grad = ln_sp.weight.grad().contiguous().clone();
    group.all_reduce(ln_grad);
    EXPECT_LE(max_abs_diff(ln_grad, ln.weight.grad()), 1e-5);
  });
}

}  // namespace
