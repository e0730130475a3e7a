// Schedules as data: the AFAB and 1F1B orders equal the textbook tables (Narayanan et al. 2021,
// figures 3 and 4, 0-based), every generated set of schedules replays without deadlock, the
// replayed bubble equals (p-1)/(m+p-1), and misuse is refused with clear errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tt/error.h"
#include "tt/pipeline_schedule.h"

namespace {

using tt::pp::format_schedule;
using tt::pp::OpKind;
using tt::pp::PipelineShape;
using tt::pp::RankSchedule;
using tt::pp::ScheduleKind;

// The compute operations of every rank, as the textbook tables write them.
std::vector<std::string> table(ScheduleKind kind, int p, int m) {
  std::vector<std::string> rows;
  for (int r = 0; r < p; ++r) {
    rows.push_back(format_schedule(tt::pp::compute_order(kind, {p, m, 1}, r)));
  }
  return rows;
}

std::vector<RankSchedule> schedules(ScheduleKind kind, const PipelineShape& shape) {
  std::vector<RankSchedule> out;
  for (int r = 0; r < shape.stages; ++r) out.push_back(tt::pp::make_schedule(kind, shape, r));
  return out;
}

TEST(Ch14_1_OneFOneB, TextbookTablesTwoStages) {
  EXPECT_EQ(table(ScheduleKind::kOneFOneB, 2, 4),
            (std::vector<std::string>{"F0 F1 B0 F2 B1 F3 B2 B3", "F0 B0 F1 B1 F2 B2 F3 B3"}));
  EXPECT_EQ(table(ScheduleKind::kOneFOneB, 2, 8),
            (std::vector<std::string>{"F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7",
                                      "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"}));
}

TEST(Ch14_1_OneFOneB, TextbookTablesFourStages) {
  EXPECT_EQ(table(ScheduleKind::kOneFOneB, 4, 4),
            (std::vector<std::string>{"F0 F1 F2 F3 B0 B1 B2 B3", "F0 F1 F2 B0 F3 B1 B2 B3",
                                      "F0 F1 B0 F2 B1 F3 B2 B3", "F0 B0 F1 B1 F2 B2 F3 B3"}));
  EXPECT_EQ(table(ScheduleKind::kOneFOneB, 4, 8),
            (std::vector<std::string>{"F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7",
                                      "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7",
                                      "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7",
                                      "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"}));
}

TEST(Ch14_1_OneFOneB, FewerMicroBatchesThanStages) {
  // m < p: the warm-up is cut to m, so the first rank runs all forwards, then all backwards.
  EXPECT_EQ(table(ScheduleKind::kOneFOneB, 4, 2),
            (std::vector<std::string>{"F0 F1 B0 B1", "F0 F1 B0 B1", "F0 F1 B0 B1", "F0 B0 F1 B1"}));
  EXPECT_EQ(table(ScheduleKind::kOneFOneB, 1, 3), (std::vector<std::string>{"F0 B0 F1 B1 F2 B2"}));
}

TEST(Ch14_1_OneFOneB, TransfersBetweenTheOperations) {
  // Megatron's pairing: after a forward, its send and the receive of the next backward's
  // gradient in one batch; after a backward, its send and the next forward's receive.
  const std::vector<RankSchedule> s = schedules(ScheduleKind::kOneFOneB, {2, 4, 1});
  EXPECT_EQ(format_schedule(s[0]), "F0 sA0 F1 sA1 rG0 B0 F2 sA2 rG1 B1 F3 sA3 rG2 B2 rG3 B3");
  EXPECT_EQ(format_schedule(s[1]), "rA0 F0 B0 sG0 rA1 F1 B1 sG1 rA2 F2 B2 sG2 rA3 F3 B3 sG3");
}

TEST(Ch14_1_OneFOneB, PeakInFlightIsAtMostTheStages) {
  // What makes 1F1B's activation memory p/m of AFAB's: at most p - rank micro-batches between
  // their forward and their backward, against m for AFAB.
  for (int p : {2, 4}) {
    for (int m : {4, 8, 16}) {
      for (int r = 0; r < p; ++r) {
        int in_flight = 0, peak = 0;
        for (const auto& op : tt::pp::one_f_one_b_order(p, m, r)) {
          in_flight += op.kind == OpKind::kForward ? 1 : -1;
          peak = std::max(peak, in_flight);
        }
        EXPECT_EQ(peak, std::min(p - r, m)) << "p=" << p << " m=" << m << " rank " << r;
      }
    }
  }
}

TEST(Ch14_1_OneFOneB, ReplaysWithoutDeadlock) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 16; ++m) {
      const PipelineShape shape{p, m, 1};
      EXPECT_NO_THROW(tt::pp::check_schedules(schedules(ScheduleKind::kOneFOneB, shape), shape))
          << shape.str();
    }
  }
}

TEST(Ch14_Schedule, AfabTextbookTables) {
  EXPECT_EQ(table(ScheduleKind::kAfab, 2, 4),
            (std::vector<std::string>{"F0 F1 F2 F3 B0 B1 B2 B3", "F0 F1 F2 F3 B0 B1 B2 B3"}));
  const std::vector<std::string> four = table(ScheduleKind::kAfab, 4, 8);
  for (const std::string& row : four) {
    EXPECT_EQ(row, "F0 F1 F2 F3 F4 F5 F6 F7 B0 B1 B2 B3 B4 B5 B6 B7");
  }
  const std::vector<RankSchedule> s = schedules(ScheduleKind::kAfab, {2, 4, 1});
  EXPECT_EQ(format_schedule(s[0]), "F0 sA0 F1 sA1 F2 sA2 F3 sA3 rG0 B0 rG1 B1 rG2 B2 rG3 B3");
  EXPECT_EQ(format_schedule(s[1]), "rA0 F0 rA1 F1 rA2 F2 rA3 F3 B0 sG0 B1 sG1 B2 sG2 B3 sG3");
}

TEST(Ch14_Schedule, AfabAndInterleavedReplayWithoutDeadlock) {
  for (int p = 1; p <= 6; ++p) {
    for (int m = 1; m <= 12; ++m) {
      const PipelineShape shape{p, m, 1};
      EXPECT_NO_THROW(tt::pp::check_schedules(schedules(ScheduleKind::kAfab, shape), shape))
          << shape.str();
    }
  }
  for (int p = 2; p <= 4; ++p) {
    for (int v = 2; v <= 3; ++v) {
      for (int m = 2 * p; m <= 5 * p; m += p) {
        const PipelineShape shape{p, m, v};
        EXPECT_NO_THROW(
            tt::pp::check_schedules(schedules(ScheduleKind::kInterleaved, shape), shape))
            << shape.str();
      }
    }
  }
}

TEST(Ch14_Schedule, InterleavedVisitsChunksInGroupsOfP) {
  // Rank 0 of p = 2, v = 2, m = 4: micro-batches 0, 1 through chunk 0, then through chunk 1;
  // warm-up 2 (p - 1) + (v - 1) p = 4 forwards.
  EXPECT_EQ(format_schedule(tt::pp::compute_order(ScheduleKind::kInterleaved, {2, 4, 2}, 0)),
            "F0 F1 F0c1 F1c1 F2 B0c1 F3 B1c1 F2c1 B0 F3c1 B1 B2c1 B3c1 B2 B3");
}

TEST(Ch14_Schedule, ReplayFindsDeadlocksAndMissingInputs) {
  const PipelineShape shape{2, 2, 1};
  std::vector<RankSchedule> s = schedules(ScheduleKind::kOneFOneB, shape);
  // Rank 1 receives both activations before it computes, but rank 0 sends micro-batch 1 only
  // after micro-batch 0's gradient came back: each waits for the other.
  std::vector<RankSchedule> bad = s;
  bad[0] = {{OpKind::kForward, 0, 0},      {OpKind::kSendActivation, 0, 0},
            {OpKind::kRecvGradient, 0, 0}, {OpKind::kBackward, 0, 0},
            {OpKind::kForward, 1, 0},      {OpKind::kSendActivation, 1, 0},
            {OpKind::kRecvGradient, 1, 0}, {OpKind::kBackward, 1, 0}};
  bad[1] = {{OpKind::kRecvActivation, 0, 0}, {OpKind::kRecvActivation, 1, 0},
            {OpKind::kForward, 0, 0},        {OpKind::kBackward, 0, 0},
            {OpKind::kSendGradient, 0, 0},   {OpKind::kForward, 1, 0},
            {OpKind::kBackward, 1, 0},       {OpKind::kSendGradient, 1, 0}};
  try {
    tt::pp::check_schedules(bad, shape);
    ADD_FAILURE() << "a deadlocking pair of schedules was accepted";
  } catch (const tt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("deadlock"), std::string::npos) << e.what();
  }
  // A backward before its gradient arrived.
  std::vector<RankSchedule> early = s;
  early[0] = {{OpKind::kForward, 0, 0},      {OpKind::kSendActivation, 0, 0},
              {OpKind::kForward, 1, 0},      {OpKind::kSendActivation, 1, 0},
              {OpKind::kBackward, 0, 0},     {OpKind::kRecvGradient, 0, 0},
              {OpKind::kRecvGradient, 1, 0}, {OpKind::kBackward, 1, 0}};
  try {
    tt::pp::check_schedules(early, shape);
    ADD_FAILURE() << "a backward before its gradient was accepted";
  } catch (const tt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("B0 before receiving its output gradient"),
              std::string::npos)
        << e.what();
  }
}

TEST(Ch14_Schedule, MisuseIsRefused) {
  const auto message = [](auto f) {
    try {
      f();
    } catch (const tt::Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  // Interleaving needs m to be a multiple of p, and at least 2p.
  const std::string m = message([] {
    (void)tt::pp::make_schedule(ScheduleKind::kInterleaved, {4, 6, 2}, 0);
  });
  EXPECT_NE(m.find("multiple of the number of stages"), std::string::npos) << m;
  EXPECT_NE(m.find("m = 6"), std::string::npos) << m;
  EXPECT_THROW((void)tt::pp::make_schedule(ScheduleKind::kInterleaved, {4, 4, 2}, 0), tt::Error);
  // Chunks only for the interleaved schedule.
  EXPECT_THROW((void)tt::pp::make_schedule(ScheduleKind::kOneFOneB, {2, 4, 2}, 0), tt::Error);
  EXPECT_THROW((void)tt::pp::make_schedule(ScheduleKind::kAfab, {0, 4, 1}, 0), tt::Error);
  EXPECT_THROW((void)tt::pp::one_f_one_b_order(2, 4, 2), tt::Error);  // no rank 2 of 2
  const std::string k = message([] { (void)tt::pp::parse_schedule_kind("gpipe"); });
  EXPECT_NE(k.find("afab, 1f1b, interleaved"), std::string::npos) << k;
  EXPECT_EQ(tt::pp::parse_schedule_kind("1f1b"), ScheduleKind::kOneFOneB);
}

TEST(Ch14_4_Bubble, Formula) {
  EXPECT_DOUBLE_EQ(tt::pp::bubble_fraction(1, 8), 0.0);
  EXPECT_DOUBLE_EQ(tt::pp::bubble_fraction(2, 4), 1.0 / 5.0);
  EXPECT_DOUBLE_EQ(tt::pp::bubble_fraction(4, 8), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(tt::pp::bubble_fraction(4, 16), 3.0 / 19.0);
  EXPECT_DOUBLE_EQ(tt::pp::bubble_fraction(4, 8, 2), 3.0 / 19.0);  // v divides the bubble time
  EXPECT_THROW((void)tt::pp::bubble_fraction(0, 4), tt::Error);
  EXPECT_THROW((void)tt::pp::bubble_fraction(2, 0), tt::Error);
}

TEST(Ch14_4_Bubble, ReplayedSchedulesHaveTheTheoreticalBubble) {
  // With t_b = 2 t_f and free transfers, AFAB and 1F1B idle (p-1)/(m+p-1) of the step.
  for (ScheduleKind kind : {ScheduleKind::kAfab, ScheduleKind::kOneFOneB}) {
    for (int p : {2, 4}) {
      for (int m : {4, 8, 16}) {
        const PipelineShape shape{p, m, 1};
        const double replayed =
            tt::pp::simulated_bubble(tt::pp::check_schedules(schedules(kind, shape), shape));
        EXPECT_NEAR(replayed, tt::pp::bubble_fraction(p, m), 1e-12)
            << tt::pp::schedule_kind_name(kind) << " " << shape.str();
      }
    }
  }
}

TEST(Ch14_4_Bubble, InterleavingShrinksTheBubble) {
  for (int p : {2, 4}) {
    for (int m : {4, 8, 16}) {
      if (m < 2 * p) continue;  // interleaving needs m >= 2p
      const PipelineShape plain{p, m, 1}, inter{p, m, 2};
      const double b1 = tt::pp::simulated_bubble(
          tt::pp::check_schedules(schedules(ScheduleKind::kOneFOneB, plain), plain));
      // Each chunk is half the layers: half the time per operation.
      const double b2 = tt::pp::simulated_bubble(
          tt::pp::check_schedules(schedules(ScheduleKind::kInterleaved, inter), inter, 0.5, 1.0));
      EXPECT_LT(b2, b1) << inter.str();
      EXPECT_NEAR(b2, tt::pp::bubble_fraction(p, m, 2), 1e-12) << inter.str();
    }
  }
}

}  // namespace
