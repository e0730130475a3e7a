// Before the training loop (tt/train_setup.h).
#include "tt/train_setup.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "tt/backend.h"
#include "tt/cuda_probe.h"
#include "tt/error.h"
#include "tt/gpt2.h"
#include "tt/parallel.h"
#include "tt/shard_set.h"

namespace tt::train {

namespace {

DataLoaderOptions loader_options(const TrainConfig& config, const gpt2::ParallelStrategy& parallel,
                                 int64_t vocab_size, bool shuffle) {
  DataLoaderOptions dl;
  dl.batch_size = config.B;
  dl.seq_len = config.T;
  dl.vocab_size = vocab_size;
  dl.shuffle = shuffle;
  dl.seed = config.seed;
  // This rank's B rows of each global batch of N*B rows (N replicas: the ranks that split one
  // model read the same rows).
  dl.rank = parallel.data_rank();
  dl.world_size = parallel.data_world_size();
  return dl;
}

}  // namespace

std::string format_number(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, value);
  return buf;
}

Device pick_device(const std::string& name) {
  const bool gpu = has_backend(DeviceType::kCUDA) && cuda_device_count() > 0;
  std::string missing;
  for (const std::string& op : gpt2::missing_training_kernels(DeviceType::kCUDA)) {
    missing += " " + op;
  }
  if (name == "auto") {
    if (gpu && !missing.empty()) {
      std::printf(
          "note: a GPU is present but CUDA kernels are missing (%s ); training on the "
          "CPU\n",
          missing.c_str());
    }
    return gpu && missing.empty() ? Device::cuda(0) : Device::cpu();
  }
  const Device d = Device::parse(name);
  if (d.is_cuda()) {
    TT_CHECK(gpu, "--device ", name, " but no CUDA device/backend is available (built with CUDA: ",
             built_with_cuda() ? "yes" : "no", ", devices: ", cuda_device_count(), ")");
    TT_CHECK(missing.empty(), "--device ", name,
             ": these kernels have no CUDA implementation yet:", missing);
  }
  return d;
}

std::unique_ptr<gpt2::ParallelStrategy> make_parallel_strategy(const TrainConfig& config,
                                                               Device picked) {
  // One process, or N started by mpirun (OpenMPI sets OMPI_COMM_WORLD_SIZE).
  const bool mpi = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
  // --tp / --sequence-parallel: chapter 13's "tp" (tensor parallel x data parallel).
  const bool split = config.tp > 1 || config.sequence_parallel;
  // --pp: chapter 14's "pp" (pipeline x tensor parallel x data parallel); --cp: chapter 16's
  // "cp" (context parallel x tensor parallel x data parallel).
  auto strategy = gpt2::make_parallel_strategy(config.pp > 1      ? "pp"
                                               : config.cp > 1    ? "cp"
                                               : split            ? "tp"
                                               : config.zero == 1 ? "zero1"
                                               : mpi              ? "ddp"
                                                                  : "single");
  strategy->set_device_type(picked.type);  // before the groups: CUDA ones may connect GPUs
  strategy->set_model_parallelism(static_cast<int>(config.tp), config.sequence_parallel);
  strategy->set_context_parallelism(static_cast<int>(config.cp));
  strategy->set_pipeline({static_cast<int>(config.pp), static_cast<int>(config.micro_batches),
                          config.schedule, static_cast<int>(config.chunks), config.pp_partition,
                          std::max<int64_t>(1, config.B / config.micro_batches), config.T});
  return strategy;
}

Device rank_device(Device picked, const gpt2::ParallelStrategy& parallel) {
  const Device device =
      picked.is_cuda() && parallel.world_size() > 1 ? Device::cuda(parallel.local_rank()) : picked;
  TT_CHECK(device.index < cuda_device_count() || !device.is_cuda(), "rank ", parallel.rank(),
           " is local rank ", parallel.local_rank(), " but this machine has ", cuda_device_count(),
           " GPU(s): start at most that many processes per machine");
  return device;
}

RunStart start_run(TrainConfig& config) {
  if (config.threads > 0) set_num_threads(config.threads);
  const Device picked = pick_device(config.device);
  if (config.print_device) {
    std::printf("%s\n", picked.str().c_str());
    return {nullptr, picked};
  }
  std::unique_ptr<gpt2::ParallelStrategy> parallel = make_parallel_strategy(config, picked);
  // Every rank was started with the same options (else: an error naming the rank that was not).
  check_same_on_all_ranks(config, *parallel);
  config.validate_for(parallel->data_world_size());
  const Device device = rank_device(picked, *parallel);
  silence_other_ranks(*parallel);
  return {std::move(parallel), device};
}

void silence_other_ranks(const gpt2::ParallelStrategy& parallel) {
  if (parallel.is_logging_rank()) return;
  TT_CHECK(std::freopen("/dev/null", "w", stdout) != nullptr, "cannot silence rank ",
           parallel.rank(), ": ", std::strerror(errno));
}

TrainData::TrainData(const TrainConfig& config, const gpt2::ParallelStrategy& parallel)
    : tokenizer(Tokenizer::load(config.data + "/tokenizer.ttbpe")),
      train(shard_set_paths(config.data, "train", config.data + "/tokenizer.ttbpe"),
            loader_options(config, parallel, tokenizer.vocab_size(), true)),
      val(shard_set_paths(config.data, "val", config.data + "/tokenizer.ttbpe"),
          loader_options(config, parallel, tokenizer.vocab_size(), false)) {}

void print_plan(const TrainConfig& o, const gpt2::ParallelStrategy& par, const TrainData& data) {
  const int64_t ranks = par.data_world_size();
  std::printf("data: %s (%lld train tokens, %lld batches/epoch), tokenizer %lld ids\n",
              o.data.c_str(), static_cast<long long>(data.train.num_tokens()),
              static_cast<long long>(data.train.batches_per_epoch()),
              static_cast<long long>(data.tokenizer.vocab_size()));
  if (par.splits_model()) {
    std::printf(
        "parallel: %s over %d processes: %lld data-parallel replica(s) of %lld ranks that split "
        "the model (B=%lld rows per replica, %lld per global batch)\n",
        par.name().c_str(), par.world_size(), static_cast<long long>(ranks),
        static_cast<long long>(par.world_size() / ranks), static_cast<long long>(o.B),
        static_cast<long long>(o.B * ranks));
  } else if (ranks > 1 || par.name() != "single") {
    std::printf("parallel: %s over %lld processes (B=%lld rows per rank, %lld per global batch)\n",
                par.name().c_str(), static_cast<long long>(ranks), static_cast<long long>(o.B),
                static_cast<long long>(o.B * ranks));
  }
  std::printf(
      "batch: B=%lld T=%lld, %lld tokens/step (grad accumulation %lld), %lld steps, "
      "AdamW lr %g warmup %lld cosine to %g\n",
      static_cast<long long>(o.B), static_cast<long long>(o.T),
      static_cast<long long>(o.tokens_per_step(ranks)),
      static_cast<long long>(o.accumulation(ranks)), static_cast<long long>(o.steps), o.lr,
      static_cast<long long>(o.warmup), o.lr * o.min_lr_frac);
}

}  // namespace tt::train
