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
//            --save DIR (writes the model, and DIR/input_ids.npy and
//            DIR/logits.npy of the prompt's first row, for reference_data/check_llama_hf_load.py)
//
// There is no tokenizer here: LLaMA checkpoints ship SentencePiece or tiktoken vocabularies,
// which this project does not implement; prompts and outputs are token ids.
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
#include "tt/train_setup.h"

namespace {

using namespace tt;

std::vector<int64_t> parse_ids(const std::string& text, const char* what) {
  std::vector<int64_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
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

int run(int argc, char** argv) {
  std::string model_dir, random, gpt2_file, prompt = "1", stop, device_name = "auto", save;
  int64_t max_new = 64, top_k = 0;
  double temperature = 0.0, top_p = 1.0;
  uint64_t seed = 1337, seed_weights = 1337;
  bool cuda_graph = false;
  ArgParser args(
      "tt_generate",
      "usage: tt_generate (--model DIR | --random tiny|tinyllama-1.1b | --gpt2 FILE) [--prompt "
      "\"1,2,3;4,5\"] [--max-new N] [--temperature T] [--top-k K] [--top-p P] [--seed "
      "S] [--stop \"2\"] [--device auto|cpu|cuda] [--save DIR] [--seed-weights N] [--cuda-graph]\n");
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
      .flag("--cuda-graph", &cuda_graph);
  args.parse(argc, argv);
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
    model = model_dir.empty() ? std::make_unique<llama::Llama>(preset(random), seed_weights)
                              : llama::load_hf(model_dir);
    model->to(device);
    std::printf("model: %s (%lld parameters) on %s\n", model->config().str().c_str(),
                static_cast<long long>(model->num_parameters()), device.str().c_str());
    cached = llama::cached_model(*model);
  }
  std::vector<std::vector<int64_t>> prompts;
  std::stringstream rows(prompt);
  std::string row;
  while (std::getline(rows, row, ';')) prompts.push_back(parse_ids(row, "--prompt"));
  if (!save.empty()) {
    llama::save_hf(*model, save);
    const Tensor ids = from_vector(prompts.at(0), {1, static_cast<int64_t>(prompts[0].size())});
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
  opt.cuda_graph = cuda_graph;
  Generator gen(seed);
  const llama::GenerateResult r = llama::generate(cached, prompts, opt, gen);
  for (std::size_t b = 0; b < r.tokens.size(); ++b) {
    std::printf("row %zu:", b);
    for (int64_t id : r.tokens[b]) std::printf(" %lld", static_cast<long long>(id));
    std::printf("\n");
  }
  std::printf("time to first token: %.2f ms (prefill of %zu row(s))\n", 1e3 * r.prefill_seconds,
              prompts.size());
  std::printf(
      "decode: %lld steps, %.2f ms/step, %.1f tokens/s\n", static_cast<long long>(r.decode_steps),
      r.decode_steps > 0 ? 1e3 * r.decode_seconds / static_cast<double>(r.decode_steps) : 0.0,
      r.decode_tokens_per_second());
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
