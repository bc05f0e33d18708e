// KeyWatch: the memory watch of the coordination Redis (issue 9 item 7, seed 000's lesson "TTL
// everything"). A bounded history of the server's key count (DBSIZE samples with Redis TIME, in
// Keys::key_count_samples(), written by key_watch_sample.lua), the rule that calls a history
// "growing without bound", and a cheap look at which key prefixes hold the keys (SCAN sampling)
// so a warning can name the likely culprit.
//
// Who samples: `gapless status` at each run (at most one sample per min_interval_ms, so a status
// in a `watch` loop does not flood the window); the leader may call RecordKeyCountSample from a
// duty as well (same key, same bounds). The count is the whole database's (DBSIZE), so keys of
// other applications sharing the server count too.
//
// The rule (KeyGrowthRule, DetectKeyGrowth): the key count rose strictly at every step of the
// newest >= min_samples samples, which span >= min_span_ms. A fleet at steady state has a key
// count that moves both ways (leases, heartbeats, range markers come and go), so a count that
// only ever rises over ten minutes or more is what an unbounded key looks like; a single step
// down (keys expiring) ends the run. Display only: nothing acts on it.
//
// Thread-safety: the functions are stateless; the RedisConn is the caller's (one per thread).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coord/keys.h"
#include "coord/redis.h"
#include "core/status.h"

namespace gapless {

struct KeyCountSample {
  int64_t time_ms = 0;  // Redis TIME
  int64_t keys = 0;     // DBSIZE
};

struct KeyWatchOptions {
  int64_t max_samples = 30;          // the list's bound (keys.h "Bounds")
  int64_t min_interval_ms = 60'000;  // a younger newest sample: nothing recorded
  int64_t ttl_ms = 24 * 3'600'000;   // an unused history disappears
};

struct KeyCountHistory {
  int64_t now_ms = 0;
  bool recorded = false;                // this call added a sample
  std::vector<KeyCountSample> samples;  // oldest first
};

// Runs key_watch_sample.lua: a sample of DBSIZE now unless the newest is younger than
// min_interval_ms, then the whole history. Errors: Redis's; DataLoss for a corrupt entry.
Result<KeyCountHistory> RecordKeyCountSample(RedisConn& redis, const Keys& keys,
                                             const KeyWatchOptions& options = {});

// Parses the list's entries (newest first, "<time ms>:<count>") into samples oldest first.
// InvalidData naming the entry when one is malformed.
Result<std::vector<KeyCountSample>> ParseKeyCountSamples(const std::vector<std::string>& entries);

struct KeyGrowthRule {
  size_t min_samples = 6;
  int64_t min_span_ms = 10 * 60'000;
};

struct KeyGrowth {
  bool growing = false;  // the rule holds
  // The run of strictly rising samples that ends at the newest (1 when the newest did not rise).
  size_t rising_samples = 0;
  int64_t span_ms = 0;  // from the run's first sample to the newest
  int64_t from_keys = 0;
  int64_t to_keys = 0;
};

// The rule above over samples oldest first. A sample whose time is not after the one before it
// (a failover to a server whose clock is behind) ends the run like a step down. Empty input: an
// empty KeyGrowth.
KeyGrowth DetectKeyGrowth(const std::vector<KeyCountSample>& samples,
                          const KeyGrowthRule& rule = {});

// The group of a key for the prefix breakdown: gapless's own keys by namespace and first name
// ("gapless:{chain-1-db-x}:heartbeat:*", "gapless:{chain-1-db-x}:frontier"), any other key by its
// first ':'-separated part ("bull:*"); a key without ':' is "(no prefix)".
std::string KeyPrefix(std::string_view key);

struct PrefixCount {
  std::string prefix;
  int64_t keys_seen = 0;    // in the SCAN sample
  int64_t ttl_checked = 0;  // of those, how many were asked for their TTL
  int64_t without_ttl = 0;  // of those, how many have none (TTL -1)
};

struct PrefixSample {
  int64_t keys_scanned = 0;
  std::vector<PrefixCount> top;  // largest first, at most `top` entries
};

// SCANs about max_keys keys (COUNT min(max_keys, 500) per call) and groups them by KeyPrefix; for
// the `top` largest groups asks the TTL of up to ttl_checks keys each. Cost: about max_keys / 500 +
// top * ttl_checks round trips. Errors: Redis's.
Result<PrefixSample> SampleKeyPrefixes(RedisConn& redis, int64_t max_keys = 5'000, size_t top = 3,
                                       int64_t ttl_checks = 20);

}  // namespace gapless
