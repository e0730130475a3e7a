// Tests of common/'s program helpers: the command-line parser, the progress bar's ETA and
// text, the CSV writer, and duration formatting.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tt/cli.h"
#include "tt/csv.h"
#include "tt/progress.h"
#include "tt/temp_dir.h"
#include "tt/testing_common.h"
#include "tt/timer.h"

namespace tt {
namespace {

TEST(Common_Cli, ParsesOptionsFlagsAndLists) {
  std::string name = "x";
  int64_t steps = 1;
  int threads = 0;
  uint64_t seed = 0;
  double lr = 0;
  bool resume = false;
  std::vector<std::string> inputs;
  ArgParser p("prog", "usage\n");
  p.option("--name", &name).option("--steps", &steps).option("--threads", &threads);
  p.option("--seed", &seed).option("--lr", &lr).flag("--resume", &resume);
  p.option("--input", &inputs);
  EXPECT_TRUE(p.parse_or_throw({"--steps", "30", "--lr", "3e-4", "--resume", "--input", "a",
                                "--input", "b", "--seed", "18446744073709551615"}));
  EXPECT_EQ(name, "x");  // untouched default
  EXPECT_EQ(steps, 30);
  EXPECT_EQ(threads, 0);
  EXPECT_EQ(seed, 18446744073709551615ULL);
  EXPECT_DOUBLE_EQ(lr, 3e-4);
  EXPECT_TRUE(resume);
  EXPECT_EQ(inputs, (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(p.parse_or_throw({"--help"}));
}

TEST(Common_Cli, RejectsUnknownMissingAndMalformed) {
  int64_t steps = 0;
  ArgParser p("prog", "usage\n");
  p.option("--steps", &steps);
  EXPECT_TT_ERROR(p.parse_or_throw({"--step", "3"}), "prog", "unknown option '--step'");
  EXPECT_TT_ERROR(p.parse_or_throw({"--steps"}), "--steps needs a value");
  EXPECT_TT_ERROR(p.parse_or_throw({"--steps", "12x"}), "--steps expects a number", "12x");
  EXPECT_TT_ERROR(p.option("--steps", &steps), "registered twice");
}

TEST(Common_Cli, IntegersMustFitTheirType) {
  int vocab = 7;
  ArgParser p("prog", "usage\n");
  p.option("--vocab-size", &vocab);
  EXPECT_TT_ERROR(p.parse_or_throw({"--vocab-size", "4294967297"}), "--vocab-size 4294967297",
                  "out of range");
  EXPECT_TT_ERROR(p.parse_or_throw({"--vocab-size", "300abc"}), "expects a number", "300abc");
  EXPECT_TT_ERROR(p.parse_or_throw({"--vocab-size", "abc"}), "expects a number", "'abc'");
  EXPECT_EQ(vocab, 7);
  EXPECT_TRUE(p.parse_or_throw({"--vocab-size", "-2147483648"}));
  EXPECT_EQ(vocab, -2147483648LL);
}

TEST(Common_Cli, OptionalValueTakesTheImplicitOneWhenLeftOut) {
  std::string dir = "unset";
  int64_t n = 0;
  ArgParser p("prog", "usage\n");
  p.optional_value("--gpt2-vocab", &dir, "default/dir").option("--n", &n);
  EXPECT_TRUE(p.parse_or_throw({"--gpt2-vocab"}));
  EXPECT_EQ(dir, "default/dir");
  EXPECT_TRUE(p.parse_or_throw({"--gpt2-vocab", "--n", "3"}));
  EXPECT_EQ(dir, "default/dir");
  EXPECT_EQ(n, 3);
  EXPECT_TRUE(p.parse_or_throw({"--gpt2-vocab", "mine"}));
  EXPECT_EQ(dir, "mine");
}

TEST(Common_Cli, SplitListDropsEmptyItems) {
  EXPECT_EQ(split_list("1,8,32"), (std::vector<std::string>{"1", "8", "32"}));
  EXPECT_EQ(split_list(",a,,b,"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(split_list("x;y", ';'), (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(split_list("").empty());
}

TEST(Common_Progress, EtaAndText) {
  EXPECT_DOUBLE_EQ(ProgressBar::eta_seconds(25, 100, 10.0), 30.0);
  EXPECT_DOUBLE_EQ(ProgressBar::eta_seconds(100, 100, 10.0), 0.0);
  EXPECT_LT(ProgressBar::eta_seconds(0, 100, 1.0), 0.0);
  ProgressBar bar(200, "train", nullptr);
  const std::string line = bar.render(50, "loss 2.5", 10.0);
  EXPECT_NE(line.find("train ["), std::string::npos) << line;
  EXPECT_NE(line.find(" 25% 50/200"), std::string::npos) << line;
  EXPECT_NE(line.find("5.00 it/s"), std::string::npos) << line;
  EXPECT_NE(line.find("ETA 30s"), std::string::npos) << line;
  EXPECT_NE(line.find("loss 2.5"), std::string::npos) << line;
  EXPECT_EQ(format_duration(59.4), "59s");
  EXPECT_EQ(format_duration(187), "3m07s");
  EXPECT_EQ(format_duration(3720), "1h02m");
  EXPECT_EQ(format_duration(-1), "?");
}

TEST(Common_Progress, NonTerminalPrintsAtStartAndEveryTenPercent) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar(100, "p", f, 10);
    for (int i = 1; i <= 100; ++i) bar.update(i);
    bar.finish();
  }
  std::rewind(f);
  int lines = 0;
  for (int c; (c = std::fgetc(f)) != EOF;) lines += c == '\n';
  std::fclose(f);
  EXPECT_EQ(lines, 11);  // the first update, then 10%, 20%, ..., 100%
}

TEST(Common_Csv, WritesQuotesAndAppends) {
  const testing::TempDir dir;
  const std::filesystem::path path = dir.file("log.csv");
  {
    CsvWriter csv(path.string(), {"step", "note"});
    csv.row({"1", "plain"});
    csv.row({"2", "a,b \"q\""});
    EXPECT_TT_ERROR(csv.row({"3"}), "1 cells for 2 columns");
  }
  { CsvWriter(path.string(), {"step", "note"}, /*append=*/true).row({"3", CsvWriter::num(0.5)}); }
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "step,note\n1,plain\n2,\"a,b \"\"q\"\"\"\n3,0.5\n");
}

TEST(Common_Timer, MeasuresForward) {
  Timer t;
  EXPECT_GE(t.elapsed_s(), 0.0);
  EXPECT_GE(t.elapsed_ms(), t.elapsed_s());
}

}  // namespace
}  // namespace tt
