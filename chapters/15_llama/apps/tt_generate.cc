// tt_generate: text generation (token ids) from a LLaMA-family model with the KV cache of
// chapter 15, printing the time to first token and the decode tokens/s.
//
//   tt_generate --model DIR            a directory saved by transformers' save_pretrained
//                                      (config.json + model.safetensors) or by --save
//   tt_generate --random tiny|tinyllama-1.1b [--seed-weights N]
//                                      random weights of that shape (timing without a download)
//   tt_generate --gpt2 FILE            a GPT-2 in llm.c's format (chapter 09), with the same cache
//   options: --prompt "1,2,3;4,5"      one row per ';' (token ids; rows may differ in length)
//            --max-new N --temperature T --top-k K --top-p P --seed S --stop "2,3"
//            --device auto|cpu|cuda --cuda-graph (decode steps replayed as a CUDA graph)
//   timing (each a comma-separated list; every combination runs, in this order):
//            --dtype f32,bf16 (bf16: the LLaMA's parameters rounded to bfloat16, CUDA inference;
//            the model is converted in place between dtypes)
//            --prompt-len N (rows of N seeded random ids instead of --prompt)
//            --batch 1,8,32 (that many rows: of --prompt-len ids, or copies of --prompt's first)
//            --modes eager,graph (graph: as --cuda-graph)
//            --gemv step,on,off (bf16 at batch 1: step = the whole decode step in one launch,
//            llama_decode_step, the default, for caches of up to 1,024 positions (longer ones run
//            as on); on = the fused decode GEMV launch by launch; off = RMSNorm/SwiGLU kernels +
//            cuBLASLt; batches take cuBLASLt in every case)
//            --profile (after each eager combination: chapter 10's per-op profile of one decode
//            step, each kernel timed with CUDA events)
//            --runs N (generate N times, report the last: the first warms up cuBLASLt and the
//            allocator) --copy-bandwidth (time a 1 GiB device-to-device copy) --json (one JSON
//            line of the numbers: tokens/s, TTFT, bytes read per decode step, effective GB/s)
//            --save DIR (writes the model, and DIR/input_ids.npy and
//            DIR/logits.npy of the prompt's first row, for reference_data/check_llama_hf_load.py)
//
// There is no tokenizer here: LLaMA checkpoints ship SentencePiece or tiktoken vocabularies,
// which this project does not implement; prompts and outputs are token ids.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tt/autograd.h"
#include "tt/cli.h"
#include "tt/error.h"
#include "tt/generate.h"
#include "tt/npy_tensor.h"
#include "tt/profiler.h"
#include "tt/train_setup.h"

namespace {

using namespace tt;

std::vector<int64_t> parse_ids(const std::string& text, const char* what) {
  std::vector<int64_t> ids;
  for (const std::string& item : split_list(text)) {
    try {
      std::size_t used = 0;
      ids.push_back(std::stoll(item, &used));
      TT_CHECK(used == item.size(), "trailing characters");
    } catch (const std::exception&) {
      TT_THROW("tt_generate: ", what, " '", text, "' holds '", item, "', not a token id");
    }
  }
  return ids;
}

/// Seconds of `f` on `device` (waits for the device before and after).
template <typename F>
double timed(Device device, F&& f) {
  auto sync = [&] {
    if (device.is_cuda()) (void)zeros({1}, {DType::kFloat32, device}).to(Device::cpu());
  };
  sync();
  const auto t0 = std::chrono::steady_clock::now();
  f();
  sync();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// GB/s (1e9 bytes) of copying 1 GiB within `device`, counting the bytes read and written (as
/// nvbandwidth and cudaMemcpy benchmarks do): the best of 10 copies after one warm-up.
double copy_bandwidth(Device device) {
  const int64_t n = int64_t{1} << 28;  // float32: 1 GiB
  const Tensor src = zeros({n}, {DType::kFloat32, device}),
               dst = empty({n}, {DType::kFloat32, device});
  dst.copy_(src);
  double best = 1e30;
  for (int i = 0; i < 10; ++i) best = std::min(best, timed(device, [&] { dst.copy_(src); }));
  return 2.0 * 4.0 * static_cast<double>(n) / best / 1e9;
}

llama::LlamaConfig preset(const std::string& name) {
  llama::LlamaConfig c;
  if (name == "tiny") {
    c.vocab_size = 512, c.dim = 128, c.n_layers = 4, c.n_heads = 4, c.n_kv_heads = 2,
    c.ffn_dim = 352, c.max_seq_len = 1024;
  } else if (name == "tinyllama-1.1b") {  // TinyLlama-1.1B's shape
    c.vocab_size = 32000, c.dim = 2048, c.n_layers = 22, c.n_heads = 32, c.n_kv_heads = 4,
    c.ffn_dim = 5632, c.max_seq_len = 2048, c.norm_eps = 1e-5;
  } else {
    TT_THROW("tt_generate: --random '", name, "' is not one of tiny, tinyllama-1.1b");
  }
  return c;
}

/// Prints the tokens (two rows at most with `copy_gbps` >= 0, which also asks for the JSON
/// line), the time to first token, the decode rate and, for a LLaMA, the bytes a decode step
/// reads: every parameter once (the embedding table only its B rows unless it is also the head)
/// and every row's cached keys and values of all layers (row b's step i attends len_b + i + 1
/// positions), over the decode time: the effective bandwidth. `decode`: the --gemv setting
/// (step, on or off; "off" for float32).
void report(const llama::GenerateResult& r, const std::vector<std::vector<int64_t>>& prompts,
            const llama::Llama* model, double copy_gbps, const std::string& dtype, bool cuda_graph,
            const std::string& decode, int64_t max_new) {
  const bool json = copy_gbps >= 0;
  for (std::size_t b = 0; b < r.tokens.size() && (!json || b < 2); ++b) {
    std::printf("row %zu:", b);
    for (int64_t id : r.tokens[b]) std::printf(" %lld", static_cast<long long>(id));
    std::printf("\n");
  }
  std::printf("time to first token: %.2f ms (prefill of %zu row(s))\n", 1e3 * r.prefill_seconds,
              prompts.size());
  const double step_ms =
      r.decode_steps > 0 ? 1e3 * r.decode_seconds / static_cast<double>(r.decode_steps) : 0.0;
  std::printf("decode: %lld steps, %.2f ms/step, %.1f tokens/s\n",
              static_cast<long long>(r.decode_steps), step_ms, r.decode_tokens_per_second());
  double weight_bytes = 0, kv_bytes = 0;
  const auto B = static_cast<int64_t>(prompts.size());
  if (model) {
    const llama::LlamaConfig& c = model->config();
    const double elem = static_cast<double>(dtype_size(model->dtype()));
    weight_bytes = elem * static_cast<double>(model->num_parameters());
    if (!c.tie_embeddings) weight_bytes -= elem * static_cast<double>((c.vocab_size - B) * c.dim);
    const auto S = static_cast<double>(r.decode_steps);
    for (int64_t b = 0; b < B; ++b) {
      const auto len = static_cast<double>(prompts[b].size());
      kv_bytes += 2.0 * static_cast<double>(c.n_layers * c.n_kv_heads * c.head_dim()) * elem *
                  (S * (len + 1) + S * (S - 1) / 2);  // the sum over steps i of len + i + 1
    }
  }
  const double kv_step = r.decode_steps > 0 ? kv_bytes / static_cast<double>(r.decode_steps) : 0;
  const double step_bytes = r.decode_steps > 0 ? weight_bytes + kv_step : 0;
  const double gbps = step_ms > 0 ? step_bytes / (1e-3 * step_ms) / 1e9 : 0;
  if (model) {
    std::printf(
        "decode reads %.1f MB per step (weights %.1f MB, KV cache %.1f MB on average): %.0f GB/s "
        "effective\n",
        step_bytes / 1e6, weight_bytes / 1e6, kv_step / 1e6, gbps);
  }
  if (json) {
    std::printf(
        "{\"impl\": \"tt\", \"dtype\": \"%s\", \"batch\": %lld, \"prompt_len\": %zu, "
        "\"new_tokens\": %lld, \"cuda_graph\": %s, \"gemv\": %s, \"decode\": \"%s\", "
        "\"ttft_ms\": %.3f, "
        "\"decode_ms_per_step\": "
        "%.4f, \"tokens_per_s\": %.2f, \"bytes_per_step\": %.0f, \"effective_gbps\": %.1f, "
        "\"copy_gbps\": %.1f}\n",
        dtype.c_str(), static_cast<long long>(B), prompts.at(0).size(),
        static_cast<long long>(max_new), cuda_graph ? "true" : "false",
        decode != "off" ? "true" : "false", decode.c_str(), 1e3 * r.prefill_seconds, step_ms,
        r.decode_tokens_per_second(), step_bytes, gbps, copy_gbps);
  }
}

/// Prints chapter 10's per-op profile of one eager decode step of `model` after a prefill of
/// `prompts` (right-padded) and one warm-up step: every dispatched kernel timed by CUDA events.
void profile_decode_step(llama::Llama& model, const std::vector<std::vector<int64_t>>& prompts,
                         Device device) {
  autograd::NoGradGuard no_grad;
  const auto B = static_cast<int64_t>(prompts.size());
  int64_t P = 0;
  for (const auto& p : prompts) P = std::max(P, static_cast<int64_t>(p.size()));
  llama::KVCache cache = model.make_cache(B, P + 2);
  std::vector<int64_t> ids(static_cast<std::size_t>(B * P), 0);
  for (int64_t b = 0; b < B; ++b)
    std::copy(prompts[b].begin(), prompts[b].end(), ids.begin() + b * P);
  (void)model.forward_cached(from_vector(ids, {B, P}).to(device), cache,
                             std::vector<int64_t>(static_cast<std::size_t>(B), 0));
  const Tensor next = ones({B, 1}, {DType::kInt64, device});
  (void)model.forward_cached(next, cache, std::vector<int64_t>(static_cast<std::size_t>(B), P));
  prof::Profiler profiler(device);
  {
    prof::ProfileScope scope(profiler);
    (void)model.forward_cached(next, cache,
                               std::vector<int64_t>(static_cast<std::size_t>(B), P + 1));
  }
  std::printf("%s", prof::profile_report(
                        profiler, prof::default_peaks(device, model.dtype() == DType::kBFloat16),
                        "one eager decode step")
                        .c_str());
}

int run(int argc, char** argv) {
  std::string model_dir, random, gpt2_file, prompt = "1", stop, device_name = "auto", save;
  std::string dtypes = "f32", batches = "1", prompt_lens = "0", modes, gemvs = "step";
  int64_t max_new = 64, top_k = 0, runs = 1;
  bool json = false, measure_copy = false, profile = false;
  double temperature = 0.0, top_p = 1.0;
  uint64_t seed = 1337, seed_weights = 1337;
  bool cuda_graph = false;
  ArgParser args(
      "tt_generate",
      "usage: tt_generate (--model DIR | --random tiny|tinyllama-1.1b | --gpt2 FILE) [--prompt "
      "\"1,2,3;4,5\"] [--max-new N] [--temperature T] [--top-k K] [--top-p P] [--seed "
      "S] [--stop \"2\"] [--device auto|cpu|cuda] [--save DIR] [--seed-weights N] [--cuda-graph] "
      "[--dtype f32,bf16] [--prompt-len N,...] [--batch B,...] [--modes eager,graph] "
      "[--gemv step,on,off] [--runs N] "
      "[--copy-bandwidth] [--json] [--profile]\n");
  args.option("--model", &model_dir)
      .option("--random", &random)
      .option("--gpt2", &gpt2_file)
      .option("--prompt", &prompt)
      .option("--max-new", &max_new)
      .option("--temperature", &temperature)
      .option("--top-k", &top_k)
      .option("--top-p", &top_p)
      .option("--seed", &seed)
      .option("--seed-weights", &seed_weights)
      .option("--stop", &stop)
      .option("--device", &device_name)
      .option("--save", &save)
      .flag("--cuda-graph", &cuda_graph)
      .option("--dtype", &dtypes)
      .option("--prompt-len", &prompt_lens)
      .option("--batch", &batches)
      .option("--modes", &modes)
      .option("--gemv", &gemvs)
      .option("--runs", &runs)
      .flag("--copy-bandwidth", &measure_copy)
      .flag("--profile", &profile)
      .flag("--json", &json);
  args.parse(argc, argv);
  std::vector<DType> dtype_list;
  for (const std::string& d : split_list(dtypes)) {
    TT_CHECK(d == "f32" || d == "bf16", "tt_generate: --dtype '", d, "' is not one of f32, bf16");
    dtype_list.push_back(d == "bf16" ? DType::kBFloat16 : DType::kFloat32);
  }
  std::vector<bool> graph_modes;
  for (const std::string& m :
       split_list(modes.empty() ? (cuda_graph ? "graph" : "eager") : modes)) {
    TT_CHECK(m == "eager" || m == "graph", "tt_generate: --modes '", m,
             "' is not one of eager, graph");
    graph_modes.push_back(m == "graph");
  }
  std::vector<std::string> gemv_list;
  for (const std::string& g : split_list(gemvs)) {
    TT_CHECK(g == "step" || g == "on" || g == "off", "tt_generate: --gemv '", g,
             "' is not one of step, on, off");
    gemv_list.push_back(g);
  }
  TT_CHECK(!dtype_list.empty() && !graph_modes.empty() && !gemv_list.empty() && runs >= 1,
           "tt_generate: --dtype and --modes need a value and --runs must be >= 1");
  TT_CHECK(gpt2_file.empty() || dtype_list == std::vector<DType>{DType::kFloat32},
           "tt_generate: --dtype bf16 needs a LLaMA");
  TT_CHECK(model_dir.empty() + random.empty() + gpt2_file.empty() == 2,
           "tt_generate: give exactly one of --model, --random and --gpt2");
  TT_CHECK(gpt2_file.empty() || save.empty(), "tt_generate: --save needs a LLaMA model");
  const Device device = train::pick_device(device_name);
  std::unique_ptr<llama::Llama> model;
  std::unique_ptr<gpt2::GPT2> gpt2_model;
  llama::CachedModel cached;
  if (!gpt2_file.empty()) {
    gpt2_model = gpt2::load_llmc(gpt2_file);
    gpt2_model->to(device);
    std::printf("model: GPT-2 %s (%lld parameters) on %s\n", gpt2_model->config().str().c_str(),
                static_cast<long long>(gpt2_model->num_parameters()), device.str().c_str());
    cached = llama::cached_model(*gpt2_model);
  } else {
    const TensorOptions options{dtype_list[0], Device::cpu()};
    model = model_dir.empty()
                ? std::make_unique<llama::Llama>(preset(random), seed_weights, options)
                : llama::load_hf(model_dir, dtype_list[0]);
    model->to(device);
    std::printf("model: %s (%lld parameters) on %s\n", model->config().str().c_str(),
                static_cast<long long>(model->num_parameters()), device.str().c_str());
    cached = llama::cached_model(*model);
  }
  std::vector<std::vector<int64_t>> given;
  std::stringstream rows(prompt);
  std::string row;
  while (std::getline(rows, row, ';')) given.push_back(parse_ids(row, "--prompt"));
  if (!save.empty()) {
    llama::save_hf(*model, save);
    const Tensor ids = from_vector(given.at(0), {1, static_cast<int64_t>(given[0].size())});
    save_npy(save + "/input_ids.npy", ids);
    {
      autograd::NoGradGuard no_grad;
      save_npy(save + "/logits.npy", model->forward(ids.to(device)).to(Device::cpu()));
    }
    std::printf("saved %s (config.json, model.safetensors, input_ids.npy, logits.npy)\n",
                save.c_str());
  }
  llama::GenerateOptions opt;
  opt.max_new_tokens = max_new;
  opt.sampling = {temperature, top_k, top_p};
  opt.stop_tokens = parse_ids(stop, "--stop");
  const double copy_gbps = measure_copy ? copy_bandwidth(device) : 0;
  if (measure_copy) std::printf("device copy bandwidth: %.0f GB/s (read + write)\n", copy_gbps);
  // Every combination of dtype, prompt length, batch size and mode (the model converted in place
  // between dtypes: one random initialisation for all).
  const std::size_t combinations = dtype_list.size() * split_list(prompt_lens).size() *
                                   split_list(batches).size() * graph_modes.size() *
                                   gemv_list.size();
  for (const DType dtype : dtype_list) {
    if (model && model->dtype() != dtype) model->to_dtype(dtype);
    for (const int64_t prompt_len : parse_ids(prompt_lens, "--prompt-len")) {
      for (const int64_t batch : parse_ids(batches, "--batch")) {
        TT_CHECK(batch >= 1 && prompt_len >= 0, "tt_generate: --batch sizes must be >= 1 and ",
                 "--prompt-len >= 0, got ", batch, " and ", prompt_len);
        std::vector<std::vector<int64_t>> prompts = given;
        if (prompt_len > 0) {  // `batch` rows of seeded random ids
          Generator ids(seed + 1);
          prompts.assign(static_cast<std::size_t>(batch), {});
          for (auto& p : prompts) {
            for (int64_t i = 0; i < prompt_len; ++i) {
              p.push_back(static_cast<int64_t>(ids.next_uniform() *
                                               static_cast<double>(cached.vocab_size)));
            }
          }
        } else if (batch > 1) {  // `batch` copies of --prompt's first row
          prompts.assign(static_cast<std::size_t>(batch), given.at(0));
        }
        for (const bool graph : graph_modes) {
          // The decode GEMV exists for bfloat16 only: float32 runs once.
          for (std::size_t gi = 0; gi < (dtype == DType::kBFloat16 ? gemv_list.size() : 1); ++gi) {
            const std::string decode =
                dtype == DType::kBFloat16 ? gemv_list[gi] : std::string("off");
            const bool gemv = decode != "off";
            llama::set_decode_gemv(gemv);
            llama::set_decode_step(decode == "step");
            opt.cuda_graph = graph;
            llama::GenerateResult r;
            for (int64_t i = 0; i < runs; ++i) {
              Generator gen(seed);
              r = llama::generate(cached, prompts, opt, gen);
            }
            if (combinations > 1) {
              std::printf("%s, batch %lld, prompt %zu, %s%s:\n", dtype_name(dtype),
                          static_cast<long long>(batch), prompts.at(0).size(),
                          graph ? "CUDA graph" : "eager",
                          decode == "step" ? ", decode step in one launch"
                          : gemv           ? ", decode GEMV"
                                           : "");
            }
            report(r, prompts, model.get(), json ? copy_gbps : -1,
                   dtype == DType::kBFloat16 ? "bf16" : "f32", graph, decode, max_new);
            if (profile && model && !graph) profile_decode_step(*model, prompts, device);
          }
        }
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const tt::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
