// row_builders: how copy_rows writes one value of each SQL type of the schema, in COPY's text
// format (TextRow) and its binary format (BinaryRow), and the checks both make before PostgreSQL
// sees a value (RowChecks: hex syntax, a NUL in text, an integer too wide for its column).
// copy_rows.cc says which values of a block go into which table's rows.
//
// Internal to store/: not for other modules. A builder appends to the caller's buffer and is used
// by one thread; the rest is constant.
#pragma once

#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/u256.h"

namespace gapless::store_detail {

struct HexTable {
  std::array<bool, 256> is_hex{};
  std::array<uint8_t, 256> value{};
  constexpr HexTable() {
    for (int c = '0'; c <= '9'; ++c) is_hex[c] = true, value[c] = static_cast<uint8_t>(c - '0');
    for (int c = 'a'; c <= 'f'; ++c)
      is_hex[c] = true, value[c] = static_cast<uint8_t>(c - 'a' + 10);
    for (int c = 'A'; c <= 'F'; ++c)
      is_hex[c] = true, value[c] = static_cast<uint8_t>(c - 'A' + 10);
  }
};
inline constexpr HexTable kHex;

inline bool AllHex(std::string_view digits) {
  // Branch-light: OR the verdicts, test once.
  bool ok = true;
  for (unsigned char c : digits) ok &= kHex.is_hex[c];
  return ok;
}

// What both formats check. The first invalid value is remembered (field + reason) and later
// values are still appended (cheaper than branching everywhere); the caller discards the buffer.
class RowChecks {
 public:
  bool failed() const { return bad_field_ != nullptr; }
  Status Error(const std::string& row) const {
    return InvalidData(row + ": field " + bad_field_ + ": " + bad_reason_);
  }

 protected:
  void Fail(const char* field, std::string reason) {
    if (bad_field_ != nullptr) return;
    bad_field_ = field;
    bad_reason_ = std::move(reason);
  }

  // v fits a signed column of `bits` bits (the schema's BIGINT, INTEGER, SMALLINT).
  template <int kBits>
  void CheckFits(uint64_t v, const char* field) {
    constexpr uint64_t kMax = (uint64_t{1} << (kBits - 1)) - 1;
    if (v > kMax) {
      constexpr const char* kType = kBits == 64 ? "BIGINT" : kBits == 32 ? "INTEGER" : "SMALLINT";
      Fail(field, "value " + std::to_string(v) + " does not fit " + kType + " (above " +
                      std::to_string(kMax) + ")");
    }
  }

  static std::string Excerpt(std::string_view v) {
    std::string out = "\"";
    for (char c : v.substr(0, 20)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
    if (v.size() > 20) out += "...";
    out += "\"";
    return out;
  }

  std::string_view Digits(std::string_view v, const char* field) {
    if (v.size() < 2 || v[0] != '0' || (v[1] != 'x' && v[1] != 'X')) {
      Fail(field, "expected 0x-prefixed hex, got " + Excerpt(v));
      return {};
    }
    std::string_view digits = v.substr(2);
    if (!AllHex(digits)) {
      Fail(field, "non-hex character in " + Excerpt(v));
      return {};
    }
    return digits;
  }

  // Hex data: the digits of "0x" + an even number of hex digits.
  std::string_view DataDigits(std::string_view v, const char* field) {
    std::string_view digits = Digits(v, field);
    if (digits.size() % 2 != 0) {
      Fail(field, "odd number of hex digits in " + Excerpt(v));
      return {};
    }
    return digits;
  }

  // A quantity's digits ("0x1b", "0x0"); empty is refused.
  std::string_view QuantityDigits(std::string_view v, const char* field) {
    std::string_view digits = Digits(v, field);
    if (digits.empty()) Fail(field, "empty quantity");
    return digits;
  }

  void CheckText(std::string_view v, const char* field) {
    if (v.find('\0') != std::string_view::npos) Fail(field, "contains a NUL byte");
  }

 private:
  const char* bad_field_ = nullptr;
  std::string bad_reason_;
};

// The optional forms of a builder's values: NULL when absent.
template <typename Row>
class Optionals {
 public:
  template <typename T>
  void OptInt8(const std::optional<T>& v, const char* field) {
    v.has_value() ? row().Int8(static_cast<uint64_t>(*v), field) : row().Null();
  }
  template <typename T>
  void OptInt4(const std::optional<T>& v, const char* field) {
    v.has_value() ? row().Int4(static_cast<uint64_t>(*v), field) : row().Null();
  }
  template <typename T>
  void OptInt2(const std::optional<T>& v, const char* field) {
    v.has_value() ? row().Int2(static_cast<uint64_t>(*v), field) : row().Null();
  }
  void OptDec(const std::optional<U256>& v) { v.has_value() ? row().Dec(*v) : row().Null(); }
  void OptHex(const std::optional<std::string>& v, const char* field) {
    v.has_value() ? row().Hex(*v, field) : row().Null();
  }
  void OptQuantity(const std::optional<std::string>& v, const char* field) {
    v.has_value() ? row().Quantity(*v, field) : row().Null();
  }
  void OptText(const std::optional<std::string>& v, const char* field) {
    v.has_value() ? row().Text(*v, field) : row().Null();
  }

 private:
  Row& row() { return static_cast<Row&>(*this); }
};

// The row builders: one method per SQL type of the schema (migrations/), so a value is written at
// its column's width. TextRow writes COPY text: each value followed by a tab, EndRow turns the
// last tab into the row's newline.
class TextRow : public RowChecks, public Optionals<TextRow> {
 public:
  explicit TextRow(std::string* out) : out_(*out) {}

  void BeginRow() {}
  void EndRow() { out_.back() = '\n'; }

  void Null() { out_.append("\\N\t", 3); }

  void Int8(uint64_t v, const char* field) {
    CheckFits<64>(v, field);
    Unsigned(v);
  }
  void Int4(uint64_t v, const char* field) {
    CheckFits<32>(v, field);
    Unsigned(v);
  }
  void Int2(uint64_t v, const char* field) {
    CheckFits<16>(v, field);
    Unsigned(v);
  }

  void Dec(const U256& v) {
    if (v.fits_u64()) {
      AppendUnsigned(v.low64());
    } else {
      out_ += v.ToDecimal();
    }
    out_.push_back('\t');
  }

  void Bool(bool v) { out_.append(v ? "t\t" : "f\t", 2); }

  // Hex data ("0x" + an even number of hex digits) as bytea hex input.
  void Hex(std::string_view v, const char* field) {
    std::string_view digits = DataDigits(v, field);
    out_.append("\\\\x", 3);
    out_.append(digits);
    out_.push_back('\t');
  }

  // A hex quantity ("0x1b", "0x0"): stored as bytea, left-padded to an even digit count.
  void Quantity(std::string_view v, const char* field) {
    std::string_view digits = QuantityDigits(v, field);
    out_.append("\\\\x", 3);
    if (digits.size() % 2 != 0) out_.push_back('0');
    out_.append(digits);
    out_.push_back('\t');
  }

  // A list of hashes as a bytea[] literal; NULL when empty.
  void HexArray(const std::vector<std::string>& values, const char* field) {
    if (values.empty()) {
      Null();
      return;
    }
    out_.push_back('{');
    for (size_t i = 0; i < values.size(); ++i) {
      if (i > 0) out_.push_back(',');
      std::string_view digits = DataDigits(values[i], field);
      // Array element "\x.." needs its backslash escaped for the array parser, and both again
      // for COPY.
      out_.append("\\\\\\\\x", 5);
      out_.append(digits);
    }
    out_.append("}\t", 2);
  }

  // Free text (JSON, TEXT), escaped for COPY.
  void Text(std::string_view v, const char* field) {
    CheckText(v, field);
    for (char c : v) {
      switch (c) {
        case '\\':
          out_.append("\\\\", 2);
          break;
        case '\t':
          out_.append("\\t", 2);
          break;
        case '\n':
          out_.append("\\n", 2);
          break;
        case '\r':
          out_.append("\\r", 2);
          break;
        default:
          out_.push_back(c);
      }
    }
    out_.push_back('\t');
  }

  // An integer[] literal ("{}", "{0,2}").
  void Int4Array(const std::vector<uint32_t>& values, const char* field) {
    out_.push_back('{');
    for (size_t i = 0; i < values.size(); ++i) {
      if (i > 0) out_.push_back(',');
      CheckFits<32>(values[i], field);
      AppendUnsigned(values[i]);
    }
    out_.append("}\t", 2);
  }

  // A text[] literal of 0x-hex words ("{}", "{0x06fdde03,0x095ea7b3}"): no element needs quoting.
  void HexWordArray(const std::vector<std::string>& values, const char* field) {
    out_.push_back('{');
    for (size_t i = 0; i < values.size(); ++i) {
      if (i > 0) out_.push_back(',');
      Digits(values[i], field);  // checks 0x + hex digits
      out_.append(values[i]);
    }
    out_.append("}\t", 2);
  }

 private:
  void Unsigned(uint64_t v) {
    AppendUnsigned(v);
    out_.push_back('\t');
  }
  void AppendUnsigned(uint64_t v) {
    char buf[24];
    auto res = std::to_chars(buf, buf + sizeof buf, v);
    out_.append(buf, static_cast<size_t>(res.ptr - buf));
  }

  std::string& out_;
};

// Element type OIDs of the arrays in the schema (pg_type.dat); binary array input checks them.
inline constexpr uint32_t kByteaOid = 17;
inline constexpr uint32_t kInt4Oid = 23;
inline constexpr uint32_t kTextOid = 25;

// BinaryRow writes COPY binary tuples: a 16-bit field count, then per field a 32-bit length (-1
// for NULL) and the value's binary send form, all big-endian.
class BinaryRow : public RowChecks, public Optionals<BinaryRow> {
 public:
  explicit BinaryRow(std::string* out) : out_(*out) {}

  void BeginRow() {
    row_start_ = out_.size();
    fields_ = 0;
    Put16(0);  // the field count, set by EndRow
  }
  void EndRow() { Set16(row_start_, fields_); }

  void Null() {
    Put32(0xffffffffu);
    ++fields_;
  }

  void Int8(uint64_t v, const char* field) {
    CheckFits<64>(v, field);
    Put32(8);
    Put64(v);
    ++fields_;
  }
  void Int4(uint64_t v, const char* field) {
    CheckFits<32>(v, field);
    Put32(4);
    Put32(static_cast<uint32_t>(v));
    ++fields_;
  }
  void Int2(uint64_t v, const char* field) {
    CheckFits<16>(v, field);
    Put32(2);
    Put16(static_cast<uint16_t>(v));
    ++fields_;
  }

  // NUMERIC: ndigits, weight, sign, dscale, then base-10000 digits from the most significant;
  // trailing zero digits are left out (the weight places the rest), as PostgreSQL sends them.
  void Dec(const U256& v) {
    uint16_t groups[20];  // least significant first; 2^256 has 78 decimal digits
    int n = 0;
    if (v.fits_u64()) {
      for (uint64_t x = v.low64(); x != 0; x /= 10000)
        groups[n++] = static_cast<uint16_t>(x % 10000);
    } else {
      std::string decimal = v.ToDecimal();
      for (size_t end = decimal.size(); end > 0;) {
        size_t begin = end >= 4 ? end - 4 : 0;
        uint16_t g = 0;
        for (size_t i = begin; i < end; ++i) g = static_cast<uint16_t>(g * 10 + (decimal[i] - '0'));
        groups[n++] = g;
        end = begin;
      }
    }
    int low = 0;
    while (low < n && groups[low] == 0) ++low;
    int ndigits = n - low;
    Put32(static_cast<uint32_t>(8 + 2 * ndigits));
    Put16(static_cast<uint16_t>(ndigits));
    Put16(static_cast<uint16_t>(n > 0 ? n - 1 : 0));  // weight
    Put16(0);                                         // sign: positive
    Put16(0);                                         // dscale
    for (int i = n - 1; i >= low; --i) Put16(groups[i]);
    ++fields_;
  }

  void Bool(bool v) {
    Put32(1);
    out_.push_back(v ? 1 : 0);
    ++fields_;
  }

  void Hex(std::string_view v, const char* field) {
    std::string_view digits = DataDigits(v, field);
    Put32(static_cast<uint32_t>(digits.size() / 2));
    AppendBytes(digits);
    ++fields_;
  }

  void Quantity(std::string_view v, const char* field) {
    std::string_view digits = QuantityDigits(v, field);
    Put32(static_cast<uint32_t>((digits.size() + 1) / 2));
    if (digits.size() % 2 != 0) {
      out_.push_back(static_cast<char>(kHex.value[static_cast<unsigned char>(digits[0])]));
      digits.remove_prefix(1);
    }
    AppendBytes(digits);
    ++fields_;
  }

  void HexArray(const std::vector<std::string>& values, const char* field) {
    if (values.empty()) {
      Null();
      return;
    }
    size_t at = BeginArray(kByteaOid, values.size());
    for (const std::string& value : values) {
      std::string_view digits = DataDigits(value, field);
      Put32(static_cast<uint32_t>(digits.size() / 2));
      AppendBytes(digits);
    }
    EndValue(at);
  }

  void Text(std::string_view v, const char* field) {
    CheckText(v, field);
    Put32(static_cast<uint32_t>(v.size()));
    out_.append(v);
    ++fields_;
  }

  void Int4Array(const std::vector<uint32_t>& values, const char* field) {
    size_t at = BeginArray(kInt4Oid, values.size());
    for (uint32_t value : values) {
      CheckFits<32>(value, field);
      Put32(4);
      Put32(value);
    }
    EndValue(at);
  }

  void HexWordArray(const std::vector<std::string>& values, const char* field) {
    size_t at = BeginArray(kTextOid, values.size());
    for (const std::string& value : values) {
      Digits(value, field);  // checks 0x + hex digits
      Put32(static_cast<uint32_t>(value.size()));
      out_.append(value);
    }
    EndValue(at);
  }

 private:
  // A one-dimensional array's header (none for an empty one: zero dimensions); returns where its
  // length goes, for EndValue.
  size_t BeginArray(uint32_t element_oid, size_t count) {
    size_t at = out_.size();
    Put32(0);                   // the value's length, set by EndValue
    Put32(count == 0 ? 0 : 1);  // dimensions
    Put32(0);                   // has nulls
    Put32(element_oid);
    if (count > 0) {
      Put32(static_cast<uint32_t>(count));
      Put32(1);  // lower bound
    }
    return at;
  }
  void EndValue(size_t at) {
    uint32_t len = static_cast<uint32_t>(out_.size() - at - 4);
    for (int i = 0; i < 4; ++i) out_[at + i] = static_cast<char>(len >> (24 - 8 * i));
    ++fields_;
  }

  // Hex digits (already checked, even count) as bytes.
  void AppendBytes(std::string_view digits) {
    size_t at = out_.size();
    out_.resize(at + digits.size() / 2);
    char* dst = out_.data() + at;
    const auto* src = reinterpret_cast<const unsigned char*>(digits.data());
    for (size_t i = 0; i + 1 < digits.size(); i += 2) {
      *dst++ = static_cast<char>((kHex.value[src[i]] << 4) | kHex.value[src[i + 1]]);
    }
  }

  void Put16(uint16_t v) {
    char b[2] = {static_cast<char>(v >> 8), static_cast<char>(v)};
    out_.append(b, 2);
  }
  void Put32(uint32_t v) {
    char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                 static_cast<char>(v)};
    out_.append(b, 4);
  }
  void Put64(uint64_t v) {
    Put32(static_cast<uint32_t>(v >> 32));
    Put32(static_cast<uint32_t>(v));
  }
  void Set16(size_t at, uint16_t v) {
    out_[at] = static_cast<char>(v >> 8);
    out_[at + 1] = static_cast<char>(v);
  }

  std::string& out_;
  size_t row_start_ = 0;
  uint16_t fields_ = 0;
};

}  // namespace gapless::store_detail
