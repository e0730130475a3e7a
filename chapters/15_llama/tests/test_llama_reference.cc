// Chapter 15 against Hugging Face transformers: a tiny random-init LlamaForCausalLM (GQA, untied
// head) saved by save_pretrained (reference_data/ch15, written by
// reference_data/gen_llama_reference.py) loads here and gives transformers' logits (1e-4 max
// abs, fp32), loss, gradients (tolerance in the MANIFEST) and 64 greedy tokens, on the CPU and
// on CUDA. Skipped, with a message naming the script, while the files are not committed.
// TT_LLAMA_REFERENCE=DIR runs the same tests on another directory written by the script, e.g.
// the ~125M-parameter shape of `gen_llama_reference.py --preset 100m` on a GPU machine
// (.devrun/ch15_ref.sh); its MANIFEST names the files "ch15/<file>" too.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "ch15_test_util.h"
#include "tt/generate.h"
#include "tt/npy_tensor.h"
#include "tt/reference_data.h"

namespace tt {
namespace {

/// $TT_LLAMA_REFERENCE, or "" when it is not set.
std::string reference_from_env() {
  const char* dir = std::getenv("TT_LLAMA_REFERENCE");
  return dir != nullptr && *dir != '\0' ? std::filesystem::absolute(dir).string() : "";
}

/// reference_data/ch15, or $TT_LLAMA_REFERENCE when set (absolute).
std::string reference_dir() {
  const std::string env = reference_from_env();
  return env.empty() ? testing::reference_path("ch15") : env;
}

const std::string& manifest_path() {
  static const std::string path = reference_dir() + "/MANIFEST";
  return path;
}

#define TT_SKIP_WITHOUT_LLAMA_REFERENCE()                                                        \
  do {                                                                                           \
    if (!std::filesystem::exists(manifest_path())) {                                             \
      if (!reference_from_env().empty()) FAIL() << "TT_LLAMA_REFERENCE: no " << manifest_path(); \
      GTEST_SKIP() << "reference_data/ch15 is not there yet: run "                               \
                      "reference_data/gen_llama_reference.py (torch + transformers) and commit " \
                      "its output";                                                              \
    }                                                                                            \
  } while (0)

const reference::ManifestEntry& entry(const std::string& file) {
  const auto& m = reference::manifest(manifest_path().c_str());
  const auto it = m.find("ch15/" + file);
  TT_CHECK(it != m.end(), "ch15/MANIFEST has no line for ", file);
  return it->second;
}

/// max |a - b| over the elements (same shape), for the log.
double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.contiguous().to(DType::kFloat64).to_vector<double>();
  const std::vector<double> y = b.contiguous().to(DType::kFloat64).to_vector<double>();
  double m = 0;
  for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

std::string path(const std::string& file) {
  return reference_dir() + "/" + file;
}

/// The reference model on `device`, its inputs, and the expected tensors.
struct Reference {
  std::unique_ptr<llama::Llama> model;
  Tensor ids, targets, logits, loss;

  explicit Reference(Device device) {
    model = llama::load_hf(reference_dir());
    model->to(device);
    ids = load_npy(path("input_ids.npy")).to(device);
    targets = load_npy(path("targets.npy")).to(device);
    logits = load_npy(path("logits.npy"));
    loss = load_npy(path("loss.npy"));
  }
};

TEST(Ch15_Reference, FilesMatchTheirManifest) {
  TT_SKIP_WITHOUT_LLAMA_REFERENCE();
  for (const char* f : {"config.json", "model.safetensors", "input_ids.npy", "targets.npy",
                        "logits.npy", "loss.npy", "grads.safetensors", "greedy.npy"}) {
    EXPECT_EQ(reference::sha256_hex(reference::read_file(path(f))), entry(f).sha256) << f;
  }
}

void check_logits_loss_grads(Device device) {
  Reference r(device);
  // Grouped-query attention (tiny: 4 query heads, 2 key/value heads; 100m: 12 and 4).
  EXPECT_LT(r.model->config().n_kv_heads, r.model->config().n_heads);
  EXPECT_FALSE(r.model->config().tie_embeddings);
  const Tensor logits = r.model->forward(r.ids);
  EXPECT_TENSOR_NEAR(logits.to(Device::cpu()), r.logits, entry("logits.npy").atol, 0);
  std::printf("[ %s ] logits: max abs err %.3g vs transformers\n", device.str().c_str(),
              max_abs_diff(logits.to(Device::cpu()), r.logits));
  const Tensor loss = r.model->loss(r.ids, r.targets);
  EXPECT_NEAR(loss.item(), r.loss.item(), entry("loss.npy").atol);
  autograd::backward(loss);
  const nn::StateDict grads = safetensors::load(path("grads.safetensors"));
  // A copy: GCC 13+ warns (-Wdangling-reference) on a reference bound from a call with a
  // temporary argument.
  const reference::ManifestEntry tol = entry("grads.safetensors");
  std::size_t checked = 0;
  double worst = 0;
  for (const auto& [name, p] : r.model->named_parameters()) {
    for (const auto& [gname, g] : grads) {
      if (gname != name) continue;
      EXPECT_TENSOR_NEAR(p.grad().to(Device::cpu()), g, tol.atol, tol.rtol) << name;
      worst = std::max(worst, max_abs_diff(p.grad().to(Device::cpu()), g));
      ++checked;
    }
  }
  EXPECT_EQ(checked, grads.size());
  std::printf("[ %s ] gradients: %zu tensors, max abs err %.3g vs transformers\n",
              device.str().c_str(), checked, worst);
}

void check_greedy(Device device) {
  Reference r(device);
  const std::vector<int64_t> expected = load_npy(path("greedy.npy")).to_vector<int64_t>();
  const int64_t n_new = 64;
  const std::vector<int64_t> prompt(expected.begin(), expected.end() - n_new);
  llama::GenerateOptions opt;
  opt.max_new_tokens = n_new;
  opt.sampling.temperature = 0;
  Generator gen(0);
  const llama::GenerateResult got = llama::generate(*r.model, {prompt}, opt, gen);
  EXPECT_EQ(got.tokens[0], std::vector<int64_t>(expected.end() - n_new, expected.end()));
}

TEST(Ch15_Reference, LogitsLossAndGradientsMatchTransformers) {
  TT_SKIP_WITHOUT_LLAMA_REFERENCE();
  check_logits_loss_grads(Device::cpu());
}

TEST(Ch15_Reference, GreedyTokensWithTheKvCacheMatchTransformers) {
  TT_SKIP_WITHOUT_LLAMA_REFERENCE();
  check_greedy(Device::cpu());
}

TEST(Ch15_ReferenceCuda, LogitsLossAndGradientsMatchTransformers) {
  TT_SKIP_IF_NO_CUDA();
  TT_SKIP_WITHOUT_LLAMA_REFERENCE();
  check_logits_loss_grads(Device::cuda(0));
}

TEST(Ch15_ReferenceCuda, GreedyTokensWithTheKvCacheMatchTransformers) {
  TT_SKIP_IF_NO_CUDA();
  TT_SKIP_WITHOUT_LLAMA_REFERENCE();
  check_greedy(Device::cuda(0));
}

}  // namespace
}  // namespace tt
