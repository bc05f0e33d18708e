// get_logs_limits: how wide an eth_getLogs request to one endpoint should be (issue 36 item 3), as
// a pure policy: a reading of a provider's limit error (ClassifyGetLogsError) and the per-endpoint
// state that sizes the next range from the answers and refusals seen (GetLogsSizer). Nothing here
// sends a request; a GetLogsSizer reads no clock (the caller passes the time in), GetLogsSizers
// reads its Env's. JsonRpcClient::GetLogs (rpc/json_rpc.h) is the one caller.
//
// Providers limit eth_getLogs in two ways, and word it in a dozen: a structural cap on the range's
// width ("eth_getLogs is limited to a 10,000 range"), and a cap on the answer's size ("query
// returned more than 10000 results"), sometimes with a range that would fit ("Try with this block
// range [0xF42400, 0xF4247F]"). The classifier reads the words and the numbers it parses (hex,
// decimal, "10,000", "2K"), never a bare substring; the real messages it must read, with the
// reading expected, are ../shared/fixtures/getlogs/errors.json.
//
// The sizer (one per endpoint; the pool owns them) aims at target_logs logs per request: it grows
// the width while answers stay small (toward the target, at most x2 an answer), shrinks it when an
// answer is larger, and on a refusal says at once what to ask instead: within the provider's cap
// (remembered for the endpoint), the provider's suggested range (used once, never remembered as a
// cap), or half (too many results, or an unknown "too large", whose half is remembered as an
// inferred cap). It never returns the range just refused: every retry is strictly narrower than
// the refused request and starts at the same block, so a refusal loop ends, at worst at one block,
// which is an error for the caller to surface. A cap is re-probed reprobe_micros after it was
// learnt (providers raise limits, and a misreading must heal), an inferred one sooner. Backfill and
// the tip go through the same calls: at the tip the range is clipped by to_limit and such a clipped
// answer neither shrinks the width nor proves anything about the cap.
//
// GetLogsSizers holds one sizer per endpoint of a transport, behind a mutex, timed by the Env it is
// given: an endpoint pool owns one for its endpoints (shared by every client of the pool), a
// client over one endpoint its own (JsonRpcClient::GetLogs).
//
// Thread-safety: ClassifyGetLogsError, GetLogsLimitKindName and DescribeGetLogsLimit are pure and
// thread-safe. A GetLogsSizer is not thread-safe: the caller locks around its calls
// (GetLogsSizers does). GetLogsSizers is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status.h"

namespace gapless {

// An inclusive range of blocks [from, to], from <= to. (node/ranges.h has the indexer's
// BlockRange; rpc/ does not include node/, and one name for two types would clash there.)
struct GetLogsRange {
  uint64_t from = 0;
  uint64_t to = 0;
  uint64_t size() const { return to - from + 1; }
  friend bool operator==(const GetLogsRange&, const GetLogsRange&) = default;
};

// What an eth_getLogs error says about the request's size.
struct GetLogsLimit {
  enum class Kind {
    kNotALimit,  // an ordinary error (revert, missing block, rate limit): not about the range
    kCap,        // the endpoint takes at most max_blocks blocks a request: remember it
    kSuggested,  // the provider names a range to retry with (range): use it once
    kTooMany,    // the answer would have too many logs: narrow the range and retry at once
    kTooLarge,   // the range is too wide, with no number (or a useless suggestion): halve
  };
  Kind kind = Kind::kNotALimit;
  uint64_t max_blocks = 0;  // kCap
  GetLogsRange range;       // kSuggested, as the provider wrote it
  friend bool operator==(const GetLogsLimit&, const GetLogsLimit&) = default;
};

// "not_a_limit", "cap", "suggested", "too_many", "too_large" (the fixture's spelling).
const char* GetLogsLimitKindName(GetLogsLimit::Kind kind);
// "cap 500 blocks", "suggested [100, 227]", "too many logs", "range too large", "not a limit".
std::string DescribeGetLogsLimit(const GetLogsLimit& limit);

// The reading of a JSON-RPC error (its code and message) to an eth_getLogs request for
// `requested`. In order:
//  1. Not a limit: codes -32601 (no such method), -32700 (parse error), 3 (execution reverted)
//     and 429, and messages with a word of rate limiting, timeouts or reverts ("rate",
//     "timeout", "timed", "deadline", "reverted", "throughput", "capacity").
//  2. Suggested: a word of suggestion ("try", "retry", "should work", "use", "instead",
//     "suggest") followed by a range of two numbers ("[a, b]", "(a, b)", "a-b", "a to b",
//     "from a to b", "between a and b", "a..b"). It must be inside `requested`, not empty and
//     not equal to it; otherwise the reading is kTooLarge (never retry the same request).
//  3. Cap: a word of limit ("exceed...", "limit...", "max...", "most", "than", "too", "up to")
//     and a number that counts blocks: followed by "block", "blocks" or "range" ("a 2K block
//     range", "1000 blocks", "a 10,000 range"), or after "range", "blocks" or "distance" (past ':',
//     '=' and filler words: "Max range: 800", "requested blocks is 1000"). A number followed by
//     "logs" or "results" counts logs, not blocks. The smallest such count below the requested
//     width is the cap; a count not below it cannot be why the request was refused and is
//     ignored (an echo of the request, or a misreading), as are the numbers of a range written
//     out ("range 100-1000 exceeds ...": block numbers).
//  4. Too many: a word of limit and one of "result(s)", "log(s)", "response".
//  5. Too large: a word of limit and one of "range", "blocks", "distance", "span".
//  6. Otherwise not a limit.
GetLogsLimit ClassifyGetLogsError(int64_t code, std::string_view message, GetLogsRange requested);

struct GetLogsSizerOptions {
  // Logs per request aimed at. A fifth of the commonest provider cap on an answer (10,000 logs at
  // Alchemy, Infura, Arbitrum, geth's default), so that a doubled width over a stretch twice as
  // dense still fits, and an answer stays a few MB.
  uint64_t target_logs = 2000;
  // The first width, before any answer: at or below most providers' stated caps (1000, 1024,
  // 2K, 10,000 blocks), so a fresh endpoint rarely starts with a refusal.
  uint64_t initial_blocks = 1000;
  // The widest request ever asked, whatever the answers: bounds one request's work and its
  // worst-case answer on a provider without caps.
  uint64_t max_blocks = 100'000;
  // How long after a cap was learnt (or last re-probed) one request wider than it is tried: a
  // stated cap, and an inferred one (a guess: an unknown "too large" may have meant too many
  // logs in a dense stretch, and would hold the width down long after it; a probe a minute is
  // one refusal in a few hundred requests where the limit is real).
  int64_t reprobe_micros = 600'000'000;          // 10 min
  int64_t reprobe_inferred_micros = 60'000'000;  // 1 min
};

// The per-endpoint range sizing. The rules, exactly:
//  - Width: starts at initial_blocks, stays within [1, max_blocks]. An answer of n logs to a
//    range of s blocks sets the width wanted from that density, s*target/n (n = 0: no bound):
//    when n <= target the width grows to min(that, 2s) if that is wider (never shrinks: an answer
//    to a range clipped at the tip says little), when n > target it shrinks to that if narrower.
//  - Cap: a kCap refusal remembers max_blocks (stated) and when; a kTooLarge refusal of a range
//    within the cap held (or with none) remembers half the refused width (inferred). Next asks at
//    most the cap, except one probe: once reprobe_micros (reprobe_inferred_micros for an inferred
//    cap) have passed since the cap was learnt or last probed, and the width wanted is above the
//    cap, Next asks min(width, 2*cap) blocks. An answer to any range wider than the cap forgets
//    the cap (the provider raised it, or it was misread); a refusal of it keeps the cap (or takes
//    the new number of a kCap) and restarts the interval.
//  - Refusal: OnRefused returns the range to ask at once, from the same block and strictly
//    narrower: kCap: the cap (or half, when the refused range was within the stated cap: a
//    misreading, remembered as an inferred cap of that half); kSuggested: the suggestion when it
//    starts at the refused range's first block, else its width from that block (never skip
//    blocks), not kept as a cap; kTooMany, kTooLarge: half. After a probe's refusal, the retry
//    is at most the cap. The width drops to the retry's (kSuggested, kTooMany, kTooLarge).
//  - Never the same request twice in a row: the last refused range is kept until an answer, and
//    Next halves a range equal to it (a single block excepted: the caller was told it failed).
class GetLogsSizer {
 public:
  explicit GetLogsSizer(GetLogsSizerOptions options = {});

  // The range to ask next, starting at `from` (from <= to_limit): never past to_limit, never
  // wider than the cap but for a due probe, never equal to the range last refused (unless one
  // block).
  GetLogsRange Next(uint64_t from, uint64_t to_limit, int64_t now_micros);

  // `asked` was answered with `logs` logs.
  void OnAnswer(GetLogsRange asked, uint64_t logs);

  // `asked` was refused for `why` (ClassifyGetLogsError). Returns the range to ask at once
  // (starting at asked.from, strictly narrower). Fails FailedPrecondition when `asked` is one
  // block (this endpoint will not serve that block's logs; the caller surfaces it, another
  // endpoint may serve it), and Internal when `why` is kNotALimit (a caller's bug: such an error
  // is an ordinary failure, not a reason to resize).
  Result<GetLogsRange> OnRefused(GetLogsRange asked, const GetLogsLimit& why, int64_t now_micros);

  // The width wanted from the answers (before the cap).
  uint64_t width() const { return width_; }
  // The cap held for this endpoint, if any, and whether it was inferred (not stated).
  std::optional<uint64_t> cap() const;
  bool cap_inferred() const { return cap_ && cap_->inferred; }
  // For status: "width 2000, cap 500 (stated, probe in 312 s)", "width 300, cap 500 (inferred,
  // not binding)", "width 8000, no cap".
  std::string Describe(int64_t now_micros) const;

 private:
  struct Cap {
    uint64_t blocks = 0;
    bool inferred = false;
    int64_t since_micros = 0;  // learnt, or last probed
  };
  void SetCap(uint64_t blocks, bool inferred, int64_t now_micros);
  int64_t ReprobeMicros() const;  // for the cap held

  GetLogsSizerOptions options_;
  uint64_t width_;
  std::optional<Cap> cap_;
  std::optional<GetLogsRange> last_refused_;
};

// The sizers of a transport's endpoints, endpoint i's at index i (HttpResponse::served_by's bit
// i; 0 over one endpoint), each used under the mutex, with the time from env. The methods are
// GetLogsSizer's for one endpoint; an index out of range is a caller's bug (Internal from
// OnRefused, endpoint 0's sizer otherwise).
class GetLogsSizers {
 public:
  // env: not owned; nullptr = Env::Default().
  GetLogsSizers(size_t endpoints, Env* env, GetLogsSizerOptions options = {});

  size_t size() const { return sizers_.size(); }
  GetLogsRange Next(size_t endpoint, uint64_t from, uint64_t to_limit);
  void OnAnswer(size_t endpoint, GetLogsRange asked, uint64_t logs);
  Result<GetLogsRange> OnRefused(size_t endpoint, GetLogsRange asked, const GetLogsLimit& why);
  // Each endpoint's GetLogsSizer::Describe, in endpoint order.
  std::vector<std::string> Describe() const;
  // Endpoint i's cap (GetLogsSizer::cap), for tests and status.
  std::optional<uint64_t> cap(size_t endpoint) const;

 private:
  size_t Index(size_t endpoint) const { return endpoint < sizers_.size() ? endpoint : 0; }

  Env* env_;
  mutable std::mutex mu_;
  std::vector<GetLogsSizer> sizers_;  // guarded by mu_
};

}  // namespace gapless
