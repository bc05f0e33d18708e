#include "store/testdata.h"

#include <algorithm>
#include <optional>
#include <type_traits>

namespace gapless {
namespace {

constexpr const char* kTransferTopic =
    "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";
constexpr const char* kTransferSingleTopic =
    "0xc3d58168c5ae7397731d063d5bbf3d657854427343f4c083240f7aacaa2d0f62";
constexpr const char* kTransferBatchTopic =
    "0x4a39dc06d4c0dbc64b70af90fd698a233a518aa5d07e595d983b8c0526c8f7fb";
constexpr const char* kEmptyUncles =
    "0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347";

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {  // splitmix64
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : Next() % n; }

  std::string Hex(size_t bytes) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out = "0x";
    out.resize(2 + 2 * bytes);
    for (size_t i = 0; i < bytes; i += 8) {
      uint64_t r = Next();
      for (size_t j = 0; j < 8 && i + j < bytes; ++j) {
        out[2 + 2 * (i + j)] = kDigits[(r >> (8 * j + 4)) & 0xf];
        out[2 + 2 * (i + j) + 1] = kDigits[(r >> (8 * j)) & 0xf];
      }
    }
    return out;
  }
  // A canonical hex quantity of up to `bytes` bytes (no leading zeros, so odd lengths occur).
  std::string Quantity(size_t bytes) {
    std::string h = Hex(bytes);
    size_t nz = h.find_first_not_of('0', 2);
    if (nz == std::string::npos) return "0x0";
    return "0x" + h.substr(nz);
  }
  // A value of `bits` random bits (the top one set).
  U256 Big(int bits) {
    std::string digits;
    int nibbles = (bits + 3) / 4;
    for (int i = 0; i < nibbles; ++i) digits.push_back("0123456789abcdef"[Below(16)]);
    digits[0] = "1248"[(bits - 1) % 4];
    return *U256::FromHexDigits(digits);
  }
  // A 32-byte topic holding a 20-byte address, as ABI pads it.
  std::string AddressTopic() { return "0x000000000000000000000000" + Hex(20).substr(2); }

 private:
  uint64_t s_;
};

uint64_t Mix(uint64_t a, uint64_t b) {
  Rng r(a * 0x2545f4914f6cdd1dULL ^ b);
  return r.Next();
}

U256 MaxU256() { return *U256::FromHexDigits(std::string(64, 'f')); }

std::string Word(const U256& v) {
  std::string hex = v.ToHexQuantity().substr(2);
  return std::string(64 - hex.size(), '0') + hex;
}

}  // namespace

SyntheticOptions SmallSyntheticOptions() {
  return {.transactions_per_block = 4,
          .logs_per_block = 6,
          .token_transfers_per_block = 2,
          .withdrawals_per_block = 2,
          .traces_per_block = 4};
}

std::string SyntheticBlockHash(uint64_t number, uint64_t seed) {
  Rng r(Mix(seed ^ 0x68617368ULL, number));
  return r.Hex(32);
}

BlockData SyntheticBlock(uint64_t n, const SyntheticOptions& o) {
  Rng rng(Mix(o.seed, n));
  BlockData d;
  Block& b = d.block;
  b.number = n;
  b.hash = SyntheticBlockHash(n, o.seed);
  b.parent_hash = n > 0 ? SyntheticBlockHash(n - 1, o.seed) : "0x" + std::string(64, '0');
  b.nonce = n % 2 == 0 ? "0x0000000000000000" : rng.Hex(8);
  b.sha3_uncles = kEmptyUncles;
  b.logs_bloom = rng.Hex(256);
  b.transactions_root = rng.Hex(32);
  b.state_root = rng.Hex(32);
  b.receipts_root = rng.Hex(32);
  b.miner = rng.Hex(20);
  if (n % 11 != 0) b.mix_hash = rng.Hex(32);
  b.difficulty = n % 3 == 0 ? U256(0) : (n % 3 == 1 ? rng.Big(80) : U256(7298514125186));
  if (n % 4 != 0) b.total_difficulty = rng.Big(76);
  b.size = 50'000 + rng.Below(100'000);
  b.extra_data = n % 6 == 0 ? "0x" : rng.Hex(1 + rng.Below(32));
  b.gas_limit = 30'000'000;
  b.timestamp = 1'600'000'000 + 12 * n;
  if (n % 7 != 0) b.base_fee_per_gas = U256(rng.Below(100'000'000'000ULL));
  if (n % 5 != 0) {
    b.withdrawals_root = rng.Hex(32);
    for (uint32_t k = 0; k < o.withdrawals_per_block; ++k) {
      Withdrawal w;
      w.index = n * o.withdrawals_per_block + k;
      w.validator_index = rng.Below(1'000'000);
      w.address = rng.Hex(20);
      w.amount_gwei = rng.Below(50'000'000);
      b.withdrawals.push_back(std::move(w));
    }
  }
  if (n % 2 == 0) {
    b.blob_gas_used = 131072 * rng.Below(7);
    b.excess_blob_gas = rng.Below(100'000'000);
    b.parent_beacon_block_root = rng.Hex(32);
  }
  if (n % 4 == 0) b.requests_hash = rng.Hex(32);

  const uint32_t T = o.transactions_per_block;
  b.transaction_count = T;
  uint64_t cumulative = 0;
  for (uint32_t i = 0; i < T; ++i) {
    Transaction t;
    t.hash = rng.Hex(32);
    t.block_number = n;
    t.block_hash = b.hash;
    t.transaction_index = i;
    t.nonce = rng.Below(1'000'000);
    t.from_address = rng.Hex(20);
    bool creation = i % 25 == 7;
    if (!creation) t.to_address = rng.Hex(20);
    t.value = i % 3 == 0 ? rng.Big(70 + static_cast<int>(rng.Below(30)))
                         : (i % 3 == 1 ? U256(0) : U256(rng.Below(1'000'000'000'000'000'000ULL)));
    t.gas = 21'000 + rng.Below(500'000);
    if (i % 41 != 40) t.gas_price = U256(rng.Below(200'000'000'000ULL));
    t.input = i % 4 == 0 ? "0x" : rng.Hex(creation ? 600 : 4 + 32 * rng.Below(9));
    std::optional<uint8_t> type;
    if (i % 37 != 36) type = static_cast<uint8_t>(i % 5);
    t.transaction_type = type;
    uint8_t ty = type.value_or(0);
    if (ty >= 1) {
      t.access_list_json = i % 2 == 0
                               ? "[]"
                               : "[{\"address\":\"" + rng.Hex(20) + "\",\"storageKeys\":[\"" +
                                     rng.Hex(32) + "\",\"" + rng.Hex(32) + "\"]}]";
    }
    if (ty >= 2) {
      t.max_fee_per_gas = U256(rng.Below(300'000'000'000ULL));
      t.max_priority_fee_per_gas = U256(rng.Below(3'000'000'000ULL));
    }
    if (ty == 3) {
      t.max_fee_per_blob_gas = U256(rng.Below(1'000'000'000ULL));
      for (uint64_t k = 0; k <= rng.Below(3); ++k)
        t.blob_versioned_hashes.push_back("0x01" + rng.Hex(31).substr(2));
      t.blob_gas_used = 131072 * t.blob_versioned_hashes.size();
      t.blob_gas_price = U256(1 + rng.Below(1000));
    }
    if (ty == 4) {
      t.authorization_list_json = "[{\"chainId\":\"0x1\",\"address\":\"" + rng.Hex(20) +
                                  "\",\"nonce\":\"0x" + std::to_string(rng.Below(9)) +
                                  "\",\"yParity\":\"0x1\",\"r\":\"" + rng.Quantity(32) +
                                  "\",\"s\":\"" + rng.Quantity(32) + "\"}]";
    }
    if (ty >= 1 || i % 2 == 0) t.chain_id = 1;
    if (ty == 0) {
      t.v = i % 2 == 0 ? "0x25" : "0x1b";
    } else {
      t.v = i % 2 == 0 ? "0x0" : "0x1";
      t.y_parity = static_cast<uint8_t>(i % 2);
    }
    t.r = rng.Quantity(32);
    t.s = i % 9 == 0 ? rng.Quantity(31) : rng.Quantity(32);  // leading-zero words occur
    t.gas_used = 21'000 + rng.Below(200'000);
    cumulative += t.gas_used;
    t.cumulative_gas_used = cumulative;
    if (creation) t.contract_address = rng.Hex(20);
    if (i % 50 == 3) {
      t.root = rng.Hex(32);  // pre-Byzantium shape: root, no status
    } else {
      t.status = static_cast<uint8_t>(i % 10 == 9 ? 0 : 1);
    }
    if (i % 43 != 42) t.effective_gas_price = t.gas_price.value_or(U256(1'000'000'000));
    t.receipt_logs_bloom = rng.Hex(256);
    d.transactions.push_back(std::move(t));
  }
  b.gas_used = cumulative;

  const uint32_t L = T == 0 ? 0 : o.logs_per_block;
  // Transfer-carrying logs: 8 of every 10 give one row, an ERC-1155 batch gives 3, so ~1.2 rows
  // each.
  uint32_t transfer_logs = std::min<uint32_t>(L, (o.token_transfers_per_block * 10 + 6) / 12);
  uint32_t stride = transfer_logs == 0 ? 0 : std::max<uint32_t>(1, L / transfer_logs);
  uint32_t k = 0;  // transfer logs made so far
  for (uint32_t j = 0; j < L; ++j) {
    Log l;
    l.block_number = n;
    l.block_hash = b.hash;
    l.log_index = j;
    l.transaction_index = static_cast<uint32_t>(static_cast<uint64_t>(j) * T / L);
    Transaction& tx = d.transactions[l.transaction_index];
    tx.log_count += 1;
    l.transaction_hash = tx.hash;
    l.address = rng.Hex(20);
    l.removed = j == 1;  // a removed log is stored as given
    if (stride != 0 && j % stride == 0 && k < transfer_logs) {
      TokenTransfer base;
      base.block_number = n;
      base.log_index = j;
      base.transaction_hash = tx.hash;
      base.token_address = l.address;
      std::string from = rng.AddressTopic(), to = rng.AddressTopic();
      base.from_address = "0x" + from.substr(26);
      base.to_address = "0x" + to.substr(26);
      uint32_t kind = k % 10;
      if (kind <= 6) {
        base.standard = TokenStandard::kErc20;
        base.value =
            k % 20 == 1 ? MaxU256() : (k % 4 == 0 ? rng.Big(100) : U256(rng.Below(1'000'000'000)));
        l.topics = {kTransferTopic, from, to};
        l.data = "0x" + Word(base.value);
        d.token_transfers.push_back(base);
      } else if (kind == 7) {
        base.standard = TokenStandard::kErc721;
        base.token_id = k % 3 == 0 ? rng.Big(200) : U256(rng.Below(10'000));
        base.value = U256(1);
        l.topics = {kTransferTopic, from, to, "0x" + Word(*base.token_id)};
        l.data = "0x";
        d.token_transfers.push_back(base);
      } else {
        std::string op = rng.AddressTopic();
        base.standard = TokenStandard::kErc1155;
        base.operator_address = "0x" + op.substr(26);
        uint32_t rows = kind == 8 ? 1 : 3;
        l.topics = {kind == 8 ? kTransferSingleTopic : kTransferBatchTopic, op, from, to};
        l.data = "0x";
        for (uint32_t bi = 0; bi < rows; ++bi) {
          TokenTransfer t = base;
          t.batch_index = bi;
          t.token_id = U256(rng.Below(1000));
          t.value = U256(1 + rng.Below(100));
          l.data += Word(*t.token_id) + Word(t.value);
          d.token_transfers.push_back(std::move(t));
        }
      }
      ++k;
    } else {
      uint32_t topics = j % 5;
      for (uint32_t q = 0; q < topics; ++q) l.topics.push_back(rng.Hex(32));
      l.data = j % 6 == 0 ? "0x" : rng.Hex(32 * (1 + j % 3));
    }
    d.logs.push_back(std::move(l));
  }
  // Traces: per transaction (the first traces_per_block / 3 of them) a top-level call with two
  // children, the second a create that failed (so it and its own child have status 0), and the
  // block reward. trace_id and status as decode/traces.h computes them.
  if (o.traces_per_block > 0) {
    const size_t calls = std::min<size_t>(d.transactions.size(), o.traces_per_block / 3);
    for (size_t k = 0; k < calls; ++k) {
      const Transaction& tx = d.transactions[k];
      Trace top;
      top.block_number = n;
      top.transaction_hash = tx.hash;
      top.transaction_index = tx.transaction_index;
      top.from_address = tx.from_address;
      top.to_address = tx.to_address.value_or(rng.Hex(20));
      top.value = k % 4 == 0 ? rng.Big(90) : U256(rng.Below(1'000'000));
      top.input = k % 3 == 0 ? "0x" : rng.Hex(4 + 32 * (k % 3));
      top.output = "0x";
      top.trace_type = "call";
      top.call_type = "call";
      top.gas = 21'000 + rng.Below(1'000'000);
      top.gas_used = 21'000;
      top.subtraces = 2;
      top.status = 1;
      top.trace_id = "call_" + tx.hash + "_";
      Trace child = top;
      child.from_address = top.to_address;
      child.to_address = rng.Hex(20);
      child.call_type = k % 2 == 0 ? "delegatecall" : "staticcall";
      child.value.reset();
      child.subtraces = 0;
      child.trace_address = {0};
      child.trace_id = "call_" + tx.hash + "_0";
      Trace create = top;
      create.trace_type = "create2";
      create.call_type.reset();
      create.to_address.reset();
      create.output.reset();
      create.gas_used.reset();
      create.error = k % 5 == 0 ? "out of gas" : "execution reverted: \"tab\there\"";
      create.status = 0;
      create.subtraces = 0;
      create.trace_address = {1};
      create.trace_id = "create2_" + tx.hash + "_1";
      d.traces.push_back(std::move(top));
      d.traces.push_back(std::move(child));
      d.traces.push_back(std::move(create));
    }
    Trace reward;
    reward.block_number = n;
    reward.to_address = b.miner;
    reward.value = U256(2'000'000'000'000'000'000ULL);
    reward.trace_type = "reward";
    reward.reward_type = "block";
    reward.status = 1;
    reward.trace_id = "reward_" + std::to_string(n) + "_0";
    d.traces.push_back(std::move(reward));
  }
  return d;
}

std::vector<BlockData> SyntheticBlocks(uint64_t from, uint64_t count,
                                       const SyntheticOptions& options) {
  std::vector<BlockData> out;
  out.reserve(count);
  for (uint64_t i = 0; i < count; ++i) out.push_back(SyntheticBlock(from + i, options));
  return out;
}

namespace {

class Describer {
 public:
  void Field(const std::string& path, const std::string& v) { out_ += path + "=" + v + "\n"; }
  void Field(const std::string& path, uint64_t v) { Field(path, std::to_string(v)); }
  void Field(const std::string& path, const U256& v) { Field(path, v.ToDecimal()); }
  void Field(const std::string& path, bool v) { Field(path, std::string(v ? "true" : "false")); }
  template <typename T>
  void Field(const std::string& path, const std::optional<T>& v) {
    if (v.has_value()) {
      if constexpr (std::is_integral_v<T>) {
        Field(path, static_cast<uint64_t>(*v));
      } else {
        Field(path, *v);
      }
    } else {
      Field(path, std::string("null"));
    }
  }
  void Field(const std::string& path, const std::vector<std::string>& v) {
    std::string joined = "[";
    for (size_t i = 0; i < v.size(); ++i) joined += (i ? "," : "") + v[i];
    Field(path, joined + "]");
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

}  // namespace

std::string DescribeBlockData(const BlockData& d) {
  Describer w;
  const Block& b = d.block;
  std::string p = "block[" + std::to_string(b.number) + "].";
  w.Field(p + "number", b.number);
  w.Field(p + "hash", b.hash);
  w.Field(p + "parent_hash", b.parent_hash);
  w.Field(p + "nonce", b.nonce);
  w.Field(p + "sha3_uncles", b.sha3_uncles);
  w.Field(p + "logs_bloom", b.logs_bloom);
  w.Field(p + "transactions_root", b.transactions_root);
  w.Field(p + "state_root", b.state_root);
  w.Field(p + "receipts_root", b.receipts_root);
  w.Field(p + "miner", b.miner);
  w.Field(p + "mix_hash", b.mix_hash);
  w.Field(p + "difficulty", b.difficulty);
  w.Field(p + "total_difficulty", b.total_difficulty);
  w.Field(p + "size", b.size);
  w.Field(p + "extra_data", b.extra_data);
  w.Field(p + "gas_limit", b.gas_limit);
  w.Field(p + "gas_used", b.gas_used);
  w.Field(p + "timestamp", b.timestamp);
  w.Field(p + "transaction_count", static_cast<uint64_t>(b.transaction_count));
  w.Field(p + "base_fee_per_gas", b.base_fee_per_gas);
  w.Field(p + "withdrawals_root", b.withdrawals_root);
  for (size_t i = 0; i < b.withdrawals.size(); ++i) {
    const Withdrawal& x = b.withdrawals[i];
    std::string q = p + "withdrawals[" + std::to_string(i) + "].";
    w.Field(q + "index", x.index);
    w.Field(q + "validator_index", x.validator_index);
    w.Field(q + "address", x.address);
    w.Field(q + "amount_gwei", x.amount_gwei);
  }
  w.Field(p + "blob_gas_used", b.blob_gas_used);
  w.Field(p + "excess_blob_gas", b.excess_blob_gas);
  w.Field(p + "parent_beacon_block_root", b.parent_beacon_block_root);
  w.Field(p + "requests_hash", b.requests_hash);
  for (const Transaction& t : d.transactions) {
    std::string q = p + "tx[" + std::to_string(t.transaction_index) + "].";
    w.Field(q + "hash", t.hash);
    w.Field(q + "block_number", t.block_number);
    w.Field(q + "block_hash", t.block_hash);
    w.Field(q + "transaction_index", static_cast<uint64_t>(t.transaction_index));
    w.Field(q + "nonce", t.nonce);
    w.Field(q + "from_address", t.from_address);
    w.Field(q + "to_address", t.to_address);
    w.Field(q + "value", t.value);
    w.Field(q + "gas", t.gas);
    w.Field(q + "gas_price", t.gas_price);
    w.Field(q + "input", t.input);
    w.Field(q + "transaction_type", t.transaction_type);
    w.Field(q + "max_fee_per_gas", t.max_fee_per_gas);
    w.Field(q + "max_priority_fee_per_gas", t.max_priority_fee_per_gas);
    w.Field(q + "max_fee_per_blob_gas", t.max_fee_per_blob_gas);
    w.Field(q + "blob_versioned_hashes", t.blob_versioned_hashes);
    w.Field(q + "access_list_json", t.access_list_json);
    w.Field(q + "authorization_list_json", t.authorization_list_json);
    w.Field(q + "chain_id", t.chain_id);
    w.Field(q + "v", t.v);
    w.Field(q + "r", t.r);
    w.Field(q + "s", t.s);
    w.Field(q + "y_parity", t.y_parity);
    w.Field(q + "cumulative_gas_used", t.cumulative_gas_used);
    w.Field(q + "gas_used", t.gas_used);
    w.Field(q + "contract_address", t.contract_address);
    w.Field(q + "root", t.root);
    w.Field(q + "status", t.status);
    w.Field(q + "effective_gas_price", t.effective_gas_price);
    w.Field(q + "receipt_logs_bloom", t.receipt_logs_bloom);
    w.Field(q + "blob_gas_used", t.blob_gas_used);
    w.Field(q + "blob_gas_price", t.blob_gas_price);
    w.Field(q + "log_count", static_cast<uint64_t>(t.log_count));
  }
  for (const Log& l : d.logs) {
    std::string q = p + "log[" + std::to_string(l.log_index) + "].";
    w.Field(q + "block_number", l.block_number);
    w.Field(q + "block_hash", l.block_hash);
    w.Field(q + "log_index", static_cast<uint64_t>(l.log_index));
    w.Field(q + "transaction_hash", l.transaction_hash);
    w.Field(q + "transaction_index", static_cast<uint64_t>(l.transaction_index));
    w.Field(q + "address", l.address);
    w.Field(q + "data", l.data);
    w.Field(q + "topics", l.topics);
    w.Field(q + "removed", l.removed);
  }
  for (const TokenTransfer& t : d.token_transfers) {
    std::string q =
        p + "transfer[" + std::to_string(t.log_index) + "." + std::to_string(t.batch_index) + "].";
    w.Field(q + "block_number", t.block_number);
    w.Field(q + "log_index", static_cast<uint64_t>(t.log_index));
    w.Field(q + "batch_index", static_cast<uint64_t>(t.batch_index));
    w.Field(q + "transaction_hash", t.transaction_hash);
    w.Field(q + "token_address", t.token_address);
    w.Field(q + "from_address", t.from_address);
    w.Field(q + "to_address", t.to_address);
    w.Field(q + "operator_address", t.operator_address);
    w.Field(q + "token_id", t.token_id);
    w.Field(q + "value", t.value);
    w.Field(q + "standard", std::string(TokenStandardName(t.standard)));
  }
  for (size_t i = 0; i < d.traces.size(); ++i) {
    const Trace& t = d.traces[i];
    std::string q = p + "trace[" + std::to_string(i) + "].";
    w.Field(q + "block_number", t.block_number);
    w.Field(q + "transaction_hash", t.transaction_hash);
    w.Field(q + "transaction_index", t.transaction_index);
    w.Field(q + "from_address", t.from_address);
    w.Field(q + "to_address", t.to_address);
    w.Field(q + "value", t.value);
    w.Field(q + "input", t.input);
    w.Field(q + "output", t.output);
    w.Field(q + "trace_type", t.trace_type);
    w.Field(q + "call_type", t.call_type);
    w.Field(q + "reward_type", t.reward_type);
    w.Field(q + "gas", t.gas);
    w.Field(q + "gas_used", t.gas_used);
    w.Field(q + "subtraces", static_cast<uint64_t>(t.subtraces));
    std::vector<std::string> address;
    for (uint32_t a : t.trace_address) address.push_back(std::to_string(a));
    w.Field(q + "trace_address", address);
    w.Field(q + "error", t.error);
    w.Field(q + "status", t.status);
    w.Field(q + "trace_id", t.trace_id);
  }
  return w.Take();
}

RangeWrite SyntheticRange(uint64_t from, uint64_t to, const SyntheticOptions& options,
                          std::optional<int64_t> fence_token) {
  RangeWrite w;
  w.from_block = from;
  w.to_block = to;
  w.blocks = SyntheticBlocks(from, to - from + 1, options);
  w.fence_token = fence_token;
  return w;
}

}  // namespace gapless
