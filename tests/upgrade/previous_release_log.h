// What a dlm_previous_release_worker reports besides its holds (which it
// writes in the contention workers' format, oracle::writeResult, so that one
// checker judges both kinds of worker): how many calls of each previous-
// release statement it made, the transient errors it retried, the errors it
// did not expect, and the start and end of every acquire call (for the
// latency around the migration).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dlm::test::upgrade {

// One dlm_acquire call, retries included (steady_clock ns).
struct AcquireCall {
  std::int64_t startNs = 0;
  std::int64_t endNs = 0;
  bool acquired = false;
};

struct PreviousReleaseStats {
  // Statement executions by prepared-statement name ("dlm_acquire", ...),
  // each retry counted.
  std::map<std::string, std::int64_t> calls;
  // Transient failures that were retried, by SQLSTATE (55P03 lock_timeout,
  // 40001 serialization failure, 40P01 deadlock).
  std::map<std::string, std::int64_t> retries;
  // Everything else: any other SQL error, a transient one that outlived its
  // retries, a lost connection, a result of the wrong shape. Each is a test
  // failure.
  std::int64_t errors = 0;
  std::vector<std::string> errorMessages;  // the first few
  // dlm_register_wait reported a deadlock cycle (a worker holds nothing while
  // it waits, so there can be none).
  std::int64_t deadlockCycles = 0;
  // dlm_extend answered NULL (lease lost) for a lock the worker held.
  std::int64_t extendsLost = 0;
  // NOTIFY dlm_release deliveries on the worker's LISTEN connection.
  std::int64_t notifications = 0;
  // Tries on the long-held key, and the long holder's extensions.
  std::int64_t probes = 0;
  std::int64_t longExtends = 0;
  std::vector<AcquireCall> acquires;

  std::int64_t totalRetries() const;
  void addError(const std::string& message);
  void merge(const PreviousReleaseStats& other);
};

// Line-oriented text ending in "END", like oracle::writeResult.
void writeStats(const PreviousReleaseStats& stats, std::ostream& out);
// The inverse; nullopt (with `problem` set) for damaged or cut-short text.
std::optional<PreviousReleaseStats> readStats(std::istream& in,
                                              std::string* problem);

}  // namespace dlm::test::upgrade
