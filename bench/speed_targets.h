// Issue 12's speed targets, judged from the results of one dlm_bench run:
// one target line each in latest.md, for the workloads that ran.
#pragma once

#include "bench_util.h"

namespace dlm_bench {

void addSpeedTargets(Report& report);

}  // namespace dlm_bench
