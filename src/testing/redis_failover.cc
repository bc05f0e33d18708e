#include "testing/redis_failover.h"

#include <chrono>
#include <functional>
#include <thread>
#include <vector>

namespace gapless {

int64_t CommandStat(RedisConn& conn, const std::string& command, const std::string& counter) {
  std::string line = InfoField(conn, "commandstats", "cmdstat_" + command);
  size_t at = line.find(counter + "=");
  if (at == std::string::npos) return 0;
  return std::stoll(line.substr(at + counter.size() + 1));
}

namespace {

bool Poll(int64_t timeout_ms, const std::function<bool()>& done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace

Status WaitForReplicaLink(RedisConn& replica, int64_t timeout_ms) {
  if (Poll(timeout_ms,
           [&] { return InfoField(replica, "replication", "master_link_status") == "up"; })) {
    return Status::Ok();
  }
  return Unavailable("replica " + replica.Describe() + ": no link to its primary within " +
                     std::to_string(timeout_ms) + " ms");
}

Status ManualFailover(RedisConn& old_primary, RedisConn& replica, const std::string& new_host,
                      int new_port, bool close_clients, int64_t timeout_ms) {
  GAPLESS_RETURN_IF_ERROR(
      old_primary.Command({"CLIENT", "PAUSE", std::to_string(timeout_ms), "WRITE"}).status());
  auto unpause = [&] { (void)old_primary.Command({"CLIENT", "UNPAUSE"}); };
  const std::string target = InfoField(old_primary, "replication", "master_repl_offset");
  bool caught_up = Poll(timeout_ms, [&] {
    return InfoField(replica, "replication", "master_link_status") == "up" &&
           InfoField(replica, "replication", "slave_repl_offset") == target;
  });
  if (!caught_up) {
    unpause();
    return Unavailable("replica " + replica.Describe() + " did not reach offset " + target);
  }
  Status promoted = replica.Command({"REPLICAOF", "NO", "ONE"}).status();
  if (!promoted.ok()) {
    unpause();
    return promoted;
  }
  std::vector<std::vector<std::string>> demote = {
      {"MULTI"}, {"REPLICAOF", new_host, std::to_string(new_port)}};
  if (close_clients) {
    demote.push_back({"CLIENT", "KILL", "TYPE", "normal"});
    demote.push_back({"CLIENT", "KILL", "TYPE", "pubsub"});
  }
  demote.push_back({"CONFIG", "RESETSTAT"});
  demote.push_back({"EXEC"});
  for (const std::vector<std::string>& argv : demote) {
    Status st = old_primary.Command(argv, /*idempotent=*/false).status();
    if (!st.ok()) {
      unpause();
      return st;
    }
  }
  return old_primary.Command({"CLIENT", "UNPAUSE"}).status();
}

}  // namespace gapless
