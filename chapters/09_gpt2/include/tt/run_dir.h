/// @file run_dir.h
/// @brief The run directory of a training run (the training library, part 2 of 3; see also
/// tt/train_config.h and tt/trainer.h): one run at a time (an exclusive lock), the run log
/// train.csv, the checkpoint, the loss plot and the samples.
///
/// Layout of `--out`:
/// @verbatim
///   run.lock            flock'ed by the run using the directory; holds its pid
///   train.csv           one row per step, plus validation rows (cut back on --resume)
///   checkpoint.ttckpt   model + optimizer + the run's configuration (atomic writes)
///   model.bin           llm.c model file, at the end
///   loss.png            gnuplot, when installed
///   samples.txt         every sample the run printed, with its step
/// @endverbatim
/// Guarantees: a second run on the same directory fails at once naming the holder's pid; a run
/// without --resume refuses a directory that holds a checkpoint unless --overwrite; a crash during
/// a checkpoint write leaves a temporary file `FILE.tmp.XXXXXX` that the next run in the
/// directory (it holds the lock, so no writer is alive) removes; files keep mode 0666 - umask
/// (ckpt::write_file_atomic).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tt/csv.h"

namespace tt::train {

/// A run directory opened by one process of a run.
class RunDir {
 public:
  /// How a run opens its directory.
  struct Options {
    bool writer = true;      ///< the process that writes (rank 0): takes the lock, cleans up
    bool resume = false;     ///< --resume: the checkpoint must exist
    bool overwrite = false;  ///< --overwrite: an earlier run's checkpoint and model are removed
  };

  /// Opens `path` (creating it). The writer takes an exclusive flock on `path/run.lock` (throws
  /// tt::Error naming the holder's pid when another process has it), removes the stale temporary
  /// files of the run's files, and then checks the state: with resume the checkpoint must exist;
  /// without, a checkpoint of an earlier run is refused (throws, suggesting --resume or
  /// --overwrite) unless overwrite, which removes it and model.bin. Other processes (ranks > 0)
  /// only check that the checkpoint exists when resuming.
  RunDir(std::string path, Options options);
  ~RunDir();
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;

  /// The directory.
  const std::string& path() const { return path_; }
  /// `path/name`.
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  /// `path/checkpoint.ttckpt`.
  std::string checkpoint_path() const { return file("checkpoint.ttckpt"); }
  /// `path/train.csv`.
  std::string log_path() const { return file("train.csv"); }
  /// Number and bytes of the stale temporary files removed when the directory was opened.
  int64_t removed_temp_files() const { return removed_files_; }
  /// Bytes of the removed temporary files.
  int64_t removed_temp_bytes() const { return removed_bytes_; }

  /// Opens train.csv with `columns`: a new file, or (append) the existing one continued after
  /// cut_log_after(). Writer only.
  CsvWriter& open_log(const std::vector<std::string>& columns, bool append);
  /// For --resume: cuts train.csv back to `step`, keeping the header and the rows of steps <=
  /// step (and dropping a last line cut off mid-write), atomically. Nothing when it is missing.
  void cut_log_after(int64_t step) const;
  /// Appends "step N: text" to samples.txt. Writer only.
  void add_sample(int64_t step, const std::string& text) const;
  /// Draws loss.png from train.csv with gnuplot (train loss, validation points); false when
  /// gnuplot is missing or fails.
  bool plot_loss(const std::string& title) const;

 private:
  std::string path_;
  Options options_;
  int lock_fd_ = -1;
  int64_t removed_files_ = 0, removed_bytes_ = 0;
  std::unique_ptr<CsvWriter> log_;
};

/// The names of the files a RunDir writes atomically (their temporary files are
/// `NAME.tmp.XXXXXX`).
const std::vector<std::string>& run_dir_files();

}  // namespace tt::train
