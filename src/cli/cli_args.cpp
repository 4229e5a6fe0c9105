#include "cli/cli_args.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "dlm/store_url.h"

namespace dlm::cli {

Args::Args(std::vector<std::string> args) : args_(std::move(args)) {
  end_ = static_cast<std::size_t>(std::find(args_.begin(), args_.end(), "--") -
                                  args_.begin());
}

std::optional<std::string> Args::take(const std::string& name) {
  std::optional<std::string> value;
  const std::string withEquals = name + "=";
  for (std::size_t i = 0; i < end_;) {
    if (args_[i] == name) {
      if (i + 1 >= end_)
        throw UsageError(fmt::format("{} needs a value", name));
      value = args_[i + 1];
      args_.erase(args_.begin() + static_cast<std::ptrdiff_t>(i),
                  args_.begin() + static_cast<std::ptrdiff_t>(i + 2));
      end_ -= 2;
    } else if (args_[i].rfind(withEquals, 0) == 0) {
      value = args_[i].substr(withEquals.size());
      args_.erase(args_.begin() + static_cast<std::ptrdiff_t>(i));
      end_ -= 1;
    } else {
      ++i;
    }
  }
  return value;
}

bool Args::takeFlag(const std::string& name) {
  bool found = false;
  for (std::size_t i = 0; i < end_;) {
    if (args_[i] == name) {
      args_.erase(args_.begin() + static_cast<std::ptrdiff_t>(i));
      end_ -= 1;
      found = true;
    } else {
      ++i;
    }
  }
  return found;
}

std::optional<std::string> Args::takePositional() {
  for (std::size_t i = 0; i < args_.size(); ++i) {
    if (i == end_) continue;  // the "--" itself
    // Before "--", anything starting with "--" is an (unknown) option.
    if (i < end_ && args_[i].size() > 1 && args_[i][0] == '-') continue;
    std::string value = args_[i];
    args_.erase(args_.begin() + static_cast<std::ptrdiff_t>(i));
    if (i < end_) --end_;
    return value;
  }
  return std::nullopt;
}

void Args::requireEmpty() const {
  for (std::size_t i = 0; i < args_.size(); ++i) {
    if (i == end_) continue;
    if (i < end_ && args_[i].size() > 1 && args_[i][0] == '-') {
      throw UsageError(fmt::format("unknown option '{}'", args_[i]));
    }
    throw UsageError(fmt::format("unexpected argument '{}'", args_[i]));
  }
}

namespace {

// The global options that take a value (takeGlobalOptions).
const std::vector<std::string> kGlobalValueOptions = {"--db", "--schema",
                                                      "--client", "--farm"};

bool isOption(const std::string& word) {
  return word.size() > 1 && word[0] == '-';
}

bool contains(const std::vector<std::string>& names, const std::string& w) {
  return std::find(names.begin(), names.end(), w) != names.end();
}

}  // namespace

void Args::keepCommandLineAfter(const std::string& command,
                                const std::vector<std::string>& valueOptions) {
  // The first word that is not an option or an option's value, from `from`
  // up to end_ (end_ when there is none).
  const auto firstWord = [&](std::size_t from, bool withCommandOptions) {
    std::size_t i = from;
    while (i < end_ && isOption(args_[i])) {
      const bool takesValue =
          contains(kGlobalValueOptions, args_[i]) ||
          (withCommandOptions && contains(valueOptions, args_[i]));
      i += takesValue ? 2 : 1;
    }
    return std::min(i, end_);
  };
  const std::size_t commandWord = firstWord(0, false);
  if (commandWord >= end_ || args_[commandWord] != command) return;
  const std::size_t start = firstWord(commandWord + 1, true);
  if (start >= end_) return;  // no word before "--" (or no command at all)
  // A "--" of the program's own (after `start`) stays an argument of it.
  args_.insert(args_.begin() + static_cast<std::ptrdiff_t>(start), "--");
  end_ = start;
}

std::int64_t parseInteger(const std::string& option, const std::string& text,
                          std::int64_t min, std::int64_t max) {
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || value < min ||
      value > max) {
    throw UsageError(
        fmt::format("{} must be a whole number from {} to {}, "
                    "not '{}'",
                    option, min, max, text));
  }
  return value;
}

double parseDecimal(const std::string& option, const std::string& text,
                    double min, double max) {
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !(value >= min) ||
      !(value <= max)) {
    throw UsageError(fmt::format("{} must be a number from {} to {}, not '{}'",
                                 option, min, max, text));
  }
  return value;
}

GlobalOptions takeGlobalOptions(Args& args) {
  GlobalOptions g;
  const bool longHelp = args.takeFlag("--help");
  const bool shortHelp = args.takeFlag("-h");
  g.help = longHelp || shortHelp;
  if (auto db = args.take("--db")) {
    g.db = *db;
    g.dbOrigin = "--db";
  } else if (const char* env = std::getenv("DLM_DATABASE_URL");
             env != nullptr && *env != '\0') {
    g.db = env;
    g.dbOrigin = "DLM_DATABASE_URL";
  } else {
    g.db = kDefaultStoreUrl;
    g.dbOrigin = "default";
  }
  if (auto schema = args.take("--schema")) g.schema = *schema;
  if (auto client = args.take("--client")) g.client = *client;
  if (auto farm = args.take("--farm")) g.farm = *farm;
  return g;
}

}  // namespace dlm::cli
