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

Result<bool> RangeLocks::Acquire(const TaskRange& range, const std::string& owner, int64_t ttl_ms) {
  return Run(range, "acquire", owner, ttl_ms);
}

Result<bool> RangeLocks::Extend(const TaskRange& range, const std::string& owner, int64_t ttl_ms) {
  return Run(range, "extend", owner, ttl_ms);
}

Result<bool> RangeLocks::Release(const TaskRange& range, const std::string& owner) {
  return Run(range, "release", owner, 0);
}

Result<std::optional<std::string>> RangeLocks::Holder(const TaskRange& range) {
  GAPLESS_ASSIGN_OR_RETURN(RedisReply r, conn_->Command({"GET", keys_.range_lock(range.id())}));
  if (r.is_nil()) return std::optional<std::string>();
  return std::optional<std::string>(r.str);
}

Status RangeLocks::MarkCompleted(const TaskRange& range, int64_t ttl_ms) {
  return conn_->Command({"SET", keys_.range_done(range.id()), "1", "PX", std::to_string(ttl_ms)})
      .status();
}

Result<bool> RangeLocks::IsCompleted(const TaskRange& range) {
  GAPLESS_ASSIGN_OR_RETURN(RedisReply r, conn_->Command({"EXISTS", keys_.range_done(range.id())}));
  return r.integer == 1;
}

}  // namespace gapless
