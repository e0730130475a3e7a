// Chapter 05 against PyTorch (reference_data/ch05, written by generate_ch05.py): the files match
// MANIFEST.json; AdamW and SGD applied to PyTorch's gradients reproduce its parameters; and a
// small MLP trained end to end (forward, cross-entropy, backward, clipping, schedule, step)
// reproduces PyTorch's losses and parameters. Hyper-parameters are read from the manifest.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "tt/reference_data.h"  // sha256_hex, read_file
#include "tt/functional.h"
#include "tt/nn.h"
#include "tt/npy_tensor.h"
#include "tt/testing.h"

namespace tt {
namespace {

using json = nlohmann::json;
using nn::StateDict;

std::string ref_path(const std::string& file) {
  return testing::reference_path("ch05/" + file);
}

const json& manifest() {
  static const json m = json::parse(reference::read_file(ref_path("MANIFEST.json")));
  return m;
}

/// The manifest entry of `file`.
const json& entry(const std::string& file) {
  for (const json& e : manifest()["files"]) {
    if (e["file"] == file) return e;
  }
  TT_THROW("reference_data/ch05/", file, " is not in MANIFEST.json");
}

Tensor load(const std::string& file) {
  return load_npy(ref_path(file));
}

/// Expects `actual` to match the reference `file` within the manifest's tolerance.
void expect_file(const Tensor& actual, const std::string& file) {
  const json& e = entry(file);
  EXPECT_TENSOR_NEAR(actual, load(file), e["atol"].get<double>(), e["rtol"].get<double>())
      << "reference ch05/" << file;
}

/// "c_fc.weight" -> "c_fc_weight" (file names).
std::string file_name(std::string param) {
  std::replace(param.begin(), param.end(), '.', '_');
  return param;
}

std::vector<std::string> param_names() {
  return manifest()["params"].get<std::vector<std::string>>();
}

std::vector<std::string> runs_of(const std::string& optimizer) {
  std::vector<std::string> out;
  for (const auto& [name, cfg] : manifest()["runs"].items()) {
    if (cfg["optimizer"] == optimizer) out.push_back(name);
  }
  return out;
}

/// The optimizer of run `cfg` over `params`.
std::unique_ptr<optim::Optimizer> make_optimizer(const json& cfg, std::vector<Tensor> params) {
  if (cfg["optimizer"] == "adamw") {
    return std::make_unique<optim::AdamW>(std::move(params),
                                          optim::AdamWOptions{.lr = cfg["lr"],
                                                              .beta1 = cfg["beta1"],
                                                              .beta2 = cfg["beta2"],
                                                              .eps = cfg["eps"],
                                                              .weight_decay = cfg["weight_decay"]});
  }
  return std::make_unique<optim::SGD>(std::move(params),
                                      optim::SgdOptions{.lr = cfg["lr"],
                                                        .momentum = cfg["momentum"],
                                                        .dampening = cfg["dampening"],
                                                        .weight_decay = cfg["weight_decay"],
                                                        .nesterov = cfg["nesterov"]});
}

TEST(Ch05_Reference, FilesMatchTheManifest) {
  std::set<std::string> listed;
  for (const json& e : manifest()["files"]) {
    const std::string file = e["file"];
    listed.insert(file);
    EXPECT_EQ(reference::sha256_hex(reference::read_file(ref_path(file))),
              e["sha256"].get<std::string>())
        << file << " differs from MANIFEST.json";
    const Tensor t = load(file);
    EXPECT_EQ(dtype_name(t.dtype()), e["dtype"].get<std::string>()) << file;
    EXPECT_EQ(t.shape(), e["shape"].get<Shape>()) << file;
  }
  for (const auto& f : std::filesystem::directory_iterator(ref_path(""))) {
    if (f.path().extension() != ".npy") continue;
    EXPECT_TRUE(listed.count(f.path().filename().string()))
        << f.path() << " is not in MANIFEST.json (rerun generate_ch05.py)";
  }
}

/// Applies PyTorch's per-step gradients of `run` with our optimizer (no forward pass) and
/// compares the final parameters.
void optimizer_only(const std::string& run) {
  SCOPED_TRACE(run);
  const json& cfg = manifest()["runs"][run];
  std::vector<Tensor> params, grads;
  for (const std::string& p : param_names()) {
    params.push_back(load("init_" + file_name(p) + ".npy"));
    params.back().set_requires_grad(true);
    grads.push_back(load(run + "_grads_" + file_name(p) + ".npy"));
  }
  auto opt = make_optimizer(cfg, params);
  const bool scheduled = cfg.contains("schedule");
  const Tensor lrs = scheduled ? load(run + "_lrs.npy") : Tensor();
  for (int64_t step = 0; step < manifest()["steps"].get<int64_t>(); ++step) {
    if (scheduled) opt->set_lr(lrs.to_vector<double>()[static_cast<std::size_t>(step)]);
    for (std::size_t i = 0; i < params.size(); ++i)
      params[i].set_grad(grads[i].select(0, step).clone());
    opt->step();
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    expect_file(params[i], run + "_final_" + file_name(param_names()[i]) + ".npy");
  }
}

TEST(Ch05_2_SgdReference, TorchGradientsGiveTorchParameters) {
  ASSERT_FALSE(runs_of("sgd").empty());
  for (const std::string& run : runs_of("sgd")) optimizer_only(run);
}

TEST(Ch05_3_AdamWReference, TorchGradientsGiveTorchParameters) {
  ASSERT_FALSE(runs_of("adamw").empty());
  for (const std::string& run : runs_of("adamw")) optimizer_only(run);
}

TEST(Ch05_ReferenceTraining, MlpTrainingMatchesTorch) {
  const auto dims = manifest()["dims"].get<std::vector<int64_t>>();
  const Tensor xs = load("x.npy"), ys = load("y.npy");
  StateDict init;
  for (const std::string& p : param_names())
    init.emplace_back(p, load("init_" + file_name(p) + ".npy"));
  for (const auto& [run, cfg] : manifest()["runs"].items()) {
    SCOPED_TRACE(run);
    Generator gen(0);  // overwritten by the reference initialisation
    nn::MLP model(dims[0], dims[1], dims[2], gen);
    model.load_state_dict(init, "reference init");
    auto opt = make_optimizer(cfg, model.parameters());
    std::unique_ptr<optim::LRSchedule> schedule;
    if (cfg.contains("schedule")) {
      const json& s = cfg["schedule"];
      schedule = std::make_unique<optim::WarmupCosineLR>(s["max_lr"], s["min_lr"],
                                                         s["warmup_steps"], s["total_steps"]);
    }
    std::vector<float> losses, norms;
    const int64_t steps = manifest()["steps"];
    for (int64_t step = 0; step < steps; ++step) {
      if (schedule) schedule->apply(*opt);
      opt->zero_grad();
      Tensor loss = cross_entropy(model(xs.select(0, step)), ys.select(0, step));
      autograd::backward(loss);
      if (cfg.contains("max_norm")) {
        norms.push_back(
            static_cast<float>(optim::clip_grad_norm_(model.parameters(), cfg["max_norm"])));
      }
      opt->step();
      losses.push_back(static_cast<float>(loss.item()));
    }
    expect_file(from_vector<float>(losses, {steps}), run + "_losses.npy");
    if (!norms.empty()) expect_file(from_vector<float>(norms, {steps}), run + "_grad_norms.npy");
    for (const auto& [name, p] : model.named_parameters()) {
      expect_file(p, run + "_final_" + file_name(name) + ".npy");
    }
  }
}

}  // namespace
}  // namespace tt
