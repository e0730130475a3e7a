// tt_prepare_data: text -> tokenizer -> train/val token shards (llm.c's format).
//
//   tt_prepare_data [--input PATH]... [--out DIR] [--format auto|fortune|paragraph|file]
//                   [--vocab-size N | --tokenizer FILE | --gpt2-vocab [DIR]]
//                   [--val-fraction F] [--shard-tokens N] [--name NAME]
//
// Defaults: --input /usr/share/games/fortunes (Debian's `fortunes`), --out data/fortunes,
// --vocab-size 4096, --val-fraction 0.1, --shard-tokens 100000000. --gpt2-vocab without DIR
// uses GPT-2's vocabulary committed in reference_data/gpt2_vocab/ ($TT_GPT2_VOCAB_DIR
// overrides it; see tt::gpt2_vocab_dir()).
// Writes DIR/tokenizer.ttbpe and DIR/NAME_{train,val}_NNNNNN.bin. Every document is preceded
// by <|endoftext|> (as in llm.c). Document i is a validation document when
// floor((i+1)*F) > floor(i*F) (every 10th document for F = 0.1); a trained tokenizer only sees
// the training documents.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "tt/corpus.h"
#include "tt/error.h"
#include "tt/shards.h"
#include "tt/tokenizer.h"

namespace {

struct Options {
  std::vector<std::string> inputs;
  std::string out = "data/fortunes";
  std::string format = "auto";
  int32_t vocab_size = 4096;
  std::string tokenizer_path;
  std::string gpt2_dir;
  double val_fraction = 0.1;
  int64_t shard_tokens = 100000000;
  std::string name;
};

[[noreturn]] void usage(int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: tt_prepare_data [--input PATH]... [--out DIR] "
               "[--format auto|fortune|paragraph|file]\n"
               "                       [--vocab-size N | --tokenizer FILE | --gpt2-vocab [DIR]]\n"
               "                       [--val-fraction F] [--shard-tokens N] [--name NAME]\n"
               "Text file(s) or directories -> DIR/tokenizer.ttbpe + DIR/NAME_{train,val}_*.bin\n"
               "(defaults: --input /usr/share/games/fortunes --out data/fortunes "
               "--vocab-size 4096 --val-fraction 0.1;\n"
               " --gpt2-vocab without DIR: %s)\n",
               tt::gpt2_vocab_dir().c_str());
  std::exit(code);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") usage(0);
    if (arg == "--gpt2-vocab" && (i + 1 >= argc || std::string(argv[i + 1]).starts_with("--"))) {
      o.gpt2_dir = tt::gpt2_vocab_dir();  // no DIR: GPT-2's vocabulary of this repository
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "tt_prepare_data: %s needs a value\n", arg.c_str());
      usage(2);
    }
    const std::string value = argv[++i];
    if (arg == "--input") {
      o.inputs.push_back(value);
    } else if (arg == "--out") {
      o.out = value;
    } else if (arg == "--format") {
      o.format = value;
    } else if (arg == "--vocab-size") {
      o.vocab_size = std::stoi(value);
    } else if (arg == "--tokenizer") {
      o.tokenizer_path = value;
    } else if (arg == "--gpt2-vocab") {
      o.gpt2_dir = value;
    } else if (arg == "--val-fraction") {
      o.val_fraction = std::stod(value);
    } else if (arg == "--shard-tokens") {
      o.shard_tokens = std::stoll(value);
    } else if (arg == "--name") {
      o.name = value;
    } else {
      std::fprintf(stderr, "tt_prepare_data: unknown option %s\n", arg.c_str());
      usage(2);
    }
  }
  if (o.inputs.empty()) o.inputs.push_back("/usr/share/games/fortunes");
  if (o.name.empty()) {
    std::filesystem::path p(o.inputs.front());
    o.name = p.has_filename() ? p.filename().string() : p.parent_path().filename().string();
  }
  TT_CHECK(o.tokenizer_path.empty() || o.gpt2_dir.empty(),
           "tt_prepare_data: --tokenizer and --gpt2-vocab exclude each other");
  TT_CHECK(o.shard_tokens > 0, "tt_prepare_data: --shard-tokens must be positive");
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

// Collects tokens and writes a shard every `shard_tokens` tokens.
class ShardSink {
 public:
  ShardSink(std::string prefix, int64_t shard_tokens, int64_t vocab_size)
      : prefix_(std::move(prefix)), shard_tokens_(shard_tokens), vocab_size_(vocab_size) {}
  void append(const std::vector<int32_t>& tokens) {
    buffer_.insert(buffer_.end(), tokens.begin(), tokens.end());
    while (static_cast<int64_t>(buffer_.size()) >= shard_tokens_) flush(shard_tokens_);
  }
  void finish() {
    if (!buffer_.empty() || paths_.empty()) flush(static_cast<int64_t>(buffer_.size()));
  }
  const std::vector<std::string>& paths() const { return paths_; }
  int64_t total() const { return total_; }

 private:
  void flush(int64_t n) {
    char suffix[32];
    std::snprintf(suffix, sizeof suffix, "_%06zu.bin", paths_.size());
    const std::string path = prefix_ + suffix;
    tt::write_shard(path, std::span<const int32_t>(buffer_.data(), static_cast<std::size_t>(n)),
                    vocab_size_);
    buffer_.erase(buffer_.begin(), buffer_.begin() + n);
    paths_.push_back(path);
    total_ += n;
  }
  std::string prefix_;
  int64_t shard_tokens_;
  int64_t vocab_size_;
  std::vector<int32_t> buffer_;
  std::vector<std::string> paths_;
  int64_t total_ = 0;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TT_CHECK(in.good(), "tt_prepare_data: cannot open '", path, "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int run(const Options& o) {
  const auto t_start = std::chrono::steady_clock::now();
  // 1. Documents, in corpus order (files in name order, documents in file order).
  const tt::DocumentFormat format = tt::parse_document_format(o.format);
  std::vector<std::string> docs;
  int64_t bytes = 0;
  int64_t num_files = 0;
  for (const std::string& input : o.inputs) {
    for (const std::string& file : tt::list_input_files(input)) {
      const std::string text = read_text(file);
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
  std::filesystem::create_directories(o.out);
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
  const std::string tok_path = o.out + "/tokenizer.ttbpe";
  tok.save(tok_path);
  std::fprintf(stderr, "tokenizer: %d ids (%zu merges), saved to %s (%.2f s)\n", tok.vocab_size(),
               tok.merges().size(), tok_path.c_str(), seconds_since(t0));

  // 3. Encode: <|endoftext|> before every document, then shards.
  t0 = std::chrono::steady_clock::now();
  const int32_t eot = tok.eot_id();
  ShardSink train(o.out + "/" + o.name + "_train", o.shard_tokens, tok.vocab_size());
  ShardSink val(o.out + "/" + o.name + "_val", o.shard_tokens, tok.vocab_size());
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
  for (const auto* sink : {&train, &val}) {
    for (const std::string& p : sink->paths()) std::printf("%s\n", p.c_str());
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
