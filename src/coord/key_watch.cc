#include "coord/key_watch.h"

#include <algorithm>
#include <charconv>
#include <map>

namespace gapless {

namespace {

bool ParseInt(std::string_view s, int64_t* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

}  // namespace

Result<std::vector<KeyCountSample>> ParseKeyCountSamples(const std::vector<std::string>& entries) {
  std::vector<KeyCountSample> out;
  out.reserve(entries.size());
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    std::string_view e = *it;
    size_t colon = e.find(':');
    KeyCountSample s;
    if (colon == std::string_view::npos || !ParseInt(e.substr(0, colon), &s.time_ms) ||
        !ParseInt(e.substr(colon + 1), &s.keys)) {
      return InvalidData("key count sample '" + std::string(e) + "' is not <time ms>:<count>");
    }
    out.push_back(s);
  }
  return out;
}

Result<KeyCountHistory> RecordKeyCountSample(RedisConn& redis, const Keys& keys,
                                             const KeyWatchOptions& options) {
  static const RedisScript& script = LoadScript("key_watch_sample.lua");
  GAPLESS_ASSIGN_OR_RETURN(
      RedisReply r,
      redis.Eval(script, {keys.key_count_samples()},
                 {std::to_string(options.max_samples), std::to_string(options.min_interval_ms),
                  std::to_string(options.ttl_ms)},
                 // Resending after a broken connection adds at most one more sample, which the
                 // minimum interval then refuses.
                 /*idempotent=*/true));
  if (r.type != RedisReply::Type::kArray || r.elements.size() < 2) {
    return Internal("key_watch_sample.lua: unexpected reply");
  }
  KeyCountHistory out;
  out.now_ms = r.elements[0].integer;
  out.recorded = r.elements[1].integer == 1;
  std::vector<std::string> entries;
  for (size_t i = 2; i < r.elements.size(); ++i) entries.push_back(r.elements[i].str);
  GAPLESS_ASSIGN_OR_RETURN(out.samples, ParseKeyCountSamples(entries));
  return out;
}

KeyGrowth DetectKeyGrowth(const std::vector<KeyCountSample>& samples, const KeyGrowthRule& rule) {
  KeyGrowth out;
  if (samples.empty()) return out;
  size_t first = samples.size() - 1;  // the run's first sample
  while (first > 0 && samples[first - 1].keys < samples[first].keys &&
         samples[first - 1].time_ms < samples[first].time_ms) {
    --first;
  }
  out.rising_samples = samples.size() - first;
  out.span_ms = samples.back().time_ms - samples[first].time_ms;
  out.from_keys = samples[first].keys;
  out.to_keys = samples.back().keys;
  out.growing = out.rising_samples >= std::max<size_t>(rule.min_samples, 2) &&
                out.span_ms >= rule.min_span_ms;
  return out;
}

std::string KeyPrefix(std::string_view key) {
  size_t name_start = 0;
  if (key.starts_with("gapless:{")) {
    size_t close = key.find("}:");
    if (close != std::string_view::npos) name_start = close + 2;
  }
  size_t colon = key.find(':', name_start);
  if (colon == std::string_view::npos) {
    return name_start > 0 ? std::string(key) : std::string("(no prefix)");
  }
  return std::string(key.substr(0, colon)) + ":*";
}

Result<PrefixSample> SampleKeyPrefixes(RedisConn& redis, int64_t max_keys, size_t top,
                                       int64_t ttl_checks) {
  PrefixSample out;
  std::map<std::string, std::vector<std::string>> groups;  // prefix -> up to ttl_checks keys
  std::map<std::string, int64_t> counts;
  std::string cursor = "0";
  const std::string count = std::to_string(std::clamp<int64_t>(max_keys, 1, 500));
  do {
    GAPLESS_ASSIGN_OR_RETURN(RedisReply page, redis.Command({"SCAN", cursor, "COUNT", count}));
    if (page.type != RedisReply::Type::kArray || page.elements.size() != 2) {
      return Internal("SCAN: unexpected reply");
    }
    cursor = page.elements[0].str;
    for (const RedisReply& key : page.elements[1].elements) {
      std::string prefix = KeyPrefix(key.str);
      ++counts[prefix];
      auto& keys = groups[prefix];
      if (static_cast<int64_t>(keys.size()) < ttl_checks) keys.push_back(key.str);
      ++out.keys_scanned;
    }
  } while (cursor != "0" && out.keys_scanned < max_keys);
  std::vector<std::pair<std::string, int64_t>> by_size(counts.begin(), counts.end());
  std::sort(by_size.begin(), by_size.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  for (size_t i = 0; i < by_size.size() && i < top; ++i) {
    PrefixCount p;
    p.prefix = by_size[i].first;
    p.keys_seen = by_size[i].second;
    for (const std::string& key : groups[p.prefix]) {
      GAPLESS_ASSIGN_OR_RETURN(RedisReply ttl, redis.Command({"PTTL", key}));
      if (ttl.integer == -2) continue;  // gone since the SCAN
      ++p.ttl_checked;
      if (ttl.integer == -1) ++p.without_ttl;
    }
    out.top.push_back(std::move(p));
  }
  return out;
}

}  // namespace gapless
