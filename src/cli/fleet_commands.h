// The fleet subcommands of the gapless binary that read or repair the coordination state:
// status and dlq. Each returns the process exit code and prints its own errors.
#pragma once

#include <cstdint>
#include <string>

namespace gapless {

struct FleetArgs {
  std::string db;
  std::string redis;
  uint64_t chain_id = 0;  // 0: the chain recorded in the database
  std::string rpc;        // optional: the head, for the lag
};

// Frontier (Redis and PostgreSQL), queue depths, leases, dead letters, live workers, lag.
int RunStatus(const FleetArgs& args);
// action "list", or "retry" with task "from-to" or "all".
int RunDlq(const FleetArgs& args, const std::string& action, const std::string& task);

}  // namespace gapless
