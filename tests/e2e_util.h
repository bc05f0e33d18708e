// Helpers shared by the end-to-end tests: run the indexer in-process over any transport, export
// a table, compare CSV text the way ethereum-etl's tests do (line count equal, lines equal after
// sorting: row order does not matter, column order does).
#pragma once

#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "node/indexer.h"
#include "rpc/json_rpc.h"
#include "store/export.h"
#include "store/migrate.h"
#include "store/pg.h"
#include "store/writer.h"

namespace gapless::e2e {

// A JSON string, number or null (as "") as text.
inline std::string Str(simdjson::dom::element e) {
  if (e.is_null()) return "";
  if (e.is_string()) return std::string(std::string_view(e));
  if (e.is_uint64()) return std::to_string(uint64_t(e));
  return std::to_string(int64_t(e));
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline std::vector<std::string> SortedLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

// Opens a pool on url, applies migrations.
inline std::unique_ptr<PgPool> OpenPool(const std::string& url, size_t size = 2) {
  auto pool = PgPool::Open(url, size);
  EXPECT_TRUE(pool.ok()) << pool.status().ToString();
  if (!pool.ok()) return nullptr;
  auto conn = (*pool)->Acquire();
  Status st = Migrate(*conn);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return std::move(pool).value();
}

inline Status IndexWith(HttpTransport* transport, PgPool* pool, uint64_t from, uint64_t to,
                        uint64_t chain_id, uint64_t range_size = 50, uint32_t workers = 2) {
  {
    auto conn = pool->Acquire();
    GAPLESS_RETURN_IF_ERROR(EnsureChainId(*conn, chain_id));
  }
  IndexerOptions options;
  options.from = from;
  options.to = to;
  options.range_size = range_size;
  options.fetch_workers = workers;
  options.chain_id = chain_id;
  options.max_attempts = 2;
  options.retry_base_micros = 1000;
  // The recorded mainnet answers hold no eth_call of the tokens' methods.
  options.token_metadata = false;
  Indexer indexer(
      options, [transport] { return std::make_unique<JsonRpcClient>(transport); }, pool);
  GAPLESS_ASSIGN_OR_RETURN(uint64_t planned, indexer.Plan());
  (void)planned;
  return indexer.Run();
}

inline std::string Export(PgPool* pool, std::string_view table, uint64_t from, uint64_t to,
                          const std::string& standards = "erc20,erc721") {
  auto conn = pool->Acquire();
  auto parsed = ParseExportTable(table);
  EXPECT_TRUE(parsed.ok());
  ExportOptions options;
  auto st = ParseTokenStandards(standards);
  EXPECT_TRUE(st.ok());
  options.token_standards = *st;
  std::ostringstream out;
  Status s = ExportCsv(*conn, *parsed, from, to, out, options);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out.str();
}

}  // namespace gapless::e2e
