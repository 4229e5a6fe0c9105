#include "faults/fault_log.h"

#include <cstdio>
#include <istream>
#include <ostream>

namespace dlm::test::faults {
namespace {

std::string oneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return text;
}

}  // namespace

void writeLog(const WorkerLog& log, std::ostream& out) {
  if (!log.fatal.empty()) out << "F\t" << oneLine(log.fatal) << '\n';
  for (const auto& c : log.calls) {
    out << "C\t" << c.kind << '\t' << c.startNs << '\t' << c.endNs << '\t'
        << c.outcome << '\n';
  }
  for (const auto& h : log.holds) out << "H\t" << oracle::formatHold(h) << '\n';
  for (const auto& m : log.messages) out << "M\t" << oneLine(m) << '\n';
  out << "END\n";
}

std::optional<WorkerLog> readLog(std::istream& in, std::string* problem) {
  WorkerLog log;
  std::string line;
  while (std::getline(in, line)) {
    if (line == "END") return log;
    const std::string body = line.size() > 2 ? line.substr(2) : "";
    if (line.rfind("C\t", 0) == 0) {
      char kind[16] = {0}, outcome[64] = {0};
      long long start = 0, end = 0;
      if (std::sscanf(body.c_str(), "%15s\t%lld\t%lld\t%63s", kind, &start,
                      &end, outcome) != 4) {
        *problem = "malformed call line: " + line;
        return std::nullopt;
      }
      log.calls.push_back({kind, start, end, outcome});
    } else if (line.rfind("H\t", 0) == 0) {
      auto hold = oracle::parseHold(body);
      if (!hold) {
        *problem = "malformed hold line: " + line;
        return std::nullopt;
      }
      log.holds.push_back(std::move(*hold));
    } else if (line.rfind("M\t", 0) == 0) {
      log.messages.push_back(body);
    } else if (line.rfind("F\t", 0) == 0) {
      log.fatal = body;
    } else {
      *problem = "unexpected line: " + line;
      return std::nullopt;
    }
  }
  *problem = "the log is incomplete (no END line)";
  return std::nullopt;
}

}  // namespace dlm::test::faults
