// Ring attention (tt/ring_attention.h) against one-process attention: the layouts' index map
// (ch16.2), the log-sum-exp merge (ch16.1), and the ring forward (ch16.3) and backward at the
// world size of the run (one process, mpirun -np 2 and -np 4), causal or not, zigzag or
// contiguous. Every rank draws the same whole q, k, v, computes the reference on all of it,
// and compares its own shard. Tolerances: float32 2e-5 absolute on outputs and gradients
// (values of order 1; the ring sums the softmax in another order than the reference), float64
// 1e-12, bfloat16 1e-2 (in and out in bf16, float32 inside; against float32 on the same
// values). The CUDA tests (NCCL; float32 on tensor cores in TF32 with cuda::allow_tf32 off, i.e.
// 3xTF32; bfloat16 through chapter 11's bf16 FlashAttention, causal and full modes, K/V sent in
// bf16, parts merged in float32) skip without a GPU per rank. The bf16 CUDA ring rounds each
// block's output (and gradient) to bf16 once before the float32 merge (sum), and P and dS are bf16
// mma operands, as in chapter 11's kernels: with u = 2^-8, outputs and gradients of order 1 to 3
// are required within 16u = 6.25e-2 absolute (chapter 11's per-element bound 8u + 4u |ref| at
// |ref| = 2) and 2u = 7.8e-3 in relative norm (its kGrad).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "../../12_data_parallel/tests/ch12_test_util.h"
#include "tt/autograd.h"
#include "tt/cuda_matmul.h"
#include "tt/dist.h"
#include "tt/error.h"
#include "tt/functional.h"
#include "tt/parallel.h"
#include "tt/ring_attention.h"

namespace {

using tt::Tensor;
using tt::cp::Layout;
namespace cp = tt::cp;
namespace dist = tt::dist;

// Largest |a - b| (any float dtype, any device).
double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape()) << a.describe() << " vs " << b.describe();
  const std::vector<double> x =
      a.detach().to(tt::Device::cpu()).to(tt::DType::kFloat64).contiguous().to_vector<double>();
  const std::vector<double> y =
      b.detach().to(tt::Device::cpu()).to(tt::DType::kFloat64).contiguous().to_vector<double>();
  double m = 0;
  for (std::size_t i = 0; i < x.size() && i < y.size(); ++i)
    m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

// Seeded [B, NH, T, hs] values, the same on every rank.
Tensor draw(const tt::Shape& shape, uint64_t seed, tt::DType dtype) {
  tt::Generator gen(seed);
  return tt::randn(shape, gen).to(dtype);
}

const char* mask_name(bool causal) {
  return causal ? "causal" : "full";
}

// ---- ch16.2: the index map ----------------------------------------------------------------

TEST(Ch16_2_ZigzagIndexMap, PositionsOfTwoAndFourRanks) {
  // T = 8 over 2 ranks: zigzag chunks of 2, rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2.
  EXPECT_EQ(cp::shard_positions(Layout::kZigzag, 8, 0, 2), (std::vector<int64_t>{0, 1, 6, 7}));
  EXPECT_EQ(cp::shard_positions(Layout::kZigzag, 8, 1, 2), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(cp::shard_positions(Layout::kContiguous, 8, 1, 2), (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(cp::shard_positions(Layout::kZigzag, 16, 1, 4), (std::vector<int64_t>{2, 3, 12, 13}));
  EXPECT_EQ(cp::global_position(Layout::kZigzag, 16, 3, 4, 3), 9);  // chunk 4 = 2*4-1-3
  // A world of one: the identity.
  EXPECT_EQ(cp::shard_positions(Layout::kZigzag, 4, 0, 1), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(Ch16_2_ZigzagIndexMap, EveryPositionOnceAndInOrder) {
  for (const Layout layout : {Layout::kContiguous, Layout::kZigzag}) {
    for (const int world : {1, 2, 3, 4, 8}) {
      const int64_t T = 4 * cp::num_chunks(layout, world);
      std::set<int64_t> seen;
      for (int r = 0; r < world; ++r) {
        const std::vector<int64_t> pos = cp::shard_positions(layout, T, r, world);
        ASSERT_EQ(static_cast<int64_t>(pos.size()), T / world);
        EXPECT_TRUE(std::is_sorted(pos.begin(), pos.end())) << cp::layout_name(layout);
        seen.insert(pos.begin(), pos.end());
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), T) << cp::layout_name(layout) << " N=" << world;
      EXPECT_EQ(*seen.begin(), 0);
      EXPECT_EQ(*seen.rbegin(), T - 1);
    }
  }
}

TEST(Ch16_2_ZigzagIndexMap, ShardCopiesThePositionsAndChecksSizes) {
  const Tensor x = tt::arange(0, 16, 1, {tt::DType::kInt64}).view({2, 8});  // rows 0..7, 8..15
  const Tensor s = cp::shard(x, 1, Layout::kZigzag, 1, 2);
  EXPECT_EQ(s.to_vector<int64_t>(), (std::vector<int64_t>{2, 3, 4, 5, 10, 11, 12, 13}));
  EXPECT_THROW(cp::shard(x, 1, Layout::kZigzag, 0, 3), tt::Error);  // 8 % 6 != 0
  EXPECT_THROW(cp::global_position(Layout::kZigzag, 8, 2, 2, 0), tt::Error);
  EXPECT_THROW(cp::global_position(Layout::kZigzag, 8, 0, 2, 4), tt::Error);
}

// ---- ch16.1: the merge ----------------------------------------------------------------------

TEST(Ch16_1_LseMerge, TwoKeyHalvesEqualAllKeys) {
  for (const tt::DType dtype : {tt::DType::kFloat32, tt::DType::kFloat64}) {
    const Tensor q = draw({2, 3, 5, 4}, 1, dtype), k = draw({2, 3, 7, 4}, 2, dtype),
                 v = draw({2, 3, 7, 4}, 3, dtype);
    const cp::AttentionPart all = cp::attention_block_forward(q, k, v, false);
    const cp::AttentionPart a =
        cp::attention_block_forward(q, k.slice(2, 0, 3), v.slice(2, 0, 3), false);
    const cp::AttentionPart b =
        cp::attention_block_forward(q, k.slice(2, 3, 7), v.slice(2, 3, 7), false);
    const cp::AttentionPart ab = cp::merge_attention(a, b), ba = cp::merge_attention(b, a);
    const double tol = dtype == tt::DType::kFloat32 ? 2e-6 : 1e-14;
    EXPECT_LE(max_abs_diff(ab.out, all.out), tol) << tt::dtype_name(dtype);
    EXPECT_LE(max_abs_diff(ab.lse, all.lse), tol) << tt::dtype_name(dtype);
    EXPECT_LE(max_abs_diff(ba.out, all.out), tol) << "the merge is symmetric";
    EXPECT_EQ(ab.out.dtype(), dtype);
  }
}

TEST(Ch16_RingAttention, FullBlocksInPiecesEqualOneBlock) {
  // A block computed in pieces of 2 query rows (max_scores = 2 rows x 2 heads x 7 keys) equals
  // the block at once, forward and backward.
  const tt::DType f64 = tt::DType::kFloat64;
  const Tensor q = draw({1, 2, 5, 4}, 1, f64), k = draw({1, 2, 7, 4}, 2, f64),
               v = draw({1, 2, 7, 4}, 3, f64), dout = draw({1, 2, 5, 4}, 4, f64);
  const cp::AttentionPart whole = cp::attention_block_forward(q, k, v, false);
  const cp::AttentionPart pieces = cp::attention_block_forward(q, k, v, false, 2 * 2 * 7);
  EXPECT_LE(max_abs_diff(pieces.out, whole.out), 1e-14);
  EXPECT_LE(max_abs_diff(pieces.lse, whole.lse), 1e-14);
  const auto g = cp::attention_block_backward(dout, q, k, v, whole.out, whole.lse, false);
  const auto gp =
      cp::attention_block_backward(dout, q, k, v, whole.out, whole.lse, false, 2 * 2 * 7);
  for (int i = 0; i < 3; ++i) EXPECT_LE(max_abs_diff(gp[i], g[i]), 1e-14) << "gradient " << i;
}

TEST(Ch16_1_LseMerge, FarApartLogSumExpsDoNotOverflow) {
  // Rows whose two parts differ by 1e4 in log-sum-exp: the larger one wins entirely.
  const Tensor oa = tt::full({1, 1, 2, 3}, 1.0), ob = tt::full({1, 1, 2, 3}, -1.0);
  const Tensor la = tt::from_vector(std::vector<float>{1e4f, -5e3f}, {1, 1, 2});
  const Tensor lb = tt::from_vector(std::vector<float>{0.0f, 5e3f}, {1, 1, 2});
  const cp::AttentionPart m = cp::merge_attention({oa, la}, {ob, lb});
  const std::vector<float> out = m.out.contiguous().to_vector<float>();
  const std::vector<float> lse = m.lse.contiguous().to_vector<float>();
  for (int c = 0; c < 3; ++c) {
    EXPECT_FLOAT_EQ(out[c], 1.0f);
    EXPECT_FLOAT_EQ(out[3 + c], -1.0f);
  }
  EXPECT_FLOAT_EQ(lse[0], 1e4f);
  EXPECT_FLOAT_EQ(lse[1], 5e3f);
  // Equal parts: lse + log 2, the mean of the outputs.
  const cp::AttentionPart e = cp::merge_attention({oa, lb}, {ob, lb});
  EXPECT_NEAR(e.lse.contiguous().to_vector<float>()[0], std::log(2.0f), 1e-6);
  EXPECT_NEAR(e.out.contiguous().to_vector<float>()[0], 0.0f, 1e-6);
}

TEST(Ch16_1_LseMerge, RejectsPartsOfAnotherGeometry) {
  const Tensor o = tt::zeros({1, 1, 2, 3}), l = tt::zeros({1, 1, 2});
  EXPECT_THROW(cp::merge_attention({o, l}, {tt::zeros({1, 1, 3, 3}), tt::zeros({1, 1, 3})}),
               tt::Error);
  EXPECT_THROW(cp::merge_attention({o, l}, {o, tt::Tensor()}), tt::Error);
}

// ---- ch16.3 and the backward: the ring at the world size of the run -------------------------

struct Case {
  Layout layout;
  bool causal;
  tt::DType dtype;
};

std::string name_of(const Case& c, int world) {
  return std::string(cp::layout_name(c.layout)) + ", " + mask_name(c.causal) + ", " +
         tt::dtype_name(c.dtype) + ", N=" + std::to_string(world);
}

// ||a - ref|| / max(||ref||, sqrt(numel)) in float64 (chapter 11's relative error).
double relative_error(const Tensor& a, const Tensor& ref) {
  const std::vector<double> x =
      a.detach().to(tt::Device::cpu()).to(tt::DType::kFloat64).contiguous().to_vector<double>();
  const std::vector<double> y =
      ref.detach().to(tt::Device::cpu()).to(tt::DType::kFloat64).contiguous().to_vector<double>();
  double num = 0, den = 0;
  for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
    num += (x[i] - y[i]) * (x[i] - y[i]);
    den += y[i] * y[i];
  }
  return std::sqrt(num / std::max(den, static_cast<double>(x.size())));
}

// The ring's output and gradients of this rank's shard against the reference on the whole
// sequence (T divisible into 2N chunks for N = 1, 2, 4: 16 by default), with dout drawn per
// position.
void check_ring(const Case& c, tt::Device device, int64_t hs, bool gradients, int64_t T = 16) {
  dist::ProcessGroup& world = dist::world();
  const int n = world.world_size(), r = world.rank();
  const int64_t B = 1, NH = 2;
  const tt::Shape shape{B, NH, T, hs};
  const Tensor q = draw(shape, 11, c.dtype), k = draw(shape, 12, c.dtype),
               v = draw(shape, 13, c.dtype), dout = draw(shape, 14, c.dtype);
  // bfloat16: the reference runs in float32 on the same (rounded) values; the ring's output and
  // gradients are rounded to bfloat16 once (relative error 2^-9 on values of order 1).
  const bool bf16 = c.dtype == tt::DType::kBFloat16;
  const tt::DType ref_dtype = bf16 ? tt::DType::kFloat32 : c.dtype;
  // bf16 on CUDA: the blocks in bf16 (chapter 11's kernels), see the file's comment.
  const bool bf16_blocks = bf16 && device.is_cuda();
  const double tol = c.dtype == tt::DType::kFloat64 ? 1e-12
                     : bf16_blocks                  ? 16.0 / 256
                     : bf16                         ? 1e-2
                                                    : 2e-5;
  const double rel_tol = bf16_blocks ? 2.0 / 256 : 1.0;  // relative norm (bf16 blocks only)
  const std::string what =
      name_of(c, n) + ", T=" + std::to_string(T) + ", hs=" + std::to_string(hs);
  auto expect_near = [&](const Tensor& a, const Tensor& ref, const char* name) {
    EXPECT_LE(max_abs_diff(a, ref), tol) << name << ", " << what;
    const double rel = relative_error(a, ref);
    EXPECT_LE(rel, rel_tol) << name << ", " << what;
    if (bf16_blocks && r == 0) {
      std::printf("[ bf16 ring ] %-6s %-48s max|err| = %.2e, ||err||/||ref|| = %.2e\n", name,
                  what.c_str(), max_abs_diff(a, ref), rel);
    }
  };

  // Reference: one process, the whole sequence.
  const Tensor qr = q.to(ref_dtype).clone().set_requires_grad(),
               kr = k.to(ref_dtype).clone().set_requires_grad(),
               vr = v.to(ref_dtype).clone().set_requires_grad();
  const Tensor ref = cp::attention_reference(qr, kr, vr, c.causal);
  if (gradients) tt::autograd::backward(tt::sum(tt::mul(ref, dout.to(ref_dtype))));

  // This rank's shard (one process: the whole sequence, without the index map of ch16.2, so
  // that a starter of ch16.3 fails on its own TODO).
  auto mine = [&](const Tensor& t) {
    return n == 1 ? t.detach() : cp::shard(t.detach(), 2, c.layout, r, n);
  };
  const Tensor ql = mine(q).to(device).set_requires_grad(),
               kl = mine(k).to(device).set_requires_grad(),
               vl = mine(v).to(device).set_requires_grad();
  const Tensor out = cp::ring_attention(ql, kl, vl, world, c.layout, c.causal);
  expect_near(out, mine(ref), "output");
  if (!gradients) return;
  EXPECT_EQ(out.dtype(), c.dtype);
  tt::autograd::backward(out, mine(dout).to(device));
  ASSERT_TRUE(ql.grad().defined() && ql.grad().dtype() == c.dtype) << what;
  expect_near(ql.grad(), mine(qr.grad()), "dq");
  expect_near(kl.grad(), mine(kr.grad()), "dk");
  expect_near(vl.grad(), mine(vr.grad()), "dv");
}

const Case kCases[] = {
    {Layout::kZigzag, true, tt::DType::kFloat32},
    {Layout::kContiguous, true, tt::DType::kFloat32},
    {Layout::kZigzag, false, tt::DType::kFloat32},
    {Layout::kContiguous, false, tt::DType::kFloat32},
};

TEST(Ch16_3_RingForward, MatchesOneProcessAttentionMpi) {
  tt::ScopedNumThreads one_thread(1);
  for (const Case& c : kCases) check_ring(c, tt::Device::cpu(), 8, false);
  dist::world().barrier();
}

TEST(Ch16_RingAttention, GradientsMatchOneProcessAttentionMpi) {
  tt::ScopedNumThreads one_thread(1);
  for (const Case& c : kCases) check_ring(c, tt::Device::cpu(), 8, true);
  check_ring({Layout::kZigzag, true, tt::DType::kFloat64}, tt::Device::cpu(), 8, true);
  check_ring({Layout::kZigzag, true, tt::DType::kBFloat16}, tt::Device::cpu(), 8, true);
  dist::world().barrier();
}

TEST(Ch16_RingAttention, RejectsShardsThatDoNotSplitMpi) {
  dist::ProcessGroup& world = dist::world();
  const Tensor odd = tt::zeros({1, 1, 3, 4});
  // Refused before anything is sent, on every rank alike.
  EXPECT_THROW(cp::ring_attention(odd, odd, odd, world, Layout::kZigzag), tt::Error);
  EXPECT_THROW(cp::ring_attention(odd, odd, tt::zeros({1, 1, 3, 5}), world), tt::Error);
  EXPECT_THROW(cp::ring_attention(odd.to(tt::DType::kInt64), odd.to(tt::DType::kInt64),
                                  odd.to(tt::DType::kInt64), world, Layout::kContiguous),
               tt::Error);
  EXPECT_THROW(cp::parse_layout("diagonal"), tt::Error);
  world.barrier();
}

TEST(Ch16_RingAttention, AsyncBatchSendRecvCompletesAtWaitMpi) {
  // Chapter 12's batch_send_recv_async, which the ring step uses: the transfer around the ring
  // is started, the rank computes, and the received values are there after wait().
  dist::ProcessGroup& world = dist::world();
  const int n = world.world_size(), r = world.rank();
  const Tensor mine = tt::full({5}, 10.0 * r + 1), theirs = tt::zeros({5});
  using tt::dist::P2POp;
  const std::unique_ptr<dist::Work> work =
      world.batch_send_recv_async({{P2POp::Kind::kSend, mine, (r + 1) % n, 7},
                                   {P2POp::Kind::kRecv, theirs, (r + n - 1) % n, 7}});
  const Tensor busy = tt::sum(tt::mul(mine, mine));  // work done while the transfer runs
  work->wait();
  EXPECT_TRUE(work->is_completed());
  EXPECT_EQ(busy.item(), 5 * (10.0 * r + 1) * (10.0 * r + 1));
  for (const float x : theirs.to_vector<float>()) EXPECT_EQ(x, 10.0f * ((r + n - 1) % n) + 1);
  world.barrier();
}

TEST(Ch16_RingAttention, PlanBalancesZigzagWork) {
  // Work of a rank (query-key pairs it computes), causal, over all its steps: zigzag gives every
  // rank the same; contiguous gives the last rank N times the first one's.
  for (const int n : {2, 4, 8}) {
    const int64_t Tl = 8;
    auto work = [&](Layout layout, int r) {
      int64_t w = 0;
      for (int src = 0; src < n; ++src) {
        const cp::BlockPlan p = cp::plan_block(layout, true, r, src, n, Tl);
        const int64_t rows = p.q_end - p.q_begin, keys = p.k_end - p.k_begin;
        w += p.kind == cp::BlockPlan::Kind::kCausal ? rows * (rows + 1) / 2
             : p.kind == cp::BlockPlan::Kind::kFull ? rows * keys
                                                    : 0;
      }
      return w;
    };
    for (int r = 1; r < n; ++r) {
      // Zigzag: the causal diagonal of 2 chunks differs from its peers' only in which chunks.
      EXPECT_EQ(work(Layout::kZigzag, r), work(Layout::kZigzag, 0)) << "N=" << n << " rank " << r;
    }
    EXPECT_GT(work(Layout::kContiguous, n - 1), work(Layout::kContiguous, 0) * (n - 1));
  }
}

TEST(Ch16_RingAttention, CudaMatchesOneProcessAttentionMpi) {
  dist::ProcessGroup& world = dist::world();
  SKIP_WITHOUT_NCCL(world);
  const tt::Device device = tt::Device::cuda(world.local_rank());
  tt::cuda::AllowTf32Guard exact(false);  // 3xTF32 in FlashAttention, fp32 GEMMs in cuBLAS
  for (const Case& c : kCases) check_ring(c, device, 32, true);
  world.barrier();
}

// The bf16 ring on CUDA: the causal diagonal and the fully visible rectangles through chapter
// 11's bf16 FlashAttention (m != n under the zigzag layout), K/V sent in bf16 over NCCL. T = 16
// gives blocks of 2 to 16 rows (one padded tile); T = 200 blocks of 25 to 200 rows (N = 4
// zigzag: 50 queries against 25 keys), several tiles, none full.
TEST(Ch16_RingAttention, CudaBf16MatchesOneProcessAttentionMpi) {
  dist::ProcessGroup& world = dist::world();
  SKIP_WITHOUT_NCCL(world);
  const tt::Device device = tt::Device::cuda(world.local_rank());
  for (const Layout layout : {Layout::kZigzag, Layout::kContiguous}) {
    for (const bool causal : {true, false}) {
      const Case c{layout, causal, tt::DType::kBFloat16};
      check_ring(c, device, 64, true);
      check_ring(c, device, 64, true, 200);
      check_ring(c, device, 128, true, 200);
    }
  }
  // A head size the kernels do not take is refused before anything is sent, on every rank.
  const Tensor h48 = tt::zeros({1, 2, 16, 48}, {tt::DType::kBFloat16, device});
  EXPECT_THROW(cp::ring_attention(h48, h48, h48, world), tt::Error);
  world.barrier();
}

// The blocks of the bf16 ring on the CPU: attention_block_forward / backward route bfloat16 to
// chapter 11's kernels (the CPU emulations here), with float32 parts and gradients, and agree
// with the float32 blocks on the same values, rectangle (m != n) and causal diagonal.
TEST(Ch16_RingAttention, Bf16BlocksMatchFloat32Blocks) {
  const tt::DType bf = tt::DType::kBFloat16, f32 = tt::DType::kFloat32;
  for (const bool causal : {false, true}) {
    const int64_t m = 24, n = causal ? 24 : 12;
    const Tensor q = draw({1, 2, m, 16}, 21, bf), k = draw({1, 2, n, 16}, 22, bf),
                 v = draw({1, 2, n, 16}, 23, bf), dout = draw({1, 2, m, 16}, 24, bf);
    const cp::AttentionPart a = cp::attention_block_forward(q, k, v, causal);
    const cp::AttentionPart b =
        cp::attention_block_forward(q.to(f32), k.to(f32), v.to(f32), causal);
    ASSERT_EQ(a.out.dtype(), f32);
    ASSERT_EQ(a.lse.dtype(), f32);
    EXPECT_LE(max_abs_diff(a.out, b.out), 1e-2) << mask_name(causal);
    EXPECT_LE(max_abs_diff(a.lse, b.lse), 1e-5) << mask_name(causal);
    const Tensor out = b.out.to(bf);
    const auto ga = cp::attention_block_backward(dout, q, k, v, out, b.lse, causal);
    const auto gb = cp::attention_block_backward(dout.to(f32), q.to(f32), k.to(f32), v.to(f32),
                                                 out.to(f32), b.lse, causal);
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(ga[i].dtype(), f32) << i;
      EXPECT_EQ(ga[i].shape(), gb[i].shape()) << i;
      EXPECT_LE(max_abs_diff(ga[i], gb[i]), 3e-2) << mask_name(causal) << " gradient " << i;
    }
  }
}

// ---- the ring's in-place sums: merge_attention_rows and add_rows ------------------------------

// A running result acc (out [2, 3, Tl, hs], lse [2, 3, Tl]) and a part of m rows on `device`:
// out values of order 1, lse of order 3 (part.out in `part_dtype`).
struct RowsCase {
  cp::AttentionPart acc, part;
};
RowsCase draw_rows(int64_t Tl, int64_t m, int64_t hs, tt::DType part_dtype, tt::Device device,
                   uint64_t seed) {
  const tt::DType f32 = tt::DType::kFloat32;
  auto on = [&](const Tensor& t) { return t.to(device); };
  return {{on(draw({2, 3, Tl, hs}, seed, f32)), on(tt::mul(draw({2, 3, Tl}, seed + 1, f32), 3.0))},
          {on(draw({2, 3, m, hs}, seed + 2, part_dtype)),
           on(tt::mul(draw({2, 3, m}, seed + 3, f32), 3.0))}};
}

// merge_attention_rows(acc, begin, part) computed the slow way: merge_attention of the rows on
// the CPU, the other rows as they were.
cp::AttentionPart merge_rows_reference(const RowsCase& c, int64_t begin) {
  const tt::Device cpu = tt::Device::cpu();
  const cp::AttentionPart acc{c.acc.out.to(cpu).clone(), c.acc.lse.to(cpu).clone()};
  const int64_t end = begin + c.part.out.size(2);
  const cp::AttentionPart merged =
      cp::merge_attention({acc.out.slice(2, begin, end), acc.lse.slice(2, begin, end)},
                          {c.part.out.to(cpu).to(tt::DType::kFloat32), c.part.lse.to(cpu)});
  acc.out.slice(2, begin, end).copy_(merged.out);
  acc.lse.slice(2, begin, end).copy_(merged.lse);
  return acc;
}

// Checks merge_attention_rows and add_rows on `device` against the CPU composition, for the
// first, a middle and the last rows, head sizes 64, 128 and 40 (not a multiple of the warp),
// float32 and bfloat16 parts. Float32 exp/log in another order: 2e-6 (values of order 1).
void check_rows_on(tt::Device device) {
  struct Rows {
    int64_t Tl, m, begin, hs;
  };
  for (const Rows& r :
       {Rows{10, 4, 0, 64}, Rows{10, 4, 6, 128}, Rows{9, 9, 0, 40}, Rows{12, 5, 3, 64}}) {
    for (const tt::DType dt : {tt::DType::kFloat32, tt::DType::kBFloat16}) {
      const std::string what = "Tl " + std::to_string(r.Tl) + " m " + std::to_string(r.m) +
                               " begin " + std::to_string(r.begin) + " hs " + std::to_string(r.hs) +
                               " part " + tt::dtype_name(dt);
      const RowsCase c = draw_rows(r.Tl, r.m, r.hs, dt, device, 40 + r.hs + r.begin);
      const cp::AttentionPart want = merge_rows_reference(c, r.begin);
      cp::merge_attention_rows(c.acc, r.begin, c.part);
      EXPECT_LE(max_abs_diff(c.acc.out, want.out), 2e-6) << what;
      EXPECT_LE(max_abs_diff(c.acc.lse, want.lse), 2e-6) << what;

      const Tensor before = c.acc.out.to(tt::Device::cpu()).clone();
      cp::add_rows(c.acc.out, r.begin, c.part.out);
      const Tensor rows = before.slice(2, r.begin, r.begin + r.m);
      rows.copy_(tt::add(rows, c.part.out.to(tt::Device::cpu()).to(tt::DType::kFloat32)));
      EXPECT_LE(max_abs_diff(c.acc.out, before), 1e-6) << "add_rows " << what;

      // Rows of a larger tensor (the ring's gradients of a rectangle are such views): rows
      // [1, 1 + m) of [2, 3, m + 2, hs].
      const Tensor wide = draw({2, 3, r.m + 2, r.hs}, 90 + r.hs, dt).to(device);
      const Tensor view = wide.slice(2, 1, 1 + r.m);
      cp::add_rows(c.acc.out, r.begin, view);
      rows.copy_(tt::add(rows, view.to(tt::Device::cpu()).to(tt::DType::kFloat32)));
      EXPECT_LE(max_abs_diff(c.acc.out, before), 1e-6) << "add_rows of a view, " << what;
    }
  }
  // Rows whose log-sum-exps are 1e4 apart: the larger part wins entirely, nothing overflows.
  const tt::Device cpu = tt::Device::cpu();
  const cp::AttentionPart acc{
      tt::full({1, 1, 2, 3}, 1.0).to(device),
      tt::from_vector(std::vector<float>{1e4f, -5e3f}, {1, 1, 2}).to(device)};
  cp::merge_attention_rows(acc, 0,
                           {tt::full({1, 1, 2, 3}, -1.0).to(device),
                            tt::from_vector(std::vector<float>{0.0f, 5e3f}, {1, 1, 2}).to(device)});
  EXPECT_EQ(acc.out.to(cpu).contiguous().to_vector<float>(),
            (std::vector<float>{1, 1, 1, -1, -1, -1}));
  EXPECT_EQ(acc.lse.to(cpu).contiguous().to_vector<float>(), (std::vector<float>{1e4f, 5e3f}));
}

TEST(Ch16_RingAttention, MergeRowsAndAddRowsEqualTheComposition) {
  check_rows_on(tt::Device::cpu());
  // Rows past the end, a dtype the accumulator cannot take, lse of the wrong length.
  const RowsCase c = draw_rows(6, 4, 8, tt::DType::kFloat32, tt::Device::cpu(), 3);
  EXPECT_TT_ERROR(cp::add_rows(c.acc.out, 3, c.part.out), "cp::add_rows", "begin 3", "[2, 3, 6, 8]",
                  "[2, 3, 4, 8]");
  EXPECT_TT_ERROR(cp::add_rows(c.acc.out.to(tt::DType::kBFloat16), 0, c.part.out), "cp::add_rows",
                  "bfloat16");
  EXPECT_TT_ERROR(cp::merge_attention_rows(c.acc, 0, {c.part.out, c.acc.lse}),
                  "cp::merge_attention_rows", "[2, 3, 6]");
}

// The CUDA kernels "cp_merge_rows" and "cp_add_rows" (one pass each) against the composition.
TEST(Ch16_RingAttention, CudaMergeRowsAndAddRowsKernelsEqualTheComposition) {
  TT_SKIP_IF_NO_CUDA();
  check_rows_on(tt::Device::cuda(0));
}

}  // namespace
