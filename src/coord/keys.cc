#include "coord/keys.h"

namespace gapless {

Keys::Keys(int64_t chain_id, std::string_view database_id) : chain_id_(chain_id) {
  prefix_ = "gapless:{chain-" + std::to_string(chain_id);
  if (!database_id.empty()) prefix_.append("-db-").append(database_id);
  prefix_ += "}:";
}

std::string Keys::pending() const { return prefix_ + "queue:pending"; }
std::string Keys::processing() const { return prefix_ + "queue:processing"; }
std::string Keys::queued() const { return prefix_ + "queue:queued"; }
std::string Keys::leases() const { return prefix_ + "queue:leases"; }
std::string Keys::attempts() const { return prefix_ + "queue:attempts"; }
std::string Keys::expiries() const { return prefix_ + "queue:expiries"; }
std::string Keys::dlq() const { return prefix_ + "queue:dlq"; }
std::string Keys::fence_counter() const { return prefix_ + "fence"; }
std::string Keys::fence_dataset() const { return prefix_ + "fence:dataset"; }
std::string Keys::completed() const { return prefix_ + "frontier:completed"; }
std::string Keys::frontier() const { return prefix_ + "frontier"; }
std::string Keys::rate_limit(std::string_view endpoint) const {
  return prefix_ + "ratelimit:" + std::string(endpoint);
}
std::string Keys::range_lock(std::string_view task) const {
  return prefix_ + "rangelock:" + std::string(task);
}
std::string Keys::gap() const { return prefix_ + "gap"; }
std::string Keys::rpc_pool(std::string_view process) const {
  return prefix_ + "rpcpool:" + std::string(process);
}
std::string Keys::heartbeat(std::string_view worker) const {
  return prefix_ + "heartbeat:" + std::string(worker);
}
std::string Keys::registry() const { return prefix_ + "registry"; }
std::string Keys::key_count_samples() const { return prefix_ + "keywatch:samples"; }
std::string Keys::registry_expiries() const { return prefix_ + "registry:expiries"; }
std::string Keys::election_lock() const { return prefix_ + "election:lock"; }
std::string Keys::election_epoch() const { return prefix_ + "election:epoch"; }
std::string Keys::election_meta() const { return prefix_ + "election:meta"; }
std::string Keys::head_log() const { return prefix_ + "head:log"; }
std::string Keys::head_heights() const { return prefix_ + "head:heights"; }
std::string Keys::head_floor() const { return prefix_ + "head:floor"; }
std::string Keys::head_incarnation() const { return prefix_ + "head:incarnation"; }
std::string Keys::head_fork() const { return prefix_ + "head:fork"; }
std::string Keys::reorg_generation() const { return prefix_ + "reorg:generation"; }
std::string Keys::leader_epoch() const { return prefix_ + "leader:epoch"; }
std::string Keys::leader_term() const { return prefix_ + "leader:term"; }

}  // namespace gapless
