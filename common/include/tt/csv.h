/// @file csv.h
/// @brief A small CSV writer for run logs (one row per training step), readable by gnuplot,
/// pandas and spreadsheets.
#pragma once

#include <fstream>
#include <string>
#include <vector>

namespace tt {

/// Writes a header row, then rows of numbers or text, flushing each row so a crash or Ctrl-C
/// keeps everything written so far. Cells containing ',', '"' or a newline are quoted.
/// @code
/// tt::CsvWriter csv("run.csv", {"step", "loss", "lr"});
/// csv.row({"1", "2.31", "0.0006"});
/// @endcode
class CsvWriter {
 public:
  /// Creates (truncates) `path` and writes the header; throws tt::Error if it cannot.
  /// With `append` an existing file is continued instead (its header is kept) — for resumed runs.
  CsvWriter(const std::string& path, const std::vector<std::string>& columns, bool append = false);
  /// Writes one row; throws tt::Error when the number of cells differs from the header's.
  void row(const std::vector<std::string>& cells);
  /// The file path.
  const std::string& path() const { return path_; }
  /// A number as a short, exact-enough cell ("%.6g").
  static std::string num(double value);

 private:
  std::string path_;
  std::size_t columns_;
  std::ofstream out_;
};

}  // namespace tt
