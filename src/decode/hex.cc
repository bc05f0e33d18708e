#include "decode/hex.h"

#include <array>

#include "core/text.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace gapless::decode_internal {
namespace {

// kLower[c] is the lower-case hex digit for c, or 0 when c is not a hex digit.
constexpr std::array<char, 256> MakeLowerTable() {
  std::array<char, 256> t{};
  for (int c = '0'; c <= '9'; ++c) t[c] = static_cast<char>(c);
  for (int c = 'a'; c <= 'f'; ++c) t[c] = static_cast<char>(c);
  for (int c = 'A'; c <= 'F'; ++c) t[c] = static_cast<char>(c - 'A' + 'a');
  return t;
}
constexpr std::array<char, 256> kLower = MakeLowerTable();

bool HasPrefix(std::string_view text) {
  return text.size() >= 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
}

// Lower-cases n hex digits in place; false if one is not a hex digit. Digits already have bit
// 0x20 set ('0' is 0x30), so OR-ing 0x20 lower-cases A-F and leaves digits alone; validity is
// checked on the original bytes (c in 0-9, or c|0x20 in a-f).
bool LowerHexInPlace(char* p, size_t n) {
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i k20 = _mm_set1_epi8(0x20);
  const __m128i k2f = _mm_set1_epi8('0' - 1), k3a = _mm_set1_epi8('9' + 1);
  const __m128i k60 = _mm_set1_epi8('a' - 1), k67 = _mm_set1_epi8('f' + 1);
  for (; i + 16 <= n; i += 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    __m128i lower = _mm_or_si128(v, k20);
    // Signed compares: bytes >= 0x80 are negative and fail both ranges.
    __m128i digit = _mm_and_si128(_mm_cmpgt_epi8(v, k2f), _mm_cmplt_epi8(v, k3a));
    __m128i alpha = _mm_and_si128(_mm_cmpgt_epi8(lower, k60), _mm_cmplt_epi8(lower, k67));
    if (_mm_movemask_epi8(_mm_or_si128(digit, alpha)) != 0xffff) return false;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + i), lower);
  }
#endif
  bool bad = false;
  for (; i < n; ++i) {
    char c = kLower[static_cast<unsigned char>(p[i])];
    bad |= (c == 0);
    p[i] = c;
  }
  return !bad;
}

// Writes text ("0x" or "0X" + digits) lower-cased to *out; false if a digit is not hex.
bool WriteLower(std::string_view text, std::string* out) {
  out->assign(text);  // one allocation and copy, then lower-case in place
  (*out)[1] = 'x';
  return LowerHexInPlace(out->data() + 2, text.size() - 2);
}

// Validates a 256-bit quantity ("0x" + 1..64 significant hex digits, leading zeros allowed);
// *digits gets the text after the prefix.
HexProblem CheckQuantity256(std::string_view text, std::string_view* digits) {
  if (!HasPrefix(text)) return HexProblem::kNoPrefix;
  *digits = text.substr(2);
  if (digits->empty()) return HexProblem::kEmpty;
  size_t sig = 0;
  bool bad = false;
  for (char c : *digits) {
    char l = kLower[static_cast<unsigned char>(c)];
    bad |= (l == 0);
    if (sig != 0 || l != '0') ++sig;
  }
  if (bad) return HexProblem::kBadDigit;
  if (sig > 64) return HexProblem::kOverflow;
  return HexProblem::kNone;
}

}  // namespace

HexProblem NormalizeHexData(std::string_view text, size_t want_bytes, std::string* out) {
  if (!HasPrefix(text)) return HexProblem::kNoPrefix;
  std::string_view digits = text.substr(2);
  if (want_bytes != kAnyLength) {
    if (digits.size() != 2 * want_bytes) return HexProblem::kWrongLength;
  } else if (digits.size() % 2 != 0) {
    return HexProblem::kOddLength;
  }
  if (!WriteLower(text, out)) return HexProblem::kBadDigit;
  return HexProblem::kNone;
}

HexProblem NormalizeHexQuantity(std::string_view text, std::string* out) {
  std::string_view digits;
  HexProblem p = CheckQuantity256(text, &digits);
  if (p != HexProblem::kNone) return p;
  WriteLower(text, out);
  return HexProblem::kNone;
}

HexProblem ParseQuantityU64(std::string_view text, uint64_t* out) {
  if (!HasPrefix(text)) return HexProblem::kNoPrefix;
  std::string_view digits = text.substr(2);
  if (digits.empty()) return HexProblem::kEmpty;
  uint64_t v = 0;
  size_t sig = 0;
  bool bad = false;
  for (char c : digits) {
    int d = HexValue(c);
    if (d < 0) {
      bad = true;
      continue;
    }
    if (sig == 0 && d == 0) continue;
    ++sig;
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  if (bad) return HexProblem::kBadDigit;
  if (sig > 16) return HexProblem::kOverflow;
  *out = v;
  return HexProblem::kNone;
}

HexProblem ParseQuantityU256(std::string_view text, U256* out) {
  std::string_view digits;
  HexProblem p = CheckQuantity256(text, &digits);
  if (p != HexProblem::kNone) return p;
  std::optional<U256> v = U256::FromHexDigits(digits);
  if (!v) return HexProblem::kBadDigit;  // not reached: the digits were checked above
  *out = *v;
  return HexProblem::kNone;
}

bool IsHexOfBytes(std::string_view text, size_t bytes) {
  if (text.size() != 2 + 2 * bytes || !HasPrefix(text)) return false;
  for (size_t i = 2; i < text.size(); ++i) {
    if (kLower[static_cast<unsigned char>(text[i])] == 0) return false;
  }
  return true;
}

HexProblem CompareHexData(std::string_view text, size_t want_bytes, std::string_view lower,
                          bool* equal) {
  if (!HasPrefix(text)) return HexProblem::kNoPrefix;
  if (text.size() != 2 + 2 * want_bytes) return HexProblem::kWrongLength;
  bool bad = false, same = lower.size() == text.size();
  for (size_t i = 2; i < text.size(); ++i) {
    char c = kLower[static_cast<unsigned char>(text[i])];
    bad |= (c == 0);
    same = same && c == lower[i];
  }
  if (bad) return HexProblem::kBadDigit;
  *equal = same;
  return HexProblem::kNone;
}

std::string DescribeHexProblem(HexProblem problem, std::string_view text, size_t want_bytes) {
  size_t digits = text.size() >= 2 ? text.size() - 2 : 0;
  switch (problem) {
    case HexProblem::kNone:
      return "is valid";
    case HexProblem::kNoPrefix:
      return "is not a 0x-prefixed hex string";
    case HexProblem::kEmpty:
      return "has no hex digits";
    case HexProblem::kBadDigit:
      return "contains a character that is not a hex digit";
    case HexProblem::kOddLength:
      return "has an odd number of hex digits (" + std::to_string(digits) + ")";
    case HexProblem::kWrongLength:
      return "has " + std::to_string(digits) + " hex digits, expected " +
             std::to_string(2 * want_bytes) + " (" + std::to_string(want_bytes) + " bytes)";
    case HexProblem::kOverflow:
      return "does not fit in 256 bits (u256 overflow)";
  }
  return "is invalid";
}

std::string QuoteForMessage(std::string_view text) {
  constexpr size_t kMax = 80;
  std::string out = "\"";
  for (size_t i = 0; i < text.size() && i < kMax; ++i) {
    char c = text[i];
    out.push_back((c >= 0x20 && c < 0x7f) ? c : '?');
  }
  out.push_back('"');
  if (text.size() > kMax) out += "... (" + std::to_string(text.size()) + " characters)";
  return out;
}

}  // namespace gapless::decode_internal
