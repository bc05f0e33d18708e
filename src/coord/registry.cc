#include "coord/registry.h"

#include <fmt/format.h>

#include <algorithm>

namespace gapless {
namespace {

// Minimal JSON string escaping for the few free-text fields (host, range).
std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Reads "key":<value> from our own flat encoding: strings (without escapes beyond \" \\) and
// numbers. Enough for what Encode writes; not a general JSON parser.
bool Field(const std::string& json, std::string_view key, std::string* out) {
  std::string needle = "\"" + std::string(key) + "\":";
  size_t at = json.find(needle);
  if (at == std::string::npos) return false;
  at += needle.size();
  out->clear();
  if (at < json.size() && json[at] == '"') {
    for (size_t i = at + 1; i < json.size(); ++i) {
      if (json[i] == '\\' && i + 1 < json.size()) {
        out->push_back(json[++i]);
      } else if (json[i] == '"') {
        return true;
      } else {
        out->push_back(json[i]);
      }
    }
    return false;
  }
  size_t end = json.find_first_of(",}", at);
  if (end == std::string::npos) return false;
  *out = json.substr(at, end - at);
  return true;
}

}  // namespace

std::string Registry::Encode(const WorkerInfo& info) {
  return fmt::format(R"({{"host":{},"pid":{},"range":{},"blocks_per_s":{:.2f},"updated_ms":{}}})",
                     Quote(info.host), info.pid, Quote(info.range), info.blocks_per_s,
                     info.updated_ms);
}

bool Registry::Decode(const std::string& worker, const std::string& json, WorkerInfo* out) {
  std::string host, pid, range, rate, updated;
  if (!Field(json, "host", &host) || !Field(json, "pid", &pid) || !Field(json, "range", &range) ||
      !Field(json, "blocks_per_s", &rate) || !Field(json, "updated_ms", &updated)) {
    return false;
  }
  try {
    out->worker = worker;
    out->host = host;
    out->pid = std::stoll(pid);
    out->range = range;
    out->blocks_per_s = std::stod(rate);
    out->updated_ms = std::stoll(updated);
  } catch (...) {
    return false;
  }
  return true;
}

Status Registry::Beat(const WorkerInfo& info, int64_t ttl_ms) {
  GAPLESS_ASSIGN_OR_RETURN(auto now, redis_->Command({"TIME"}));
  WorkerInfo stamped = info;
  if (now.elements.size() == 2) {
    stamped.updated_ms =
        std::stoll(now.elements[0].str) * 1000 + std::stoll(now.elements[1].str) / 1000;
  }
  // Idempotent: a beat run twice leaves the same state.
  return redis_
      ->Eval(
          LoadScript("registry_beat.lua"),
          {keys_->heartbeat(info.worker), keys_->registry(), keys_->registry_expiries()},
          {info.worker, Encode(stamped), std::to_string(ttl_ms), std::to_string(kMaxPrunePerBeat)},
          /*idempotent=*/true)
      .status();
}

Status Registry::Leave(const std::string& worker) {
  return redis_
      ->Eval(LoadScript("registry_leave.lua"),
             {keys_->heartbeat(worker), keys_->registry(), keys_->registry_expiries()}, {worker},
             /*idempotent=*/true)
      .status();
}

Result<std::vector<WorkerInfo>> Registry::List(bool prune_dead) {
  GAPLESS_ASSIGN_OR_RETURN(auto all, redis_->Command({"HGETALL", keys_->registry()}));
  std::vector<WorkerInfo> live;
  for (size_t i = 0; i + 1 < all.elements.size(); i += 2) {
    const std::string& worker = all.elements[i].str;
    GAPLESS_ASSIGN_OR_RETURN(auto alive, redis_->Command({"EXISTS", keys_->heartbeat(worker)}));
    WorkerInfo info;
    if (alive.integer == 1 && Decode(worker, all.elements[i + 1].str, &info)) {
      live.push_back(std::move(info));
    } else if (alive.integer == 0 && prune_dead) {
      // Dead and not yet pruned by a beat: prune it now.
      GAPLESS_RETURN_IF_ERROR(Leave(worker));
    }
  }
  std::sort(live.begin(), live.end(),
            [](const WorkerInfo& a, const WorkerInfo& b) { return a.worker < b.worker; });
  return live;
}

}  // namespace gapless
