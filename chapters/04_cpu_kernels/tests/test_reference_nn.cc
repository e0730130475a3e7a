// Chapter 04 against PyTorch: the reference files are intact (MANIFEST, sha256), and every NN op
// matches PyTorch's float32 forward and backward within the tolerance the manifest states.
// reference_data/generate.py writes the files; see reference_data/README.md for the naming.
#include <filesystem>
#include <limits>

#include "tt/reference_data.h"
#include "tt/autograd.h"
#include "tt/ops_nn.h"

namespace tt {
namespace {

using reference::Case;
using reference::CaseRunner;
using reference::unary;
using reference::with_grad;

TEST(Ch04_Reference, ManifestMatchesFiles) {
  const auto& m = reference::manifest();
  ASSERT_FALSE(m.empty());
  for (const auto& [file, e] : m) {
    const std::string bytes = reference::read_file(testing::reference_path(file));
    EXPECT_EQ(reference::sha256_hex(bytes), e.sha256) << file << " differs from MANIFEST";
    EXPECT_EQ(dtype_name(load_npy(testing::reference_path(file)).dtype()), e.dtype) << file;
    EXPECT_FALSE(e.torch.empty()) << file;
    EXPECT_FALSE(e.seed.empty()) << file;
    EXPECT_LE(e.atol, 1e-5) << file;  // f32 vs PyTorch: 1e-5 absolute or tighter
  }
}

TEST(Ch04_Reference, EveryFileIsListed) {
  int64_t files = 0;
  for (const auto& f : std::filesystem::directory_iterator(testing::reference_path("ch04"))) {
    ++files;
    EXPECT_TRUE(reference::manifest().count("ch04/" + f.path().filename().string()))
        << f.path() << " is not in MANIFEST (rerun reference_data/generate.py)";
  }
  EXPECT_EQ(files, static_cast<int64_t>(reference::manifest().size()));
}

TEST(Ch04_Reference, Sha256KnownAnswers) {
  EXPECT_EQ(reference::sha256_hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(reference::sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // 56 bytes: the padding spills into a second block.
  EXPECT_EQ(reference::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

void layernorm_case(Case& c) {
  Tensor x = c.load("x", true), w = c.load("weight", true), b = c.load("bias", true);
  Tensor out = layernorm(x, w, b, 1e-5);
  autograd::backward(out, c.load("dout"));
  c.expect("out", out);
  c.expect("grad_x", x.grad());
  c.expect("grad_weight", w.grad());
  c.expect("grad_bias", b.grad());
  // The statistics the forward kernel saves for backward.
  Tensor y = zeros(x.shape()), mean = zeros({x.size(0), x.size(1)}), rstd = zeros(mean.shape());
  call_kernel<LayerNormForwardKernel>("layernorm_forward", x.device(), y, mean, rstd, x.detach(),
                                      w.detach(), b.detach(), 1e-5);
  c.expect("mean", mean);
  c.expect("rstd", rstd);
}

class Ch04_ReferenceNn : public ::testing::TestWithParam<CaseRunner> {};

TEST_P(Ch04_ReferenceNn, MatchesPyTorch) {
  Case c(GetParam().name);
  GetParam().run(c);
  c.expect_all_files_used();
}

const double kInf = std::numeric_limits<double>::infinity();

INSTANTIATE_TEST_SUITE_P(
    Nn, Ch04_ReferenceNn,
    ::testing::Values(
        unary("softmax_rows", [](const Tensor& x) { return softmax(x, -1); }),
        unary("softmax_dim1", [](const Tensor& x) { return softmax(x, 1); }),
        unary("log_softmax_rows", [](const Tensor& x) { return log_softmax(x, -1); }),
        unary("log_softmax_dim0", [](const Tensor& x) { return log_softmax(x, 0); }),
        unary("gelu_tanh", [](const Tensor& x) { return gelu(x); }),
        unary("causal_softmax_attn",
              [](const Tensor& x) { return softmax(masked_fill(x, causal_mask(5), -kInf)); }),
        CaseRunner{"layernorm_btc", layernorm_case},
        with_grad("embedding_repeats", "weight", "indices",
                  [](const Tensor& w, const Tensor& idx) { return embedding(w, idx); }),
        with_grad("cross_entropy_basic", "logits", "targets",
                  [](const Tensor& x, const Tensor& t) { return cross_entropy(x, t); }),
        with_grad("cross_entropy_ignore", "logits", "targets",
                  [](const Tensor& x, const Tensor& t) { return cross_entropy(x, t); }),
        with_grad("masked_fill_causal", "x", "mask",
                  [](const Tensor& x, const Tensor& m) { return masked_fill(x, m, -1e9); })),
    reference::case_name);

}  // namespace
}  // namespace tt
