// The run directory of a training run (tt/run_dir.h).
#include "tt/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string_view>

#include "tt/checkpoint.h"
#include "tt/error.h"

namespace tt::train {

namespace fs = std::filesystem;

const std::vector<std::string>& run_dir_files() {
  static const std::vector<std::string> names = {"checkpoint.ttckpt", "train.csv", "model.bin"};
  return names;
}

RunDir::RunDir(std::string path, Options options) : path_(std::move(path)), options_(options) {
  TT_CHECK(!path_.empty(), "--out: the run directory must not be empty");
  if (options_.writer) {
    std::error_code ec;
    fs::create_directories(path_, ec);
    TT_CHECK(fs::is_directory(path_), "--out ", path_, ": cannot create the run directory",
             ec ? ": " + ec.message() : std::string(fs::exists(path_) ? " (it is a file)" : ""));
    const std::string lock = file("run.lock");
    lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    TT_CHECK(lock_fd_ >= 0, "--out ", path_, ": cannot open the lock file ", lock, ": ",
             std::strerror(errno));
    if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      std::ifstream in(lock);
      std::string pid;
      std::getline(in, pid);
      ::close(lock_fd_);
      lock_fd_ = -1;
      TT_CHECK(err != EWOULDBLOCK, "--out ", path_, " is in use by another run (pid ",
               pid.empty() ? "unknown" : pid, ", holding ", lock,
               "): wait for it to end, or give another --out");
      TT_THROW("--out ", path_, ": cannot lock ", lock, ": ", std::strerror(err));
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(lock_fd_, 0) != 0 || ::pwrite(lock_fd_, pid.data(), pid.size(), 0) < 0) {
      TT_THROW("--out ", path_, ": cannot write the pid into ", lock, ": ", std::strerror(errno));
    }
    // We hold the lock: no writer of these files is alive, so their temporary files are what a
    // killed run left behind (a checkpoint of GPT-2 124M is ~1.5 GB each).
    for (const auto& entry : fs::directory_iterator(path_)) {
      const std::string name = entry.path().filename().string();
      for (const std::string& f : run_dir_files()) {
        if (name.starts_with(f + ".tmp.") && entry.is_regular_file()) {
          removed_bytes_ += static_cast<int64_t>(entry.file_size());
          fs::remove(entry.path());
          ++removed_files_;
        }
      }
    }
  }
  const bool has_checkpoint = fs::exists(checkpoint_path());
  if (options_.resume) {
    TT_CHECK(has_checkpoint, "--resume: there is no checkpoint ", checkpoint_path(),
             " (a run saves one with --checkpoint-every N, at --max-seconds and at its end)");
  } else if (has_checkpoint && options_.writer) {
    TT_CHECK(options_.overwrite, "--out ", path_, " holds the checkpoint of an earlier run (",
             checkpoint_path(),
             "): continue it with --resume, or start over with --overwrite "
             "(which replaces its checkpoint, train.csv and model.bin)");
    fs::remove(checkpoint_path());
    fs::remove(file("model.bin"));
  }
}

RunDir::~RunDir() {
  log_.reset();
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

CsvWriter& RunDir::open_log(const std::vector<std::string>& columns, bool append) {
  TT_CHECK(options_.writer, "RunDir::open_log: only the writing process opens ", log_path());
  log_ = std::make_unique<CsvWriter>(log_path(), columns, append);
  return *log_;
}

void RunDir::cut_log_after(int64_t step) const {
  const std::string csv_path = log_path();
  if (!fs::exists(csv_path)) return;
  std::ifstream in(csv_path, std::ios::binary);
  TT_CHECK(in, "cannot read the run log '", csv_path, "'");
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::string kept;
  std::size_t begin = 0;
  for (std::size_t end; (end = text.find('\n', begin)) != std::string::npos; begin = end + 1) {
    const std::string_view line(text.data() + begin, end - begin);
    int64_t row_step = -1;
    const bool numbered =
        std::from_chars(line.data(), line.data() + line.size(), row_step).ec == std::errc();
    if (begin == 0 || (numbered && row_step <= step)) kept.append(line).push_back('\n');
  }
  const auto* bytes = reinterpret_cast<const std::byte*>(kept.data());
  ckpt::write_file_atomic(csv_path, std::vector<std::byte>(bytes, bytes + kept.size()));
}

void RunDir::add_sample(int64_t step, const std::string& text) const {
  TT_CHECK(options_.writer, "RunDir::add_sample: only the writing process writes samples");
  std::ofstream out(file("samples.txt"), std::ios::app);
  out << "step " << step << ": " << text << "\n";
  TT_CHECK(out.good(), "cannot append to ", file("samples.txt"));
}

bool RunDir::plot_loss(const std::string& title) const {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return false;
  const std::string png = file("loss.png"), script = png + ".gnuplot";
  std::ofstream(script) << "set terminal pngcairo size 900,540\n"
                        << "set output '" << png << "'\n"
                        << "set datafile separator ','\n"
                        << "set key autotitle columnhead\n"
                        << "set title '" << title
                        << "'\nset xlabel 'step'\nset ylabel 'loss (nats/token)'\n"
                        << "set grid\n"
                        << "plot '" << log_path() << "' using 1:2 with lines lw 1.5 title 'train', "
                        << "'' using 1:(column(7) > 0 ? column(7) : 1/0) with linespoints lw 2 "
                           "pt 7 title 'val'\n";
  const bool ok = std::system(("gnuplot '" + script + "' 2>/dev/null").c_str()) == 0;
  fs::remove(script);
  return ok;
}

}  // namespace tt::train
