// processing_locks: the consumer's processing keys (events/consumer.h step 2): their name
// (ProcessingKey) and RedisProcessingLocks, which takes, releases and renews them with the
// consumer_*.lua scripts over a small pool of connections.
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "coord/redis.h"
#include "events/consumer.h"

namespace gapless {

std::string ProcessingKey(std::string_view prefix, std::string_view event_id) {
  std::string key(prefix);
  key += ":processing:";
  key += event_id;
  return key;
}

Result<std::unique_ptr<RedisProcessingLocks>> RedisProcessingLocks::Open(
    const std::string& url, std::string key_prefix, const RedisOptions& options) {
  if (key_prefix.empty()) return FailedPrecondition("processing locks: empty key prefix");
  // Checks the URL now, so a bad one fails at start rather than at the first event.
  GAPLESS_ASSIGN_OR_RETURN(auto conn, RedisConn::Connect(url, options, /*connect_now=*/false));
  std::unique_ptr<RedisProcessingLocks> locks(
      new RedisProcessingLocks(url, std::move(key_prefix), options));
  locks->Give(std::move(conn));
  return locks;
}

Result<std::unique_ptr<RedisConn>> RedisProcessingLocks::Take() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      return conn;
    }
  }
  return RedisConn::Connect(url_, options_, /*connect_now=*/false);
}

void RedisProcessingLocks::Give(std::unique_ptr<RedisConn> conn) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(std::move(conn));
}

Result<bool> RedisProcessingLocks::TryAcquire(const std::string& event_id, const std::string& token,
                                              int64_t ttl_ms) {
  GAPLESS_ASSIGN_OR_RETURN(auto conn, Take());
  // Idempotent: the script recognises its own token, so a resend after a lost reply is safe.
  auto r = conn->Eval(LoadScript("consumer_acquire.lua"), {ProcessingKey(prefix_, event_id)},
                      {token, std::to_string(ttl_ms)}, /*idempotent=*/true);
  Give(std::move(conn));
  if (!r.ok()) return r.status().WithContext("processing key of " + event_id);
  return r->integer == 1;
}

Status RedisProcessingLocks::Release(const std::string& event_id, const std::string& token) {
  GAPLESS_ASSIGN_OR_RETURN(auto conn, Take());
  auto r = conn->Eval(LoadScript("consumer_release.lua"), {ProcessingKey(prefix_, event_id)},
                      {token}, /*idempotent=*/true);
  Give(std::move(conn));
  if (!r.ok()) return r.status().WithContext("release processing key of " + event_id);
  return Status::Ok();
}

Result<bool> RedisProcessingLocks::Renew(const std::string& event_id, const std::string& token,
                                         int64_t ttl_ms) {
  GAPLESS_ASSIGN_OR_RETURN(auto conn, Take());
  auto r = conn->Eval(LoadScript("consumer_renew.lua"), {ProcessingKey(prefix_, event_id)},
                      {token, std::to_string(ttl_ms)}, /*idempotent=*/true);
  Give(std::move(conn));
  if (!r.ok()) return r.status().WithContext("renew processing key of " + event_id);
  return r->integer == 1;
}

}  // namespace gapless
