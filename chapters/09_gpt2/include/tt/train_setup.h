/// @file train_setup.h
/// @brief What a training app does before the loop, for any model family and layout (the
/// training library; see tt/trainer.h): the device, the parallel strategy and each rank's
/// device, rank 0 alone speaking, the tokenizer and data loaders of a shard set, and the log
/// lines of the plan.
/// @code
///   tt::train::TrainConfig config = tt::train::TrainConfig::parse(argc, argv);
///   tt::train::RunStart start = tt::train::start_run(config);  // the steps below, in order
///   if (!start.parallel) return 0;                              // --print-device
///   tt::train::TrainData data(config, *start.parallel);  // tokenizer + this rank's loaders
/// @endcode
/// start_run is pick_device, make_parallel_strategy ("single", "ddp", "zero1", "tp", "pp"),
/// check_same_on_all_ranks, TrainConfig::validate_for, rank_device and silence_other_ranks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tt/dataloader.h"
#include "tt/device.h"
#include "tt/tokenizer.h"
#include "tt/train_config.h"
#include "tt/train_parallel.h"

namespace tt::train {

/// `format` (one printf conversion of a double, e.g. "%.4f") applied to `value`.
std::string format_number(const char* format, double value);

/// The device of `name` ("auto", "cpu", "cuda", "cuda:1"). "auto": CUDA when a GPU, the CUDA
/// backend and every kernel of a training step exist there, else the CPU (printing why when a
/// GPU is present). Throws tt::Error when an explicit CUDA device is not usable (no GPU or
/// backend, or missing kernels: they are named).
Device pick_device(const std::string& name);

/// The strategy of the run: "pp" for --pp > 1 (chapter 14), "tp" for --tp > 1 or
/// --sequence-parallel (chapter 13), "zero1" for --zero 1, "ddp" when started by mpirun
/// (OpenMPI's OMPI_COMM_WORLD_SIZE is set), else "single" (gpt2::make_parallel_strategy), told
/// the device type of the run first (set_device_type: `picked`'s), then the model parallelism and
/// the pipeline (set_model_parallelism, set_pipeline).
std::unique_ptr<gpt2::ParallelStrategy> make_parallel_strategy(const TrainConfig& config,
                                                               Device picked = Device::cpu());

/// This rank's device: with several ranks on GPUs, cuda:local_rank (NCCL needs one GPU per
/// rank); otherwise `picked`. Throws tt::Error when the machine has fewer GPUs than local ranks.
Device rank_device(Device picked, const gpt2::ParallelStrategy& parallel);

/// On every rank but the logging one, sends stdout to /dev/null (rank 0 speaks for every rank;
/// errors still reach stderr). Throws tt::Error when that fails.
void silence_other_ranks(const gpt2::ParallelStrategy& parallel);

/// What start_run() gives a training app: the parallel strategy (null when --print-device printed
/// the device and the app should stop) and this rank's device.
struct RunStart {
  std::unique_ptr<gpt2::ParallelStrategy> parallel;  ///< null under --print-device
  Device device;                                     ///< this rank's device (rank_device)
};

/// The start of every training app (train_gpt2, train_llama): applies --threads, picks the device
/// (under --print-device prints it and returns a null strategy), makes the parallel strategy,
/// checks that every rank was started with the same options, validates them for the number of
/// data-parallel replicas (TrainConfig::validate_for(data_world_size())), picks this rank's device
/// and silences the other ranks. Throws tt::Error from any of those steps.
RunStart start_run(TrainConfig& config);

/// The tokenizer and this rank's data loaders of the shard set --data (tt/shard_set.h: its
/// manifest must list the tokenizer and the shards). Each rank reads its B rows of every global
/// batch of N*B rows (DataLoader rank options); the training order is shuffled with --seed,
/// the validation order is fixed.
struct TrainData {
  /// Loads `config.data`'s tokenizer and opens its "train" and "val" shards for `parallel`'s
  /// rank. Throws tt::Error (a missing or foreign shard set, a bad tokenizer file).
  TrainData(const TrainConfig& config, const gpt2::ParallelStrategy& parallel);

  Tokenizer tokenizer;  ///< `data/tokenizer.ttbpe`
  DataLoader train;     ///< the training batches of this rank
  DataLoader val;       ///< the validation batches of this rank
};

/// Prints the plan of the run on stdout: the data ("data: DIR (N train tokens, ...)"), the
/// layout when it has several processes ("parallel: ddp over N processes ...") and the batch and
/// schedule ("batch: B=.. T=.., tokens/step, accumulation, steps, AdamW ...").
void print_plan(const TrainConfig& config, const gpt2::ParallelStrategy& parallel,
                const TrainData& data);

}  // namespace tt::train
