// The cost workloads (issue 38): what the database pays per operation, from
// /proc (proc_meter.h), for dlm against (e) ShedLock's statements, (f) the
// PL/pgSQL skeleton and (a) dlm's functions through raw libpq, interleaved
// in rounds, in one condition (local disk, or a synchronous standby).
#pragma once

#include <string>

#include "bench_util.h"
#include "pg_common.h"
#include "proc_meter.h"

namespace dlm_bench::pg {

// Runs every cost workload once in `condition` ("local", "sync standby"),
// adding "cost.*" results whose config ends in " [<condition>]".
void runCost(const Ctx& ctx, ServerMeter& meter, const std::string& condition);

// The floor of the batched protocol alone (--benchmarks=floor without
// cost): (g) against dlm's batch functions, and (e)'s cycle beside them.
// runCost runs the same lines after the cost workloads when floor is
// wanted, against that run's (e).
void runFloor(const Ctx& ctx, ServerMeter& meter,
              const std::string& condition);

}  // namespace dlm_bench

namespace dlm_bench {
// The child of the "4 processes x 4 threads" workload (dlm_bench
// --child=cycle ...): runs its threads when its parent says go, reports on
// stdout. Returns the exit code.
int runCostChild(const Flags& flags);
}  // namespace dlm_bench
