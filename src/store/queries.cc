#include "store/queries.h"

#include <algorithm>
#include <charconv>
#include <functional>

#include "store/copy_rows.h"

namespace gapless {
namespace {

// Blocks per Verify query: bounds the hash aggregates' memory on a large interval.
constexpr uint64_t kVerifyChunk = 20'000;

Result<uint64_t> ParseU64(std::string_view text, std::string_view what) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return InvalidData(std::string(what) + " is not a number: " + std::string(text));
  }
  return v;
}

std::string Plural(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

Result<std::vector<std::pair<uint64_t, uint64_t>>> CommittedRanges(PgConn& conn, uint64_t from,
                                                                   uint64_t to,
                                                                   const Datasets& holding) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  if (from > to) return out;
  GAPLESS_ASSIGN_OR_RETURN(
      auto res, conn.Query("SELECT from_block, to_block FROM indexed_ranges"
                           " WHERE blocks && int8range($1, $2, '[]') AND datasets @> $3::text[]"
                           " ORDER BY from_block",
                           {std::to_string(from), std::to_string(to), holding.SqlArray()}));
  for (int i = 0; i < res.rows(); ++i) {
    GAPLESS_ASSIGN_OR_RETURN(uint64_t a, ParseU64(res.Get(i, 0), "indexed_ranges.from_block"));
    GAPLESS_ASSIGN_OR_RETURN(uint64_t b, ParseU64(res.Get(i, 1), "indexed_ranges.to_block"));
    a = std::max(a, from);
    b = std::min(b, to);
    if (!out.empty() && a <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, b);
    } else {
      out.emplace_back(a, b);
    }
  }
  return out;
}

Result<std::optional<uint64_t>> MaxBlock(PgConn& conn) {
  GAPLESS_ASSIGN_OR_RETURN(auto res, conn.Query("SELECT max(number) FROM blocks"));
  if (res.rows() == 0 || res.IsNull(0, 0)) return std::optional<uint64_t>();
  GAPLESS_ASSIGN_OR_RETURN(uint64_t v, ParseU64(res.Get(0, 0), "max(number)"));
  return std::optional<uint64_t>(v);
}

Result<std::map<std::string, uint64_t>> StoredTokenBlocks(
    PgConn& conn, const std::vector<std::string>& addresses) {
  std::map<std::string, uint64_t> out;
  if (addresses.empty()) return out;
  // A bytea[] parameter: {"\\x..","\\x.."} (an element's backslash escaped for the array
  // parser). Addresses are 0x-hex from the decoder.
  std::string array = "{";
  for (const std::string& a : addresses) {
    if (a.size() < 2 || a.find_first_not_of("0123456789abcdef", 2) != std::string::npos) {
      return InvalidData("not a lower-case 0x-hex address: " + a);
    }
    if (array.size() > 1) array += ',';
    array += "\"\\\\x" + a.substr(2) + "\"";
  }
  array += "}";
  GAPLESS_ASSIGN_OR_RETURN(
      auto res, conn.Query("SELECT '0x' || encode(address, 'hex'), block_number FROM tokens"
                           " WHERE address = ANY($1::bytea[])",
                           {array}));
  for (int i = 0; i < res.rows(); ++i) {
    GAPLESS_ASSIGN_OR_RETURN(uint64_t block, ParseU64(res.Get(i, 1), "tokens.block_number"));
    out.emplace(std::string(res.Get(i, 0)), block);
  }
  return out;
}

uint64_t VerifyReport::missing_count() const {
  uint64_t n = 0;
  for (const auto& [a, b] : missing) n += b - a + 1;
  return n;
}

std::string VerifyReport::Render() const {
  std::string out = "verify blocks " + std::to_string(from) + ".." + std::to_string(to) + ": " +
                    Plural(blocks_found, "block", "blocks") + " present, " +
                    std::to_string(missing_count()) + " missing, " +
                    Plural(parent_breaks.size(), "parent-hash break", "parent-hash breaks") + ", " +
                    Plural(inconsistencies.size(), "inconsistency", "inconsistencies") + "\n";
  if (!missing.empty()) {
    out += "missing blocks:";
    for (const auto& [a, b] : missing) {
      out += " " + std::to_string(a);
      if (b != a) out += "-" + std::to_string(b);
    }
    out += "\n";
  }
  for (uint64_t n : parent_breaks) {
    out += "parent-hash break: block " + std::to_string(n) +
           "'s parent_hash is not the hash of block " + std::to_string(n - 1) + "\n";
  }
  for (const auto& inc : inconsistencies) {
    out += "block " + std::to_string(inc.block_number) + ": " + inc.what + "\n";
  }
  for (const DatasetGap& gap : missing_datasets) {
    const std::string blocks =
        std::to_string(gap.from) + (gap.to != gap.from ? "-" + std::to_string(gap.to) : "");
    out += "missing dataset: blocks " + blocks + " are committed without " + gap.dataset +
           ", which a run asked for (`gapless index --from " + std::to_string(gap.from) + " --to " +
           std::to_string(gap.to) + " " + HowToAskFor(gap.dataset) +
           "` writes them again with it)\n";
  }
  if (truncated) {
    out += "(more anomalies exist than are listed; verify a smaller interval to see them)\n";
  }
  if (deep) {
    out += "deep: " + Plural(deep->verified, "block", "blocks") + " verified (" + deep->checks +
           "), " + std::to_string(deep->failed_blocks) + " failed, " +
           std::to_string(deep->not_verifiable) + " not verifiable\n";
    for (const auto& failure : deep->failures) {
      out += "block " + std::to_string(failure.block_number) + ": " + failure.what + "\n";
    }
    if (deep->truncated) {
      out += "(more failures exist than are listed; verify a smaller interval to see them)\n";
    }
    if (deep->first_not_verifiable) {
      out += "not verifiable (not Ethereum's rules, skipped): " +
             Plural(deep->not_verifiable, "block", "blocks") + ", the first: block " +
             std::to_string(deep->first_not_verifiable->block_number) + ": " +
             deep->first_not_verifiable->what + "\n";
    }
    if (deep->anvil_quirk_blocks > 0) {
      out +=
          "note: " + Plural(deep->anvil_quirk_blocks, "failed block holds", "failed blocks hold") +
          " blob transactions and would pass with anvil's blob-sidecar transactionsRoot: if "
          "this database holds an anvil devnet, rerun with --anvil-blob-roots (docs/verify.md)\n";
    }
  }
  out += ok() ? "OK\n" : "FAILED\n";
  return out;
}

namespace {

// Gaps and parent-hash breaks in one ordered scan of the primary key over [from - 1, to].
Status CheckContinuity(PgConn& conn, uint64_t from, uint64_t to, VerifyReport* report) {
  GAPLESS_ASSIGN_OR_RETURN(auto counts, conn.Query("SELECT count(*), max(number) FROM blocks"
                                                   " WHERE number BETWEEN $1 AND $2",
                                                   {std::to_string(from), std::to_string(to)}));
  GAPLESS_ASSIGN_OR_RETURN(report->blocks_found, ParseU64(counts.Get(0, 0), "count"));
  uint64_t lo = from > 0 ? from - 1 : 0;
  std::optional<uint64_t> last_seen;
  Status st = conn.QueryEach(
      "SELECT number, prev_number, prev_number = number - 1 AND parent_hash <> prev_hash FROM ("
      "  SELECT number, parent_hash, lag(number) OVER w AS prev_number, lag(hash) OVER w AS"
      "  prev_hash FROM blocks WHERE number BETWEEN $1 AND $3 WINDOW w AS (ORDER BY number)) s"
      " WHERE number >= $2 AND (prev_number IS NULL OR prev_number <> number - 1"
      "  OR parent_hash <> prev_hash)"
      " ORDER BY number",
      {std::to_string(lo), std::to_string(from), std::to_string(to)},
      [&](const PgResult& row) -> Status {
        if (report->missing.size() + report->parent_breaks.size() >= 2 * VerifyReport::kMaxListed) {
          report->truncated = true;
          return Status::Ok();
        }
        GAPLESS_ASSIGN_OR_RETURN(uint64_t n, ParseU64(row.Get(0, 0), "number"));
        if (row.Get(0, 2) == "t") {
          report->parent_breaks.push_back(n);
          return Status::Ok();
        }
        // A gap before n: from the block after the previous stored one (or from `from`).
        uint64_t gap_start = from;
        if (!row.IsNull(0, 1)) {
          GAPLESS_ASSIGN_OR_RETURN(uint64_t prev, ParseU64(row.Get(0, 1), "prev_number"));
          gap_start = std::max(from, prev + 1);
        }
        if (gap_start < n) report->missing.emplace_back(gap_start, n - 1);
        return Status::Ok();
      });
  GAPLESS_RETURN_IF_ERROR(st);
  if (report->blocks_found == 0) {
    report->missing.assign(1, {from, to});
    return Status::Ok();
  }
  GAPLESS_ASSIGN_OR_RETURN(last_seen, ParseU64(counts.Get(0, 1), "max(number)"));
  if (*last_seen < to) report->missing.emplace_back(*last_seen + 1, to);
  return Status::Ok();
}

struct CrossCheck {
  const char* sql;  // $1 = from, $2 = to; returns (block_number, description)
  // Also in an events-mode database (writer.h EnsureDataMode), which stores no transactions.
  bool sparse = false;
};

// An events-mode database stores only the blocks with matching logs: a block is missing when no
// committed range covers it, and parent hashes chain between adjacent stored blocks only (the
// ordered scan above skips non-adjacent pairs: it reports them as gaps, which are not counted).
Status CheckCommittedCoverage(PgConn& conn, uint64_t from, uint64_t to, VerifyReport* report) {
  GAPLESS_ASSIGN_OR_RETURN(auto committed, CommittedRanges(conn, from, to));
  uint64_t next = from;
  for (const auto& [a, b] : committed) {
    if (a > next) report->missing.emplace_back(next, a - 1);
    next = b + 1;
  }
  if (next <= to && (committed.empty() || committed.back().second < to)) {
    report->missing.emplace_back(next, to);
  }
  return Status::Ok();
}

// Each query returns the block number and a description of one anomaly.
constexpr CrossCheck kCrossChecks[] = {
    {"SELECT b.number, 'transaction_count is ' || b.transaction_count || ' but ' ||"
     " coalesce(t.n, 0) || ' transactions are stored'"
     " FROM blocks b LEFT JOIN (SELECT block_number, count(*) AS n FROM transactions"
     "  WHERE block_number BETWEEN $1 AND $2 GROUP BY block_number) t"
     "  ON t.block_number = b.number"
     " WHERE b.number BETWEEN $1 AND $2 AND b.transaction_count <> coalesce(t.n, 0)"},
    {"SELECT t.block_number, 'transaction ' || t.transaction_index || ': log_count is ' ||"
     " t.log_count || ' but ' || coalesce(l.n, 0) || ' logs are stored'"
     " FROM transactions t LEFT JOIN (SELECT block_number, transaction_index, count(*) AS n"
     "  FROM logs WHERE block_number BETWEEN $1 AND $2 GROUP BY 1, 2) l"
     "  USING (block_number, transaction_index)"
     " WHERE t.block_number BETWEEN $1 AND $2 AND t.log_count <> coalesce(l.n, 0)"},
    {"SELECT t.block_number, 'transaction ' || t.transaction_index ||"
     " ': block_hash is not the block''s hash'"
     " FROM transactions t JOIN blocks b ON b.number = t.block_number"
     " WHERE t.block_number BETWEEN $1 AND $2 AND t.block_hash <> b.hash"},
    {"SELECT l.block_number, 'log ' || l.log_index || ': block_hash is not the block''s hash'"
     " FROM logs l JOIN blocks b ON b.number = l.block_number"
     " WHERE l.block_number BETWEEN $1 AND $2 AND l.block_hash <> b.hash",
     true},
    {"SELECT l.block_number, 'log ' || l.log_index || CASE WHEN t.hash IS NULL"
     "  THEN ': its transaction ' || l.transaction_index || ' is not stored'"
     "  ELSE ': transaction_hash differs from transaction ' || l.transaction_index || '''s hash'"
     "  END"
     " FROM logs l LEFT JOIN transactions t USING (block_number, transaction_index)"
     " WHERE l.block_number BETWEEN $1 AND $2"
     "  AND (t.hash IS NULL OR t.hash <> l.transaction_hash)"},
    {"SELECT x.block_number, 'token transfer at log ' || x.log_index || '.' || x.batch_index ||"
     " CASE WHEN l.transaction_hash IS NULL THEN ': its log is not stored'"
     "  ELSE ': transaction_hash differs from its log''s' END"
     " FROM token_transfers x LEFT JOIN logs l USING (block_number, log_index)"
     " WHERE x.block_number BETWEEN $1 AND $2"
     "  AND (l.transaction_hash IS NULL OR l.transaction_hash <> x.transaction_hash)"},
    {"SELECT w.block_number, count(*) || ' withdrawals stored but the block is not'"
     " FROM withdrawals w WHERE w.block_number BETWEEN $1 AND $2"
     "  AND NOT EXISTS (SELECT 1 FROM blocks b WHERE b.number = w.block_number)"
     " GROUP BY w.block_number"},
    {"SELECT t.block_number, count(*) || ' transactions stored but the block is not'"
     " FROM transactions t WHERE t.block_number BETWEEN $1 AND $2"
     "  AND NOT EXISTS (SELECT 1 FROM blocks b WHERE b.number = t.block_number)"
     " GROUP BY t.block_number"},
};

}  // namespace

Result<VerifyReport> Verify(PgConn& conn, uint64_t from, uint64_t to) {
  if (from > to) {
    return FailedPrecondition("verify: from " + std::to_string(from) + " is above to " +
                              std::to_string(to));
  }
  VerifyReport report;
  report.from = from;
  report.to = to;
  // One snapshot for the whole report, so a concurrent writer cannot make it contradict itself.
  PgTransaction txn(conn);
  GAPLESS_RETURN_IF_ERROR(txn.Begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
  GAPLESS_ASSIGN_OR_RETURN(auto mode,
                           conn.Query("SELECT value FROM indexer_state WHERE key = 'data_mode'"));
  const bool sparse = mode.rows() == 1 && mode.Get(0, 0) == "events";
  if (sparse) {
    VerifyReport scan;
    GAPLESS_RETURN_IF_ERROR(CheckContinuity(conn, from, to, &scan));
    report.blocks_found = scan.blocks_found;
    report.parent_breaks = scan.parent_breaks;
    GAPLESS_RETURN_IF_ERROR(CheckCommittedCoverage(conn, from, to, &report));
  } else {
    GAPLESS_RETURN_IF_ERROR(CheckContinuity(conn, from, to, &report));
  }
  for (uint64_t lo = from;; lo += kVerifyChunk) {
    uint64_t hi = to - lo < kVerifyChunk ? to : lo + kVerifyChunk - 1;
    for (const CrossCheck& check : kCrossChecks) {
      if (sparse && !check.sparse) continue;
      std::string sql = std::string(check.sql) + " ORDER BY 1 LIMIT " +
                        std::to_string(VerifyReport::kMaxListed + 1);
      GAPLESS_ASSIGN_OR_RETURN(auto res, conn.Query(sql, {std::to_string(lo), std::to_string(hi)}));
      for (int i = 0; i < res.rows(); ++i) {
        if (report.inconsistencies.size() >= VerifyReport::kMaxListed) {
          report.truncated = true;
          break;
        }
        GAPLESS_ASSIGN_OR_RETURN(uint64_t n, ParseU64(res.Get(i, 0), "block_number"));
        report.inconsistencies.push_back({n, std::string(res.Get(i, 1))});
      }
    }
    if (hi >= to || report.truncated) break;
  }
  std::stable_sort(report.inconsistencies.begin(), report.inconsistencies.end(),
                   [](const auto& a, const auto& b) { return a.block_number < b.block_number; });
  GAPLESS_ASSIGN_OR_RETURN(report.missing_datasets, MissingRequestedDatasets(conn, from, to));
  GAPLESS_RETURN_IF_ERROR(txn.Commit());
  return report;
}

Result<std::string> TableChecksum(PgConn& conn, std::string_view table, uint64_t from, uint64_t to,
                                  uint64_t chunk_blocks) {
  // The row's data columns (the writer's COPY columns), not bookkeeping a table may carry beside
  // them (blocks.live: how the block was committed, store/outbox.h "Phase").
  std::string name, key, block_column, row = "x";
  for (DataTable t : kDataTables) {
    const DataTableInfo& info = TableInfo(t);
    if (table != info.name) continue;
    name = info.name;
    key = info.key;
    block_column = info.block_column;
    row = std::string("ROW(") + info.columns + ")";
  }
  if (table == "tokens") {  // keyed by address; its block is where the token first appeared
    name = "tokens";
    key = "address";
    block_column = "block_number";
  }
  if (name.empty()) {
    return FailedPrecondition("checksum: unknown table " + std::string(table) +
                              " (blocks, withdrawals, transactions, logs, token_transfers, traces, "
                              "contracts, tokens)");
  }
  if (chunk_blocks == 0) return FailedPrecondition("checksum: chunk of 0 blocks");
  // Per chunk of blocks, the md5 of the rows' md5s in key order: one 32-character digest per row
  // on the server, never one string of every row (PostgreSQL's 1 GB string limit: issue 19). The
  // chunks' digests, in order, are digested once more.
  const std::string sql = "SELECT md5(coalesce(string_agg(md5(" + row + "::text), '' ORDER BY " +
                          key + "), '')) FROM " + name + " x WHERE " + block_column +
                          " BETWEEN $1 AND $2";
  std::string digests;
  for (uint64_t lo = from; lo <= to;) {
    const uint64_t hi = to - lo < chunk_blocks ? to : lo + chunk_blocks - 1;
    GAPLESS_ASSIGN_OR_RETURN(auto res, conn.Query(sql, {std::to_string(lo), std::to_string(hi)}));
    digests += std::string(res.Get(0, 0));
    if (hi == to) break;
    lo = hi + 1;
  }
  GAPLESS_ASSIGN_OR_RETURN(auto all, conn.Query("SELECT md5($1::text)", {digests}));
  return std::string(all.Get(0, 0));
}

}  // namespace gapless
