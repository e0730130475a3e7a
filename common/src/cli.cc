// The command-line parser of the apps (tt/cli.h).
#include "tt/cli.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "tt/error.h"

namespace tt {

namespace {

template <typename T, typename F>
T convert(const std::string& program, const std::string& name, const std::string& value, F f) {
  std::size_t used = 0;
  T v{};
  try {
    v = static_cast<T>(f(value, &used));
  } catch (const std::logic_error&) {
    used = 0;
  }
  TT_CHECK(!value.empty() && used == value.size(), program, ": ", name, " expects a number, got '",
           value, "'");
  return v;
}

}  // namespace

ArgParser::ArgParser(std::string program, std::string usage)
    : program_(std::move(program)), usage_(std::move(usage)) {}

ArgParser& ArgParser::add(const std::string& name, Target target) {
  for (const auto& e : entries_) {
    TT_CHECK(e.name != name, program_, ": option ", name, " registered twice");
  }
  entries_.push_back({name, target, false, ""});
  return *this;
}

ArgParser& ArgParser::option(const std::string& n, std::string* t) {
  return add(n, t);
}
ArgParser& ArgParser::option(const std::string& n, std::vector<std::string>* t) {
  return add(n, t);
}
ArgParser& ArgParser::option(const std::string& n, int64_t* t) {
  return add(n, t);
}
ArgParser& ArgParser::option(const std::string& n, int* t) {
  return add(n, t);
}
ArgParser& ArgParser::option(const std::string& n, uint64_t* t) {
  return add(n, t);
}
ArgParser& ArgParser::option(const std::string& n, double* t) {
  return add(n, t);
}
ArgParser& ArgParser::flag(const std::string& n, bool* t) {
  return add(n, t);
}
ArgParser& ArgParser::optional_value(const std::string& n, std::string* t, std::string implicit) {
  add(n, t);
  entries_.back().value_optional = true;
  entries_.back().implicit = std::move(implicit);
  return *this;
}

bool ArgParser::parse_or_throw(const std::vector<std::string>& args) const {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") return false;
    const Entry* entry = nullptr;
    for (const auto& e : entries_) {
      if (e.name == arg) entry = &e;
    }
    TT_CHECK(entry != nullptr, program_, ": unknown option '", arg, "'");
    if (auto* b = std::get_if<bool*>(&entry->target)) {
      **b = true;
      continue;
    }
    if (entry->value_optional && (i + 1 == args.size() || args[i + 1].starts_with("--"))) {
      *std::get<std::string*>(entry->target) = entry->implicit;
      continue;
    }
    TT_CHECK(i + 1 < args.size(), program_, ": ", arg, " needs a value");
    const std::string& v = args[++i];
    const std::string& p = program_;
    std::visit(
        [&](auto* t) {
          using T = std::remove_pointer_t<decltype(t)>;
          if constexpr (std::is_same_v<T, std::string>) {
            *t = v;
          } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            t->push_back(v);
          } else if constexpr (std::is_same_v<T, double>) {
            *t = convert<double>(
                p, arg, v, [](const std::string& s, std::size_t* u) { return std::stod(s, u); });
          } else if constexpr (std::is_same_v<T, uint64_t>) {
            *t = convert<uint64_t>(
                p, arg, v, [](const std::string& s, std::size_t* u) { return std::stoull(s, u); });
          } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
            const long long n = convert<long long>(
                p, arg, v, [](const std::string& s, std::size_t* u) { return std::stoll(s, u); });
            TT_CHECK(n >= std::numeric_limits<T>::min() && n <= std::numeric_limits<T>::max(), p,
                     ": ", arg, " ", v, " is out of range [", std::numeric_limits<T>::min(), ", ",
                     std::numeric_limits<T>::max(), "]");
            *t = static_cast<T>(n);
          }
        },
        entry->target);
  }
  return true;
}

void ArgParser::parse(int argc, char** argv) const {
  try {
    if (!parse_or_throw(std::vector<std::string>(argv + 1, argv + argc))) {
      std::fputs(usage_.c_str(), stdout);
      std::exit(0);
    }
  } catch (const Error& e) {
    std::string msg = e.what();
    if (const auto at = msg.rfind(" (at "); at != std::string::npos) msg.resize(at);
    std::fprintf(stderr, "%s\n%s", msg.c_str(), usage_.c_str());
    std::exit(2);
  }
}

std::vector<std::string> split_list(const std::string& text, char sep) {
  std::vector<std::string> items;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(sep, begin), text.size());
    if (end > begin) items.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return items;
}

}  // namespace tt
