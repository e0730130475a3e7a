// Exercises ch12.2 (buckets) and ch12.3 (the reducer), and DistributedDataParallel end to end:
// N ranks with B/N rows each must train like one process with the global batch B.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>

#include "ch12_test_util.h"
#include "tt/ddp.h"
#include "tt/optim.h"

namespace tt::dist {
namespace {

using ch12_test::Data;

/// float32 parameters of the given element counts.
std::vector<Tensor> params_of(const std::vector<int64_t>& numels, DType dtype = DType::kFloat32) {
  std::vector<Tensor> out;
  for (int64_t n : numels) out.push_back(zeros({n}, {.dtype = dtype}).set_requires_grad(true));
  return out;
}

/// A bucket as (param, offset, numel) triples, for EXPECT_EQ.
std::vector<std::vector<int64_t>> layout(const std::vector<Bucket>& buckets) {
  std::vector<std::vector<int64_t>> out;
  for (const Bucket& b : buckets) {
    std::vector<int64_t> row;
    for (const BucketEntry& e : b.entries) row.insert(row.end(), {e.param, e.offset, e.numel});
    out.push_back(row);
  }
  return out;
}

// ----- ch12.2 ------------------------------------------------------------------------------

TEST(Ch12_2_Buckets, ReverseOrderUpToTheCap) {
  // 40, 80, 120, 160 bytes with a 200-byte cap, taken from the last parameter:
  // {3} (160; +120 > 200), {2, 1} (120 + 80 = 200 fits), {0}.
  const auto buckets = assign_buckets(params_of({10, 20, 30, 40}), 200);
  EXPECT_EQ(layout(buckets),
            (std::vector<std::vector<int64_t>>{{3, 0, 40}, {2, 0, 30, 1, 30, 20}, {0, 0, 10}}));
  EXPECT_EQ(buckets[1].numel, 50);
}

TEST(Ch12_2_Buckets, OversizedParameterAloneAndDTypeChanges) {
  // 4 + 400 (over the 100-byte cap) + 4 bytes: the big one alone.
  EXPECT_EQ(layout(assign_buckets(params_of({1, 100, 1}), 100)),
            (std::vector<std::vector<int64_t>>{{2, 0, 1}, {1, 0, 100}, {0, 0, 1}}));
  auto mixed = params_of({2, 2});
  mixed.push_back(zeros({2}, {.dtype = DType::kFloat64}).set_requires_grad(true));
  const auto buckets = assign_buckets(mixed, 1 << 20);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].dtype, DType::kFloat64);
  EXPECT_EQ(layout(buckets), (std::vector<std::vector<int64_t>>{{2, 0, 2}, {1, 0, 2, 0, 2, 2}}));
}

TEST(Ch12_2_Buckets, EveryParameterOnceWithinTheCap) {
  Generator gen(3);
  std::vector<int64_t> numels(40);
  for (auto& n : numels) n = 1 + static_cast<int64_t>(gen.next_u64() % 300);
  for (int64_t cap : {4, 100, 1000, 1 << 30}) {
    const auto buckets = assign_buckets(params_of(numels), cap);
    std::vector<int> seen(numels.size(), 0);
    int64_t expected_next = static_cast<int64_t>(numels.size()) - 1;  // reverse order
    for (const Bucket& b : buckets) {
      ASSERT_FALSE(b.entries.empty());
      int64_t offset = 0;
      for (const BucketEntry& e : b.entries) {
        EXPECT_EQ(e.param, expected_next--);
        EXPECT_EQ(e.offset, offset);
        EXPECT_EQ(e.numel, numels[static_cast<std::size_t>(e.param)]);
        offset += e.numel;
        ++seen[static_cast<std::size_t>(e.param)];
      }
      EXPECT_EQ(b.numel, offset);
      // Within the cap, unless one parameter alone exceeds it.
      EXPECT_TRUE(4 * b.numel <= cap || b.entries.size() == 1) << "cap " << cap;
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(numels.size()));
    // Greedy: a bucket is closed only because the next parameter did not fit.
    for (std::size_t b = 0; b + 1 < buckets.size(); ++b) {
      EXPECT_GT(4 * (buckets[b].numel + buckets[b + 1].entries.front().numel), cap);
    }
  }
  EXPECT_TRUE(assign_buckets({}, 100).empty());
  EXPECT_TT_ERROR(assign_buckets(params_of({1}), 0), "assign_buckets", "bucket_cap_bytes");
}

// ----- ch12.3 ------------------------------------------------------------------------------

/// Three parameters with gradients 1000*(rank+1) + i; buckets {2}, {1, 0}.
struct ReducerSetup {
  std::vector<Tensor> params = params_of({3, 2, 4});
  std::vector<Bucket> buckets = {Bucket{{{2, 0, 4}}, 4, DType::kFloat32},
                                 Bucket{{{1, 0, 2}, {0, 2, 3}}, 5, DType::kFloat32}};
  explicit ReducerSetup(int rank) {
    for (const Tensor& p : params) {
      p.set_grad(add(arange(0, static_cast<double>(p.numel())), 1000.0 * (rank + 1)));
    }
  }
};

TEST(Ch12_3_Reducer, ReducesCompleteBucketsInBucketOrder) {
  ProcessGroup g(make_self_backend());
  ReducerSetup s(0);
  Reducer reducer(s.params, s.buckets, g);
  reducer.mark_grad_ready(0);  // bucket 1 not complete
  EXPECT_EQ(reducer.num_reductions(), 0);
  reducer.mark_grad_ready(1);  // bucket 1 complete, but bucket 0 must go first
  EXPECT_EQ(reducer.num_reductions(), 0);
  reducer.mark_grad_ready(2);  // bucket 0, then bucket 1
  EXPECT_EQ(reducer.num_reductions(), 2);
  reducer.finalize_backward();
  EXPECT_EQ(reducer.reduced_order(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(g.bytes_communicated(), 4 * 9);
  // The average over one rank is the gradient itself.
  EXPECT_TENSOR_NEAR(s.params[2].grad(), add(arange(0, 4), 1000.0), 0, 0);
}

TEST(Ch12_3_Reducer, FinalizeReducesWhatIsLeftAndUnusedGradientsAreZero) {
  ProcessGroup g(make_self_backend());
  ReducerSetup s(0);
  s.params[1].set_grad(Tensor());  // parameter 1 took no part in the loss
  Reducer reducer(s.params, s.buckets, g);
  reducer.mark_grad_ready(2);
  EXPECT_EQ(reducer.num_reductions(), 1);
  reducer.finalize_backward();
  EXPECT_EQ(reducer.num_reductions(), 2);
  EXPECT_TENSOR_NEAR(s.params[1].grad(), zeros({2}), 0, 0);
  // The next backward starts afresh; marking twice in one backward is an error.
  reducer.mark_grad_ready(0);
  EXPECT_TT_ERROR(reducer.mark_grad_ready(0), "mark_grad_ready", "parameter 0", "twice");
  EXPECT_TT_ERROR(reducer.mark_grad_ready(3), "mark_grad_ready", "parameter 3");
}

TEST(Ch12_3_Reducer, DisabledDoesNothingAndBadBucketsAreRejected) {
  ProcessGroup g(make_self_backend());
  ReducerSetup s(0);
  Reducer reducer(s.params, s.buckets, g);
  reducer.set_enabled(false);
  reducer.mark_grad_ready(2);
  reducer.finalize_backward();
  EXPECT_EQ(reducer.num_reductions(), 0);
  EXPECT_EQ(g.bytes_communicated(), 0);
  auto missing = s.buckets;
  missing[1].entries.pop_back();
  missing[1].numel = 2;
  EXPECT_TT_ERROR(Reducer(s.params, missing, g), "Reducer", "parameter 0", "no bucket");
  auto shifted = s.buckets;
  shifted[1].entries[1].offset = 3;
  EXPECT_TT_ERROR(Reducer(s.params, shifted, g), "Reducer", "offset 3", "expected offset 2");
}

TEST(Ch12_3_ReducerMpi, AveragesGradientsOverTheRanks) {
  ProcessGroup& g = world();
  const int N = g.world_size();
  ReducerSetup s(g.rank());
  Reducer reducer(s.params, s.buckets, g);
  // Ranks mark in different orders; the all-reduces still pair up bucket by bucket.
  if (g.rank() % 2 == 0) {
    for (int64_t i : {0, 1, 2}) reducer.mark_grad_ready(i);
  } else {
    for (int64_t i : {2, 1, 0}) reducer.mark_grad_ready(i);
  }
  reducer.finalize_backward();
  for (const Tensor& p : s.params) {
    // mean over r of 1000 (r + 1) + i = 500 (N + 1) + i: exact in float32.
    EXPECT_TENSOR_NEAR(p.grad(), add(arange(0, static_cast<double>(p.numel())), 500.0 * (N + 1)), 0,
                       0);
  }
}

// ----- DistributedDataParallel end to end --------------------------------------------------

constexpr int kSteps = 4;
/// SGD with momentum: linear in the gradient, so summation-order differences stay at rounding
/// level (AdamW divides by sqrt(v) and can amplify them near zero gradients).
const optim::SgdOptions kSgd{.lr = 0.1, .momentum = 0.9};
/// float32 rounding after a few steps of a 8-16-4 MLP: gradients of N partial batches summed in
/// another order than one whole batch.
constexpr double kAtol = 2e-6, kRtol = 1e-5;

/// One process, the whole global batch at every step.
std::vector<Tensor> train_one_process() {
  auto model = ch12_test::make_model(100);
  optim::SGD opt(model->parameters(), kSgd);
  for (int step = 0; step < kSteps; ++step) {
    opt.zero_grad();
    ch12_test::forward_backward(*model, ch12_test::global_batch(step));
    opt.step();
  }
  return model->parameters();
}

/// Trains `ddp` for kSteps on this rank's rows of each global batch, cut into `micro`
/// micro-batches (each split over the ranks, losses scaled by 1/micro) of which all but the last
/// run inside no_sync; then checks the traffic and the parameters against one process.
/// With `in_buckets`, the gradients are zeroed by ddp.zero_grad() (in the buckets) instead of
/// the optimizer's zero_grad (set to none), and every backward must then write the gradients of
/// the parameters of at least `min_view` elements into the buckets (the others are set to none).
void train_and_compare(DistributedDataParallel& ddp, int micro, bool in_buckets = false,
                       int64_t min_view = 0) {
  const ProcessGroup& g = ddp.group();
  const std::vector<Tensor> params = ddp.module().parameters();
  optim::SGD opt(params, kSgd);
  const int64_t micro_rows = ch12_test::kGlobalBatch / micro, rows = micro_rows / g.world_size();
  std::vector<const void*> bucket_slots;  // where each gradient lives in its bucket
  for (int step = 0; step < kSteps; ++step) {
    if (in_buckets) {
      ddp.zero_grad();
      if (bucket_slots.empty()) {
        for (const Tensor& p : params) {
          bucket_slots.push_back(p.grad().defined() ? p.grad().data_ptr() : nullptr);
        }
      }
      for (const Tensor& p : params) {
        if (p.numel() < min_view) {
          EXPECT_FALSE(p.grad().defined()) << "a small parameter's gradient goes the copy path";
          continue;
        }
        ASSERT_TRUE(p.grad().defined());
        EXPECT_TENSOR_NEAR(p.grad(), zeros(p.shape()), 0, 0);  // zeroed, not left as it was
      }
    } else {
      opt.zero_grad();
    }
    const Data d = ch12_test::global_batch(step);
    for (int m = 0; m < micro; ++m) {
      const Data mine = ch12_test::rows(d, m * micro_rows + g.rank() * rows, rows);
      if (m + 1 < micro) {
        auto guard = ddp.no_sync();
        ch12_test::forward_backward(ddp.module(), mine, 1.0 / micro);
        ddp.sync_gradients();  // a no-op inside no_sync
      } else {
        ch12_test::forward_backward(ddp.module(), mine, 1.0 / micro);
        if (in_buckets) {
          // Backward accumulated into the buckets: nothing for reduce_bucket to copy in.
          for (std::size_t i = 0; i < params.size(); ++i) {
            if (params[i].numel() < min_view) {
              EXPECT_NE(params[i].grad().data_ptr(), nullptr) << "parameter " << i;
            } else {
              EXPECT_EQ(params[i].grad().data_ptr(), bucket_slots[i]) << "parameter " << i;
            }
          }
        }
        ddp.sync_gradients();
      }
    }
    opt.step();
  }
  // One all-reduce per bucket per STEP, not per micro-batch.
  EXPECT_EQ(ddp.reducer().num_reductions(),
            kSteps * static_cast<int64_t>(ddp.reducer().buckets().size()));
  ch12_test::expect_params_near(ddp.module().parameters(), train_one_process(), kAtol, kRtol);
  ch12_test::expect_identical_across_ranks(ddp.group(), ddp.module().parameters());
}

TEST(Ch12_3_DdpMpi, TrainsLikeOneProcessWithTheGlobalBatch) {
  ProcessGroup& g = world();
  // Each rank draws different weights: the constructor's broadcast makes them rank 0's (seed 100,
  // the one-process model's).
  DistributedDataParallel ddp(ch12_test::make_model(100 + static_cast<uint64_t>(g.rank())), g,
                              {.bucket_cap_bytes = 256});
  EXPECT_GT(ddp.reducer().buckets().size(), 2u);
  train_and_compare(ddp, 1);
}

TEST(Ch12_3_DdpMpi, NoSyncAccumulationEqualsTheLargeBatch) {
  DistributedDataParallel ddp(ch12_test::make_model(100), world(), {.bucket_cap_bytes = 256});
  train_and_compare(ddp, 2);
}

TEST(Ch12_3_DdpMpi, GradientsZeroedInTheBucketsTrainAlikeWithoutCopies) {
  // 0: every gradient in its bucket; 20: the 16- and 4-element biases go the copy path, the
  // weights (128 and 64 elements) stay in the buckets: both train like one process.
  for (int64_t min_view : {0, 20}) {
    for (int micro : {1, 2}) {
      SCOPED_TRACE("micro-batches " + std::to_string(micro) + ", bucket_view_min_numel " +
                   std::to_string(min_view));
      DistributedDataParallel ddp(ch12_test::make_model(100), world(),
                                  {.bucket_cap_bytes = 256, .bucket_view_min_numel = min_view});
      train_and_compare(ddp, micro, /*in_buckets=*/true, min_view);
    }
  }
  EXPECT_TT_ERROR(
      DistributedDataParallel(ch12_test::make_model(100), world(), {.bucket_view_min_numel = -1}),
      "bucket_view_min_numel", "-1");
}

TEST(Ch12_3_DdpMpi, BucketsStartDuringBackwardThroughTheAutogradHook) {
  ProcessGroup& g = world();
  DistributedDataParallel ddp(ch12_test::make_model(100), g, {.bucket_cap_bytes = 256});
  const auto num_buckets = static_cast<int64_t>(ddp.reducer().buckets().size());
  ASSERT_GT(num_buckets, 2);
  const Data d = ch12_test::rows(ch12_test::global_batch(0), 0, 2);
  const auto before = std::chrono::steady_clock::now();
  ch12_test::forward_backward(ddp.module(), d);
  // Every parameter took part, so every bucket was started by the hooks during backward.
  EXPECT_EQ(ddp.reducer().num_reductions(), num_buckets);
  ddp.sync_gradients();
  EXPECT_EQ(ddp.reducer().reduced_order().size(), static_cast<std::size_t>(num_buckets));
  const auto& timeline = ddp.reducer().timeline();
  ASSERT_EQ(static_cast<int64_t>(timeline.size()), num_buckets);
  for (std::size_t b = 0; b < timeline.size(); ++b) {
    const BucketTiming& t = timeline[b];
    EXPECT_LE(before, t.ready) << "bucket " << b;
    EXPECT_LE(t.ready, t.started) << "bucket " << b;
    EXPECT_LE(t.started, t.finished) << "bucket " << b;
    EXPECT_LE(t.finished, ddp.reducer().finalize_returned()) << "bucket " << b;
    // Started during backward, before sync_gradients() was called.
    EXPECT_LT(t.started, ddp.reducer().finalize_called()) << "bucket " << b;
    if (b > 0) {
      EXPECT_LE(timeline[b - 1].started, t.started) << "buckets start in order";
    }
    // On the CPU there is no device timeline.
    EXPECT_EQ(t.device_begin, nullptr);
    EXPECT_EQ(t.device_end, nullptr);
  }
  EXPECT_EQ(ddp.reducer().backward_end_mark(), nullptr);
  // A second backward without sync_gradients() in between marks parameters twice.
  ch12_test::forward_backward(ddp.module(), d);
  EXPECT_TT_ERROR(ch12_test::forward_backward(ddp.module(), d), "marked twice", "sync_gradients");
  ddp.sync_gradients();
}

TEST(Ch12_Timeline, HiddenFractionIsThePartBeforeTheEndOfCompute) {
  EXPECT_DOUBLE_EQ(hidden_fraction(1.0, 3.0, 5.0), 1.0);   // ends before compute does
  EXPECT_DOUBLE_EQ(hidden_fraction(1.0, 3.0, 2.5), 0.75);  // 1.5 of 2 ms before the end
  EXPECT_DOUBLE_EQ(hidden_fraction(4.0, 6.0, 3.0), 0.0);   // starts after compute ended
  EXPECT_DOUBLE_EQ(hidden_fraction(2.0, 2.0, 2.0), 1.0);   // zero length, in time
  EXPECT_DOUBLE_EQ(hidden_fraction(2.0, 2.0, 1.0), 0.0);   // zero length, too late
  EXPECT_TT_ERROR(hidden_fraction(3.0, 1.0, 5.0), "hidden_fraction", "before it begins");
}

TEST(Ch12_3_Ddp, DefaultBucketsHoldASmallModelInOne) {
  ProcessGroup g(make_self_backend());
  DistributedDataParallel ddp(ch12_test::make_model(1), g);
  ASSERT_EQ(ddp.reducer().buckets().size(), 1u);
  EXPECT_EQ(ddp.reducer().buckets()[0].numel, ddp.module().num_parameters());
}

}  // namespace
}  // namespace tt::dist
