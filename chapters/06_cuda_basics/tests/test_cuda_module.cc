// Chapter 05's Module::to(device) on a real GPU: moving a model keeps every parameter's identity
// (optimizer references stay valid), keeps tied weights tied, and moves gradients and buffers.
// It lives here because chapter 06 is the first chapter whose tests link the CUDA backend.
#include "tt/nn.h"
#include "tt/testing.h"

namespace tt::nn {
namespace {

struct TiedModel : Module {
  TiedModel() : Module("TiedModel") {
    Generator gen(7);
    wte = register_module("wte", std::make_shared<Embedding>(10, 4, gen));
    proj = register_module("proj", std::make_shared<Linear>(4, 4, true, gen));
    head = register_module("head", std::make_shared<Module>("Head"));
    head->register_parameter("weight", wte->weight);  // tied, like GPT-2's lm_head
    stat = register_buffer("stat", full({3}, 2.0));
  }
  std::shared_ptr<Embedding> wte;
  std::shared_ptr<Linear> proj;
  std::shared_ptr<Module> head;
  Tensor stat;
};

TEST(Ch06_CudaModule, ToCudaKeepsIdentityTiesGradsAndBuffers) {
  TT_SKIP_IF_NO_CUDA();
  TiedModel model;
  model.proj->weight.set_grad(full({4, 4}, 0.5));
  const std::vector<Tensor> before = model.parameters();
  const std::vector<float> w = model.proj->weight.to_vector<float>();
  model.to(Device::cuda(0));
  const std::vector<Tensor> after = model.parameters();
  ASSERT_EQ(after.size(), before.size());
  for (std::size_t i = 0; i < after.size(); ++i) {
    EXPECT_TRUE(after[i].is_same(before[i])) << "parameter " << i << " was replaced";
    EXPECT_TRUE(after[i].device().is_cuda());
  }
  EXPECT_EQ(model.head->parameters()[0].data_ptr(), model.wte->weight.data_ptr());  // still tied
  EXPECT_TRUE(model.proj->weight.grad().device().is_cuda());
  EXPECT_TRUE(model.stat.device().is_cuda());
  EXPECT_EQ(model.proj->weight.to_vector<float>(), w);
  model.to(Device::cpu());
  EXPECT_TRUE(model.proj->weight.device().is_cpu());
  EXPECT_EQ(model.proj->weight.grad().to_vector<float>(), std::vector<float>(16, 0.5f));
  EXPECT_EQ(model.stat.to_vector<float>(), std::vector<float>(3, 2.0f));
}

}  // namespace
}  // namespace tt::nn
