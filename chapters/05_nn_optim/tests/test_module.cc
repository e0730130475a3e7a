// Tests of Module (tt/module.h): registration, the named traversal with deduplication of tied
// tensors (ch05.1), train/eval, in-place device moves, zero_grad, printing.
#include <memory>
#include <set>

#include "tt/backend.h"
#include "tt/module.h"
#include "tt/testing.h"

namespace tt::nn {
namespace {

/// A leaf with the given values (built with given code only, so that starter tests reach their
/// own exercise first).
Tensor values(std::vector<float> v, Shape shape) {
  return from_vector<float>(v, shape);
}

/// A module with two parameters and one buffer.
struct Leafy : Module {
  Leafy() : Module("Leafy") {
    w = register_parameter("weight", values({1, 2, 3, 4, 5, 6}, {2, 3}));
    b = register_parameter("bias", values({7, 8}, {2}));
    stat = register_buffer("running", values({0, 0}, {2}));
  }
  Tensor w, b, stat;
};

/// root(param "scale") -> h (ModuleList-like: "0", "1") -> each Leafy; plus "head" sharing
/// h.0's weight (tying) and "again", the same child registered a second time.
struct Tree : Module {
  Tree() : Module("Tree") {
    scale = register_parameter("scale", values({1}, {1}));
    h = register_module("h", std::make_shared<Module>("List"));
    first = h->register_module("0", std::make_shared<Leafy>());
    second = h->register_module("1", std::make_shared<Leafy>());
    head = register_module("head", std::make_shared<Module>("Head"));
    head->register_parameter("weight", first->w);  // tied to h.0.weight
    again = register_module("again", second);      // shared child
  }
  Tensor scale;
  std::shared_ptr<Module> h, head;
  std::shared_ptr<Leafy> first, second, again;
};

std::vector<std::string> names_of(const std::vector<NamedTensor>& named) {
  std::vector<std::string> out;
  for (const auto& [name, t] : named) out.push_back(name);
  return out;
}

TEST(Ch05_1_NamedParameters, PreOrderDottedNames) {
  Tree tree;
  EXPECT_EQ(
      names_of(tree.named_parameters()),
      (std::vector<std::string>{"scale", "h.0.weight", "h.0.bias", "h.1.weight", "h.1.bias"}));
  EXPECT_EQ(names_of(tree.named_parameters(/*recurse=*/false)),
            (std::vector<std::string>{"scale"}));
  EXPECT_EQ(names_of(tree.h->named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"}));
}

TEST(Ch05_1_NamedParameters, TiedAndSharedTensorsAreListedOnce) {
  Tree tree;
  const auto params = tree.parameters();
  ASSERT_EQ(params.size(), 5u);  // head.weight is h.0.weight; "again" is h.1
  std::set<const TensorImpl*> distinct;
  for (const Tensor& p : params) distinct.insert(p.impl().get());
  EXPECT_EQ(distinct.size(), 5u);
  EXPECT_TRUE(params[1].is_same(tree.first->w));
  EXPECT_TRUE(params[1].is_same(tree.head->own_parameters()[0].second));
  EXPECT_EQ(tree.num_parameters(), 1 + 2 * (6 + 2));
  // A module on its own still lists its tied parameter under its own name.
  EXPECT_EQ(names_of(tree.head->named_parameters()), (std::vector<std::string>{"weight"}));
}

TEST(Ch05_1_NamedParameters, BuffersAndStateDict) {
  Tree tree;
  EXPECT_EQ(names_of(tree.named_buffers()),
            (std::vector<std::string>{"h.0.running", "h.1.running"}));
  EXPECT_EQ(names_of(tree.state_dict()),
            (std::vector<std::string>{"scale", "h.0.weight", "h.0.bias", "h.1.weight", "h.1.bias",
                                      "h.0.running", "h.1.running"}));
  // The state dict holds handles to the live tensors, not copies.
  EXPECT_TRUE(tree.state_dict()[1].second.is_same(tree.first->w));
}

TEST(Ch05_1_NamedParameters, ZeroGradAndToKeepIdentity) {
  Tree tree;
  for (const Tensor& p : tree.parameters()) p.set_grad(ones(p.shape()));
  tree.zero_grad(/*set_to_none=*/false);
  EXPECT_EQ(tree.first->w.grad().to_vector<float>(), std::vector<float>(6, 0.f));
  tree.zero_grad();
  EXPECT_FALSE(tree.first->w.grad().defined());
  // CPU -> CPU: nothing moves, every handle is the same object with the same memory.
  void* before = tree.first->w.data_ptr();
  tree.to(Device::cpu());
  EXPECT_EQ(tree.first->w.data_ptr(), before);
  EXPECT_TRUE(tree.parameters()[1].is_same(tree.first->w));
}

TEST(Ch05_Module, RegistrationErrors) {
  Module m("Thing");
  m.register_parameter("w", values({1}, {1}));
  EXPECT_TT_ERROR(m.register_parameter("w", values({1}, {1})), "Thing", "'w'", "already used");
  EXPECT_TT_ERROR(m.register_buffer("w", values({1}, {1})), "already used");
  EXPECT_TT_ERROR(m.register_module("w", std::make_shared<Module>()), "already used");
  EXPECT_TT_ERROR(m.register_parameter("a.b", values({1}, {1})), "invalid name 'a.b'");
  EXPECT_TT_ERROR(m.register_parameter("", values({1}, {1})), "invalid name");
  EXPECT_TT_ERROR(m.register_parameter("i", tensor_i64({1})), "float32 or float64", "int64");
  EXPECT_TT_ERROR(m.register_parameter("u", Tensor()), "'u' is undefined");
  EXPECT_TT_ERROR(m.register_module("null", std::shared_ptr<Module>()), "'null' is null");
  EXPECT_TT_ERROR(m.forward(values({1}, {1})), "Thing has no forward");
}

TEST(Ch05_Module, RegisterParameterMarksRequiresGrad) {
  Module m;
  Tensor w = values({1, 2}, {2});
  EXPECT_FALSE(w.requires_grad());
  Tensor same = m.register_parameter("w", w);
  EXPECT_TRUE(same.is_same(w));
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(m.register_buffer("b", values({1}, {1})).defined());
  EXPECT_FALSE(m.own_buffers()[0].second.requires_grad());
}

TEST(Ch05_Module, CyclesAreRejected) {
  auto a = std::make_shared<Module>("A");
  auto b = a->register_module("b", std::make_shared<Module>("B"));
  EXPECT_TT_ERROR(b->register_module("a", a), "cycles");
}

TEST(Ch05_Module, TrainEvalRecurse) {
  Tree tree;
  EXPECT_TRUE(tree.is_training());
  tree.eval();
  for (auto& [name, m] : tree.named_modules()) EXPECT_FALSE(m->is_training()) << name;
  tree.h->train();
  EXPECT_FALSE(tree.is_training());
  EXPECT_TRUE(tree.first->is_training());
}

TEST(Ch05_Module, NamedModulesListsSharedChildOnce) {
  Tree tree;
  std::vector<std::string> names;
  for (auto& [name, m] : tree.named_modules()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"", "h", "h.0", "h.1", "head"}));
}

TEST(Ch05_Module, ToString) {
  Tree tree;
  EXPECT_EQ(tree.to_string(),
            "Tree(\n  (h): List(\n    (0): Leafy()\n    (1): Leafy()\n  )\n  (head): Head()\n"
            "  (again): Leafy()\n)");
}

TEST(Ch05_Module, MoveToDeviceSwapsStorageOnce) {
  // Two views of one storage are moved once; a CPU -> CPU move is a no-op.
  Tensor base = values({1, 2, 3, 4}, {4});
  Tensor view = base.slice(0, 1, 3);
  const Storage* storage = base.storage().get();
  move_to_device_({base, view, Tensor()}, Device::cpu());
  EXPECT_EQ(base.storage().get(), storage);
  EXPECT_EQ(view.to_vector<float>(), (std::vector<float>{2, 3}));
}

// Module::to(Device::cuda(0)) is tested in chapter 06 (test_cuda_module.cc), the first chapter
// whose tests link the CUDA backend.

}  // namespace
}  // namespace tt::nn
