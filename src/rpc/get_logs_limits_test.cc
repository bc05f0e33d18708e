// The eth_getLogs limit reading against every real provider message of
// ../shared/fixtures/getlogs/errors.json and the forms around them (numbers, ranges, ordinary
// errors), then the sizer: growth, shrinking, caps per endpoint, suggestions used once, halving,
// the re-probe that heals a misread cap, a one-block refusal, random sequences that must never
// repeat a refused request, and simulated providers driven over a long range of blocks.
#include "rpc/get_logs_limits.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace gapless {
namespace {

using Kind = GetLogsLimit::Kind;

constexpr int64_t kSecond = 1'000'000;
constexpr int64_t kMinute = 60 * kSecond;

GetLogsLimit Read(std::string_view message, GetLogsRange requested = {0, 100'000},
                  int64_t code = -32000) {
  return ClassifyGetLogsError(code, message, requested);
}

TEST(ClassifyGetLogsErrorTest, EveryFixtureMessageReadsAsExpected) {
  const std::string path = std::string(GAPLESS_FIXTURES_DIR) + "/getlogs/errors.json";
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.load(path).get(doc), simdjson::SUCCESS) << path;
  simdjson::dom::array cases;
  ASSERT_EQ(doc["cases"].get_array().get(cases), simdjson::SUCCESS);
  std::set<std::string> kinds_seen;
  size_t n = 0;
  for (simdjson::dom::element c : cases) {
    ++n;
    std::string_view provider, message, kind;
    int64_t code = 0;
    ASSERT_EQ(c["provider"].get_string().get(provider), simdjson::SUCCESS);
    ASSERT_EQ(c["message"].get_string().get(message), simdjson::SUCCESS);
    ASSERT_EQ(c["code"].get_int64().get(code), simdjson::SUCCESS);
    ASSERT_EQ(c["expect"]["kind"].get_string().get(kind), simdjson::SUCCESS);
    uint64_t from = 0, to = 0;
    ASSERT_EQ(c["request"].at(0).get_uint64().get(from), simdjson::SUCCESS);
    ASSERT_EQ(c["request"].at(1).get_uint64().get(to), simdjson::SUCCESS);
    SCOPED_TRACE(std::string(provider) + ": " + std::string(message));

    GetLogsLimit want;
    if (kind == "cap") {
      want.kind = Kind::kCap;
      ASSERT_EQ(c["expect"]["max_blocks"].get_uint64().get(want.max_blocks), simdjson::SUCCESS);
    } else if (kind == "suggested") {
      want.kind = Kind::kSuggested;
      ASSERT_EQ(c["expect"]["range"].at(0).get_uint64().get(want.range.from), simdjson::SUCCESS);
      ASSERT_EQ(c["expect"]["range"].at(1).get_uint64().get(want.range.to), simdjson::SUCCESS);
    } else if (kind == "too_many") {
      want.kind = Kind::kTooMany;
    } else if (kind == "too_large") {
      want.kind = Kind::kTooLarge;
    } else if (kind == "not_a_limit" || kind == "none") {
      want.kind = Kind::kNotALimit;
    } else {
      FAIL() << "a kind this test does not know: " << kind;
    }
    kinds_seen.insert(std::string(kind));
    const GetLogsLimit got = ClassifyGetLogsError(code, message, {from, to});
    EXPECT_EQ(got, want) << "got " << DescribeGetLogsLimit(got) << ", want "
                         << DescribeGetLogsLimit(want);
    EXPECT_STREQ(GetLogsLimitKindName(got.kind), std::string(kind).c_str());
  }
  EXPECT_GE(n, 23u);
  EXPECT_EQ(kinds_seen, (std::set<std::string>{"cap", "suggested", "too_many", "too_large"}));
}

TEST(ClassifyGetLogsErrorTest, ReadsNumbersInEveryForm) {
  const GetLogsRange wide{0, 5'000'000};
  EXPECT_EQ(Read("limited to a 0x3e8 block range", wide).max_blocks, 1000u);
  EXPECT_EQ(Read("limited to a 0X3E8 block range", wide).max_blocks, 1000u);
  EXPECT_EQ(Read("up to a 2k block range", wide).max_blocks, 2000u);
  EXPECT_EQ(Read("up to a 10K block range", wide).max_blocks, 10000u);
  EXPECT_EQ(Read("max 1M blocks", wide).max_blocks, 1'000'000u);
  EXPECT_EQ(Read("limited to 1,000,000 blocks", wide).max_blocks, 1'000'000u);
  EXPECT_EQ(Read("limited to a 10,000 range", wide).max_blocks, 10000u);
  EXPECT_EQ(Read("max range of at most 500", wide).max_blocks, 500u);
  EXPECT_EQ(Read("please use a 1000-block range at most", wide).max_blocks, 1000u);
  EXPECT_EQ(Read("block range must be less than 3000 blocks", wide).max_blocks, 3000u);
  // The smallest block count wins; counts of logs are not counts of blocks.
  EXPECT_EQ(Read("at most 5000 blocks, or 2000 blocks with no address", wide).max_blocks, 2000u);
  EXPECT_EQ(Read("response limited to 10K logs", wide).kind, Kind::kTooMany);
  EXPECT_EQ(Read("max results 500", wide).kind, Kind::kTooMany);
  // Not numbers: part of a word, an unknown unit, too big for 64 bits.
  EXPECT_EQ(Read("exceeds the 2nd block range", wide).kind, Kind::kTooLarge);
  EXPECT_EQ(Read("limited to 10kb range", wide).kind, Kind::kTooLarge);
  EXPECT_EQ(Read("limited to 99999999999999999999999 blocks", wide).kind, Kind::kTooLarge);
}

TEST(ClassifyGetLogsErrorTest, ACountNotBelowTheRequestIsNotACap) {
  // The request was within the stated count: an echo of the request, or not the reason.
  EXPECT_EQ(Read("eth_getLogs is limited to 10,000 blocks", {0, 4999}).kind, Kind::kTooLarge);
  EXPECT_EQ(Read("requested 5000 blocks exceeds the max range of 1000", {0, 4999}),
            (GetLogsLimit{Kind::kCap, 1000, {}}));
  EXPECT_EQ(Read("range exceeds 1000 blocks", {10, 1009}).kind, Kind::kTooLarge);
  EXPECT_EQ(Read("range exceeds 1000 blocks", {10, 1010}).max_blocks, 1000u);
}

TEST(ClassifyGetLogsErrorTest, ReadsSuggestedRangesInEveryForm) {
  const GetLogsRange req{100, 1000};
  const GetLogsLimit want{Kind::kSuggested, 0, {100, 199}};
  EXPECT_EQ(Read("too many results, try from 100 to 199", req), want);
  EXPECT_EQ(Read("too many results, retry between 100 and 199", req), want);
  EXPECT_EQ(Read("too many results, try [100,199]", req), want);
  EXPECT_EQ(Read("too many results, use (0x64, 0xc7) instead", req), want);
  EXPECT_EQ(Read("too many results; suggested range: 100..199", req), want);
  EXPECT_EQ(Read("more than 10,000 results, retry with the range 100 - 199", req), want);
  // Useless suggestions are read as "too large": outside the request, inverted, the request.
  EXPECT_EQ(Read("try with this block range [0x0, 0x63]", req).kind, Kind::kTooLarge);
  EXPECT_EQ(Read("try with this block range [0x64, 0x3e9]", req).kind, Kind::kTooLarge);
  EXPECT_EQ(Read("try with this block range [199, 100]", req).kind, Kind::kTooLarge);
  EXPECT_EQ(Read("try with this block range [100, 1000]", req).kind, Kind::kTooLarge);
  // A range written without a word of suggestion is not one (here an echo of the request).
  EXPECT_EQ(Read("range 100-1000 exceeds max block range 500", req).max_blocks, 500u);
}

TEST(ClassifyGetLogsErrorTest, OrdinaryErrorsAreNotLimits) {
  for (const auto& [code, message] : std::vector<std::pair<int64_t, std::string>>{
           {3, "execution reverted"},
           {-32000, "execution reverted: block range limit"},
           {-32000, "header not found"},
           {-32000, "missing trie node 0123abcd (path )"},
           {-32000, "invalid block range params"},
           {-32602, "block range extends beyond current head block"},
           {429, "Too Many Requests"},
           {-32005, "Too Many Requests"},
           {-32005, "daily request count exceeded, request rate limited"},
           {-32005, "project ID request rate exceeded"},
           {-32000, "rate limit exceeded: max 1000 blocks per second"},
           {-32007, "Your app has exceeded its compute units per second capacity"},
           {-32000, "request timed out"},
           {-32000, "context deadline exceeded"},
           {-32601, "eth_getLogs is limited to a 1000 block range"},
           {-32700, "parse error"},
           {-32000, ""},
       }) {
    EXPECT_EQ(Read(message, {0, 100'000}, code).kind, Kind::kNotALimit) << code << " " << message;
  }
  // "429" inside a number is a number, not a rate limit.
  EXPECT_EQ(Read("query returned more than 14290 results", {0, 100'000}, -32005).kind,
            Kind::kTooMany);
  EXPECT_EQ(Read("max block range: 4290", {0, 100'000}, -32000).max_blocks, 4290u);
}

// --- The sizer -------------------------------------------------------------------------------

const GetLogsLimit kTooMany{Kind::kTooMany, 0, {}};
const GetLogsLimit kTooLarge{Kind::kTooLarge, 0, {}};
GetLogsLimit Cap(uint64_t n) { return {Kind::kCap, n, {}}; }
GetLogsLimit Suggested(uint64_t a, uint64_t b) { return {Kind::kSuggested, 0, {a, b}}; }

constexpr uint64_t kFar = 1'000'000'000;

TEST(GetLogsSizerTest, GrowsWhileAnswersStaySmallAndShrinksWhenLarge) {
  GetLogsSizer s;  // target 2000 logs, 1000 blocks first, 100000 at most
  EXPECT_EQ(s.Next(0, kFar, 0), (GetLogsRange{0, 999}));
  s.OnAnswer({0, 999}, 0);
  EXPECT_EQ(s.width(), 2000u);  // at most x2 an answer
  s.OnAnswer({1000, 2999}, 500);
  EXPECT_EQ(s.width(), 4000u);  // x2, short of the 8000 the density allows
  s.OnAnswer({3000, 6999}, 1600);
  EXPECT_EQ(s.width(), 5000u);  // toward the target: 4000 * 2000 / 1600
  s.OnAnswer({7000, 11999}, 8000);
  EXPECT_EQ(s.width(), 1250u);  // shrinks to the target's share: 5000 * 2000 / 8000
  EXPECT_EQ(s.Next(12000, kFar, 0), (GetLogsRange{12000, 13249}));
  for (int i = 0; i < 20; ++i) s.OnAnswer(s.Next(0, kFar, 0), 0);
  EXPECT_EQ(s.width(), 100'000u);  // the ceiling
  EXPECT_EQ(s.Next(5, kFar, 0).size(), 100'000u);
}

TEST(GetLogsSizerTest, NeverPastToLimitAndAClippedAnswerDoesNotShrink) {
  GetLogsSizer s;
  EXPECT_EQ(s.Next(500, 500, 0), (GetLogsRange{500, 500}));
  EXPECT_EQ(s.Next(500, 502, 0), (GetLogsRange{500, 502}));
  s.OnAnswer({500, 502}, 3);  // at the tip: three blocks, a few logs
  EXPECT_EQ(s.width(), 1000u);
  EXPECT_EQ(s.Next(UINT64_MAX - 10, UINT64_MAX, 0), (GetLogsRange{UINT64_MAX - 10, UINT64_MAX}));
}

TEST(GetLogsSizerTest, TooManyAndTooLargeHalveTooLargeInfersACap) {
  GetLogsSizer s;
  auto r = s.OnRefused({0, 999}, kTooMany, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (GetLogsRange{0, 499}));
  EXPECT_EQ(s.width(), 500u);
  EXPECT_FALSE(s.cap());  // density, not a structural limit
  r = s.OnRefused({0, 499}, kTooLarge, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (GetLogsRange{0, 249}));
  EXPECT_EQ(s.cap(), 250u);
  EXPECT_TRUE(s.cap_inferred());
  s.OnAnswer({0, 249}, 0);
  EXPECT_EQ(s.Next(250, kFar, 30 * kSecond), (GetLogsRange{250, 499}));  // held at the cap
}

TEST(GetLogsSizerTest, RemembersAStatedCapPerEndpoint) {
  GetLogsSizer a, b;
  auto r = a.OnRefused({0, 999}, Cap(500), 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (GetLogsRange{0, 499}));
  EXPECT_EQ(a.cap(), 500u);
  EXPECT_FALSE(a.cap_inferred());
  for (uint64_t from = 500; from < 50'000; from += 500) {
    const GetLogsRange next = a.Next(from, kFar, 9 * kMinute);
    EXPECT_EQ(next, (GetLogsRange{from, from + 499}));
    a.OnAnswer(next, 0);
  }
  EXPECT_EQ(a.cap(), 500u);
  EXPECT_EQ(b.Next(0, kFar, 0), (GetLogsRange{0, 999}));  // the other endpoint has no cap
  EXPECT_FALSE(b.cap());
}

TEST(GetLogsSizerTest, UsesASuggestionOnceWithoutKeepingItAsACap) {
  GetLogsSizer s;
  auto r = s.OnRefused({0, 999}, Suggested(0, 127), 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (GetLogsRange{0, 127}));
  EXPECT_FALSE(s.cap());
  s.OnAnswer({0, 127}, 100);
  EXPECT_EQ(s.Next(128, kFar, 0), (GetLogsRange{128, 383}));  // grows back from it, x2
  // A suggestion that starts later is used for its width from the refused range's first block:
  // no block is skipped.
  r = s.OnRefused({1000, 1999}, Suggested(1500, 1599), 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (GetLogsRange{1000, 1099}));
  // A useless one (outside, or the request itself) halves.
  r = s.OnRefused({2000, 2099}, Suggested(0, 10), 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (GetLogsRange{2000, 2049}));
  r = s.OnRefused({2000, 2049}, Suggested(2000, 2049), 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (GetLogsRange{2000, 2024}));
}

TEST(GetLogsSizerTest, ACapThatWouldRepeatTheRequestHalvesInstead) {
  GetLogsSizer s;
  // The stated cap is the refused width (or wider): retrying within it would be the same
  // request. Halve, and keep the half as an inferred cap.
  auto r = s.OnRefused({0, 999}, Cap(1000), 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (GetLogsRange{0, 499}));
  EXPECT_EQ(s.cap(), 500u);
  EXPECT_TRUE(s.cap_inferred());
  r = s.OnRefused({0, 499}, Cap(4000), 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (GetLogsRange{0, 249}));
}

TEST(GetLogsSizerTest, AOneBlockRefusalIsAnErrorAndNotALimitIsABug) {
  GetLogsSizer s;
  auto r = s.OnRefused({42, 42}, kTooMany, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("block 42"), std::string::npos) << r.status().message();
  // The caller may try that block again later (another endpoint failed too): it gets it.
  EXPECT_EQ(s.Next(42, kFar, 0).from, 42u);
  r = s.OnRefused({0, 999}, GetLogsLimit{}, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInternal);
}

TEST(GetLogsSizerTest, ReprobesACapAndHealsAMisreading) {
  GetLogsSizer s;  // reprobe after 10 min
  ASSERT_TRUE(s.OnRefused({0, 999}, Cap(10), 0).ok());
  uint64_t from = 10;
  for (int64_t now = kMinute; now < 10 * kMinute; now += kMinute) {
    const GetLogsRange r = s.Next(from, kFar, now);
    EXPECT_EQ(r.size(), 10u) << "before the interval the cap holds";
    s.OnAnswer(r, 0);
    from = r.to + 1;
  }
  EXPECT_EQ(s.Describe(9 * kMinute), "width 1000, cap 10 (stated, probe in 60 s)");
  EXPECT_EQ(s.Describe(10 * kMinute), "width 1000, cap 10 (stated, probe due)");
  const GetLogsRange probe = s.Next(from, kFar, 10 * kMinute);
  EXPECT_EQ(probe.size(), 20u);  // twice the cap, once
  s.OnAnswer(probe, 0);          // served: the cap was raised, or misread
  EXPECT_FALSE(s.cap());
  EXPECT_EQ(s.Next(probe.to + 1, kFar, 10 * kMinute).size(), 1000u);
  EXPECT_EQ(s.Describe(0), "width 1000, no cap");
}

TEST(GetLogsSizerTest, ARefusedProbeKeepsTheCapForAnotherInterval) {
  GetLogsSizer s;
  ASSERT_TRUE(s.OnRefused({0, 999}, Cap(500), 0).ok());
  const GetLogsRange probe = s.Next(500, kFar, 11 * kMinute);
  EXPECT_EQ(probe, (GetLogsRange{500, 1499}));
  auto r = s.OnRefused(probe, Cap(500), 11 * kMinute);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (GetLogsRange{500, 999}));
  EXPECT_EQ(s.cap(), 500u);
  s.OnAnswer(*r, 0);
  EXPECT_EQ(s.Next(1000, kFar, 20 * kMinute).size(), 500u);
  EXPECT_EQ(s.Next(1000, kFar, 21 * kMinute).size(), 1000u);
  // A probe refused for another reason keeps the cap too, and retries within it.
  r = s.OnRefused({1000, 1999}, kTooMany, 21 * kMinute);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (GetLogsRange{1000, 1499}));
  EXPECT_EQ(s.cap(), 500u);
  EXPECT_EQ(s.Next(1000, kFar, 22 * kMinute).size(), 500u);
  // A new number is taken.
  s.OnAnswer(*r, 0);
  EXPECT_EQ(s.width(), 1000u);
  r = s.OnRefused(s.Next(1000, kFar, 40 * kMinute), Cap(800), 40 * kMinute);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(s.cap(), 800u);
}

TEST(GetLogsSizerTest, RandomSequencesNeverRepeatARefusedRequest) {
  std::mt19937 rng(36);
  auto below = [&rng](uint64_t n) {
    return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng);
  };
  GetLogsSizerOptions options;
  options.max_blocks = 5000;
  options.initial_blocks = 300;
  options.target_logs = 100;
  options.reprobe_micros = 5 * kMinute;
  GetLogsSizer s(options);
  int64_t now = 0;
  uint64_t from = 1000;
  int errors = 0, refusals = 0;
  for (int step = 0; step < 20'000; ++step) {
    now += static_cast<int64_t>(below(30)) * kSecond;
    const uint64_t to_limit = from + (below(4) == 0 ? below(5) : below(20'000));
    GetLogsRange r = s.Next(from, to_limit, now);
    ASSERT_EQ(r.from, from);
    ASSERT_LE(r.from, r.to);
    ASSERT_LE(r.to, to_limit);
    ASSERT_LE(r.size(), options.max_blocks);
    std::optional<GetLogsRange> refused;
    for (int attempt = 0; attempt < 64; ++attempt) {
      if (refused && r.size() > 1) {
        ASSERT_NE(r, *refused);
        ASSERT_LT(r.size(), refused->size());
        ASSERT_EQ(r.from, refused->from);
      }
      if (below(3) == 0) {
        s.OnAnswer(r, below(4) == 0 ? below(1000) : below(150));
        from = r.to + 1;
        break;
      }
      GetLogsLimit why;
      switch (below(4)) {
        case 0:
          why = Cap(1 + below(2 * r.size()));
          break;
        case 1: {
          const uint64_t a = r.from + below(r.size() + 2);
          why = below(4) == 0 ? Suggested(r.from, r.to) : Suggested(a, a + below(r.size()));
          break;
        }
        case 2:
          why = kTooMany;
          break;
        default:
          why = kTooLarge;
      }
      ++refusals;
      auto retry = s.OnRefused(r, why, now);
      if (r.size() == 1) {
        ASSERT_FALSE(retry.ok());
        ++errors;
        break;
      }
      ASSERT_TRUE(retry.ok()) << retry.status().ToString();
      refused = r;
      r = *retry;
      if (below(8) == 0) {  // the caller lost the retry (a transport failure) and asks anew
        r = s.Next(from, to_limit, now);
        ASSERT_EQ(r.from, from);
        ASSERT_LE(r.to, to_limit);
        if (r.size() > 1) {
          ASSERT_NE(r, *refused);
        }
      }
    }
  }
  EXPECT_GT(refusals, 10'000);  // the sequences did exercise refusals, and one-block errors
  EXPECT_GT(errors, 10);
}

// --- Simulated providers driven over many blocks ---------------------------------------------

struct Reply {
  bool refused = false;
  int64_t code = 0;
  std::string message;
  uint64_t logs = 0;
};
using Provider = std::function<Reply(GetLogsRange)>;
using Density = std::function<uint64_t(uint64_t block)>;

uint64_t LogsIn(GetLogsRange r, const Density& density) {
  uint64_t n = 0;
  for (uint64_t b = r.from; b <= r.to; ++b) n += density(b);
  return n;
}

// A provider with a structural cap of `cap` blocks, worded as QuickNode does.
Provider CapProvider(uint64_t cap, Density density) {
  return [cap, density](GetLogsRange r) {
    if (r.size() > cap) {
      return Reply{true, -32614, "eth_getLogs is limited to a " + std::to_string(cap) + " range"};
    }
    return Reply{false, 0, "", LogsIn(r, density)};
  };
}

// A provider that refuses answers of more than max_logs logs, worded as geth does, or as Infura
// does with the widest range from the first block that fits (hex), or as reth does when it
// suggests the very range refused.
enum class Wording { kGeth, kInfura, kRethSameRange };
Provider ResultsProvider(uint64_t max_logs, Density density, Wording wording) {
  return [=](GetLogsRange r) {
    const uint64_t logs = LogsIn(r, density);
    if (logs <= max_logs) return Reply{false, 0, "", logs};
    const std::string more = "query returned more than " + std::to_string(max_logs) + " results";
    if (wording == Wording::kGeth) return Reply{true, -32000, more};
    if (wording == Wording::kRethSameRange) {
      return Reply{true, -32602,
                   "query exceeds max results " + std::to_string(max_logs) +
                       ", retry with the range " + std::to_string(r.from) + "-" +
                       std::to_string(r.to)};
    }
    uint64_t to = r.from, sum = density(r.from);
    while (to < r.to && sum + density(to + 1) <= max_logs) sum += density(++to);
    char buf[80];
    std::snprintf(buf, sizeof buf, ". Try with this block range [0x%llX, 0x%llX].",
                  static_cast<unsigned long long>(r.from), static_cast<unsigned long long>(to));
    return Reply{true, -32005, more + buf};
  };
}

struct Drive {
  std::vector<GetLogsRange> answered;
  int requests = 0;
  int refusals = 0;
  int repeats = 0;  // a request equal to the one refused just before
  uint64_t most_logs = 0;
  Status error;
};

// Covers [from, to] through the sizer as the pool will: ask Next, on a refusal classify it and
// ask the sizer's retry at once. Each request takes step_micros of the clock.
Drive DriveOver(GetLogsSizer& s, const Provider& provider, uint64_t from, uint64_t to, int64_t* now,
                int64_t step_micros) {
  Drive out;
  std::optional<GetLogsRange> retry, refused;
  while (from <= to && out.requests < 1'000'000) {
    const GetLogsRange r = retry ? *retry : s.Next(from, to, *now);
    retry.reset();
    if (refused && r == *refused) ++out.repeats;
    ++out.requests;
    *now += step_micros;
    const Reply reply = provider(r);
    if (!reply.refused) {
      s.OnAnswer(r, reply.logs);
      out.answered.push_back(r);
      out.most_logs = std::max(out.most_logs, reply.logs);
      refused.reset();
      from = r.to + 1;
      continue;
    }
    ++out.refusals;
    const GetLogsLimit why = ClassifyGetLogsError(reply.code, reply.message, r);
    EXPECT_NE(why.kind, Kind::kNotALimit) << reply.message;
    refused = r;
    auto next = s.OnRefused(r, why, *now);
    if (!next.ok()) {
      out.error = next.status();
      break;
    }
    retry = *next;
  }
  return out;
}

// Every block of [from, to] answered exactly once, in order.
void ExpectCovered(const Drive& d, uint64_t from, uint64_t to) {
  ASSERT_FALSE(d.answered.empty());
  uint64_t expect = from;
  for (const GetLogsRange& r : d.answered) {
    ASSERT_EQ(r.from, expect);
    ASSERT_LE(r.from, r.to);
    expect = r.to + 1;
  }
  EXPECT_EQ(expect, to + 1);
}

TEST(GetLogsSimulationTest, ACappedProviderCostsOneRefusalPerProbe) {
  GetLogsSizer s;
  int64_t now = 0;
  // One log every five blocks: the target would want 10000 blocks; the provider takes 500.
  const Drive d = DriveOver(s, CapProvider(500, [](uint64_t b) { return b % 5 == 0 ? 1 : 0; }), 0,
                            1'999'999, &now, kSecond);
  ASSERT_TRUE(d.error.ok()) << d.error.ToString();
  ExpectCovered(d, 0, 1'999'999);
  EXPECT_EQ(d.repeats, 0);
  EXPECT_EQ(s.cap(), 500u);
  // The first refusal, then one per re-probe interval (each a request of the 4000-odd).
  const int probes = static_cast<int>(now / (10 * kMinute));
  EXPECT_LE(d.refusals, 1 + probes + 1);
  EXPECT_GE(d.refusals, 1 + probes - 1);
  EXPECT_LE(d.requests, 2'000'000 / 500 + d.refusals);
}

TEST(GetLogsSimulationTest, AResultsLimitedProviderOverUnevenDensity) {
  // Sparse, then a dense stretch (40 logs a block), then one log a block.
  const Density density = [](uint64_t b) -> uint64_t {
    if (b < 300'000) return b % 20 == 0 ? 1 : 0;
    if (b < 310'000) return 40;
    return 1;
  };
  for (Wording wording : {Wording::kGeth, Wording::kInfura, Wording::kRethSameRange}) {
    SCOPED_TRACE(static_cast<int>(wording));
    GetLogsSizer s;
    int64_t now = 0;
    const Drive d =
        DriveOver(s, ResultsProvider(10'000, density, wording), 0, 999'999, &now, kSecond);
    ASSERT_TRUE(d.error.ok()) << d.error.ToString();
    ExpectCovered(d, 0, 999'999);
    EXPECT_EQ(d.repeats, 0);
    EXPECT_LE(d.most_logs, 10'000u);
    EXPECT_FALSE(s.cap() && !s.cap_inferred()) << "no stated cap at a results-limited provider";
    // 1,105,000 logs at 2000 a request is 553 requests; sizing toward the target stays near it.
    EXPECT_LE(d.requests, 800) << d.refusals << " refusals";
    EXPECT_LE(d.refusals, 20);
  }
}

TEST(GetLogsSimulationTest, ABlockTooLargeForTheProviderSurfacesAsAnError) {
  GetLogsSizer s;
  int64_t now = 0;
  const Drive d =
      DriveOver(s,
                ResultsProvider(
                    10'000, [](uint64_t b) { return b == 4321 ? 20'000 : 1; }, Wording::kGeth),
                0, 99'999, &now, kSecond);
  ASSERT_FALSE(d.error.ok());
  EXPECT_EQ(d.error.code(), Code::kFailedPrecondition);
  EXPECT_NE(d.error.message().find("block 4321"), std::string::npos) << d.error.message();
  ExpectCovered(d, 0, 4320);
  EXPECT_EQ(d.repeats, 0);
  EXPECT_LE(d.refusals, 20);  // halving down to one block is logarithmic
}

TEST(GetLogsSimulationTest, BackfillThenTheTipThroughTheSameCalls) {
  GetLogsSizer s;
  int64_t now = 0;
  const Provider provider = CapProvider(2000, [](uint64_t) { return 1; });
  uint64_t head = 50'000;
  Drive d = DriveOver(s, provider, 0, head, &now, kSecond);
  ASSERT_TRUE(d.error.ok());
  ExpectCovered(d, 0, head);
  const uint64_t width = s.width();
  // At the tip: a block at a time, then a burst of 30 after a pause.
  uint64_t from = head + 1;
  for (int i = 0; i < 100; ++i) {
    head += i == 50 ? 30 : 1;
    d = DriveOver(s, provider, from, head, &now, 12 * kSecond);
    ASSERT_TRUE(d.error.ok());
    ExpectCovered(d, from, head);
    EXPECT_EQ(d.refusals, 0);
    from = head + 1;
  }
  EXPECT_EQ(s.width(), width) << "small clipped answers at the tip do not move the width";
}

}  // namespace
}  // namespace gapless
