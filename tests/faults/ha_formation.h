// The pg_auto_failover formation of scripts/pg-auto-failover.sh, as the
// failover tests drive it: its multi-host URL, the script's failover and
// kill commands, and which node a client reaches as the primary.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace dlm::test::faults {

// $DLM_TEST_HA_URL / $DLM_TEST_HA_DIR (scripts/ha-test.sh exports them);
// "" when unset. The tests fail, never skip, without them.
std::string haUrl();
std::string haDir();

// Runs `scripts/pg-auto-failover.sh <command> <haDir()> [arg]`; true when it
// exits 0. The script bounds itself.
bool runFormationScript(const std::string& command,
                        const std::string& arg = "");

// The port of the server a read-write connection to haUrl() reaches (the
// primary), or nullopt when none answers within `limit` (libpq, one
// attempt of at most 1 s per host).
std::optional<int> primaryPort(std::chrono::milliseconds limit);

// Polls primaryPort() every 50 ms until it is a port other than
// `oldPort`, for at most `limit`; the instant (steady ns) it first was, or
// nullopt.
std::optional<std::int64_t> waitForNewPrimary(int oldPort,
                                              std::chrono::milliseconds limit);

}  // namespace dlm::test::faults
