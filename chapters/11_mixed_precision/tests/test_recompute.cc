// Activation recomputation (tt/recompute.h, exercise ch11.3): the same values and gradients as
// the segment run normally, bit for bit (the same ops on the same values, in the same order),
// with only the segment's input kept between forward and backward.
#include <cstddef>
#include <string>
#include <vector>

#include "../../09_gpt2/tests/ch09_test_util.h"
#include "../../10_fast_step/tests/ch10_test_util.h"
#include "tt/autograd.h"
#include "tt/backend.h"
#include "tt/functional.h"
#include "tt/gpt2.h"
#include "tt/layers.h"
#include "tt/recompute.h"
#include "tt/testing.h"

namespace tt {
namespace {

// GPT-2's MLP shape: C -> 4C -> C.
struct Mlp {
  Generator gen{5};
  nn::Linear fc{16, 64, true, gen}, proj{64, 16, true, gen};
  Tensor operator()(const Tensor& h) { return proj.forward(gelu(fc.forward(h))); }
  std::vector<Tensor> grads() const {
    return {fc.weight.grad(), fc.bias.grad(), proj.weight.grad(), proj.bias.grad()};
  }
};

std::size_t cpu_bytes_in_use() {
  return backend_for(DeviceType::kCPU).allocator(0).stats().allocated;
}

TEST(Ch11_3_Recompute, SameValuesAndGradientsAsTheSegment) {
  const Tensor g = test10::randn_t({3, 7, 16}, 21, DType::kFloat32);
  Tensor grads_ref[5], grads_rec[5];
  Tensor y_ref, y_rec;
  for (const bool rec : {false, true}) {
    Mlp mlp;
    const Tensor x = test10::randn_t({3, 7, 16}, 20, DType::kFloat32).set_requires_grad();
    const Segment segment = [&mlp](const Tensor& h) { return mlp(h); };
    const Tensor y = rec ? recompute(segment, x) : segment(x);
    autograd::backward(sum(mul(y, g)));
    Tensor* out = rec ? grads_rec : grads_ref;
    (rec ? y_rec : y_ref) = y.detach();
    out[0] = x.grad();
    const std::vector<Tensor> p = mlp.grads();
    for (int i = 0; i < 4; ++i) out[i + 1] = p[static_cast<std::size_t>(i)];
  }
  EXPECT_TENSOR_NEAR(y_rec, y_ref, 0, 0);
  const char* names[] = {"x", "fc.weight", "fc.bias", "proj.weight", "proj.bias"};
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(grads_rec[i].defined()) << names[i] << " got no gradient";
    EXPECT_TENSOR_NEAR(grads_rec[i], grads_ref[i], 0, 0) << names[i];
  }
}

TEST(Ch11_3_Recompute, KeepsOnlyTheInputBetweenForwardAndBackward) {
  const int64_t rows = 64;
  // The MLP's intermediates: fc's output [rows, 64] and gelu's [rows, 64], float32.
  const std::size_t intermediates = 2 * rows * 64 * sizeof(float);
  std::size_t kept[2] = {0, 0};
  for (const bool rec : {false, true}) {
    Mlp mlp;
    const Tensor x = test10::randn_t({rows, 16}, 30, DType::kFloat32).set_requires_grad();
    const std::size_t before = cpu_bytes_in_use();
    const Segment segment = [&mlp](const Tensor& h) { return mlp(h); };
    Tensor y = rec ? recompute(segment, x) : segment(x);
    kept[rec] = cpu_bytes_in_use() - before;  // y, and what the graph keeps for backward
    autograd::backward(sum(y));
    EXPECT_TRUE(x.grad().defined());
  }
  EXPECT_GE(kept[false], kept[true] + intermediates)
      << "without recompute " << kept[false] << " bytes, with " << kept[true];
}

TEST(Ch11_3_Recompute, Bf16Gpt2GivesTheSameStepWithTheMlpRecomputed) {
  const gpt2::GPT2Config config = test09::tiny_config();
  const Batch batch = test09::fixed_batch(2, 12, config.vocab_size, 31);
  double loss[2] = {0, 0};
  std::vector<Tensor> grads[2];
  for (const bool rec : {false, true}) {
    gpt2::GPT2 model(config, 3);
    model.set_ops(gpt2::model_ops(rec ? "bf16_recompute" : "bf16"));
    const Tensor l = model.loss(batch.inputs, batch.targets);
    autograd::backward(l);
    loss[rec] = l.item();
    for (const Tensor& p : model.parameters()) grads[rec].push_back(p.grad());
  }
  EXPECT_EQ(loss[true], loss[false]);
  ASSERT_EQ(grads[true].size(), grads[false].size());
  for (std::size_t i = 0; i < grads[false].size(); ++i) {
    ASSERT_TRUE(grads[true][i].defined()) << "parameter " << i << " got no gradient";
    EXPECT_TENSOR_NEAR(grads[true][i], grads[false][i], 0, 0) << "parameter " << i;
  }
}

}  // namespace
}  // namespace tt
