// deep_verify: `gapless verify --deep`, a proof of the stored blocks from the database alone.
//
// Reads the blocks of an interval back from PostgreSQL in bounded batches (store/reader.h), and
// proves each one against its own stored header with the verifier the --verify write path uses
// (verify/verify.h: every transaction's hash, transactionsRoot, each receipt's and the block's
// logsBloom, receiptsRoot, withdrawalsRoot, the block hash, optionally the senders). Then it checks
// the stored columns no root covers but the proven ones determine: each transaction's gas_used
// (the rise of cumulativeGasUsed) and effective_gas_price (its fee fields and the block's base
// fee), the header's gasUsed against the last receipt, and the token_transfers rows against the
// decoder's reading of the stored logs. No node is asked. What stays unproven (the state root and
// uncle hashes as given, from_address without --verify-senders, ...) is listed in docs/verify.md.
//
// Memory: one batch of blocks (DeepVerifyOptions::batch_blocks) at a time.
// Thread-safety: one thread per PgConn, as the PgConn.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "store/pg.h"
#include "store/queries.h"
#include "verify/verify.h"

namespace gapless {

struct DeepVerifyOptions {
  // recover_senders: --verify-senders; anvil_blob_sidecar_quirk: --anvil-blob-roots.
  VerifyOptions verify;
  // Blocks read per query batch. A busy mainnet block is about 0.5 MB in the model (200
  // transactions, 500 logs), so 100 blocks keep a batch near 50 MB.
  uint64_t batch_blocks = 100;
  // A progress line (spdlog info) at most this often; 0: none.
  int64_t progress_interval_ms = 10'000;
};

// What the deep checks found for one block.
struct BlockVerdict {
  enum class Kind {
    kVerified,       // every check passed
    kNotVerifiable,  // not Ethereum's rules (verify::kUnsupportedTxTypeReason / HeaderReason)
    kFailed,         // problems lists each failing check
  };
  Kind kind = Kind::kVerified;
  // kFailed: one line per problem, without the "block N: " prefix ("receiptsRoot is 0x.. but
  // the receipts give 0x.."); kNotVerifiable: the reason.
  std::vector<std::string> problems;
  // kFailed only: the block holds a blob transaction and passes every check when anvil's
  // blob-sidecar transactionsRoot is allowed (options.anvil_blob_sidecar_quirk was off).
  bool passes_with_anvil_quirk = false;
};

// The checks of one block, as read back from the database. Pure; thread-safe.
BlockVerdict DeepVerifyBlock(const BlockData& data, const VerifyOptions& options);

// Runs DeepVerifyBlock over every stored block of [from, to] and fills report->deep (absent
// blocks are plain verify's business: VerifyReport::missing). Errors: the database's, and
// InvalidData for a stored value the reader cannot parse; report->deep is then incomplete.
Status DeepVerify(PgConn& conn, uint64_t from, uint64_t to, const DeepVerifyOptions& options,
                  VerifyReport* report);

}  // namespace gapless
