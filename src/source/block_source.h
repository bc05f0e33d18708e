// block_source: where blocks come from (issue 9 item 1). A BlockSource hands out raw blocks
// (core/raw_block.h: the block JSON and its receipts JSON) by number; what turns them into rows is
// the same for every source: DecodeRawBlock, which runs decode/decode.h DecodeBlock with its
// checks (the number asked for, one receipt per transaction in the same order, receipts and logs
// of this block hash, the chain id). No source checks a block's content itself.
//
// Sources:
//   RpcBlockSource     a JSON-RPC node (rpc/json_rpc.h FetchBlocks: eth_getBlockByNumber +
//                      eth_getBlockReceipts in one batch, per-transaction receipts fallback).
//   HeldBlockSource    blocks already in hand: the messages a Kafka consumer received
//                      (source/block_message.h parses them), optionally backed by another
//                      source for the blocks it does not hold (the Kafka worker's --rpc).
// The workers (node/range_job.h FetchAndDecodeRange) take any of them.
//
// Thread-safety: a BlockSource is used by one thread at a time (RPC clients are not
// thread-safe); make one per thread with a BlockSourceFactory.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/raw_block.h"
#include "core/status.h"
#include "rpc/json_rpc.h"
#include "verify/verify.h"

namespace gapless {

class BlockSource {
 public:
  virtual ~BlockSource() = default;
  // Blocks first..first+count-1, in order, raw. NotFound when a block is not available (above
  // the node's head, not received); otherwise the source's own errors (rpc/json_rpc.h).
  virtual Result<std::vector<RawBlock>> Fetch(uint64_t first, uint64_t count) = 0;
  // For messages and logs: "http://node:8545", "kafka topic blocks", never a secret.
  virtual std::string Describe() const = 0;
  // True when fetching costs a rate-limited request (the fleet's RPC limiter applies).
  virtual bool rate_limited() const { return false; }
  // A block this source gave was wrong (its hash is not the head log's, it does not decode
  // consistently): a source over several endpoints counts it against the ones that served it,
  // `served_by` (RawBlock::served_by), and asks others next time (rpc/endpoint_pool.h). Others
  // ignore it.
  virtual void Distrust(uint64_t served_by) { (void)served_by; }
  // The endpoints in served_by, for messages; Describe() when the source does not tell them apart.
  virtual std::string DescribeServers(uint64_t served_by) const {
    (void)served_by;
    return Describe();
  }
  // The JSON-RPC node behind the source, for what blocks do not carry (node/enrich.h: contracts'
  // code, token metadata); nullptr when there is none.
  virtual JsonRpcClient* rpc() { return nullptr; }
};

using BlockSourceFactory = std::function<std::unique_ptr<BlockSource>()>;

// A JSON-RPC node. Owns its client.
class RpcBlockSource : public BlockSource {
 public:
  explicit RpcBlockSource(std::unique_ptr<JsonRpcClient> client) : client_(std::move(client)) {}
  Result<std::vector<RawBlock>> Fetch(uint64_t first, uint64_t count) override {
    return client_->FetchBlocks(first, count);
  }
  std::string Describe() const override { return client_->Describe(); }
  bool rate_limited() const override { return true; }
  void Distrust(uint64_t served_by) override { client_->Distrust(served_by); }
  std::string DescribeServers(uint64_t served_by) const override {
    return client_->DescribeServers(served_by);
  }
  JsonRpcClient* rpc() override { return client_.get(); }
  JsonRpcClient& client() { return *client_; }

 private:
  std::unique_ptr<JsonRpcClient> client_;
};

// Blocks in hand, by number. Fetch copies them out (they stay held until Drop), and asks
// `fallback` (borrowed, nullable) for the runs it does not hold; without one a missing block is
// NotFound naming it.
class HeldBlockSource : public BlockSource {
 public:
  explicit HeldBlockSource(std::string description, BlockSource* fallback = nullptr)
      : description_(std::move(description)), fallback_(fallback) {}
  // A block of a number already held replaces it.
  void Put(RawBlock block);
  bool Holds(uint64_t number) const { return blocks_.count(number) != 0; }
  void Drop(uint64_t number);
  size_t size() const { return blocks_.size(); }
  // The text held (RawBlockBytes of every block).
  uint64_t bytes() const { return bytes_; }
  Result<std::vector<RawBlock>> Fetch(uint64_t first, uint64_t count) override;
  std::string Describe() const override { return description_; }
  bool rate_limited() const override { return false; }
  // Blocks it holds carry no endpoint (served_by 0); those from the fallback are the fallback's.
  void Distrust(uint64_t served_by) override {
    if (fallback_ != nullptr && served_by != 0) fallback_->Distrust(served_by);
  }
  std::string DescribeServers(uint64_t served_by) const override {
    return fallback_ != nullptr && served_by != 0 ? fallback_->DescribeServers(served_by)
                                                  : description_;
  }
  JsonRpcClient* rpc() override { return fallback_ != nullptr ? fallback_->rpc() : nullptr; }

 private:
  std::string description_;
  BlockSource* fallback_;
  std::map<uint64_t, RawBlock> blocks_;
  uint64_t bytes_ = 0;
};

// The JSON text a raw block carries (block, receipts, traces): what holding it costs.
uint64_t RawBlockBytes(const RawBlock& block);

// What every decoded block is checked against besides its own consistency.
struct BlockChecks {
  BlockChecks() = default;
  // Implicit: a chain id alone is the common case.
  BlockChecks(std::optional<uint64_t> chain_id) : chain_id(chain_id) {}  // NOLINT
  BlockChecks(std::optional<uint64_t> chain_id, std::optional<VerifyOptions> verify)
      : chain_id(chain_id), verify(verify) {}
  // Every transaction carrying a chainId must match (FailedPrecondition otherwise).
  std::optional<uint64_t> chain_id;
  // --verify: each block proven against its own header (verify/verify.h VerifyBlock: the
  // transactions, receipts and withdrawals roots, the blooms, the block hash; the senders with
  // recover_senders). A mismatch is InvalidData naming the block and field (retried, then
  // dead-lettered, never committed). A block of a transaction type Ethereum does not define (OP
  // deposits, Arbitrum system transactions) is stored unverified, logged once per process.
  std::optional<VerifyOptions> verify;
};

// The reason of an InvalidData from DecodeRawBlock about the block's traces (malformed, of another
// block, or not matching its transactions), as opposed to the block and its receipts.
inline constexpr std::string_view kTracesDisagreeReason = "decode:traces-disagree";

// Decodes one raw block with every consistency check (see the file comment) and, with
// checks.verify, proves it against its header. The error names the block; `source`
// (Describe()) is added as context.
Result<BlockData> DecodeRawBlock(RawBlock& block, const BlockChecks& checks,
                                 const std::string& source);

}  // namespace gapless
