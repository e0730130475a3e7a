// Chapter 09 against PyTorch: a tiny GPT-2 (L=2, C=64, NH=4, V=512, B=4, T=32) whose fixed
// weights come as an llm.c file (reference_data/ch09/gpt2_tiny.bin). Logits, loss and every
// parameter gradient must match PyTorch within the tolerances of reference_data/ch09/MANIFEST
// (logits 1e-5 absolute). reference_data/ch09/generate_gpt2.py writes the files.
#include <algorithm>
#include <filesystem>
#include <memory>

#include "tt/functional.h"
#include "tt/gpt2.h"
#include "tt/npy_tensor.h"
#include "tt/reference_data.h"
#include "tt/train.h"

namespace tt::gpt2 {
namespace {

const char* kManifest = "ch09/MANIFEST";

Tensor ref(const std::string& name) {
  return load_npy(testing::reference_path("ch09/" + name + ".npy"));
}

/// Compares `actual` with ch09/<name>.npy within the manifest's tolerance.
void expect_ref(const std::string& name, const Tensor& actual) {
  const auto& m = reference::manifest(kManifest);
  const auto it = m.find("ch09/" + name + ".npy");
  ASSERT_NE(it, m.end()) << name << " is not in " << kManifest;
  ASSERT_TRUE(actual.defined()) << name << " was not computed";
  EXPECT_TENSOR_NEAR(actual, ref(name), it->second.atol, it->second.rtol) << name;
}

TEST(Ch09_Reference, ManifestMatchesFiles) {
  const auto& m = reference::manifest(kManifest);
  ASSERT_GT(m.size(), 30u);
  for (const auto& [file, e] : m) {
    const std::string bytes = reference::read_file(testing::reference_path(file));
    EXPECT_EQ(reference::sha256_hex(bytes), e.sha256) << file << " differs from MANIFEST";
    if (file.ends_with(".npy")) {
      EXPECT_EQ(dtype_name(load_npy(testing::reference_path(file)).dtype()), e.dtype) << file;
    }
    EXPECT_FALSE(e.torch.empty()) << file;
    EXPECT_FALSE(e.seed.empty()) << file;
  }
}

TEST(Ch09_Reference, EveryFileIsListed) {
  for (const auto& f : std::filesystem::directory_iterator(testing::reference_path("ch09"))) {
    const std::string name = f.path().filename().string();
    if (!name.ends_with(".npy") && !name.ends_with(".bin")) continue;
    EXPECT_TRUE(reference::manifest(kManifest).count("ch09/" + name))
        << f.path() << " is not in ch09/MANIFEST (rerun reference_data/ch09/generate_gpt2.py)";
  }
}

TEST(Ch09_1_AttentionReference, MatchesPyTorch) {
  reference::Case c("attention", "ch09", kManifest);
  const Tensor qkv = c.load("qkv", true);
  const Tensor out = causal_self_attention(qkv, 4);
  autograd::backward(out, c.load("dout"));
  c.expect("out", out);
  c.expect("grad_qkv", qkv.grad());
  c.expect_all_files_used();
}

class Ch09_GPT2Reference : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = load_llmc(testing::reference_path("ch09/gpt2_tiny.bin"));
    idx_ = ref("gpt2_tiny_idx");
    targets_ = ref("gpt2_tiny_targets");
  }
  std::unique_ptr<GPT2> model_;
  Tensor idx_, targets_;
};

TEST_F(Ch09_GPT2Reference, Config) {
  const GPT2Config& c = model_->config();
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.block_size, 32);
}

TEST_F(Ch09_GPT2Reference, LogitsLossAndGradients) {
  const Tensor logits = model_->forward(idx_);
  expect_ref("gpt2_tiny_logits", logits);
  const Tensor loss = cross_entropy(view(logits, {-1, 512}), targets_.reshape({-1}));
  expect_ref("gpt2_tiny_loss", loss);
  autograd::backward(loss);
  ASSERT_EQ(model_->named_parameters().size(), 28u);
  for (const auto& [name, param] : model_->named_parameters()) {
    std::string file = "gpt2_tiny_grad_" + name;
    std::replace(file.begin(), file.end(), '.', '_');
    expect_ref(file, param.grad());
  }
}

TEST_F(Ch09_GPT2Reference, LossMethodMatchesPyTorch) {
  expect_ref("gpt2_tiny_loss", model_->loss(idx_, targets_));
}

TEST_F(Ch09_GPT2Reference, TenAdamWStepsMatchPyTorch) {
  // The script's run: AdamW lr 1e-3, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on
  // matrices only, global clipping at 1.0, the same batch every step; losses[i] is the loss
  // before step i.
  optim::AdamWOptions o;
  o.lr = 1e-3;
  o.beta1 = 0.9;
  o.beta2 = 0.95;
  o.eps = 1e-8;
  optim::AdamW opt(param_groups(*model_, 0.1), o);
  std::vector<float> losses;
  for (int step = 0; step < 10; ++step) {
    const TrainStepResult r = train_step(*model_, opt,
                                         [&] {
                                           return Batch{idx_, targets_};
                                         },
                                         {1, 1.0});
    ASSERT_TRUE(r.finite);
    losses.push_back(static_cast<float>(r.loss));
  }
  expect_ref("gpt2_tiny_adamw_losses", from_vector(losses, {10}));
}

}  // namespace
}  // namespace tt::gpt2
