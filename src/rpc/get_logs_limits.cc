// The reading of eth_getLogs limit errors and the per-endpoint range sizing (get_logs_limits.h).
#include "rpc/get_logs_limits.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <initializer_list>
#include <string>
#include <vector>

namespace gapless {

namespace {

// A message cut into words (lowercased), numbers and single punctuation characters.
struct Token {
  enum class Type { kWord, kNumber, kPunct };
  Type type = Type::kWord;
  std::string text;    // kWord: the word; kPunct: the character
  uint64_t value = 0;  // kNumber
};

bool IsWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)); }

// Appends digit d in `base` to *v; false on overflow.
bool AppendDigit(uint64_t* v, uint64_t base, uint64_t d) {
  if (*v > (UINT64_MAX - d) / base) return false;
  *v = *v * base + d;
  return true;
}

// A number written as `raw` (a run of word characters starting with a digit): "0x1dfb0c",
// "1024", "2K", "3m". nullopt when it is something else ("2nd", "10kb", too big).
std::optional<uint64_t> ParseNumber(std::string_view raw) {
  uint64_t v = 0;
  if (raw.size() > 2 && raw[0] == '0' && (raw[1] == 'x' || raw[1] == 'X')) {
    for (char c : raw.substr(2)) {
      const int d =
          std::isxdigit(static_cast<unsigned char>(c))
              ? (IsDigit(c) ? c - '0' : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10)
              : -1;
      if (d < 0 || !AppendDigit(&v, 16, static_cast<uint64_t>(d))) return std::nullopt;
    }
    return v;
  }
  size_t i = 0;
  for (; i < raw.size() && IsDigit(raw[i]); ++i) {
    if (!AppendDigit(&v, 10, static_cast<uint64_t>(raw[i] - '0'))) return std::nullopt;
  }
  if (i == raw.size()) return v;
  if (i + 1 != raw.size()) return std::nullopt;
  const char suffix = static_cast<char>(std::tolower(static_cast<unsigned char>(raw[i])));
  const uint64_t scale = suffix == 'k' ? 1000 : suffix == 'm' ? 1'000'000 : 0;
  if (scale == 0 || v > UINT64_MAX / scale) return std::nullopt;
  return v * scale;
}

std::vector<Token> Tokenize(std::string_view m) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < m.size()) {
    const char c = m[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (!IsWordChar(c)) {
      out.push_back({Token::Type::kPunct, std::string(1, c), 0});
      ++i;
      continue;
    }
    size_t j = i;
    while (j < m.size() && IsWordChar(m[j])) ++j;
    std::string raw(m.substr(i, j - i));
    // A plain bool and value, not an optional: GCC 12 at -O3 warns (wrongly) that the optional's
    // value may be read uninitialized.
    uint64_t value = 0;
    bool is_number = false;
    if (IsDigit(c)) {
      const std::optional<uint64_t> parsed = ParseNumber(raw);
      is_number = parsed.has_value();
      value = parsed.value_or(0);
    }
    // Thousands separators: "10,000", "1,000,000" (1 to 3 digits, then groups of exactly 3). Not
    // inside brackets, where "[100,200]" is two numbers.
    const bool bracketed = !out.empty() && out.back().type == Token::Type::kPunct &&
                           (out.back().text == "[" || out.back().text == "(");
    if (is_number && raw.size() <= 3 && !bracketed &&
        std::all_of(raw.begin(), raw.end(), IsDigit)) {
      while (is_number && j + 4 <= m.size() && m[j] == ',' && IsDigit(m[j + 1]) &&
             IsDigit(m[j + 2]) && IsDigit(m[j + 3]) &&
             (j + 4 == m.size() || !IsWordChar(m[j + 4]))) {
        // A group that overflows makes the whole run a word.
        for (size_t k = j + 1; k < j + 4 && is_number; ++k) {
          is_number = AppendDigit(&value, 10, static_cast<uint64_t>(m[k] - '0'));
        }
        if (is_number) j += 4;
      }
    }
    if (is_number) {
      out.push_back({Token::Type::kNumber, std::move(raw), value});
    } else {
      for (char& ch : raw) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      out.push_back({Token::Type::kWord, std::move(raw), 0});
    }
    i = j;
  }
  return out;
}

bool IsWord(const std::vector<Token>& t, size_t i, std::initializer_list<std::string_view> words) {
  if (i >= t.size() || t[i].type != Token::Type::kWord) return false;
  return std::find(words.begin(), words.end(), t[i].text) != words.end();
}
bool IsPunct(const std::vector<Token>& t, size_t i, char c) {
  return i < t.size() && t[i].type == Token::Type::kPunct && t[i].text[0] == c;
}
bool IsNumber(const std::vector<Token>& t, size_t i) {
  return i < t.size() && t[i].type == Token::Type::kNumber;
}
bool HasWord(const std::vector<Token>& t, std::initializer_list<std::string_view> words) {
  for (size_t i = 0; i < t.size(); ++i) {
    if (IsWord(t, i, words)) return true;
  }
  return false;
}

// A word that says something is limited: "exceeded", "limited", "max", "at most", "more than",
// "too wide", "up to".
bool HasLimitWord(const std::vector<Token>& t) {
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].type != Token::Type::kWord) continue;
    const std::string_view s = t[i].text;
    if (s.starts_with("exceed") || s.starts_with("limit") || s.starts_with("max") || s == "most" ||
        s == "than" || s == "too" || (s == "up" && IsWord(t, i + 1, {"to"}))) {
      return true;
    }
  }
  return false;
}

// The range of two numbers starting at token k: "a-b", "a to b", "a and b", "a..b", and "a, b"
// after an opening bracket.
std::optional<GetLogsRange> RangeAt(const std::vector<Token>& t, size_t k) {
  if (!IsNumber(t, k)) return std::nullopt;
  size_t second = 0;
  if (IsPunct(t, k + 1, '-') || IsWord(t, k + 1, {"to", "and"})) {
    second = k + 2;
  } else if (IsPunct(t, k + 1, ',') && k > 0 &&
             (IsPunct(t, k - 1, '[') || IsPunct(t, k - 1, '('))) {
    second = k + 2;
  } else if (IsPunct(t, k + 1, '.') && IsPunct(t, k + 2, '.')) {
    second = k + 3;
  }
  if (second == 0 || !IsNumber(t, second)) return std::nullopt;
  return GetLogsRange{t[k].value, t[second].value};
}

// The first range written after a word of suggestion ("try with this block range [a, b]",
// "retry with the range a-b", "this block range should work: [a, b]").
std::optional<GetLogsRange> SuggestedRange(const std::vector<Token>& t) {
  for (size_t i = 0; i < t.size(); ++i) {
    if (!IsWord(t, i,
                {"try", "retry", "should", "work", "works", "use", "instead", "suggest", "suggests",
                 "suggested", "suggestion", "recommend", "recommended"})) {
      continue;
    }
    for (size_t k = i + 1; k < t.size(); ++k) {
      if (auto r = RangeAt(t, k)) return r;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

// Whether number token k counts blocks: "2K block range", "1000 blocks", "10,000 range",
// "1000-block", or "range: 800", "blocks is 1000", "distance: 100000", "range of at most 500".
bool CountsBlocks(const std::vector<Token>& t, size_t k) {
  size_t next = k + 1;
  if (IsPunct(t, next, '-')) ++next;
  if (IsWord(t, next, {"block", "blocks", "range"})) return true;
  if (IsWord(t, next, {"log", "logs", "result", "results", "entries"})) return false;
  size_t p = k;
  while (p > 0 &&
         (IsPunct(t, p - 1, ':') || IsPunct(t, p - 1, '=') ||
          IsWord(t, p - 1,
                 {"is", "of", "be", "are", "at", "most", "than", "less", "fewer", "no", "more"}))) {
    --p;
  }
  return p > 0 && IsWord(t, p - 1, {"range", "blocks", "distance"});
}

uint64_t Half(uint64_t blocks) { return std::max<uint64_t>(1, blocks / 2); }

}  // namespace

const char* GetLogsLimitKindName(GetLogsLimit::Kind kind) {
  switch (kind) {
    case GetLogsLimit::Kind::kNotALimit:
      return "not_a_limit";
    case GetLogsLimit::Kind::kCap:
      return "cap";
    case GetLogsLimit::Kind::kSuggested:
      return "suggested";
    case GetLogsLimit::Kind::kTooMany:
      return "too_many";
    case GetLogsLimit::Kind::kTooLarge:
      return "too_large";
  }
  return "?";
}

std::string DescribeGetLogsLimit(const GetLogsLimit& limit) {
  switch (limit.kind) {
    case GetLogsLimit::Kind::kNotALimit:
      return "not a limit";
    case GetLogsLimit::Kind::kCap:
      return "cap " + std::to_string(limit.max_blocks) + " blocks";
    case GetLogsLimit::Kind::kSuggested:
      return "suggested [" + std::to_string(limit.range.from) + ", " +
             std::to_string(limit.range.to) + "]";
    case GetLogsLimit::Kind::kTooMany:
      return "too many logs";
    case GetLogsLimit::Kind::kTooLarge:
      return "range too large";
  }
  return "?";
}

GetLogsLimit ClassifyGetLogsError(int64_t code, std::string_view message, GetLogsRange requested) {
  using Kind = GetLogsLimit::Kind;
  if (code == -32601 || code == -32700 || code == 3 || code == 429) return {};
  const std::vector<Token> t = Tokenize(message);
  if (HasWord(t, {"rate", "ratelimit", "ratelimited", "timeout", "timed", "deadline", "reverted",
                  "throughput", "capacity"})) {
    return {};
  }
  if (std::optional<GetLogsRange> s = SuggestedRange(t)) {
    const bool usable =
        s->from <= s->to && s->from >= requested.from && s->to <= requested.to && *s != requested;
    if (!usable) return {Kind::kTooLarge, 0, {}};
    return {Kind::kSuggested, 0, *s};
  }
  const bool limit_word = HasLimitWord(t);
  if (!limit_word) return {};
  const uint64_t width = requested.from <= requested.to ? requested.size() : 0;
  // The numbers of a range written out ("range 100-1000 exceeds ...") are block numbers, not
  // counts.
  std::vector<bool> in_range(t.size(), false);
  for (size_t k = 0; k < t.size(); ++k) {
    if (!RangeAt(t, k)) continue;
    in_range[k] = true;
    for (size_t j = k + 1; j < t.size() && j <= k + 3; ++j) {
      if (IsNumber(t, j)) {
        in_range[j] = true;
        break;
      }
    }
  }
  std::optional<uint64_t> cap;
  for (size_t k = 0; k < t.size(); ++k) {
    if (!IsNumber(t, k) || in_range[k] || !CountsBlocks(t, k)) continue;
    const uint64_t n = t[k].value;
    if (n >= 1 && n < width && (!cap || n < *cap)) cap = n;
  }
  if (cap) return {Kind::kCap, *cap, {}};
  if (HasWord(t, {"result", "results", "log", "logs", "response"})) return {Kind::kTooMany, 0, {}};
  if (HasWord(t, {"range", "blocks", "distance", "span"})) return {Kind::kTooLarge, 0, {}};
  return {};
}

GetLogsSizer::GetLogsSizer(GetLogsSizerOptions options) : options_(options) {
  options_.target_logs = std::max<uint64_t>(1, options_.target_logs);
  options_.max_blocks = std::max<uint64_t>(1, options_.max_blocks);
  width_ = std::clamp<uint64_t>(options_.initial_blocks, 1, options_.max_blocks);
}

int64_t GetLogsSizer::ReprobeMicros() const {
  return cap_ && cap_->inferred ? options_.reprobe_inferred_micros : options_.reprobe_micros;
}

std::optional<uint64_t> GetLogsSizer::cap() const {
  if (!cap_) return std::nullopt;
  return cap_->blocks;
}

void GetLogsSizer::SetCap(uint64_t blocks, bool inferred, int64_t now_micros) {
  cap_ = Cap{std::max<uint64_t>(1, blocks), inferred, now_micros};
}

GetLogsRange GetLogsSizer::Next(uint64_t from, uint64_t to_limit, int64_t now_micros) {
  assert(from <= to_limit);
  if (to_limit < from) to_limit = from;  // a caller's bug; one block rather than a wrapped range
  uint64_t w = std::min(width_, options_.max_blocks);
  if (cap_ && w > cap_->blocks) {
    const bool probe_due = now_micros - cap_->since_micros >= ReprobeMicros();
    // A probe asks up to twice the cap (w > cap here, so 2 * cap does not overflow past w).
    w = !probe_due ? cap_->blocks : (cap_->blocks > w / 2 ? w : 2 * cap_->blocks);
  }
  GetLogsRange r{from, to_limit - from < w - 1 ? to_limit : from + w - 1};
  if (last_refused_ && r == *last_refused_ && r.size() > 1) r.to = from + Half(r.size()) - 1;
  return r;
}

void GetLogsSizer::OnAnswer(GetLogsRange asked, uint64_t logs) {
  const uint64_t s = asked.size();
  // The endpoint served more than the cap: it was raised, or misread.
  if (cap_ && s > cap_->blocks) cap_.reset();
  last_refused_.reset();
  const double target = static_cast<double>(options_.target_logs);
  const double wanted = logs == 0 ? static_cast<double>(options_.max_blocks)
                                  : static_cast<double>(s) * target / static_cast<double>(logs);
  const double bounded = std::min(wanted, static_cast<double>(options_.max_blocks));
  const uint64_t density_width = std::max<uint64_t>(1, static_cast<uint64_t>(bounded));
  if (logs <= options_.target_logs) {
    // At most twice the range answered (density_width <= max_blocks, so 2 * s cannot overflow).
    width_ =
        std::max(width_, s >= options_.max_blocks ? density_width : std::min(density_width, 2 * s));
  } else {
    width_ = std::min(width_, density_width);
  }
  width_ = std::clamp<uint64_t>(width_, 1, options_.max_blocks);
}

Result<GetLogsRange> GetLogsSizer::OnRefused(GetLogsRange asked, const GetLogsLimit& why,
                                             int64_t now_micros) {
  using Kind = GetLogsLimit::Kind;
  if (why.kind == Kind::kNotALimit) {
    return Internal("eth_getLogs sizing: an error that is not a limit is not a reason to resize");
  }
  const uint64_t s = asked.size();
  if (s <= 1) {
    return FailedPrecondition("eth_getLogs for block " + std::to_string(asked.from) +
                              " alone is refused (" + DescribeGetLogsLimit(why) +
                              "): the range cannot be narrower");
  }
  last_refused_ = asked;
  const bool probe = cap_ && s > cap_->blocks;
  uint64_t w = Half(s);
  switch (why.kind) {
    case Kind::kCap:
      if (why.max_blocks >= 1 && why.max_blocks < s) {
        w = why.max_blocks;
        SetCap(w, /*inferred=*/false, now_micros);
      } else if (!probe && (!cap_ || w < cap_->blocks)) {
        SetCap(w, /*inferred=*/true, now_micros);  // refused within the stated cap: a misreading
      }
      break;
    case Kind::kSuggested: {
      const GetLogsRange& g = why.range;
      if (g.from <= g.to && g.from >= asked.from && g.to <= asked.to && g.size() < s) w = g.size();
      break;
    }
    case Kind::kTooMany:
      break;
    case Kind::kTooLarge:
      if (!probe && (!cap_ || w < cap_->blocks)) SetCap(w, /*inferred=*/true, now_micros);
      break;
    case Kind::kNotALimit:
      break;
  }
  if (probe && cap_) {
    cap_->since_micros = now_micros;  // the probe is spent; the next one after another interval
    w = std::min(w, cap_->blocks);
  }
  if (why.kind != Kind::kCap) width_ = std::min(width_, w);
  w = std::clamp<uint64_t>(w, 1, s - 1);
  return GetLogsRange{asked.from, asked.from + w - 1};
}

std::string GetLogsSizer::Describe(int64_t now_micros) const {
  std::string out = "width " + std::to_string(width_);
  if (!cap_) return out + ", no cap";
  out += ", cap " + std::to_string(cap_->blocks) + (cap_->inferred ? " (inferred" : " (stated");
  const int64_t due = cap_->since_micros + ReprobeMicros() - now_micros;
  if (width_ <= cap_->blocks) return out + ", not binding)";
  if (due <= 0) return out + ", probe due)";
  return out + ", probe in " + std::to_string((due + 999'999) / 1'000'000) + " s)";
}

GetLogsSizers::GetLogsSizers(size_t endpoints, Env* env, GetLogsSizerOptions options)
    : env_(env != nullptr ? env : Env::Default()),
      sizers_(std::max<size_t>(1, endpoints), GetLogsSizer(options)) {}

GetLogsRange GetLogsSizers::Next(size_t endpoint, uint64_t from, uint64_t to_limit) {
  const int64_t now = env_->NowMicros();
  std::lock_guard<std::mutex> lock(mu_);
  return sizers_[Index(endpoint)].Next(from, to_limit, now);
}

void GetLogsSizers::OnAnswer(size_t endpoint, GetLogsRange asked, uint64_t logs) {
  std::lock_guard<std::mutex> lock(mu_);
  sizers_[Index(endpoint)].OnAnswer(asked, logs);
}

Result<GetLogsRange> GetLogsSizers::OnRefused(size_t endpoint, GetLogsRange asked,
                                              const GetLogsLimit& why) {
  if (endpoint >= sizers_.size()) {
    return Internal("eth_getLogs sizing: no endpoint " + std::to_string(endpoint));
  }
  const int64_t now = env_->NowMicros();
  std::lock_guard<std::mutex> lock(mu_);
  return sizers_[endpoint].OnRefused(asked, why, now);
}

std::vector<std::string> GetLogsSizers::Describe() const {
  const int64_t now = env_->NowMicros();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  out.reserve(sizers_.size());
  for (const GetLogsSizer& s : sizers_) out.push_back(s.Describe(now));
  return out;
}

std::optional<uint64_t> GetLogsSizers::cap(size_t endpoint) const {
  std::lock_guard<std::mutex> lock(mu_);
  return sizers_[Index(endpoint)].cap();
}

}  // namespace gapless
