// Tests of chapter 03's engine on hand-built graphs: dependency counting (ch03.1), the
// work-queue loop (ch03.2), and the given Node lifetime code. No Function is involved, so each
// exercise fails with its own id on a starter.
#include <memory>
#include <string>
#include <vector>

#include "ch03_test_util.h"

namespace tt::autograd {
namespace {

using test03::f64;

/// A hand-made node: logs its calls, keeps the gradients it receives, and sends
/// factors[i] * (sum of its gradient slots) along edge i.
struct TestNode : Node {
  TestNode(std::string label, std::vector<double> factors, uint32_t slots = 1)
      : label(std::move(label)), factors(std::move(factors)) {
    set_num_outputs(slots);
  }
  std::string name() const override { return label; }
  std::vector<Tensor> apply(const std::vector<Tensor>& grads) override {
    if (log) log->push_back(label);
    received.push_back(grads);
    double total = 0;
    for (const Tensor& g : grads) total += g.defined() ? g.item() : 0.0;
    std::vector<Tensor> out;
    for (double f : factors) out.push_back(f64({f * total}));
    return out;
  }
  void release_saved() override { ++releases; }

  std::string label;
  std::vector<double> factors;
  std::vector<std::string>* log = nullptr;
  std::vector<std::vector<Tensor>> received;
  int releases = 0;
};

std::shared_ptr<TestNode> make(const std::string& label, std::vector<double> factors,
                               uint32_t slots = 1) {
  return std::make_shared<TestNode>(label, std::move(factors), slots);
}

/// The diamond R -> {A, B} -> C: R sends 1*g to A and B, A sends 2*g to C, B sends 3*g to C.
struct Diamond {
  std::shared_ptr<TestNode> r = make("R", {1, 1}), a = make("A", {2}), b = make("B", {3}),
                            c = make("C", {});
  std::vector<std::string> log;
  Diamond() {
    r->set_next_edges({{a, 0}, {b, 0}});
    a->set_next_edges({{c, 0}});
    b->set_next_edges({{c, 0}});
    for (auto* n : {r.get(), a.get(), b.get(), c.get()}) n->log = &log;
  }
};

// ----- ch03.1 compute_dependencies -------------------------------------------------------------

TEST(Ch03_1_Dependencies, DiamondCountsEveryIncomingEdge) {
  Diamond d;
  const auto deps = compute_dependencies(*d.r);
  EXPECT_EQ(deps.size(), 4u);
  EXPECT_EQ(deps.at(d.r.get()), 0);
  EXPECT_EQ(deps.at(d.a.get()), 1);
  EXPECT_EQ(deps.at(d.b.get()), 1);
  EXPECT_EQ(deps.at(d.c.get()), 2);
}

TEST(Ch03_1_Dependencies, RepeatedEdgesCountTwiceAndEmptyEdgesNotAtAll) {
  auto r = make("R", {1, 1, 1}), s = make("S", {}, 2);
  r->set_next_edges({{s, 0}, {nullptr, 0}, {s, 1}});  // both slots of S, one input without grad
  const auto deps = compute_dependencies(*r);
  EXPECT_EQ(deps.size(), 2u);
  EXPECT_EQ(deps.at(s.get()), 2);
}

TEST(Ch03_1_Dependencies, OnlyReachableNodesCount) {
  Diamond d;
  auto outsider = make("X", {1});  // points into the graph but is not reachable from R
  outsider->set_next_edges({{d.c, 0}});
  const auto deps = compute_dependencies(*d.a);  // start in the middle: A -> C
  EXPECT_EQ(deps.size(), 2u);
  EXPECT_EQ(deps.at(d.a.get()), 0);
  EXPECT_EQ(deps.at(d.c.get()), 1);
  EXPECT_EQ(deps.count(outsider.get()), 0u);
}

TEST(Ch03_1_Dependencies, LongChainDoesNotRecurse) {
  const int n = 100000;
  auto first = make("n0", {1});
  std::shared_ptr<TestNode> last = first;
  for (int i = 1; i < n; ++i) {
    auto next = make("n", {1});
    last->set_next_edges({{next, 0}});
    last = next;
  }
  const auto deps = compute_dependencies(*first);
  EXPECT_EQ(deps.size(), static_cast<std::size_t>(n));
  EXPECT_EQ(deps.at(first.get()), 0);
  EXPECT_EQ(deps.at(last.get()), 1);
}

// ----- ch03.2 run_backward ---------------------------------------------------------------------

TEST(Ch03_2_Engine, DiamondSumsWhereBranchesMeetAndRunsEachNodeOnce) {
  Diamond d;
  run_backward({d.r, 0}, f64({1.0}),
               {{d.r.get(), 0}, {d.a.get(), 1}, {d.b.get(), 1}, {d.c.get(), 2}});
  ASSERT_EQ(d.log.size(), 4u);
  EXPECT_EQ(d.log.front(), "R");
  EXPECT_EQ(d.log.back(), "C");  // only after both A and B
  ASSERT_EQ(d.c->received.size(), 1u);
  ASSERT_EQ(d.c->received[0].size(), 1u);
  EXPECT_EQ(d.c->received[0][0].item(), 5.0);  // 2 * 1 + 3 * 1
}

TEST(Ch03_2_Engine, RootGradientGoesToTheRootSlot) {
  auto r = make("R", {1}, 3), s = make("S", {});
  r->set_next_edges({{s, 0}});
  run_backward({r, 2}, f64({4.0}), {{r.get(), 0}, {s.get(), 1}});
  ASSERT_EQ(r->received.size(), 1u);
  ASSERT_EQ(r->received[0].size(), 3u);  // one entry per slot, undefined where nothing arrived
  EXPECT_FALSE(r->received[0][0].defined());
  EXPECT_FALSE(r->received[0][1].defined());
  EXPECT_EQ(r->received[0][2].item(), 4.0);
  EXPECT_EQ(s->received.at(0).at(0).item(), 4.0);
}

TEST(Ch03_2_Engine, GradientsReachTheRightSlots) {
  auto r = make("R", {2, 5}), s = make("S", {}, 2);
  r->set_next_edges({{s, 1}, {s, 0}});
  run_backward({r, 0}, f64({1.0}), {{r.get(), 0}, {s.get(), 2}});
  ASSERT_EQ(s->received.size(), 1u);
  EXPECT_EQ(s->received[0].at(0).item(), 5.0);
  EXPECT_EQ(s->received[0].at(1).item(), 2.0);
}

TEST(Ch03_2_Engine, ReleasesSavedStateUnlessRetained) {
  Diamond d;
  const auto deps = std::unordered_map<const Node*, int>{
      {d.r.get(), 0}, {d.a.get(), 1}, {d.b.get(), 1}, {d.c.get(), 2}};
  run_backward({d.r, 0}, f64({1.0}), deps, /*retain_graph=*/true);
  for (auto* n : {d.r.get(), d.a.get(), d.b.get(), d.c.get()}) EXPECT_EQ(n->releases, 0);
  run_backward({d.r, 0}, f64({1.0}), deps);
  for (auto* n : {d.r.get(), d.a.get(), d.b.get(), d.c.get()}) EXPECT_EQ(n->releases, 1);
}

TEST(Ch03_2_Engine, LongChainRunsWithoutRecursion) {
  const int n = 10000;
  auto first = make("n0", {1});
  std::unordered_map<const Node*, int> deps{{first.get(), 0}};
  std::shared_ptr<TestNode> last = first;
  for (int i = 1; i < n; ++i) {
    auto next = make("n", i == n - 1 ? std::vector<double>{} : std::vector<double>{1.0});
    last->set_next_edges({{next, 0}});
    deps[next.get()] = 1;
    last = next;
  }
  run_backward({first, 0}, f64({3.0}), deps);
  ASSERT_EQ(last->received.size(), 1u);
  EXPECT_EQ(last->received[0][0].item(), 3.0);
}

TEST(Ch03_2_Engine, WrongGradientCountIsAnError) {
  auto r = make("Liar", {1, 1}), s = make("S", {});
  r->set_next_edges({{s, 0}});  // one edge, but apply returns two gradients
  EXPECT_TT_ERROR(run_backward({r, 0}, f64({1.0}), {{r.get(), 0}, {s.get(), 1}}), "Liar",
                  "2 gradients", "1 inputs");
}

// ----- given: Node lifetime --------------------------------------------------------------------

TEST(Ch03_Node, LiveCountFollowsNodes) {
  const int64_t before = Node::live_count();
  {
    Diamond d;
    EXPECT_EQ(Node::live_count(), before + 4);
  }
  EXPECT_EQ(Node::live_count(), before);
}

TEST(Ch03_Node, DroppingALongChainDoesNotRecurse) {
  const int64_t before = Node::live_count();
  {
    auto head = make("n0", {1});
    for (int i = 1; i < 200000; ++i) {
      auto next = make("n", {1});
      next->set_next_edges({{head, 0}});
      head = next;
    }
    EXPECT_EQ(Node::live_count(), before + 200000);
  }  // a recursive release would be 200,000 destructor calls deep
  EXPECT_EQ(Node::live_count(), before);
}

TEST(Ch03_Node, SharedNodesSurviveUntilTheirLastOwner) {
  auto shared = make("shared", {});
  const int64_t before = Node::live_count();
  {
    auto a = make("A", {1});
    a->set_next_edges({{shared, 0}});
  }
  EXPECT_EQ(Node::live_count(), before);
  EXPECT_EQ(shared->name(), "shared");  // still alive: we own it
}

}  // namespace
}  // namespace tt::autograd
