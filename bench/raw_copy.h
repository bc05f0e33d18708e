// raw_copy.h: the raw write path, the baseline the write benchmarks compare against. Per range:
// BEGIN; COPY each data table straight into the real tables; COMMIT (the range's partitions
// ensured before, as the writer does). No fence, no staging, no
// conflict handling, no indexed_ranges row: the same rows through the same serialiser and 1 MB
// chunks as the range writer (store/writer.h), as fast as one connection takes them. Header-only,
// shared by write_bench and scale_bench so that both measure the same baseline.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "store/copy_rows.h"
#include "store/partitions.h"
#include "store/pg.h"
#include "store/writer.h"

namespace gapless::bench {

// Writes `ranges` into empty tables of `conn`, one transaction per range; returns the seconds it
// took. Dies on any failure (a baseline that half-ran means nothing).
// One range: BEGIN; COPY each table; COMMIT.
inline void RawCopyRange(PgConn& conn, const RangeWrite& w, std::string* buffer,
                         CopyFormat format = CopyFormat::kBinary) {
  Check(EnsurePartitions(conn, w.from_block, w.to_block), "partitions");
  PgTransaction txn(conn);
  Check(txn.Begin(), "begin");
  for (DataTable t : kDataTables) {
    Check(CopyBlocks(conn, t, TableInfo(t).name, w.blocks, format, 1 << 20, buffer), "copy");
  }
  Check(txn.Commit(), "commit");
}

inline double RawCopy(PgConn& conn, const std::vector<RangeWrite>& ranges,
                      CopyFormat format = CopyFormat::kBinary) {
  std::string buffer;
  auto start = Clock::now();
  for (const RangeWrite& w : ranges) RawCopyRange(conn, w, &buffer, format);
  return Seconds(start, Clock::now());
}

// `n` connections to `db_url`; dies when one cannot be made.
inline std::vector<std::unique_ptr<PgConn>> Connections(const std::string& db_url, int n) {
  std::vector<std::unique_ptr<PgConn>> conns;
  for (int i = 0; i < n; ++i) {
    auto conn = PgConn::Connect(db_url);
    Check(conn.status(), "connect");
    conns.push_back(std::move(conn).value());
  }
  return conns;
}

// `write(conn, range, buffer)` for every range over `conns` at once, each connection (a thread of
// its own, with a buffer of its own) taking the next range when it is done with one. Returns the
// seconds it took.
template <typename Write>
double OverConnections(const std::vector<std::unique_ptr<PgConn>>& conns,
                       const std::vector<RangeWrite>& ranges, Write write) {
  std::atomic<size_t> next{0};
  auto start = Clock::now();
  std::vector<std::thread> threads;
  for (const auto& conn : conns) {
    threads.emplace_back([&, c = conn.get()] {
      std::string buffer;
      for (size_t i = next++; i < ranges.size(); i = next++) write(*c, ranges[i], &buffer);
    });
  }
  for (std::thread& t : threads) t.join();
  return Seconds(start, Clock::now());
}

// Raw COPY over `connections` connections to `db_url` at once (PostgreSQL's own parallel limit:
// issue 19's baseline for N workers); connecting is before the clock. Returns the seconds it took.
inline double RawCopyParallel(const std::string& db_url, const std::vector<RangeWrite>& ranges,
                              int connections, CopyFormat format = CopyFormat::kBinary) {
  return OverConnections(Connections(db_url, connections), ranges,
                         [format](PgConn& c, const RangeWrite& w, std::string* buffer) {
                           RawCopyRange(c, w, buffer, format);
                         });
}

}  // namespace gapless::bench
