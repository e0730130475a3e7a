// Chapter 05 demo: trains a small MLP with AdamW, warmup + cosine schedule and gradient
// clipping on a synthetic 4-class problem, then saves a checkpoint and reloads it into a fresh
// model. Usage: tt_ch05_demo [checkpoint path (default: tt_ch05_demo.ckpt in the temp dir)]
#include <cstdio>
#include <filesystem>

#include "tt/functional.h"
#include "tt/nn.h"

using namespace tt;

namespace {

/// A batch of 8-dim points; the class is the quadrant of (x0, x1), the other dims are noise.
std::pair<Tensor, Tensor> make_batch(Generator& gen, int64_t n) {
  Tensor x = randn({n, 8}, gen);
  std::vector<int64_t> y;
  for (int64_t i = 0; i < n; ++i) {
    const float a = x.at<float>({i, 0}), b = x.at<float>({i, 1});
    y.push_back((a > 0 ? 1 : 0) + (b > 0 ? 2 : 0));
  }
  return {x, from_vector<int64_t>(y, {n})};
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path =
      argc > 1 ? argv[1] : (std::filesystem::temp_directory_path() / "tt_ch05_demo.ckpt").string();
  Generator init(0), data(1);
  nn::MLP model(8, 32, 4, init);
  std::printf("%s\n%lld parameters\n", model.to_string().c_str(),
              static_cast<long long>(model.num_parameters()));

  optim::AdamW opt(model.parameters(), {.lr = 1e-2, .weight_decay = 0.01});
  const int64_t steps = 200;
  const optim::WarmupCosineLR schedule(1e-2, 1e-3, 20, steps);
  for (int64_t step = 0; step < steps; ++step) {
    schedule.apply(opt);
    opt.zero_grad();
    auto [x, y] = make_batch(data, 64);
    Tensor loss = cross_entropy(model(x), y);
    autograd::backward(loss);
    const double norm = optim::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    if (step % 40 == 0 || step == steps - 1) {
      std::printf("step %3lld  lr %.5f  loss %.4f  grad norm %.3f\n", static_cast<long long>(step),
                  opt.lr(), loss.item(), norm);
    }
  }

  ckpt::save_checkpoint(path, model, &opt);
  Generator other(42);
  nn::MLP restored(8, 32, 4, other);
  optim::AdamW restored_opt(restored.parameters(), {});
  ckpt::load_checkpoint(path, restored, &restored_opt);
  auto [x, y] = make_batch(data, 256);
  autograd::NoGradGuard no_grad;
  const bool same = model(x).to_vector<float>() == restored(x).to_vector<float>();
  std::printf("saved %s (%ju bytes); reloaded: step %lld, identical outputs: %s\n", path.c_str(),
              static_cast<uintmax_t>(std::filesystem::file_size(path)),
              static_cast<long long>(restored_opt.step_count()), same ? "yes" : "NO");
  return same ? 0 : 1;
}
