// Timer helpers, the progress bar and the CSV writer (tt/timer.h, tt/progress.h, tt/csv.h).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "tt/csv.h"
#include "tt/error.h"
#include "tt/progress.h"
#include "tt/timer.h"

namespace tt {

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "?";
  const auto s = static_cast<long long>(std::llround(seconds));
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof(buf), "%llds", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", s / 3600, (s % 3600) / 60);
  }
  return buf;
}

ProgressBar::ProgressBar(int64_t total, std::string label, std::FILE* out, int every_percent)
    : total_(total < 1 ? 1 : total),
      label_(std::move(label)),
      out_(out),
      tty_(out != nullptr && isatty(fileno(out)) != 0),
      every_percent_(every_percent < 1 ? 1 : every_percent) {}

double ProgressBar::eta_seconds(int64_t done, int64_t total, double elapsed) {
  if (done >= total) return 0;
  if (done <= 0) return -1;
  return elapsed / static_cast<double>(done) * static_cast<double>(total - done);
}

std::string ProgressBar::render(int64_t done, const std::string& status, double elapsed) const {
  constexpr int kWidth = 30;
  const double frac = static_cast<double>(done) / static_cast<double>(total_);
  const int fill = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<std::size_t>(fill), '#');
  bar.resize(kWidth, '.');
  char buf[160];
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
  std::snprintf(buf, sizeof(buf), "[%s] %3d%% %lld/%lld  %.2f it/s  ETA %s", bar.c_str(),
                static_cast<int>(frac * 100), static_cast<long long>(done),
                static_cast<long long>(total_), rate,
                format_duration(eta_seconds(done, total_, elapsed)).c_str());
  std::string line = label_.empty() ? std::string(buf) : label_ + " " + buf;
  if (!status.empty()) line += "  " + status;
  return line;
}

void ProgressBar::update(int64_t done, const std::string& status) {
  done_ = done < 0 ? 0 : (done > total_ ? total_ : done);
  status_ = status;
  if (out_ == nullptr) return;
  const double now = timer_.elapsed_s();
  if (tty_) {
    if (done_ < total_ && last_draw_ >= 0 && now - last_draw_ < 0.1) return;
    std::fprintf(out_, "\r%s\033[K", render(done_, status_, now).c_str());
    drawn_ = true;
  } else {
    const int bucket = static_cast<int>(done_ * 100 / total_) / every_percent_;
    if (bucket == last_bucket_) return;
    last_bucket_ = bucket;
    std::fprintf(out_, "%s\n", render(done_, status_, now).c_str());
  }
  last_draw_ = now;
  std::fflush(out_);
}

void ProgressBar::println(const std::string& line, std::FILE* stream) {
  const bool redraw = tty_ && drawn_ && !finished_;
  if (redraw) {
    std::fprintf(out_, "\r\033[K");
    std::fflush(out_);
  }
  std::fprintf(stream, "%s\n", line.c_str());
  std::fflush(stream);
  if (redraw) {
    std::fprintf(out_, "%s", render(done_, status_, timer_.elapsed_s()).c_str());
    std::fflush(out_);
  }
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  if (out_ == nullptr) return;
  if (tty_) {
    std::fprintf(out_, "\r%s\033[K\n", render(done_, status_, timer_.elapsed_s()).c_str());
  } else if (done_ * 100 / total_ / every_percent_ != last_bucket_) {
    std::fprintf(out_, "%s\n", render(done_, status_, timer_.elapsed_s()).c_str());
  }
  std::fflush(out_);
}

ProgressBar::~ProgressBar() {
  if (!finished_ && tty_ && drawn_ && out_ != nullptr) std::fprintf(out_, "\n");
}

CsvWriter::CsvWriter(const std::string& path, const std::vector<std::string>& columns, bool append)
    : path_(path), columns_(columns.size()) {
  const bool continuing = append && std::filesystem::exists(path);
  out_.open(path, continuing ? std::ios::app : std::ios::trunc);
  TT_CHECK(out_, "CsvWriter: cannot open '", path, "' for writing");
  if (!continuing) row(columns);
}

void CsvWriter::row(const std::vector<std::string>& cells) {
  TT_CHECK(cells.size() == columns_, "CsvWriter: row of ", cells.size(), " cells for ", columns_,
           " columns in '", path_, "'");
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const std::string& c = cells[i];
    if (i > 0) out_ << ',';
    if (c.find_first_of(",\"\n") == std::string::npos) {
      out_ << c;
    } else {
      out_ << '"';
      for (char ch : c) out_ << (ch == '"' ? "\"\"" : std::string(1, ch));
      out_ << '"';
    }
  }
  out_ << '\n';
  out_.flush();
  TT_CHECK(out_, "CsvWriter: writing '", path_, "' failed");
}

std::string CsvWriter::num(double value) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", value);
  return buf;
}

}  // namespace tt
