// tt_prepare_data: text -> tokenizer -> train/val token shards (llm.c's format).
//
//   tt_prepare_data [--input PATH]... [--out DIR] [--overwrite]
//                   [--format auto|fortune|paragraph|file]
//                   [--vocab-size N | --tokenizer FILE | --gpt2-vocab [DIR]]
//                   [--val-fraction F] [--shard-tokens N] [--name NAME]
//
// Defaults: --input /usr/share/games/fortunes (Debian's `fortunes`), --out data/fortunes,
// --vocab-size 4096, --val-fraction 0.1, --shard-tokens 100000000. --gpt2-vocab without DIR
// uses GPT-2's vocabulary committed in reference_data/gpt2_vocab/ ($TT_GPT2_VOCAB_DIR
// overrides it; see tt::gpt2_vocab_dir()). Numbers are parsed strictly (common/cli: "10k" is
// an error, not 10).
// Writes the shard set DIR (tt/shard_set.h): DIR/tokenizer.ttbpe, DIR/NAME_{train,val}_NNNNNN.bin
// and DIR/manifest.json (the tokenizer's hash and every shard with its token count). The set is
// written into a staging directory and published with one rename: an existing non-empty DIR is
// refused unless --overwrite, which replaces the whole set at once. Every document is preceded
// by <|endoftext|> (as in llm.c). Document i is a validation document when
// floor((i+1)*F) > floor(i*F) (every 10th document for F = 0.1); a trained tokenizer only sees
// the training documents. Symbolic links inside an input directory are not followed; each one
// skipped is named on stderr (give it as --input to read it).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "tt/cli.h"
#include "tt/corpus.h"
#include "tt/error.h"
#include "tt/file.h"
#include "tt/shard_set.h"
#include "tt/tokenizer.h"

namespace {

struct Options {
  std::vector<std::string> inputs;
  std::string out = "data/fortunes";
  bool overwrite = false;
  std::string format = "auto";
  int32_t vocab_size = 4096;
  std::string tokenizer_path;
  std::string gpt2_dir;
  double val_fraction = 0.1;
  int64_t shard_tokens = 100000000;
  std::string name;
};

std::string usage_text() {
  return "usage: tt_prepare_data [--input PATH]... [--out DIR] [--overwrite]\n"
         "                       [--format auto|fortune|paragraph|file]\n"
         "                       [--vocab-size N | --tokenizer FILE | --gpt2-vocab [DIR]]\n"
         "                       [--val-fraction F] [--shard-tokens N] [--name NAME]\n"
         "Text file(s) or directories -> the shard set DIR: DIR/tokenizer.ttbpe,\n"
         "DIR/NAME_{train,val}_*.bin and DIR/manifest.json (tokenizer hash, shard list).\n"
         "An existing non-empty DIR is refused unless --overwrite (replaces the whole set).\n"
         "(defaults: --input /usr/share/games/fortunes --out data/fortunes "
         "--vocab-size 4096 --val-fraction 0.1;\n"
         " --gpt2-vocab without DIR: " +
         tt::gpt2_vocab_dir() + ")\n";
}

Options parse(int argc, char** argv) {
  Options o;
  tt::ArgParser args("tt_prepare_data", usage_text());
  args.option("--input", &o.inputs).option("--out", &o.out).flag("--overwrite", &o.overwrite);
  args.option("--format", &o.format).option("--vocab-size", &o.vocab_size);
  args.option("--tokenizer", &o.tokenizer_path);
  args.optional_value("--gpt2-vocab", &o.gpt2_dir, tt::gpt2_vocab_dir());
  args.option("--val-fraction", &o.val_fraction).option("--shard-tokens", &o.shard_tokens);
  args.option("--name", &o.name);
  args.parse(argc, argv);
  if (o.inputs.empty()) o.inputs.push_back("/usr/share/games/fortunes");
  if (o.name.empty()) {
    std::filesystem::path p(o.inputs.front());
    o.name = p.has_filename() ? p.filename().string() : p.parent_path().filename().string();
  }
  TT_CHECK(o.tokenizer_path.empty() || o.gpt2_dir.empty(),
           "--tokenizer and --gpt2-vocab exclude each other");
  TT_CHECK(o.vocab_size >= 257,
           "--vocab-size must be at least 257 (256 bytes + <|endoftext|>), got ", o.vocab_size);
  TT_CHECK(o.shard_tokens > 0, "--shard-tokens must be positive, got ", o.shard_tokens);
  TT_CHECK(o.val_fraction >= 0.0 && o.val_fraction < 1.0, "--val-fraction must be in [0, 1), got ",
           o.val_fraction);
  (void)tt::parse_document_format(o.format);  // an unknown --format fails before any work
  return o;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Prints "label: done/total (pct%)" each time another 10% is done.
class Progress {
 public:
  explicit Progress(std::string label)
      : label_(std::move(label)), t0_(std::chrono::steady_clock::now()) {}
  void operator()(int64_t done, int64_t total) {
    const int64_t tenth = total > 0 ? done * 10 / total : 10;
    if (tenth > last_tenth_) {
      last_tenth_ = tenth;
      std::fprintf(stderr, "  %s: %lld/%lld (%lld%%, %.1f s)\n", label_.c_str(),
                   static_cast<long long>(done), static_cast<long long>(total),
                   static_cast<long long>(tenth * 10), seconds_since(t0_));
    }
  }

 private:
  std::string label_;
  std::chrono::steady_clock::time_point t0_;
  int64_t last_tenth_ = 0;
};

// Collects tokens and writes a shard of the set every `shard_tokens` tokens.
class ShardSink {
 public:
  ShardSink(tt::ShardSetWriter& set, std::string name, std::string split, int64_t shard_tokens)
      : set_(set), name_(std::move(name)), split_(std::move(split)), shard_tokens_(shard_tokens) {}
  void append(const std::vector<int32_t>& tokens) {
    buffer_.insert(buffer_.end(), tokens.begin(), tokens.end());
    while (static_cast<int64_t>(buffer_.size()) >= shard_tokens_) flush(shard_tokens_);
  }
  void finish() {
    if (!buffer_.empty() || files_.empty()) flush(static_cast<int64_t>(buffer_.size()));
  }
  const std::vector<std::string>& files() const { return files_; }
  int64_t total() const { return total_; }

 private:
  void flush(int64_t n) {
    char suffix[32];
    std::snprintf(suffix, sizeof suffix, "_%06zu.bin", files_.size());
    const std::string file = name_ + "_" + split_ + suffix;
    set_.write_shard(file, split_,
                     std::span<const int32_t>(buffer_.data(), static_cast<std::size_t>(n)));
    buffer_.erase(buffer_.begin(), buffer_.begin() + n);
    files_.push_back(file);
    total_ += n;
  }
  tt::ShardSetWriter& set_;
  std::string name_, split_;
  int64_t shard_tokens_;
  std::vector<int32_t> buffer_;
  std::vector<std::string> files_;
  int64_t total_ = 0;
};

int run(const Options& o) {
  const auto t_start = std::chrono::steady_clock::now();
  // 0. The set is written into a staging directory; an existing set is refused here, before
  // any work, unless --overwrite.
  tt::ShardSetWriter set(o.out, o.overwrite);
  // 1. Documents, in corpus order (files in name order, documents in file order).
  const tt::DocumentFormat format = tt::parse_document_format(o.format);
  std::vector<std::string> docs;
  int64_t bytes = 0;
  int64_t num_files = 0;
  for (const std::string& input : o.inputs) {
    std::vector<std::string> links;
    const std::vector<std::string> files = tt::list_input_files(input, &links);
    for (const std::string& link : links) {
      std::error_code ec;
      std::fprintf(stderr,
                   "skipped symbolic link %s -> %s (links inside an input directory are not "
                   "followed; give it as --input to read it)\n",
                   link.c_str(), std::filesystem::read_symlink(link, ec).c_str());
    }
    for (const std::string& file : files) {
      const std::string text = tt::read_whole_file(file, "input");
      bytes += static_cast<int64_t>(text.size());
      ++num_files;
      for (std::string& d : tt::split_documents(text, format)) docs.push_back(std::move(d));
    }
  }
  TT_CHECK(!docs.empty(), "tt_prepare_data: the input holds no documents");
  std::vector<bool> is_val(docs.size());
  int64_t num_val = 0;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    is_val[i] = tt::is_validation_document(static_cast<int64_t>(i), o.val_fraction);
    num_val += is_val[i] ? 1 : 0;
  }
  std::fprintf(stderr, "read %lld files, %.2f MB, %zu documents (%lld train, %lld val) in %.2f s\n",
               static_cast<long long>(num_files), static_cast<double>(bytes) / 1e6, docs.size(),
               static_cast<long long>(docs.size()) - num_val, static_cast<long long>(num_val),
               seconds_since(t_start));

  // 2. The tokenizer: loaded, GPT-2's, or trained on the training documents.
  auto t0 = std::chrono::steady_clock::now();
  auto make_tokenizer = [&]() -> tt::Tokenizer {
    if (!o.tokenizer_path.empty()) return tt::Tokenizer::load(o.tokenizer_path);
    if (!o.gpt2_dir.empty()) {
      return tt::Tokenizer::load_gpt2_dir(o.gpt2_dir);
    }
    tt::BpeTrainer trainer;
    for (std::size_t i = 0; i < docs.size(); ++i) {
      if (!is_val[i]) trainer.add_text(docs[i]);
    }
    std::fprintf(stderr,
                 "pre-tokenized: %lld pre-tokens, %lld distinct (%.2f s); training %d ids\n",
                 static_cast<long long>(trainer.num_pretokens()),
                 static_cast<long long>(trainer.num_words()), seconds_since(t0), o.vocab_size);
    Progress progress("merges");
    return trainer.train(o.vocab_size, std::ref(progress));
  };
  const tt::Tokenizer tok = make_tokenizer();
  set.set_tokenizer(tok);
  std::fprintf(stderr, "tokenizer: %d ids (%zu merges, fnv1a64 %s) (%.2f s)\n", tok.vocab_size(),
               tok.merges().size(), set.manifest().tokenizer_fnv1a64.c_str(), seconds_since(t0));

  // 3. Encode: <|endoftext|> before every document, then shards.
  t0 = std::chrono::steady_clock::now();
  const int32_t eot = tok.eot_id();
  ShardSink train(set, o.name, "train", o.shard_tokens);
  ShardSink val(set, o.name, "val", o.shard_tokens);
  Progress progress("documents encoded");
  std::vector<int32_t> tokens;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    tokens.assign(1, eot);
    tok.encode_append(docs[i], tokens);
    (is_val[i] ? val : train).append(tokens);
    progress(static_cast<int64_t>(i + 1), static_cast<int64_t>(docs.size()));
  }
  train.finish();
  val.finish();
  const double secs = seconds_since(t0);
  std::fprintf(stderr, "encoded %.2f MB into %lld tokens in %.2f s (%.2f MB/s, %.2f bytes/token)\n",
               static_cast<double>(bytes) / 1e6,
               static_cast<long long>(train.total() + val.total()), secs,
               static_cast<double>(bytes) / 1e6 / secs,
               static_cast<double>(bytes) / static_cast<double>(train.total() + val.total()));
  set.commit();
  std::fprintf(stderr, "shard set: %s (%s lists the tokenizer and %zu shards)\n", set.out().c_str(),
               tt::shard_set::kManifestFile, set.manifest().shards.size());
  for (const auto* sink : {&train, &val}) {
    for (const std::string& f : sink->files()) std::printf("%s/%s\n", set.out().c_str(), f.c_str());
  }
  std::fprintf(stderr, "train: %lld tokens, val: %lld tokens, total %.2f s\n",
               static_cast<long long>(train.total()), static_cast<long long>(val.total()),
               seconds_since(t_start));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tt_prepare_data: %s\n", e.what());
    return 1;
  }
}
