// contracts_util: what the contracts mode's integration tests share (contracts_itest,
// contracts_events_itest, contracts_complete_itest): node scripts run from the source tree, and
// the devnet of devnet/events.js (contracts with every ABI type, a factory, a misfit token).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "devnet_util.h"
#include "e2e_util.h"

namespace gapless::e2e {

inline const std::string kContractsSource = GAPLESS_SOURCE_DIR;

// Runs `node script args...` ($GAPLESS_NODE, else node on the PATH), its output into log; the
// exit code.
inline int RunNode(const std::vector<std::string>& script_and_args, const std::string& log) {
  const char* node = std::getenv("GAPLESS_NODE");
  std::vector<std::string> args = {node != nullptr && *node != 0 ? node : "/usr/bin/env"};
  if (args[0] == "/usr/bin/env") args.push_back("node");
  args.insert(args.end(), script_and_args.begin(), script_and_args.end());
  return WaitForExit(Spawn(args, log), 300);
}

// devnet/events.js against the node at `url`, writing into `dir` (contracts.yaml, manifest.json,
// abis/): "" and the manifest's last block and the block that created the pools, or what went
// wrong.
inline std::string DeployContractsDevnet(const std::string& url, const std::string& dir, int rounds,
                                         uint64_t* last, uint64_t* pools_created_by) {
  const int rc = RunNode({kContractsSource + "/devnet/events.js", "--rpc", url, "--dir", dir,
                          "--rounds", std::to_string(rounds)},
                         dir + ".events.log");
  if (rc != 0) return ReadFile(dir + ".events.log");
  const std::string manifest = ReadFile(dir + "/manifest.json");
  const size_t at = manifest.find("\"last\":");
  const size_t pools = manifest.find("\"poolsCreatedBy\":");
  if (at == std::string::npos || pools == std::string::npos) return "manifest: " + manifest;
  *last = std::stoull(manifest.substr(at + 7));
  *pools_created_by = std::stoull(manifest.substr(pools + 17));
  return "";
}

}  // namespace gapless::e2e
