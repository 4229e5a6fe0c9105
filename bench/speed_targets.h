// The speed targets (server time per cycle, events), judged from the results of one
// dlm_bench run: one target line each in latest.md, for the workloads that ran.
#pragma once

#include "bench_util.h"

namespace dlm_bench {

void addSpeedTargets(Report& report);

}  // namespace dlm_bench
