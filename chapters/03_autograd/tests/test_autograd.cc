// Tests of chapter 03: graph recording (ch03.3), AccumulateGrad (ch03.4), whole backward passes
// through test Functions, memory (no cycles, graphs freed), grad mode and backward's errors.
#include <cmath>
#include <memory>
#include <thread>

#include "ch03_test_util.h"

namespace tt::autograd {
namespace {

using test03::f64;

std::size_t cpu_allocated() {
  return backend_for(DeviceType::kCPU).allocator(0).stats().allocated;
}

// ----- ch03.3 Function::apply records the graph ------------------------------------------------

TEST(Ch03_3_Record, EdgesPointToAccumulateGradOrToTheProducer) {
  Tensor a = f64({1, 2});
  a.set_requires_grad();
  Tensor b = f64({3, 4});  // needs no gradient
  Tensor c_in = f64({5, 6, 7, 8});
  c_in.set_requires_grad();
  std::vector<Tensor> halves = Function::apply<test03::SplitFn>({c_in});
  const Tensor& c = halves[1];  // output 1 of the split

  test03::ProbeFn::setup_calls = 0;
  test03::ProbeFn::grad_mode_in_forward = true;
  std::vector<Tensor> out = Function::apply<test03::ProbeFn>({a, b, c});
  EXPECT_FALSE(test03::ProbeFn::grad_mode_in_forward) << "forward must run with grad mode off";
  EXPECT_EQ(test03::ProbeFn::setup_calls, 1);
  ASSERT_EQ(out.size(), 2u);
  const std::shared_ptr<Node>& node = out[0].grad_fn();
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(out[1].grad_fn(), node);
  EXPECT_EQ(out[0].output_nr(), 0u);
  EXPECT_EQ(out[1].output_nr(), 1u);
  EXPECT_TRUE(out[0].requires_grad());
  EXPECT_FALSE(out[0].is_leaf());
  EXPECT_EQ(node->name(), "ProbeBackward");
  EXPECT_EQ(node->num_outputs(), 2u);

  const auto& edges = node->next_edges();
  ASSERT_EQ(edges.size(), 3u);
  EXPECT_NE(std::dynamic_pointer_cast<AccumulateGrad>(edges[0].node), nullptr);
  EXPECT_EQ(edges[0].input_nr, 0u);
  EXPECT_EQ(edges[1].node, nullptr);
  EXPECT_EQ(edges[2].node, c.grad_fn());
  EXPECT_EQ(edges[2].input_nr, 1u);
  EXPECT_EQ(c.grad_fn()->name(), "SplitBackward");
  EXPECT_EQ(c.output_nr(), 1u);
}

TEST(Ch03_3_Record, NothingIsRecordedWhenNoInputRequiresGrad) {
  const int64_t nodes = Node::live_count();
  test03::ProbeFn::setup_calls = 0;
  std::vector<Tensor> out = Function::apply<test03::ProbeFn>({f64({1, 2})});
  EXPECT_EQ(test03::ProbeFn::setup_calls, 0);
  EXPECT_TRUE(out[0].is_leaf());
  EXPECT_FALSE(out[0].requires_grad());
  EXPECT_EQ(Node::live_count(), nodes);
}

TEST(Ch03_3_Record, NothingIsRecordedUnderNoGradGuard) {
  Tensor a = f64({1, 2});
  a.set_requires_grad();
  const int64_t nodes = Node::live_count();
  Tensor y;
  {
    NoGradGuard guard;
    y = Function::apply<test03::SquareFn>({a})[0];
  }
  EXPECT_TRUE(y.is_leaf());
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(Node::live_count(), nodes);
  EXPECT_TENSOR_NEAR(y, f64({1, 4}), 0, 0);
}

TEST(Ch03_3_Record, ConstructorArgumentsReachTheFunction) {
  Tensor y = Function::apply<test03::ScaleFn>({f64({1, -2})}, 3.0)[0];
  EXPECT_TENSOR_NEAR(y, f64({3, -6}), 0, 0);
}

TEST(Ch03_3_Record, AnOutputThatIsAnInputGetsItsOwnHistory) {
  Tensor a = f64({1, 2});
  a.set_requires_grad();
  Tensor y = Function::apply<test03::IdentityFn>({a})[0];
  EXPECT_FALSE(y.is_same(a));
  EXPECT_TRUE(a.is_leaf()) << "the input's history was overwritten";
  EXPECT_FALSE(y.is_leaf());
  EXPECT_EQ(y.data_ptr(), a.data_ptr());  // still no copy
}

TEST(Ch03_3_Record, GradientEdge) {
  Tensor a = f64({1});
  EXPECT_EQ(gradient_edge(a).node, nullptr);
  a.set_requires_grad();
  const Edge e = gradient_edge(a);
  EXPECT_EQ(e.node->name(), "AccumulateGrad");
  EXPECT_EQ(e.input_nr, 0u);
}

// ----- ch03.4 AccumulateGrad -------------------------------------------------------------------

TEST(Ch03_4_AccumulateGrad, StoresACopyThenAddsInPlace) {
  Tensor x = f64({0, 0, 0});
  x.set_requires_grad();
  auto node = std::make_shared<AccumulateGrad>(x);
  Tensor g = f64({1, 2, 3});
  EXPECT_TRUE(node->apply({g}).empty());
  ASSERT_TRUE(x.grad().defined());
  EXPECT_TENSOR_NEAR(x.grad(), f64({1, 2, 3}), 0, 0);
  EXPECT_NE(x.grad().data_ptr(), g.data_ptr()) << "the first gradient must be copied";
  const void* grad_data = x.grad().data_ptr();
  node->apply({g});
  EXPECT_TENSOR_NEAR(x.grad(), f64({2, 4, 6}), 0, 0);
  EXPECT_TENSOR_NEAR(g, f64({1, 2, 3}), 0, 0);  // the incoming gradient is not modified
  EXPECT_EQ(x.grad().data_ptr(), grad_data) << "accumulate in place: .grad keeps its memory";
}

TEST(Ch03_4_AccumulateGrad, UndefinedGradientOrDeadLeafIsANoOp) {
  Tensor x = f64({1});
  x.set_requires_grad();
  auto node = std::make_shared<AccumulateGrad>(x);
  EXPECT_TRUE(node->apply({Tensor()}).empty());
  EXPECT_FALSE(x.grad().defined());
  x = Tensor();  // the node holds the leaf weakly
  EXPECT_TRUE(node->apply({f64({1})}).empty());
}

TEST(Ch03_4_AccumulateGrad, MismatchedGradientIsAnError) {
  Tensor x = f64({1, 2});
  x.set_requires_grad();
  auto node = std::make_shared<AccumulateGrad>(x);
  EXPECT_TT_ERROR(node->apply({f64({1, 2, 3})}), "AccumulateGrad", "[3]", "[2]");
  EXPECT_TT_ERROR(node->apply({from_vector<float>({1, 2})}), "AccumulateGrad", "float32",
                  "float64");
}

TEST(Ch03_AccumulateGrad, NeedsALeafThatRequiresGrad) {
  EXPECT_TT_ERROR(AccumulateGrad(f64({1})), "AccumulateGrad", "leaf");
}

// ----- whole backward passes (ch03.2 with everything else) -------------------------------------

TEST(Ch03_2_Backward, ProductRule) {
  Tensor a = f64({1, 2, 3}), b = f64({4, 5, 6});
  a.set_requires_grad();
  b.set_requires_grad();
  Tensor y = Function::apply<test03::MulFn>({a, b})[0];
  backward(y, f64({1, 10, 100}));
  EXPECT_TENSOR_NEAR(a.grad(), f64({4, 50, 600}), 0, 0);
  EXPECT_TENSOR_NEAR(b.grad(), f64({1, 20, 300}), 0, 0);
}

TEST(Ch03_2_Backward, SameTensorTwiceAndSharedGradients) {
  Tensor x = f64({1, 2, 3});
  x.set_requires_grad();
  // y = x * x: both edges of MulFn lead to x, so 2x arrives as x + x.
  backward(Function::apply<test03::MulFn>({x, x})[0], f64({1, 1, 1}));
  EXPECT_TENSOR_NEAR(x.grad(), f64({2, 4, 6}), 0, 0);
  // z = a + b hands the same gradient tensor to a and b: their .grad must stay independent.
  Tensor a = f64({1}), b = f64({2});
  a.set_requires_grad();
  b.set_requires_grad();
  backward(Function::apply<test03::AddFn>({a, b})[0]);
  backward(Function::apply<test03::AddFn>({a, b})[0]);
  EXPECT_TENSOR_NEAR(a.grad(), f64({2}), 0, 0);
  EXPECT_TENSOR_NEAR(b.grad(), f64({2}), 0, 0);
}

TEST(Ch03_2_Backward, BranchesMeetAtAnInteriorNode) {
  Tensor x = f64({1, 2, -1});
  x.set_requires_grad();
  Tensor h = Function::apply<test03::SquareFn>({x})[0];
  Tensor u = Function::apply<test03::ScaleFn>({h}, 2.0)[0];
  Tensor v = Function::apply<test03::ScaleFn>({h}, 3.0)[0];
  Tensor out = Function::apply<test03::SumFn>({Function::apply<test03::MulFn>({u, v})[0]})[0];
  backward(out);  // out = sum(6 x^4): d/dx = 24 x^3
  EXPECT_TENSOR_NEAR(x.grad(), f64({24, 192, -24}), 1e-12, 0);
  EXPECT_FALSE(h.grad().defined()) << "only leaves accumulate .grad";
}

TEST(Ch03_2_Backward, TenThousandOpChain) {
  Tensor x = f64({2});
  x.set_requires_grad();
  const int64_t nodes = Node::live_count();
  {
    Tensor y = x;
    for (int i = 0; i < 10000; ++i) y = Function::apply<test03::ScaleFn>({y}, 1.0001)[0];
    EXPECT_EQ(Node::live_count(), nodes + 10001);  // + x's AccumulateGrad
    backward(y);
  }
  EXPECT_EQ(Node::live_count(), nodes);
  EXPECT_NEAR(x.grad().item(), std::pow(1.0001, 10000), 1e-9);
}

TEST(Ch03_2_Backward, ScalarLeafRootGetsOne) {
  Tensor x = f64({5});
  x.set_requires_grad();
  backward(x);
  EXPECT_TENSOR_NEAR(x.grad(), f64({1}), 0, 0);
}

TEST(Ch03_2_Backward, UnusedOutputGetsZeroGradient) {
  Tensor x = f64({1, 2, 3, 4});
  x.set_requires_grad();
  Tensor first = Function::apply<test03::SplitFn>({x})[0];
  backward(first, f64({10, 20}));
  EXPECT_TENSOR_NEAR(x.grad(), f64({10, 20, 0, 0}), 0, 0);
}

TEST(Ch03_2_Backward, AccumulatesAcrossCallsUntilCleared) {
  Tensor x = f64({3});
  x.set_requires_grad();
  backward(Function::apply<test03::SquareFn>({x})[0]);
  backward(Function::apply<test03::SquareFn>({x})[0]);
  EXPECT_TENSOR_NEAR(x.grad(), f64({12}), 0, 0);
  x.set_grad(Tensor());  // zero_grad: the next backward starts afresh
  backward(Function::apply<test03::SquareFn>({x})[0]);
  EXPECT_TENSOR_NEAR(x.grad(), f64({6}), 0, 0);
}

TEST(Ch03_2_Backward, DetachAndInputsWithoutGradStopTheGradient) {
  Tensor x = f64({2});
  x.set_requires_grad();
  Tensor h = Function::apply<test03::SquareFn>({x})[0];
  Tensor d = h.detach();
  EXPECT_TRUE(d.is_leaf());
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.data_ptr(), h.data_ptr());
  Tensor y = Function::apply<test03::MulFn>({h, d})[0];  // = x^2 * const(x^2)
  backward(y);
  EXPECT_TENSOR_NEAR(x.grad(), f64({16}), 0, 0);  // 2x * 4, not 4x^3
}

TEST(Ch03_2_Backward, WrongGradientFromABackwardIsAnError) {
  Tensor x = f64({1, 2});
  x.set_requires_grad();
  Tensor y = Function::apply<test03::WrongShapeFn>({x})[0];
  EXPECT_TT_ERROR(backward(y, f64({1, 1})), "WrongShapeBackward", "gradient of input 0", "[7]",
                  "[2]");
}

TEST(Ch03_2_Backward, SecondBackwardNeedsRetainGraph) {
  Tensor x = f64({3});
  x.set_requires_grad();
  Tensor y = Function::apply<test03::SquareFn>({x})[0];
  backward(y, Tensor(), /*retain_graph=*/true);
  backward(y);
  EXPECT_TENSOR_NEAR(x.grad(), f64({12}), 0, 0);
  EXPECT_TT_ERROR(backward(y), "SquareBackward", "second time", "retain_graph");
}

// ----- memory: no cycles, graphs and saved buffers freed ---------------------------------------

TEST(Ch03_3_Memory, ForwardOnlyGraphIsFreed) {
  const int64_t nodes = Node::live_count(), impls = TensorImpl::live_count();
  const std::size_t bytes = cpu_allocated();
  {
    Tensor x = f64(std::vector<double>(64, 0.5));
    x.set_requires_grad();
    // ExpFn saves its own output: with a plain (non-detached) handle this would be a cycle
    // output -> grad_fn -> saved output, and nothing below would ever be freed.
    Tensor y = Function::apply<test03::ExpFn>({Function::apply<test03::ExpFn>({x})[0]})[0];
    EXPECT_EQ(Node::live_count(), nodes + 3);  // two ExpFn and x's AccumulateGrad
  }
  EXPECT_EQ(Node::live_count(), nodes);
  EXPECT_EQ(TensorImpl::live_count(), impls);
  EXPECT_EQ(cpu_allocated(), bytes);
}

TEST(Ch03_2_Memory, GraphAndSavedBuffersAreFreedAfterBackward) {
  const int64_t nodes = Node::live_count(), impls = TensorImpl::live_count();
  const std::size_t bytes = cpu_allocated();
  {
    Tensor x = f64(std::vector<double>(64, 0.5));  // 512 bytes
    x.set_requires_grad();
    const std::size_t with_x = cpu_allocated();
    Tensor loss = Function::apply<test03::SumFn>({Function::apply<test03::ExpFn>({x})[0]})[0];
    const std::size_t before_backward = cpu_allocated();
    EXPECT_EQ(before_backward, with_x + 512 + sizeof(double));  // exp(x) and the loss
    backward(loss, Tensor(), /*retain_graph=*/true);
    EXPECT_EQ(cpu_allocated(), before_backward + 512) << "retained: only x.grad is new";
    x.set_grad(Tensor());
    backward(loss);
    // x.grad (512) is new; exp(x), held only by ExpFn's saved tensors (512), was released.
    EXPECT_EQ(cpu_allocated(), before_backward);
    EXPECT_GT(Node::live_count(), nodes) << "loss still holds its graph";
    EXPECT_TENSOR_NEAR(x.grad(), f64(std::vector<double>(64, std::exp(0.5))), 1e-15, 0);
  }
  EXPECT_EQ(Node::live_count(), nodes);
  EXPECT_EQ(TensorImpl::live_count(), impls);
  EXPECT_EQ(cpu_allocated(), bytes);
}

// ----- given: grad mode, backward's argument checks --------------------------------------------

TEST(Ch03_GradMode, GuardRestoresAndModeIsPerThread) {
  EXPECT_TRUE(is_grad_enabled());
  {
    NoGradGuard outer;
    EXPECT_FALSE(is_grad_enabled());
    {
      NoGradGuard inner;
      EXPECT_FALSE(is_grad_enabled());
    }
    EXPECT_FALSE(is_grad_enabled());  // restores the previous mode, not "on"
    bool other_thread = false;
    std::thread([&] { other_thread = is_grad_enabled(); }).join();
    EXPECT_TRUE(other_thread);
  }
  EXPECT_TRUE(is_grad_enabled());
}

TEST(Ch03_BackwardErrors, RootMustRequireGrad) {
  EXPECT_TT_ERROR(backward(f64({1})), "backward", "does not require grad");
  EXPECT_TT_ERROR(backward(Tensor()), "backward", "undefined");
}

TEST(Ch03_BackwardErrors, NonScalarRootNeedsAGradient) {
  Tensor x = f64({1, 2, 3});
  x.set_requires_grad();
  EXPECT_TT_ERROR(backward(x), "backward", "one-element", "[3]");
}

TEST(Ch03_BackwardErrors, GradientMustMatchTheRoot) {
  Tensor x = f64({1, 2, 3});
  x.set_requires_grad();
  EXPECT_TT_ERROR(backward(x, f64({1, 2})), "backward", "shape=[2]", "shape=[3]");
  EXPECT_TT_ERROR(backward(x, from_vector<float>({1, 2, 3})), "backward", "float32", "float64");
}

}  // namespace
}  // namespace tt::autograd
