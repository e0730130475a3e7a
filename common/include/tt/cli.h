/// @file cli.h
/// @brief A small command-line parser for the apps: `--name value` options bound to variables,
/// boolean switches, a usage text, and clear errors.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace tt {

/// Parses `--option value` pairs and `--switch` flags into variables registered beforehand.
/// @code
/// int64_t steps = 100;  bool resume = false;
/// tt::ArgParser args("train_gpt2", "usage: train_gpt2 [--steps N] [--resume]\n");
/// args.option("--steps", &steps).flag("--resume", &resume);
/// args.parse(argc, argv);  // -h/--help prints the usage and exits 0; errors exit 2
/// @endcode
/// A variable keeps its value when its option is absent. A std::vector<std::string> target
/// collects every occurrence of a repeatable option.
class ArgParser {
 public:
  /// A parser for `program` (used in messages) whose help text is `usage`.
  ArgParser(std::string program, std::string usage);
  /// Binds `--name value` to a string.
  ArgParser& option(const std::string& name, std::string* target);
  /// Binds a repeatable `--name value` to a list (each occurrence appends).
  ArgParser& option(const std::string& name, std::vector<std::string>* target);
  /// Binds `--name value` to an integer.
  ArgParser& option(const std::string& name, int64_t* target);
  /// Binds `--name value` to an int.
  ArgParser& option(const std::string& name, int* target);
  /// Binds `--name value` to an unsigned 64-bit integer (seeds).
  ArgParser& option(const std::string& name, uint64_t* target);
  /// Binds `--name value` to a floating-point number.
  ArgParser& option(const std::string& name, double* target);
  /// Binds a value-less `--name` switch: present sets *target to true.
  ArgParser& flag(const std::string& name, bool* target);
  /// Binds `--name [value]` to a string whose value may be left out: `--name` followed by
  /// nothing or by another option (an argument starting with "--") sets *target to `implicit`.
  ArgParser& optional_value(const std::string& name, std::string* target, std::string implicit);
  /// Parses argv. On -h/--help prints the usage to stdout and exits 0; on an unknown option, a
  /// missing value or a malformed number prints the problem and the usage to stderr and exits 2.
  /// Numbers are strict: the whole value must be a number ("10k", "300abc" and "" are errors)
  /// that fits the variable's type.
  void parse(int argc, char** argv) const;
  /// Parses `args` (argv without the program name) like parse() but throws tt::Error instead
  /// of exiting; returns false, without parsing further, when -h/--help is met.
  bool parse_or_throw(const std::vector<std::string>& args) const;

 private:
  using Target = std::variant<std::string*, std::vector<std::string>*, int64_t*, int*, uint64_t*,
                              double*, bool*>;
  struct Entry {
    std::string name;
    Target target;
    bool value_optional = false;  ///< optional_value(): the value may be left out
    std::string implicit;         ///< the value when it is left out
  };
  ArgParser& add(const std::string& name, Target target);
  std::string program_, usage_;
  std::vector<Entry> entries_;
};

/// The non-empty items of a `sep`-separated list ("1,,2" -> {"1", "2"}): what a list-valued
/// option ("--batch 1,8,32") holds.
std::vector<std::string> split_list(const std::string& text, char sep = ',');

}  // namespace tt
