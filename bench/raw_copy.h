// raw_copy.h: the raw write path, the baseline the write benchmarks compare against. Per range:
// BEGIN; COPY each data table straight into the real tables; COMMIT. No fence, no staging, no
// conflict handling, no indexed_ranges row: the same rows through the same serialiser and 1 MB
// chunks as the range writer (store/writer.h), as fast as one connection takes them. Header-only,
// shared by write_bench and scale_bench so that both measure the same baseline.
#pragma once

#include <string>
#include <vector>

#include "bench_util.h"
#include "store/copy_rows.h"
#include "store/pg.h"
#include "store/writer.h"

namespace gapless::bench {

// Writes `ranges` into empty tables of `conn`, one transaction per range; returns the seconds it
// took. Dies on any failure (a baseline that half-ran means nothing).
inline double RawCopy(PgConn& conn, const std::vector<RangeWrite>& ranges) {
  std::string buffer;
  auto start = Clock::now();
  for (const RangeWrite& w : ranges) {
    PgTransaction txn(conn);
    Check(txn.Begin(), "begin");
    for (DataTable t : kDataTables) {
      CopyWriter copy(conn, &buffer);
      Check(copy.Begin(std::string("COPY ") + TableInfo(t).name + " (" + TableInfo(t).columns +
                       ") FROM STDIN"),
            "copy");
      for (const BlockData& d : w.blocks) {
        Check(AppendCopyRows(t, d, copy.buffer()), "serialise");
        Check(copy.MaybeFlush(), "copy data");
      }
      Check(copy.Finish(), "copy end");
    }
    Check(txn.Commit(), "commit");
  }
  return Seconds(start, Clock::now());
}

}  // namespace gapless::bench
