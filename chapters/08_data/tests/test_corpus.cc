// Chapter 08: reading a corpus as documents (fortune files, paragraphs), the input file list
// and the train/validation split rule; a BPE trained on a real fortune file round-trips it.
#include <filesystem>

#include "ch08_test_util.h"
#include "tt/corpus.h"
#include "tt/tokenizer.h"

namespace tt {
namespace {

using test08::TempDir;
using test08::write_bytes;
using Docs = std::vector<std::string>;

TEST(Ch08_Corpus, FortuneEntries) {
  const std::string text =
      "A bird in the hand.\n\t\t-- Proverb\n%\nSecond one\n%\n%\n   \n%\r\nlast, no newline";
  EXPECT_EQ(split_documents(text, DocumentFormat::kFortune),
            (Docs{"A bird in the hand.\n\t\t-- Proverb\n", "Second one\n", "last, no newline\n"}));
  EXPECT_EQ(split_documents(text, DocumentFormat::kAuto),
            split_documents(text, DocumentFormat::kFortune));
  // A '%' inside a line is text.
  EXPECT_EQ(split_documents("50% off\n%\n", DocumentFormat::kFortune), (Docs{"50% off\n"}));
}

TEST(Ch08_Corpus, ParagraphsAndFiles) {
  const std::string text = "para one\nstill one\n\n\n  \npara two\n";
  EXPECT_EQ(split_documents(text, DocumentFormat::kAuto),
            (Docs{"para one\nstill one\n", "para two\n"}));
  EXPECT_EQ(split_documents(text, DocumentFormat::kFile), (Docs{text}));
  EXPECT_EQ(split_documents(" \n\n", DocumentFormat::kFile), Docs{});
  EXPECT_EQ(parse_document_format("paragraph"), DocumentFormat::kParagraph);
  EXPECT_TT_ERROR(parse_document_format("xml"), "unknown format 'xml'");
}

TEST(Ch08_Corpus, InputFilesSkipFortuneIndexes) {
  TempDir dir;
  for (const char* name : {"zen", "art", "art.dat", ".hidden"}) write_bytes(dir.file(name), "x\n");
  std::filesystem::create_symlink(dir.file("art"), dir.file("art.u8"));
  std::filesystem::create_symlink(dir.file("art"), dir.file("link"));
  EXPECT_EQ(list_input_files(dir.str()), (Docs{dir.file("art"), dir.file("zen")}));
  // Symbolic links are not followed, but named for the caller (fortune's *.u8 links are index
  // files, skipped silently like *.dat).
  Docs links = {"earlier"};
  EXPECT_EQ(list_input_files(dir.str(), &links), (Docs{dir.file("art"), dir.file("zen")}));
  EXPECT_EQ(links, (Docs{"earlier", dir.file("link")}));
  std::filesystem::create_directories(dir.file("only_links"));
  std::filesystem::create_symlink(dir.file("art"), dir.file("only_links/l"));
  EXPECT_TT_ERROR(list_input_files(dir.file("only_links")), "no input files",
                  "symbolic links inside it are not followed", dir.file("only_links/l"));
  EXPECT_EQ(list_input_files(dir.file("zen")), (Docs{dir.file("zen")}));
  EXPECT_TT_ERROR(list_input_files(dir.file("nope")), "nope", "does not exist");
  TempDir empty_dir_holder;
  std::filesystem::create_directories(empty_dir_holder.file("empty"));
  EXPECT_TT_ERROR(list_input_files(empty_dir_holder.file("empty")), "no input files");
}

TEST(Ch08_Corpus, ValidationSplitRule) {
  int64_t num_val = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    const bool val = is_validation_document(i, 0.1);
    EXPECT_EQ(val, i % 10 == 9) << i;
    num_val += val ? 1 : 0;
  }
  EXPECT_EQ(num_val, 100);
  EXPECT_FALSE(is_validation_document(5, 0.0));
  EXPECT_TT_ERROR(is_validation_document(0, 1.0), "val_fraction");
}

TEST(Ch08_Corpus, FortunesRoundTrip) {
  const std::string dir = "/usr/share/games/fortunes";
  if (!std::filesystem::exists(std::filesystem::path(dir) / "fortunes")) {
    GTEST_SKIP() << "Debian's fortunes package is not installed (apt-get install fortunes)";
  }
  const auto files = list_input_files(dir);
  for (const auto& f : files) {
    EXPECT_NE(f.substr(f.size() - 4), ".dat") << f;
    EXPECT_FALSE(std::filesystem::is_symlink(f)) << f;
  }
  const Docs docs = split_documents(test08::read_bytes(dir + "/fortunes"), DocumentFormat::kAuto);
  ASSERT_GT(docs.size(), 100u);
  BpeTrainer trainer;
  for (const auto& d : docs) trainer.add_text(d);
  const Tokenizer tok = trainer.train(512);
  EXPECT_EQ(tok.vocab_size(), 512);
  int64_t bytes = 0;
  int64_t tokens = 0;
  for (const auto& d : docs) {
    const auto ids = tok.encode(d);
    ASSERT_EQ(tok.decode(ids), d);
    bytes += static_cast<int64_t>(d.size());
    tokens += static_cast<int64_t>(ids.size());
  }
  EXPECT_GT(bytes, 2 * tokens);  // even 256 merges compress English text 2x or better
}

}  // namespace
}  // namespace tt
