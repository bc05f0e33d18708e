#include "store/copy_rows.h"

#include <charconv>
#include <cstdint>
#include <limits>
#include <string_view>

namespace gapless {
namespace {

constexpr std::array<DataTableInfo, 7> kInfos = {{
    {"blocks",
     "number, hash, parent_hash, nonce, sha3_uncles, logs_bloom, transactions_root, state_root, "
     "receipts_root, miner, mix_hash, difficulty, total_difficulty, size, extra_data, gas_limit, "
     "gas_used, timestamp, transaction_count, base_fee_per_gas, withdrawals_root, blob_gas_used, "
     "excess_blob_gas, parent_beacon_block_root, requests_hash",
     "number", "number"},
    {"withdrawals", "block_number, withdrawal_index, validator_index, address, amount_gwei",
     "block_number", "block_number, withdrawal_index"},
    {"transactions",
     "block_number, transaction_index, hash, block_hash, nonce, from_address, to_address, value, "
     "gas, gas_price, input, transaction_type, max_fee_per_gas, max_priority_fee_per_gas, "
     "max_fee_per_blob_gas, blob_versioned_hashes, access_list, authorization_list, chain_id, v, "
     "r, s, y_parity, cumulative_gas_used, gas_used, contract_address, root, status, "
     "effective_gas_price, logs_bloom, blob_gas_used, blob_gas_price, log_count",
     "block_number", "block_number, transaction_index"},
    {"logs",
     "block_number, log_index, transaction_index, transaction_hash, block_hash, address, data, "
     "topic0, topic1, topic2, topic3, removed",
     "block_number", "block_number, log_index"},
    {"token_transfers",
     "block_number, log_index, batch_index, transaction_hash, token_address, from_address, "
     "to_address, operator_address, token_id, value, token_standard",
     "block_number", "block_number, log_index, batch_index"},
    {"traces",
     "block_number, trace_index, transaction_hash, transaction_index, from_address, to_address, "
     "value, input, output, trace_type, call_type, reward_type, gas, gas_used, subtraces, "
     "trace_address, error, status, trace_id",
     "block_number", "block_number, trace_index"},
    {"contracts",
     "block_number, contract_index, transaction_hash, transaction_index, trace_address, address, "
     "creator_address, creation_type, bytecode, function_sighashes, is_erc20, is_erc721",
     "block_number", "block_number, contract_index"},
}};

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
constexpr HexTable kHex;

bool AllHex(std::string_view digits) {
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
constexpr uint32_t kByteaOid = 17;
constexpr uint32_t kInt4Oid = 23;
constexpr uint32_t kTextOid = 25;

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

std::string BlockRow(uint64_t number) { return "block " + std::to_string(number); }

template <typename Row>
Status AppendBlock(const Block& b, std::string* out) {
  Row r(out);
  r.BeginRow();
  r.Int8(b.number, "number");
  r.Hex(b.hash, "hash");
  r.Hex(b.parent_hash, "parent_hash");
  r.Hex(b.nonce, "nonce");
  r.Hex(b.sha3_uncles, "sha3_uncles");
  r.Hex(b.logs_bloom, "logs_bloom");
  r.Hex(b.transactions_root, "transactions_root");
  r.Hex(b.state_root, "state_root");
  r.Hex(b.receipts_root, "receipts_root");
  r.Hex(b.miner, "miner");
  r.OptHex(b.mix_hash, "mix_hash");
  r.Dec(b.difficulty);
  r.OptDec(b.total_difficulty);
  r.Int8(b.size, "size");
  r.Hex(b.extra_data, "extra_data");
  r.Int8(b.gas_limit, "gas_limit");
  r.Int8(b.gas_used, "gas_used");
  r.Int8(b.timestamp, "timestamp");
  r.Int4(b.transaction_count, "transaction_count");
  r.OptDec(b.base_fee_per_gas);
  r.OptHex(b.withdrawals_root, "withdrawals_root");
  r.OptInt8(b.blob_gas_used, "blob_gas_used");
  r.OptInt8(b.excess_blob_gas, "excess_blob_gas");
  r.OptHex(b.parent_beacon_block_root, "parent_beacon_block_root");
  r.OptHex(b.requests_hash, "requests_hash");
  r.EndRow();
  if (r.failed()) return r.Error(BlockRow(b.number));
  return Status::Ok();
}

template <typename Row>
Status AppendWithdrawals(const Block& b, std::string* out) {
  Row r(out);
  for (const Withdrawal& w : b.withdrawals) {
    r.BeginRow();
    r.Int8(b.number, "block_number");
    r.Int8(w.index, "index");
    r.Int8(w.validator_index, "validator_index");
    r.Hex(w.address, "address");
    r.Int8(w.amount_gwei, "amount");
    r.EndRow();
    if (r.failed()) return r.Error(BlockRow(b.number) + " withdrawal " + std::to_string(w.index));
  }
  return Status::Ok();
}

template <typename Row>
Status AppendTransactions(const BlockData& data, std::string* out) {
  Row r(out);
  for (const Transaction& t : data.transactions) {
    r.BeginRow();
    r.Int8(t.block_number, "block_number");
    r.Int4(t.transaction_index, "transaction_index");
    r.Hex(t.hash, "hash");
    r.Hex(t.block_hash, "block_hash");
    r.Int8(t.nonce, "nonce");
    r.Hex(t.from_address, "from");
    r.OptHex(t.to_address, "to");
    r.Dec(t.value);
    r.Int8(t.gas, "gas");
    r.OptDec(t.gas_price);
    r.Hex(t.input, "input");
    r.OptInt2(t.transaction_type, "type");
    r.OptDec(t.max_fee_per_gas);
    r.OptDec(t.max_priority_fee_per_gas);
    r.OptDec(t.max_fee_per_blob_gas);
    r.HexArray(t.blob_versioned_hashes, "blobVersionedHashes");
    r.OptText(t.access_list_json, "accessList");
    r.OptText(t.authorization_list_json, "authorizationList");
    r.OptInt8(t.chain_id, "chainId");
    r.OptQuantity(t.v, "v");
    r.OptQuantity(t.r, "r");
    r.OptQuantity(t.s, "s");
    r.OptInt2(t.y_parity, "yParity");
    r.Int8(t.cumulative_gas_used, "cumulativeGasUsed");
    r.Int8(t.gas_used, "gasUsed");
    r.OptHex(t.contract_address, "contractAddress");
    r.OptHex(t.root, "root");
    r.OptInt2(t.status, "status");
    r.OptDec(t.effective_gas_price);
    r.Hex(t.receipt_logs_bloom, "logsBloom");
    r.OptInt8(t.blob_gas_used, "blobGasUsed");
    r.OptDec(t.blob_gas_price);
    r.Int4(t.log_count, "log_count");
    r.EndRow();
    if (r.failed()) {
      return r.Error(BlockRow(t.block_number) + " transaction " +
                     std::to_string(t.transaction_index) + " (" + t.hash + ")");
    }
  }
  return Status::Ok();
}

template <typename Row>
Status AppendLogs(const BlockData& data, std::string* out) {
  Row r(out);
  for (const Log& l : data.logs) {
    r.BeginRow();
    r.Int8(l.block_number, "block_number");
    r.Int4(l.log_index, "logIndex");
    r.Int4(l.transaction_index, "transactionIndex");
    r.Hex(l.transaction_hash, "transactionHash");
    r.Hex(l.block_hash, "blockHash");
    r.Hex(l.address, "address");
    r.Hex(l.data, "data");
    if (l.topics.size() > 4) {
      return InvalidData(BlockRow(l.block_number) + " log " + std::to_string(l.log_index) +
                         ": field topics: " + std::to_string(l.topics.size()) +
                         " topics (at most 4)");
    }
    for (size_t i = 0; i < 4; ++i) {
      if (i < l.topics.size()) {
        r.Hex(l.topics[i], "topics");
      } else {
        r.Null();
      }
    }
    r.Bool(l.removed);
    r.EndRow();
    if (r.failed())
      return r.Error(BlockRow(l.block_number) + " log " + std::to_string(l.log_index));
  }
  return Status::Ok();
}

template <typename Row>
Status AppendTokenTransfers(const BlockData& data, std::string* out) {
  Row r(out);
  for (const TokenTransfer& t : data.token_transfers) {
    r.BeginRow();
    r.Int8(t.block_number, "block_number");
    r.Int4(t.log_index, "log_index");
    r.Int4(t.batch_index, "batch_index");
    r.Hex(t.transaction_hash, "transaction_hash");
    r.Hex(t.token_address, "token_address");
    r.Hex(t.from_address, "from_address");
    r.Hex(t.to_address, "to_address");
    r.OptHex(t.operator_address, "operator");
    r.OptDec(t.token_id);
    r.Dec(t.value);
    r.Int2(static_cast<uint64_t>(t.standard), "token_standard");
    r.EndRow();
    if (r.failed()) {
      return r.Error(BlockRow(t.block_number) + " token transfer at log " +
                     std::to_string(t.log_index) + "." + std::to_string(t.batch_index));
    }
  }
  return Status::Ok();
}

template <typename Row>
Status AppendTraces(const BlockData& data, std::string* out) {
  Row r(out);
  uint32_t index = 0;
  for (const Trace& t : data.traces) {
    r.BeginRow();
    r.Int8(t.block_number, "block_number");
    r.Int4(index, "trace_index");
    r.OptHex(t.transaction_hash, "transaction_hash");
    r.OptInt4(t.transaction_index, "transaction_index");
    r.OptHex(t.from_address, "from_address");
    r.OptHex(t.to_address, "to_address");
    r.OptDec(t.value);
    r.OptHex(t.input, "input");
    r.OptHex(t.output, "output");
    r.OptText(t.trace_type, "trace_type");
    r.OptText(t.call_type, "call_type");
    r.OptText(t.reward_type, "reward_type");
    r.OptInt8(t.gas, "gas");
    r.OptInt8(t.gas_used, "gas_used");
    r.Int4(t.subtraces, "subtraces");
    r.Int4Array(t.trace_address, "trace_address");
    r.OptText(t.error, "error");
    r.OptInt2(t.status, "status");
    r.OptText(t.trace_id, "trace_id");
    r.EndRow();
    if (r.failed()) {
      return r.Error(BlockRow(t.block_number) + " trace " + std::to_string(index) +
                     (t.trace_id.has_value() ? " (" + *t.trace_id + ")" : ""));
    }
    ++index;
  }
  return Status::Ok();
}

template <typename Row>
Status AppendContracts(const BlockData& data, std::string* out) {
  Row r(out);
  uint32_t index = 0;
  for (const Contract& c : data.contracts) {
    r.BeginRow();
    r.Int8(c.block_number, "block_number");
    r.Int4(index, "contract_index");
    r.Hex(c.transaction_hash, "transaction_hash");
    r.Int4(c.transaction_index, "transaction_index");
    r.Int4Array(c.trace_address, "trace_address");
    r.Hex(c.address, "address");
    r.Hex(c.creator_address, "creator_address");
    r.OptText(c.creation_type, "creation_type");
    r.OptHex(c.bytecode, "bytecode");
    r.HexWordArray(c.function_sighashes, "function_sighashes");
    r.Bool(c.is_erc20);
    r.Bool(c.is_erc721);
    r.EndRow();
    if (r.failed()) {
      return r.Error(BlockRow(c.block_number) + " contract " + c.address + " created by " +
                     c.transaction_hash);
    }
    ++index;
  }
  return Status::Ok();
}

}  // namespace

const DataTableInfo& TableInfo(DataTable table) { return kInfos[static_cast<size_t>(table)]; }

namespace {

template <typename Row>
Status AppendRows(DataTable table, const BlockData& data, std::string* out) {
  switch (table) {
    case DataTable::kBlocks:
      return AppendBlock<Row>(data.block, out);
    case DataTable::kWithdrawals:
      return AppendWithdrawals<Row>(data.block, out);
    case DataTable::kTransactions:
      return AppendTransactions<Row>(data, out);
    case DataTable::kLogs:
      return AppendLogs<Row>(data, out);
    case DataTable::kTokenTransfers:
      return AppendTokenTransfers<Row>(data, out);
    case DataTable::kTraces:
      return AppendTraces<Row>(data, out);
    case DataTable::kContracts:
      return AppendContracts<Row>(data, out);
  }
  return Internal("unknown table");
}

}  // namespace

const char* CopyFormatName(CopyFormat format) {
  return format == CopyFormat::kBinary ? "binary" : "text";
}

std::optional<CopyFormat> ParseCopyFormat(std::string_view name) {
  if (name == "binary") return CopyFormat::kBinary;
  if (name == "text") return CopyFormat::kText;
  return std::nullopt;
}

std::string CopyStatement(DataTable table, const std::string& target, CopyFormat format) {
  return "COPY " + target + " (" + TableInfo(table).columns + ") FROM STDIN" +
         (format == CopyFormat::kBinary ? " (FORMAT binary)" : "");
}

void AppendCopyHeader(CopyFormat format, std::string* out) {
  if (format != CopyFormat::kBinary) return;
  // The signature, then 32-bit flags (no OIDs) and the header extension's length, both 0.
  static constexpr char kHeader[] = "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0";
  out->append(kHeader, sizeof kHeader - 1);
}

void AppendCopyTrailer(CopyFormat format, std::string* out) {
  if (format == CopyFormat::kBinary) out->append("\377\377", 2);  // a field count of -1
}

Status AppendCopyRows(DataTable table, const BlockData& data, CopyFormat format, std::string* out) {
  return format == CopyFormat::kBinary ? AppendRows<BinaryRow>(table, data, out)
                                       : AppendRows<TextRow>(table, data, out);
}

Status CopyBlocks(PgConn& conn, DataTable table, const std::string& target,
                  const std::vector<BlockData>& blocks, CopyFormat format, size_t chunk_bytes,
                  std::string* buffer) {
  size_t rows = 0;
  for (const BlockData& d : blocks) rows += RowCount(table, d);
  if (rows == 0) return Status::Ok();
  CopyWriter copy(conn, buffer, chunk_bytes);
  GAPLESS_RETURN_IF_ERROR(copy.Begin(CopyStatement(table, target, format)));
  AppendCopyHeader(format, copy.buffer());
  for (const BlockData& d : blocks) {
    GAPLESS_RETURN_IF_ERROR(AppendCopyRows(table, d, format, copy.buffer()));
    GAPLESS_RETURN_IF_ERROR(copy.MaybeFlush());
  }
  AppendCopyTrailer(format, copy.buffer());
  return copy.Finish();
}

size_t RowCount(DataTable table, const BlockData& data) {
  switch (table) {
    case DataTable::kBlocks:
      return 1;
    case DataTable::kWithdrawals:
      return data.block.withdrawals.size();
    case DataTable::kTransactions:
      return data.transactions.size();
    case DataTable::kLogs:
      return data.logs.size();
    case DataTable::kTokenTransfers:
      return data.token_transfers.size();
    case DataTable::kTraces:
      return data.traces.size();
    case DataTable::kContracts:
      return data.contracts.size();
  }
  return 0;
}

}  // namespace gapless
