#include "coord/frontier.h"

#include <algorithm>
#include <charconv>

#include "coord/queue.h"

namespace gapless {
namespace {

bool ParseBlock(const std::string& s, uint64_t* out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

}  // namespace

Frontier::Frontier(RedisConn* conn, std::string completed_key, std::string frontier_key,
                   uint64_t start_block, std::string leader_epoch_key)
    : conn_(conn),
      completed_key_(std::move(completed_key)),
      frontier_key_(std::move(frontier_key)),
      epoch_key_(leader_epoch_key.empty() ? frontier_key_ + ":epoch" : std::move(leader_epoch_key)),
      start_(start_block) {}

Status Frontier::Record(uint64_t from, uint64_t to) {
  if (from > to) {
    return FailedPrecondition("frontier: bad range " + std::to_string(from) + "-" +
                              std::to_string(to));
  }
  std::string member = std::to_string(from) + "-" + std::to_string(to);
  auto reply = conn_->Command({"ZADD", completed_key_, std::to_string(from), member});
  if (!reply.ok()) return reply.status().WithContext("frontier: record " + member);
  return Status::Ok();
}

Result<bool> Frontier::RecordFenced(uint64_t from, uint64_t to, const std::string& generation_key,
                                    uint64_t generation) {
  auto reply = conn_->Eval(LoadScript("frontier_record.lua"), {completed_key_, generation_key},
                           {std::to_string(from), std::to_string(to), std::to_string(generation)});
  if (!reply.ok()) {
    return reply.status().WithContext("frontier: record " + std::to_string(from) + "-" +
                                      std::to_string(to));
  }
  return reply->integer == 1;
}

Result<uint64_t> Frontier::Advance(uint64_t leader_epoch) {
  // Idempotent: running the script twice gives the same frontier and the same set.
  auto reply =
      conn_->Eval(LoadScript("frontier_advance.lua"), {completed_key_, frontier_key_, epoch_key_},
                  {std::to_string(start_), std::to_string(leader_epoch)},
                  /*idempotent=*/true);
  // The script refuses corrupt state (never skips it) with kCorruptStateError, which RedisConn
  // turns into DataLoss: an invariant is broken. A deposed leader's epoch: IsStaleLeaderEpoch.
  if (!reply.ok()) return reply.status().WithContext("frontier: advance");
  if (reply->type != RedisReply::Type::kInteger || reply->integer < 0) {
    return Internal("frontier: frontier_advance.lua returned a non-integer");
  }
  return static_cast<uint64_t>(reply->integer);
}

Result<uint64_t> Frontier::Get() {
  auto reply = conn_->Command({"GET", frontier_key_});
  if (!reply.ok()) return reply.status().WithContext("frontier: get");
  if (reply->is_nil()) return start_;
  uint64_t value = 0;
  if (!ParseBlock(reply->str, &value)) {
    return DataLoss("frontier: " + frontier_key_ + " holds " + reply->str + ", not a block number");
  }
  return std::max(value, start_);
}

}  // namespace gapless
