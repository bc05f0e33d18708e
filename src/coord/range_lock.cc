#include "coord/range_lock.h"

namespace gapless {

Result<bool> RangeLocks::Run(const TaskRange& range, const char* op, const std::string& owner,
                             int64_t ttl_ms) {
  static const RedisScript& script = LoadScript("range_lock.lua");
  GAPLESS_ASSIGN_OR_RETURN(RedisReply r,
                           conn_->Eval(script, {keys_.range_lock(range.id())},
                                       {op, owner, std::to_string(ttl_ms)}, /*idempotent=*/true));
  return r.integer == 1;
}

Result<std::optional<int64_t>> RangeLocks::Acquire(const TaskRange& range, const std::string& owner,
                                                   int64_t ttl_ms) {
  static const RedisScript& script = LoadScript("range_lock.lua");
  GAPLESS_ASSIGN_OR_RETURN(
      RedisReply r,
      conn_->Eval(script,
                  {keys_.range_lock(range.id()), keys_.fence_counter(), keys_.fence_dataset()},
                  {"acquire", owner, std::to_string(ttl_ms)}, /*idempotent=*/true));
  if (r.integer <= 0) return std::optional<int64_t>();
  return std::optional<int64_t>(r.integer);
}

Result<bool> RangeLocks::Extend(const TaskRange& range, const std::string& owner, int64_t ttl_ms) {
  return Run(range, "extend", owner, ttl_ms);
}

Result<bool> RangeLocks::Release(const TaskRange& range, const std::string& owner) {
  return Run(range, "release", owner, 0);
}

Result<std::vector<std::pair<TaskRange, std::string>>> RangeLocks::ReclaimOrphans() {
  static const RedisScript& script = LoadScript("range_lock.lua");
  const std::string prefix = keys_.range_lock("");
  std::vector<std::pair<TaskRange, std::string>> freed;
  std::string cursor = "0";
  do {
    GAPLESS_ASSIGN_OR_RETURN(
        RedisReply page, conn_->Command({"SCAN", cursor, "MATCH", prefix + "*", "COUNT", "1000"}));
    if (page.type != RedisReply::Type::kArray || page.elements.size() != 2) {
      return Internal("SCAN: unexpected reply");
    }
    cursor = page.elements[0].str;
    for (const RedisReply& key : page.elements[1].elements) {
      GAPLESS_ASSIGN_OR_RETURN(RedisReply holder, conn_->Command({"GET", key.str}));
      if (holder.is_nil()) continue;  // expired meanwhile
      GAPLESS_ASSIGN_OR_RETURN(RedisReply r,
                               conn_->Eval(script, {key.str, keys_.heartbeat(holder.str)},
                                           {"reclaim", holder.str, "0"}, /*idempotent=*/true));
      if (r.integer != 1) continue;
      Result<TaskRange> range = ParseTask(std::string_view(key.str).substr(prefix.size()));
      freed.emplace_back(range.ok() ? *range : TaskRange{}, holder.str);
    }
  } while (cursor != "0");
  return freed;
}

Result<std::optional<std::string>> RangeLocks::Holder(const TaskRange& range) {
  GAPLESS_ASSIGN_OR_RETURN(RedisReply r, conn_->Command({"GET", keys_.range_lock(range.id())}));
  if (r.is_nil()) return std::optional<std::string>();
  return std::optional<std::string>(r.str);
}

}  // namespace gapless
