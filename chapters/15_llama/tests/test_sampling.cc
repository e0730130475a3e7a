// Tests of top-p filtering (exercise ch15.5) and sample_next.
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "ch15_test_util.h"
#include "tt/generate.h"

namespace tt {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> logits_of(const std::vector<double>& probs) {
  std::vector<double> l;
  for (double p : probs) l.push_back(std::log(p));
  return l;
}

TEST(Ch15_5_TopP, KeepsTheSmallestSetReachingP) {
  // probabilities 0.1, 0.5, 0.15, 0.25: sorted 0.5, 0.25, 0.15, 0.1.
  std::vector<double> l = logits_of({0.1, 0.5, 0.15, 0.25});
  llama::top_p_filter(l, 0.7);  // 0.5 + 0.25 = 0.75 >= 0.7
  EXPECT_EQ(l[0], -kInf);
  EXPECT_NEAR(l[1], std::log(0.5), 1e-12);
  EXPECT_EQ(l[2], -kInf);
  EXPECT_NEAR(l[3], std::log(0.25), 1e-12);
  l = logits_of({0.1, 0.5, 0.15, 0.25});
  llama::top_p_filter(l, 0.8);  // needs the third: 0.9
  EXPECT_EQ(l[0], -kInf);
  EXPECT_TRUE(std::isfinite(l[2]));
}

TEST(Ch15_5_TopP, AlwaysKeepsTheMostLikelyAndBreaksTiesByIndex) {
  std::vector<double> l = {1.0, 3.0, 3.0, 0.0};
  llama::top_p_filter(l, 1e-9);
  EXPECT_EQ(l, std::vector<double>({-kInf, 3.0, -kInf, -kInf}));
  l = {2.0, -kInf, 2.0};
  llama::top_p_filter(l, 0.5);  // exactly 0.5 with the first
  EXPECT_EQ(l, std::vector<double>({2.0, -kInf, -kInf}));
  l = {0.5, 0.25, -kInf};
  llama::top_p_filter(l, 1.0);
  EXPECT_EQ(l, std::vector<double>({0.5, 0.25, -kInf}));
}

TEST(Ch15_5_TopP, ErrorsAndSampledFrequencies) {
  std::vector<double> l = {1.0};
  EXPECT_TT_ERROR(llama::top_p_filter(l, 0.0), "top_p");
  EXPECT_TT_ERROR(llama::top_p_filter(l, 1.5), "top_p");
  l = {-kInf, -kInf};
  EXPECT_TT_ERROR(llama::top_p_filter(l, 0.5), "no finite logit");
  // sample_next with top_p 0.7 over {0.1, 0.5, 0.15, 0.25}: only tokens 1 and 3, as 2 : 1.
  const Tensor logits = from_vector(logits_of({0.1, 0.5, 0.15, 0.25}), {4});
  Generator gen(3);
  std::map<int64_t, int> count;
  for (int i = 0; i < 3000; ++i) ++count[llama::sample_next(logits, {1.0, 0, 0.7}, gen)];
  EXPECT_EQ(count[0] + count[2], 0);
  EXPECT_NEAR(static_cast<double>(count[1]) / 3000, 2.0 / 3, 0.04);
  EXPECT_EQ(llama::sample_next(logits, {0.0, 0, 0.5}, gen), 1);  // greedy
  EXPECT_TT_ERROR(llama::sample_next(logits, {1.0, 0, 0.0}, gen), "top_p");
}

}  // namespace
}  // namespace tt
