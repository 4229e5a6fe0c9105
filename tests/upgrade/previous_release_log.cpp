#include "upgrade/previous_release_log.h"

#include <istream>
#include <ostream>
#include <sstream>

namespace dlm::test::upgrade {
namespace {

// Error messages kept for the report; the count keeps going.
constexpr std::size_t kMaxMessages = 20;

std::string oneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return text;
}

}  // namespace

std::int64_t PreviousReleaseStats::totalRetries() const {
  std::int64_t n = 0;
  for (const auto& [state, count] : retries) n += count;
  return n;
}

void PreviousReleaseStats::addError(const std::string& message) {
  ++errors;
  if (errorMessages.size() < kMaxMessages) {
    errorMessages.push_back(oneLine(message));
  }
}

void PreviousReleaseStats::merge(const PreviousReleaseStats& other) {
  for (const auto& [name, n] : other.calls) calls[name] += n;
  for (const auto& [state, n] : other.retries) retries[state] += n;
  errors += other.errors;
  for (const auto& m : other.errorMessages) {
    if (errorMessages.size() < kMaxMessages) errorMessages.push_back(m);
  }
  deadlockCycles += other.deadlockCycles;
  extendsLost += other.extendsLost;
  notifications += other.notifications;
  probes += other.probes;
  longExtends += other.longExtends;
  acquires.insert(acquires.end(), other.acquires.begin(), other.acquires.end());
}

void writeStats(const PreviousReleaseStats& s, std::ostream& out) {
  for (const auto& [name, n] : s.calls)
    out << "call\t" << name << '\t' << n << '\n';
  for (const auto& [state, n] : s.retries) {
    out << "retry\t" << state << '\t' << n << '\n';
  }
  out << "errors\t" << s.errors << '\n';
  for (const auto& m : s.errorMessages) out << "error\t" << oneLine(m) << '\n';
  out << "cycles\t" << s.deadlockCycles << '\n';
  out << "extends_lost\t" << s.extendsLost << '\n';
  out << "notifications\t" << s.notifications << '\n';
  out << "probes\t" << s.probes << '\n';
  out << "long_extends\t" << s.longExtends << '\n';
  for (const auto& a : s.acquires) {
    out << "A\t" << a.startNs << '\t' << a.endNs << '\t' << (a.acquired ? 1 : 0)
        << '\n';
  }
  // The end marker tells a complete report from one cut short.
  out << "END\n";
}

std::optional<PreviousReleaseStats> readStats(std::istream& in,
                                              std::string* problem) {
  PreviousReleaseStats s;
  std::string line;
  while (std::getline(in, line)) {
    if (line == "END") return s;
    const std::size_t tab = line.find('\t');
    if (tab == std::string::npos) {
      *problem = "malformed stats line: " + line;
      return std::nullopt;
    }
    const std::string tag = line.substr(0, tab);
    const std::string rest = line.substr(tab + 1);
    if (tag == "error") {
      s.errorMessages.push_back(rest);
      continue;
    }
    std::istringstream fields(rest);
    if (tag == "call" || tag == "retry") {
      std::string name;
      std::int64_t n = 0;
      if (!(fields >> name >> n)) {
        *problem = "malformed stats line: " + line;
        return std::nullopt;
      }
      (tag == "call" ? s.calls : s.retries)[name] = n;
    } else if (tag == "A") {
      AcquireCall a;
      int acquired = 0;
      if (!(fields >> a.startNs >> a.endNs >> acquired)) {
        *problem = "malformed stats line: " + line;
        return std::nullopt;
      }
      a.acquired = acquired != 0;
      s.acquires.push_back(a);
    } else {
      std::int64_t n = 0;
      if (!(fields >> n)) {
        *problem = "malformed stats line: " + line;
        return std::nullopt;
      }
      if (tag == "errors") {
        s.errors = n;
      } else if (tag == "cycles") {
        s.deadlockCycles = n;
      } else if (tag == "extends_lost") {
        s.extendsLost = n;
      } else if (tag == "notifications") {
        s.notifications = n;
      } else if (tag == "probes") {
        s.probes = n;
      } else if (tag == "long_extends") {
        s.longExtends = n;
      } else {
        *problem = "unknown stats line: " + line;
        return std::nullopt;
      }
    }
  }
  *problem = "stats cut short (no END line)";
  return std::nullopt;
}

}  // namespace dlm::test::upgrade
