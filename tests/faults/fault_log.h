// What a fault-run worker hands back to the test: every lock call it made
// (kind, when, how long, outcome) and every hold (for the overlap and fencing
// checker of src/oracle/hold_log.h). Unlike the contention worker's result, errors
// do not end the run: under faults they are the data.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hold_log.h"

namespace dlm::test::faults {

// "try", "acquire", "release".
struct CallRecord {
  std::string kind;
  std::int64_t startNs = 0;  // steady_clock, just before the call
  std::int64_t endNs = 0;    // steady_clock, just after it returned
  // "OK"; "FALSE" (releaseLock returned false for a lease still inside its
  // TTL: wrong), "FALSE_AFTER_TTL" (false after the lease could have run
  // out: allowed); an ErrorCode name for a DLMException; "NOT_DLM" for any
  // other exception.
  std::string outcome;
  std::int64_t durationNs() const { return endNs - startNs; }
};

struct WorkerLog {
  std::vector<CallRecord> calls;
  std::vector<oracle::Hold> holds;
  // The first messages of each unexpected outcome, for the failure text.
  std::vector<std::string> messages;
  // Set when the worker could not run at all (bad arguments, no store).
  std::string fatal;
};

// Text form, one record per line, ending with "END" (a worker killed while
// writing leaves a log without it).
void writeLog(const WorkerLog& log, std::ostream& out);
std::optional<WorkerLog> readLog(std::istream& in, std::string* problem);

}  // namespace dlm::test::faults
