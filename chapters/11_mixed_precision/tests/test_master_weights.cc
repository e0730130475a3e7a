// The master-weight AdamW (tt/master_weights.h): MasterWeightAdamW on the CPU (its kernel is
// exercise ch11.5) against chapter 05's AdamW and against a bfloat16 weight, the copies read by
// the bf16 linear layers, and the CUDA kernel "adamw_step_bf16" against the CPU one (skipped
// without a GPU).
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../../09_gpt2/tests/ch09_test_util.h"
#include "tt/autograd.h"
#include "tt/bfloat16_cast.h"
#include "tt/dispatcher.h"
#include "tt/functional.h"
#include "tt/gpt2.h"
#include "tt/master_weights.h"
#include "tt/mixed_precision.h"
#include "tt/testing.h"
#include "tt/train.h"

namespace tt {
namespace {

const Device kCuda = Device::cuda(0);

/// Equal element for element (dtype kept).
bool same(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && allclose(a.to(Device::cpu()), b.to(Device::cpu()), 0.0, 0.0);
}

std::vector<uint16_t> bits(const Tensor& t) {
  std::vector<uint16_t> out;
  for (bfloat16 v : t.to(Device::cpu()).contiguous().to_vector<bfloat16>()) out.push_back(v.bits);
  return out;
}

/// Parameters of awkward sizes (1, 3, around a chunk, a matrix) with gradients, from `seed`.
std::vector<Tensor> make_params(uint64_t seed, Device device = Device::cpu()) {
  Generator gen(seed);
  std::vector<Tensor> ps;
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{65535}, int64_t{65537}}) {
    ps.push_back(randn({n}, gen).to(device));
  }
  ps.push_back(randn({70, 33}, gen).to(device));
  for (Tensor& p : ps) p.set_requires_grad(true);
  return ps;
}

/// Gives every parameter the gradient randn * scale (a new one per call), same for equal seeds.
void set_grads(const std::vector<Tensor>& ps, uint64_t seed, double scale = 1.0) {
  Generator gen(seed);
  for (const Tensor& p : ps) {
    const Tensor g = randn(p.shape(), gen);
    p.set_grad(mul(g, scale).to(p.device()));
  }
}

std::vector<Tensor> clones(const std::vector<Tensor>& ps) {
  std::vector<Tensor> out;
  for (const Tensor& p : ps) {
    Tensor c = p.detach().clone();
    c.set_requires_grad(true);
    out.push_back(c);
  }
  return out;
}

const optim::AdamWOptions kOptions{
    .lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};

// ----- the CPU kernel (exercise ch11.5) ----------------------------------------------------------

/// The bits of float_to_bfloat16_rne (exercise ch11.1) of every element of float32 `t`.
std::vector<uint16_t> rounded_bits(const Tensor& t) {
  std::vector<uint16_t> out;
  for (float v : t.to(Device::cpu()).contiguous().to_vector<float>()) {
    out.push_back(float_to_bfloat16_rne(v).bits);
  }
  return out;
}

TEST(Ch11_5_AdamWMasterUpdate, KernelUpdatesTheMastersAsChapter05ThenRoundsThem) {
  // The kernel alone, on copies it must fill (no conversion runs before it).
  const std::vector<Tensor> masters = make_params(12);
  const std::vector<Tensor> plain = clones(masters);
  std::vector<Tensor> grads, m, v, m05, v05, copies;
  for (const Tensor& p : masters) {
    for (auto* list : {&m, &v, &m05, &v05}) list->push_back(zeros_like(p));
    copies.push_back(empty(p.shape(), {.dtype = DType::kBFloat16}));
  }
  const auto detach = [](const std::vector<Tensor>& ts) {
    std::vector<Tensor> out;
    for (const Tensor& t : ts) out.push_back(t.detach());
    return out;
  };
  const std::vector<Tensor> mp = detach(masters), pp = detach(plain);
  for (int64_t step = 1; step <= 3; ++step) {
    Generator gen(40 + step);
    grads.clear();
    for (const Tensor& p : masters) grads.push_back(randn(p.shape(), gen));
    const optim::AdamWStepArgs args{1e-2, 0.9, 0.95, 1e-8, 0.1, step};
    const Tensor skip = scalar_tensor(step == 2 ? 1.0 : 0.0, {.dtype = DType::kFloat64});
    call_kernel<AdamWStepBf16Kernel>("adamw_step_bf16", Device::cpu(), mp, grads, m, v, copies,
                                     args, step == 1 ? Tensor() : skip);
    if (step != 2) {  // step 2 is skipped: chapter 05's kernel is not called for it
      call_kernel<optim::AdamWStepKernel>("adamw_step", Device::cpu(), pp, grads, m05, v05, args);
    }
    for (std::size_t j = 0; j < masters.size(); ++j) {
      ASSERT_TRUE(same(mp[j], pp[j])) << "parameter " << j << " step " << step
                                      << ": the masters differ from chapter 05's AdamW";
      ASSERT_TRUE(same(m[j], m05[j]) && same(v[j], v05[j])) << "parameter " << j << " moments";
      ASSERT_EQ(bits(copies[j]), rounded_bits(mp[j]))
          << "parameter " << j << " step " << step
          << (step == 2 ? ": a skipped step still writes the copies from the masters"
                        : ": the copy is not the updated master, rounded to nearest even");
    }
  }
}

// ----- MasterWeightAdamW on the CPU --------------------------------------------------------------

TEST(Ch11_5_MasterWeightAdamW, SameMastersAsAdamWAndCopiesAreTheirRounding) {
  const std::vector<Tensor> a = make_params(1);
  const std::vector<Tensor> b = clones(a);
  optim::AdamW plain(a, kOptions);
  MasterWeightAdamW master(b, kOptions);
  for (std::size_t j = 1; j < b.size(); ++j) (void)bf16_weight(b[j]);  // all but b[0] read
  for (uint64_t step = 0; step < 3; ++step) {
    set_grads(a, 100 + step);
    set_grads(b, 100 + step);
    plain.step();
    master.step();
  }
  EXPECT_FALSE(master.copy_of(b[0]).defined()) << "a parameter never read in bf16 has no copy";
  for (std::size_t j = 0; j < a.size(); ++j) {
    EXPECT_TRUE(same(a[j], b[j])) << "parameter " << j << ": the masters differ from AdamW's";
    if (j == 0) continue;
    const Tensor copy = master.copy_of(b[j]);
    ASSERT_TRUE(copy.defined()) << "parameter " << j << ": no current copy after a step";
    EXPECT_EQ(copy.dtype(), DType::kBFloat16);
    EXPECT_EQ(copy.shape(), b[j].shape());
    EXPECT_EQ(bits(copy), bits(b[j].to(DType::kBFloat16))) << "parameter " << j;
  }
  // The state and its names are AdamW's: checkpoints move between the two.
  const auto sa = plain.state_dict();
  const auto sb = master.state_dict();
  ASSERT_EQ(sa.size(), sb.size());
  for (std::size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].first, sb[i].first);
    EXPECT_TRUE(same(sa[i].second, sb[i].second)) << sa[i].first;
  }
  EXPECT_EQ(master.name(), "AdamW");
}

TEST(Ch11_5_MasterWeightAdamW, SmallStepsMoveTheMasterWhereABfloat16WeightStalls) {
  // lr 1e-4 next to a weight of 1.0: each step is below half of bfloat16's spacing there
  // (2^-8 / 2 = 2e-3). A weight stored in bfloat16 rounds back after every step and never moves;
  // the float32 master takes all 100 steps (~1e-2) and its copy follows.
  const optim::AdamWOptions o{.lr = 1e-4, .weight_decay = 0.0};
  Tensor master = ones({1});
  master.set_requires_grad(true);
  Tensor weight = ones({1});  // "stored in bfloat16": rounded after each update
  weight.set_requires_grad(true);
  MasterWeightAdamW with_master({master}, o);
  optim::AdamW without({weight}, o);
  (void)bf16_weight(master);  // a layer reads it: the steps write its copy
  for (int step = 0; step < 100; ++step) {
    master.set_grad(ones({1}));
    weight.set_grad(ones({1}));
    with_master.step();
    without.step();
    weight.detach().copy_(weight.detach().to(DType::kBFloat16));
  }
  EXPECT_NEAR(master.item(), 1.0 - 100 * 1e-4, 1e-5) << "the float32 master takes every step";
  EXPECT_NEAR(with_master.copy_of(master).to(DType::kFloat32).item(), 0.99, 2e-3)
      << "its copy is the master, rounded";
  EXPECT_EQ(weight.item(), 1.0) << "a bfloat16 weight loses every step: the demonstration failed";
}

TEST(Ch11_5_MasterWeightAdamW, Bf16WeightReadsTheCopyOnlyWhileItIsCurrent) {
  const std::vector<Tensor> ps = make_params(2);
  const Tensor& w = ps.back();
  {
    MasterWeightAdamW opt(ps, kOptions);
    EXPECT_FALSE(opt.copy_of(w).defined()) << "no copy is current before the first step";
    EXPECT_NE(bf16_weight(w).data_ptr(), bf16_weight(w).data_ptr()) << "before a step: casts";
    set_grads(ps, 7);
    opt.step();
    const Tensor copy = opt.copy_of(w);
    ASSERT_TRUE(copy.defined());
    EXPECT_EQ(bf16_weight(w).data_ptr(), copy.data_ptr()) << "after a step: the copy itself";
    EXPECT_EQ(bits(bf16_weight(w)), bits(w.to(DType::kBFloat16)));

    opt.invalidate_copies();
    EXPECT_FALSE(opt.copy_of(w).defined());
    const Tensor cast = bf16_weight(w);
    EXPECT_NE(cast.data_ptr(), copy.data_ptr()) << "after invalidate_copies(): a cast";
    EXPECT_EQ(bits(cast), bits(w.to(DType::kBFloat16)));
    opt.step();  // current again
    EXPECT_EQ(bf16_weight(w).data_ptr(), opt.copy_of(w).data_ptr());
    EXPECT_TT_ERROR(opt.copy_of(ones({2})), "copy_of", "not one of its parameters");
  }
  EXPECT_EQ(bits(bf16_weight(w)), bits(w.to(DType::kBFloat16))) << "after the optimizer: casts";
  MasterWeightAdamW again(ps, kOptions);  // the first one unregistered its parameters
  EXPECT_FALSE(again.copy_of(w).defined());
}

TEST(Ch11_MasterWeightAdamW, RefusesSharedAndNonFloat32Parameters) {
  const std::vector<Tensor> ps = make_params(3);
  MasterWeightAdamW first(ps, kOptions);
  EXPECT_TT_ERROR(MasterWeightAdamW({ps[1]}, kOptions), "MasterWeightAdamW",
                  "already has bfloat16 copies");
  Tensor d = ones({4}, {.dtype = DType::kFloat64});
  d.set_requires_grad(true);
  EXPECT_TT_ERROR(MasterWeightAdamW({d}, kOptions), "MasterWeightAdamW", "float32", "float64");
  // The kernels check the copies they are given.
  const std::vector<Tensor> wrong = {ones({1}, {.dtype = DType::kBFloat16})};
  std::vector<Tensor> g = {zeros_like(ps[0])}, m = {zeros_like(ps[0])}, v = {zeros_like(ps[0])};
  const optim::AdamWStepArgs args{1e-3, 0.9, 0.999, 1e-8, 0.0, 1};
  EXPECT_TT_ERROR(
      call_kernel<AdamWStepBf16Kernel>("adamw_step_bf16", Device::cpu(), std::vector<Tensor>{ps[1]},
                                       g, m, v, wrong, args, Tensor()),
      "adamw_step_bf16", "copies[0]", "bfloat16");
}

TEST(Ch11_5_MasterWeightAdamW, ASkippedStepKeepsTheMastersAndWritesTheCopies) {
  const std::vector<Tensor> ps = make_params(4);
  const std::vector<Tensor> before = clones(ps);
  MasterWeightAdamW opt(ps, kOptions);
  for (const Tensor& p : ps) (void)bf16_weight(p);
  set_grads(ps, 9);
  opt.step_unless(scalar_tensor(1.0, {.dtype = DType::kFloat64}));
  for (std::size_t j = 0; j < ps.size(); ++j) {
    EXPECT_TRUE(same(ps[j], before[j])) << "parameter " << j << " moved in a skipped step";
    ASSERT_TRUE(opt.copy_of(ps[j]).defined()) << "parameter " << j;
    EXPECT_EQ(bits(opt.copy_of(ps[j])), bits(ps[j].to(DType::kBFloat16))) << "parameter " << j;
  }
  opt.step_unless(scalar_tensor(0.0, {.dtype = DType::kFloat64}));
  EXPECT_FALSE(same(ps[0], before[0])) << "a step with skip = 0 updates";
  EXPECT_EQ(bits(opt.copy_of(ps[0])), bits(ps[0].to(DType::kBFloat16)));
}

/// Losses of `steps` training steps of the tiny GPT-2 with the "bf16" set on `device`, with
/// MasterWeightAdamW (copies) or optim::AdamW (casts); `poison` zeroes the copy of one linear
/// weight after the first step (a test that the layers read the copies).
std::vector<double> train_tiny(bool master, Device device, bool poison = false, int steps = 3) {
  gpt2::GPT2 model(test09::tiny_config(), 11);
  model.to(device);
  model.set_ops(gpt2::model_ops("bf16"));
  const auto groups = gpt2::param_groups(model, 0.1);
  std::unique_ptr<optim::Optimizer> opt = master ? make_master_weight_adamw(groups, kOptions)
                                                 : std::make_unique<optim::AdamW>(groups, kOptions);
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    const Batch batch = test09::fixed_batch(2, 8, 50, 30 + s);
    opt->zero_grad();
    const Tensor loss = model.loss(batch.inputs.to(device), batch.targets.to(device));
    autograd::backward(loss);
    losses.push_back(loss.item());
    opt->step();
    if (poison && s == 0) {
      auto& mw = dynamic_cast<MasterWeightAdamW&>(*opt);
      for (const auto& [name, p] : model.named_parameters()) {
        const Tensor copy = mw.copy_of(p);
        if (name.find("wte") != std::string::npos || name.find("ln_") != std::string::npos) {
          EXPECT_FALSE(copy.defined()) << name << " is read in float32: it needs no copy";
        }
        if (name.find("c_fc.weight") == std::string::npos) continue;
        EXPECT_TRUE(copy.defined()) << name << ": a linear weight has a copy after a step";
        if (copy.defined()) copy.fill_(0.0);
      }
    }
  }
  return losses;
}

TEST(Ch11_5_MasterWeightAdamW, Gpt2TrainsBitForBitAsWithCastsAndReadsTheCopies) {
  const std::vector<double> casts = train_tiny(false, Device::cpu());
  const std::vector<double> copies = train_tiny(true, Device::cpu());
  ASSERT_EQ(casts.size(), copies.size());
  for (std::size_t s = 0; s < casts.size(); ++s) {
    EXPECT_EQ(casts[s], copies[s])
        << "step " << s << ": a copy is the master's rounding, as a cast";
  }
  const std::vector<double> poisoned = train_tiny(true, Device::cpu(), /*poison=*/true);
  EXPECT_EQ(poisoned[0], copies[0]);
  EXPECT_NE(poisoned[1], copies[1]) << "zeroing a copy did not change the loss: the linear "
                                       "layers do not read the optimizer's copies";
}

TEST(Ch11_MasterWeightAdamW, TheBf16SetBringsIt) {
  const gpt2::ModelOps ops = gpt2::model_ops("bf16");
  ASSERT_TRUE(static_cast<bool>(ops.adamw));
  Tensor p = ones({3});
  p.set_requires_grad(true);
  const auto opt = ops.adamw({optim::ParamGroup{{p}, 0.0}}, kOptions);
  EXPECT_NE(dynamic_cast<MasterWeightAdamW*>(opt.get()), nullptr);
  EXPECT_TRUE(static_cast<bool>(gpt2::model_ops("bf16_recompute").adamw));
}

// ----- the CUDA kernel ---------------------------------------------------------------------------

TEST(Ch11_5_CudaMasterWeightAdamW, MatchesTheCpuKernelOverSteps) {
  TT_SKIP_IF_NO_CUDA();
  std::vector<Tensor> cpu = make_params(6);
  // A misaligned parameter (scalar path): a contiguous view one element into a larger tensor.
  Tensor big = randn({1001});
  cpu.push_back(big.narrow(0, 1, 1000).contiguous());
  cpu.back().set_requires_grad(true);
  std::vector<Tensor> gpu;
  for (const Tensor& p : cpu) {
    Tensor g = p.detach().to(kCuda);
    g.set_requires_grad(true);
    gpu.push_back(g);
  }
  Tensor holder = empty({1001}, {DType::kFloat32, kCuda});  // the misaligned one on the GPU
  holder.narrow(0, 1, 1000).copy_(cpu.back().detach());
  gpu.back() = holder.narrow(0, 1, 1000);
  gpu.back().set_requires_grad(true);
  MasterWeightAdamW on_cpu(cpu, kOptions);
  MasterWeightAdamW on_gpu(gpu, kOptions);
  for (const Tensor& p : cpu) (void)bf16_weight(p);
  for (const Tensor& p : gpu) (void)bf16_weight(p);
  for (uint64_t step = 0; step < 4; ++step) {
    set_grads(cpu, 200 + step, step == 2 ? 1e-3 : 1.0);
    set_grads(gpu, 200 + step, step == 2 ? 1e-3 : 1.0);
    on_cpu.step();
    on_gpu.step();
    for (std::size_t j = 0; j < cpu.size(); ++j) {
      const Tensor m = gpu[j].detach().to(Device::cpu());
      EXPECT_TRUE(allclose(m, cpu[j].detach(), 1e-5, 1e-6))
          << "parameter " << j << " (" << cpu[j].numel() << " elements) step " << step;
      ASSERT_TRUE(on_gpu.copy_of(gpu[j]).defined());
      EXPECT_EQ(bits(on_gpu.copy_of(gpu[j])), bits(m.to(DType::kBFloat16)))
          << "parameter " << j << " step " << step << ": the copy is not the master's rounding";
    }
  }
}

TEST(Ch11_CudaMasterWeightAdamW, ASkippedStepWritesOnlyTheCopies) {
  TT_SKIP_IF_NO_CUDA();
  const std::vector<Tensor> ps = make_params(8, kCuda);
  const std::vector<Tensor> before = clones(ps);
  MasterWeightAdamW opt(ps, kOptions);
  for (const Tensor& p : ps) (void)bf16_weight(p);
  set_grads(ps, 3);
  opt.step_unless(scalar_tensor(1.0, {.dtype = DType::kFloat64}).to(kCuda));
  for (std::size_t j = 0; j < ps.size(); ++j) {
    EXPECT_TRUE(same(ps[j].to(Device::cpu()), before[j].to(Device::cpu()))) << j;
    EXPECT_EQ(bits(opt.copy_of(ps[j])), bits(ps[j].to(DType::kBFloat16))) << j;
  }
  for (const auto& [name, t] : opt.state_dict()) {
    if (name.starts_with("state.")) {
      EXPECT_EQ(sum(t.to(Device::cpu())).item(), 0.0) << name << " changed in a skipped step";
    }
  }
}

TEST(Ch11_CudaMasterWeightAdamW, Gpt2TrainsAsWithCasts) {
  TT_SKIP_IF_NO_CUDA();
  const std::vector<double> casts = train_tiny(false, kCuda);
  const std::vector<double> copies = train_tiny(true, kCuda);
  for (std::size_t s = 0; s < casts.size(); ++s) {
    EXPECT_NEAR(casts[s], copies[s], 1e-5 * std::abs(casts[s])) << "step " << s;
  }
  const std::vector<double> poisoned = train_tiny(true, kCuda, /*poison=*/true);
  EXPECT_NE(poisoned[1], copies[1]) << "the CUDA linear layers do not read the copies";
}

}  // namespace
}  // namespace tt
