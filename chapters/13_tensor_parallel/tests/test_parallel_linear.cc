// Exercises ch13.2 (column-parallel) and ch13.3 (row-parallel), and the tensor-parallel MLP:
// outputs and gradients (input, weight, bias) against the unsplit nn::Linear, for every tp that
// divides the world, as one process and under mpirun -np 2 and 4.
//
// What is bitwise and what is not. Mathematically a column-parallel output element is the same
// dot product over the whole input as the unsplit layer's, and the row-parallel input and
// weight gradients are local products; but chapter 04's CPU matmul blocks its loops by the
// matrix shapes, so the same dot product inside a [5, 8] x [8, 16] and a [5, 8] x [8, 4] product
// may be summed in another order: the slices differ by rounding (up to 4.8e-7 seen here). So
// outputs and gradients are compared within fp32 1e-5 (values of order 1), and bitwise only
// where the operations are the same: tp = 1, and the bias gradients (a sum over rows of the
// same output gradient). Everything behind an all-reduce (the column-parallel input gradient,
// the row-parallel output) sums partial products in another order anyway.
#include <gtest/gtest.h>

#include <string>

#include "ch13_test_util.h"
#include "tt/linear_bf16.h"
#include "tt/mixed_precision.h"

namespace {

using ch13_test::bitwise_equal;
using ch13_test::for_each_tp;
using ch13_test::make_input;
using ch13_test::make_linear;
using ch13_test::max_abs_diff;
using tt::Tensor;
namespace dist = tt::dist;

constexpr double kTol = 1e-5;
constexpr int64_t kRows = 5;

// A scalar loss sum(y * w) with a seeded weighting w, so that every output element gets its
// own gradient.
Tensor weighted_sum(const Tensor& y, const Tensor& w) {
  return tt::sum(tt::mul(y, w));
}

// Slice [begin, begin + n) of t along dim, detached.
Tensor part(const Tensor& t, int64_t dim, int64_t begin, int64_t n) {
  return t.detach().narrow(dim, begin, n).contiguous();
}

TEST(Ch13_2_ColumnParallel, ForwardMatchesLinearMpi) {
  constexpr int64_t kIn = 8, kOut = 16;
  for_each_tp([&](int tp, dist::ProcessGroup& group) {
    tt::nn::Linear full = make_linear(kIn, kOut, 1);
    Tensor x = make_input(kRows, kIn, 2);
    Tensor ref = full.forward(x);
    tt::tp::ColumnParallelLinear local(full, group);
    tt::tp::ColumnParallelLinear gathered(full, group, /*gather_output=*/true);
    const int64_t n = kOut / tp;
    Tensor y = local.forward(x);
    ASSERT_EQ(y.shape(), (tt::Shape{kRows, n}));
    EXPECT_LE(max_abs_diff(y, part(ref, 1, n * group.rank(), n)), kTol);
    Tensor all = gathered.forward(x);
    ASSERT_EQ(all.shape(), ref.shape());
    EXPECT_LE(max_abs_diff(all, ref), kTol);
    if (tp == 1) {
      EXPECT_TRUE(bitwise_equal(all, ref)) << "one rank: the same operations";
    }
  });
}

TEST(Ch13_2_ColumnParallel, GradientsMatchLinearMpi) {
  constexpr int64_t kIn = 8, kOut = 16;
  for_each_tp([&](int tp, dist::ProcessGroup& group) {
    for (bool gather : {false, true}) {
      SCOPED_TRACE(gather ? "gather_output" : "no gather");
      const int64_t n = kOut / tp, begin = n * group.rank();
      tt::nn::Linear full = make_linear(kIn, kOut, 3);
      tt::tp::ColumnParallelLinear col(full, group, gather);
      Tensor w = make_input(kRows, kOut, 4);
      Tensor x = make_input(kRows, kIn, 5).set_requires_grad();
      tt::autograd::backward(weighted_sum(full.forward(x), w));

      Tensor xt = make_input(kRows, kIn, 5).set_requires_grad();
      Tensor y = col.forward(xt);
      // Without the gather each rank's loss covers its slice; their sum is the full loss.
      tt::autograd::backward(weighted_sum(y, gather ? w : part(w, 1, begin, n)));
      ASSERT_TRUE(xt.grad().defined() && col.weight.grad().defined() && col.bias.grad().defined());
      EXPECT_LE(max_abs_diff(xt.grad(), x.grad()), kTol) << "input gradient (f's all-reduce)";
      EXPECT_LE(max_abs_diff(col.weight.grad(), part(full.weight.grad(), 0, begin, n)), kTol);
      EXPECT_TRUE(bitwise_equal(col.bias.grad(), part(full.bias.grad(), 0, begin, n)));
    }
  });
}

// f's all-reduce started inside chapter 11's bf16 linear backward (EarlyGradReduce, through the
// layer's dgrad hook, right after its dx GEMM) against plain f: the same input gradient bit for
// bit (the same sum, started earlier), and the early sum was the one taken. The input is float32,
// so the bf16 layer returns a float32 dx, which MPI can sum.
TEST(Ch13_EarlyGradReduce, SameInputGradientAsFMpi) {
  constexpr int64_t kIn = 8, kOut = 16;
  for_each_tp([&](int tp, dist::ProcessGroup& group) {
    const int64_t n = kOut / tp, begin = n * group.rank();
    const tt::nn::Linear full = make_linear(kIn, kOut, 3);
    tt::nn::Linear shard(kIn, n);
    shard.weight.copy_(part(full.weight, 0, begin, n));
    shard.bias.copy_(part(full.bias, 0, begin, n));
    const Tensor w = part(make_input(kRows, kOut, 4), 1, begin, n);
    auto input_grad = [&](bool early_reduce) {
      Tensor x = make_input(kRows, kIn, 5).set_requires_grad();
      auto early = std::make_shared<tt::tp::EarlyGradReduce>();
      Tensor y;
      if (early_reduce) {
        const Tensor in = tt::tp::copy_to_tp_early(x, group, early);
        tt::ScopedLinearHooks hook(
            {.dgrad = [early, &group](const Tensor& dx) { early->start(dx, group); }});
        y = tt::linear_bf16(in, shard);
      } else {
        y = tt::linear_bf16(tt::tp::copy_to_tp(x, group), shard);
      }
      tt::autograd::backward(weighted_sum(tt::to_dtype(y, tt::DType::kFloat32), w));
      EXPECT_EQ(early->finished, early_reduce ? 1 : 0);
      shard.weight.set_grad(Tensor());
      shard.bias.set_grad(Tensor());
      return x.grad();
    };
    const Tensor want = input_grad(false), got = input_grad(true);
    ASSERT_TRUE(got.defined());
    EXPECT_TRUE(bitwise_equal(got, want)) << "max |diff| " << max_abs_diff(got, want);
  });
}

TEST(Ch13_3_RowParallel, ForwardMatchesLinearMpi) {
  constexpr int64_t kIn = 16, kOut = 8;
  for_each_tp([&](int tp, dist::ProcessGroup& group) {
    tt::nn::Linear full = make_linear(kIn, kOut, 6);
    tt::tp::RowParallelLinear row(full, group);
    const int64_t n = kIn / tp;
    Tensor x = make_input(kRows, kIn, 7);
    Tensor ref = full.forward(x);
    Tensor y = row.forward(part(x, 1, n * group.rank(), n));
    ASSERT_EQ(y.shape(), ref.shape());
    EXPECT_LE(max_abs_diff(y, ref), kTol);
    if (tp == 1) {
      EXPECT_TRUE(bitwise_equal(y, ref)) << "one rank: the same operations";
    }
    // Every rank of the group holds the same output (the all-reduce), bias added once.
    Tensor root = y.detach().clone();
    group.broadcast(root, 0);
    EXPECT_TRUE(bitwise_equal(y, root));
  });
}

TEST(Ch13_3_RowParallel, GradientsMatchLinearMpi) {
  constexpr int64_t kIn = 16, kOut = 8;
  for_each_tp([&](int tp, dist::ProcessGroup& group) {
    const int64_t n = kIn / tp, begin = n * group.rank();
    tt::nn::Linear full = make_linear(kIn, kOut, 8);
    tt::tp::RowParallelLinear row(full, group);
    Tensor w = make_input(kRows, kOut, 9);
    Tensor x = make_input(kRows, kIn, 10).set_requires_grad();
    tt::autograd::backward(weighted_sum(full.forward(x), w));

    Tensor xr = part(make_input(kRows, kIn, 10), 1, begin, n).set_requires_grad();
    tt::autograd::backward(weighted_sum(row.forward(xr), w));
    ASSERT_TRUE(xr.grad().defined() && row.weight.grad().defined() && row.bias.grad().defined());
    // g's backward is the identity: these are local products (see the file comment).
    EXPECT_LE(max_abs_diff(xr.grad(), part(x.grad(), 1, begin, n)), kTol);
    EXPECT_LE(max_abs_diff(row.weight.grad(), part(full.weight.grad(), 1, begin, n)), kTol);
    EXPECT_TRUE(bitwise_equal(row.bias.grad(), full.bias.grad()))
        << "the bias is added once, after the all-reduce";
  });
}

TEST(Ch13_ParallelLinear, RejectsTpNotDividingFeaturesMpi) {
  for_each_tp([&](int tp, dist::ProcessGroup& group) {
    tt::nn::Linear odd = make_linear(5, 5, 11);
    if (tp > 1) {
      try {
        tt::tp::ColumnParallelLinear col(odd, group);
        ADD_FAILURE() << "ColumnParallelLinear accepted 5 output features at tp=" << tp;
      } catch (const tt::Error& e) {
        EXPECT_NE(std::string(e.what()).find("does not divide 5"), std::string::npos) << e.what();
      }
      EXPECT_THROW(tt::tp::RowParallelLinear(odd, group), tt::Error);
    }
    // A row-parallel layer fed the whole input instead of the rank's slice (or any other width).
    tt::nn::Linear full = make_linear(8, 4, 12);
    tt::tp::RowParallelLinear row(full, group);
    try {
      row.forward(make_input(2, 8 / tp + 1, 13));
      ADD_FAILURE() << "RowParallelLinear accepted a wrong input width";
    } catch (const tt::Error& e) {
      EXPECT_NE(std::string(e.what()).find("this rank's slice"), std::string::npos) << e.what();
    }
    tt::tp::ColumnParallelLinear col(full, group);
    EXPECT_THROW(col.forward(make_input(2, 7, 13)), tt::Error);
    tt::dist::world().barrier();  // every rank threw before any collective: nobody hangs
  });
}

TEST(Ch13_TensorParallelMLP, MatchesPlainMlpMpi) {
  constexpr int64_t kC = 8, kH = 32;
  for_each_tp([&](int tp, dist::ProcessGroup& group) {
    const int64_t n = kH / tp, begin = n * group.rank();
    tt::nn::Linear fc = make_linear(kC, kH, 14), proj = make_linear(kH, kC, 15);
    tt::tp::TensorParallelMLP mlp(fc, proj, group);
    Tensor w = make_input(kRows, kC, 16);
    Tensor x = make_input(kRows, kC, 17).set_requires_grad();
    Tensor ref = proj.forward(tt::gelu(fc.forward(x)));
    tt::autograd::backward(weighted_sum(ref, w));

    Tensor xt = make_input(kRows, kC, 17).set_requires_grad();
    Tensor y = mlp.forward(xt);
    EXPECT_LE(max_abs_diff(y, ref), kTol);
    tt::autograd::backward(weighted_sum(y, w));
    EXPECT_LE(max_abs_diff(xt.grad(), x.grad()), kTol);
    EXPECT_LE(max_abs_diff(mlp.c_fc->weight.grad(), part(fc.weight.grad(), 0, begin, n)), kTol);
    EXPECT_LE(max_abs_diff(mlp.c_fc->bias.grad(), part(fc.bias.grad(), 0, begin, n)), kTol);
    EXPECT_LE(max_abs_diff(mlp.c_proj->weight.grad(), part(proj.weight.grad(), 1, begin, n)), kTol);
    EXPECT_LE(max_abs_diff(mlp.c_proj->bias.grad(), proj.bias.grad()), kTol);
    EXPECT_EQ(mlp.parameters().size(), 4u);
  });
}

}  // namespace
