// write_bench: how fast the range writer commits mainnet-shaped blocks, against raw COPY.
//
// In one run, on one server, with the same generated rows, it measures:
//   copy      the baseline: per range, BEGIN; COPY every table straight into the (truncated)
//             tables; COMMIT. No fence, no staging, no conflict handling.
//   staging   WriteRange(kStagingUpsert) per range into the truncated tables (default options:
//             a range without rows yet is COPied straight into the tables).
//   staging-forced  the same through the temporary staging tables and INSERT ... ON CONFLICT DO
//             NOTHING (direct_copy_when_empty = false): the path a range with rows takes.
//   replace   WriteRange(kReplaceRange) per range into the truncated tables.
//   staging-rewrite / replace-rewrite: the same writes again over the rows already stored (what a
//             retried or re-run range costs).
//   copy-text, staging-text: copy and staging in COPY's text format (the others are binary, the
//             writer's default): the binary/text ratio of issue 19.
//   copy xN, staging xN (N of --connections above 1): the ranges over N connections at once,
//             each taking the next range when done (PostgreSQL's own parallel limit, and the
//             writer against it); the ratio is to copy xN.
// Each mode runs --repeat times in rotation (copy, staging-forced, staging, ...) after a TRUNCATE
// and a CHECKPOINT, and the median is reported as rows/s, transactions/s and the ratio to raw COPY.
//
// Usage: write_bench [--url URL] [--blocks 300] [--range 50] [--repeat 3] [--connections 1,2]
//                    [--txs 150] [--logs 300] [--transfers 60] [--keep]
// Without --url it starts (or reuses) the dev server with scripts/pg.sh on its default port and
// uses `scripts/pg.sh url`. It creates (and afterwards drops, unless --keep) the database
// gapless_bench there.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "raw_copy.h"
#include "store/copy_rows.h"
#include "store/migrate.h"
#include "store/pg.h"
#include "store/testdata.h"
#include "store/writer.h"

namespace gapless {
namespace {

using bench::Check;
using bench::Die;
using bench::RawCopy;

struct Args {
  std::string url;
  uint64_t blocks = 300;
  uint64_t range = 50;
  int repeat = 3;
  std::vector<int> connections = {1};
  bool keep = false;  // keep the gapless_bench database (with the last run's rows) afterwards
  SyntheticOptions data;
};

Args ParseArgs(int argc, char** argv) {
  Args a;
  bench::Flags()
      .Switch("--keep", [&] { a.keep = true; })
      .Value("--url", [&](const std::string& v) { a.url = v; })
      .Value("--blocks", [&](const std::string& v) { a.blocks = std::stoull(v); })
      .Value("--range", [&](const std::string& v) { a.range = std::stoull(v); })
      .Value("--repeat", [&](const std::string& v) { a.repeat = std::stoi(v); })
      .Value("--connections",
             [&](const std::string& v) {
               a.connections.clear();
               for (size_t pos = 0; pos <= v.size();) {
                 size_t comma = std::min(v.find(',', pos), v.size());
                 a.connections.push_back(std::stoi(v.substr(pos, comma - pos)));
                 pos = comma + 1;
               }
             })
      .Value("--txs",
             [&](const std::string& v) {
               a.data.transactions_per_block = static_cast<uint32_t>(std::stoul(v));
             })
      .Value("--logs",
             [&](const std::string& v) {
               a.data.logs_per_block = static_cast<uint32_t>(std::stoul(v));
             })
      .Value("--transfers",
             [&](const std::string& v) {
               a.data.token_transfers_per_block = static_cast<uint32_t>(std::stoul(v));
             })
      .Parse(argc, argv);
  if (a.blocks == 0 || a.range == 0 || a.repeat <= 0)
    bench::Die("--blocks, --range, --repeat must be > 0");
  for (int n : a.connections) {
    if (n <= 0) bench::Die("--connections must list counts > 0");
  }
  return a;
}

using bench::Clock;
using bench::Seconds;

void Truncate(PgConn& conn) {
  Check(conn.Exec("TRUNCATE blocks, withdrawals, transactions, logs, token_transfers, traces,"
                  " contracts, tokens, indexed_ranges"),
        "truncate");
  Check(conn.Exec("CHECKPOINT"), "checkpoint");
}

double Write(PgConn& conn, const std::vector<RangeWrite>& ranges, WriteMode mode,
             bool direct_copy_when_empty = true, CopyFormat format = CopyFormat::kBinary) {
  WriteOptions options;
  options.mode = mode;
  options.direct_copy_when_empty = direct_copy_when_empty;
  options.copy_format = format;
  auto start = Clock::now();
  for (const RangeWrite& w : ranges) Check(WriteRange(conn, w, options), "write range");
  return Seconds(start, Clock::now());
}

// WriteRange (default options) over `connections` connections at once, as RawCopyParallel does;
// connecting is before the clock.
double WriteParallel(const std::string& url, const std::vector<RangeWrite>& ranges,
                     int connections) {
  return bench::OverConnections(
      bench::Connections(url, connections), ranges,
      [](PgConn& c, const RangeWrite& w, std::string*) { Check(WriteRange(c, w), "write range"); });
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int Main(int argc, char** argv) {
  bench::ProgramName() = "write_bench";
  Args args = ParseArgs(argc, argv);
  if (args.url.empty()) args.url = bench::DevServerUrl(GAPLESS_SOURCE_DIR);

  auto admin = PgConn::Connect(args.url);
  Check(admin.status(), "connect");
  Check((*admin)->Exec("DROP DATABASE IF EXISTS gapless_bench WITH (FORCE)"), "drop database");
  Check((*admin)->Exec("CREATE DATABASE gapless_bench"), "create database");
  auto url = PgUrlWithDatabase(args.url, "gapless_bench");
  Check(url.status(), "url");
  auto conn_or = PgConn::Connect(*url);
  Check(conn_or.status(), "connect bench database");
  PgConn& conn = **conn_or;
  Check(Migrate(conn), "migrate");

  // Data, generated before any timing.
  std::vector<RangeWrite> ranges;
  const uint64_t first = 17'000'000;
  uint64_t rows = 0, txs = 0, bytes = 0;
  for (uint64_t from = first; from < first + args.blocks; from += args.range) {
    RangeWrite w =
        SyntheticRange(from, std::min(from + args.range, first + args.blocks) - 1, args.data);
    for (const BlockData& d : w.blocks) {
      for (DataTable t : kDataTables) rows += RowCount(t, d);
      txs += d.transactions.size();
    }
    ranges.push_back(std::move(w));
  }
  // Client-side serialisation alone (what the server does not pay for), in each format.
  auto serialise = [&](CopyFormat format, uint64_t* out_bytes) {
    std::string scratch;
    auto start = Clock::now();
    for (const RangeWrite& w : ranges) {
      for (DataTable t : kDataTables) {
        for (const BlockData& d : w.blocks) {
          Check(AppendCopyRows(t, d, format, &scratch), "serialise");
          if (scratch.size() > (1 << 20)) {
            *out_bytes += scratch.size();
            scratch.clear();
          }
        }
      }
    }
    *out_bytes += scratch.size();
    return Seconds(start, Clock::now());
  };
  uint64_t text_bytes = 0;
  double text_seconds = serialise(CopyFormat::kText, &text_bytes);
  double binary_seconds = serialise(CopyFormat::kBinary, &bytes);

  std::printf(
      "write_bench: %llu blocks in %zu ranges of %llu; %llu rows (%llu transactions), "
      "%.1f MB of COPY binary (%.1f MB as text); %d repetitions\n",
      static_cast<unsigned long long>(args.blocks), ranges.size(),
      static_cast<unsigned long long>(args.range), static_cast<unsigned long long>(rows),
      static_cast<unsigned long long>(txs), static_cast<double>(bytes) / 1e6,
      static_cast<double>(text_bytes) / 1e6, args.repeat);
  std::printf(
      "client-side serialisation alone: binary %.3f s (%.0f rows/s), text %.3f s (%.0f rows/s)\n",
      binary_seconds, static_cast<double>(rows) / binary_seconds, text_seconds,
      static_cast<double>(rows) / text_seconds);

  std::vector<std::string> modes = {
      "copy",           "staging", "copy-text",       "staging-text",
      "staging-forced", "replace", "staging-rewrite", "replace-rewrite"};
  for (int n : args.connections) {
    if (n == 1) continue;
    modes.push_back("copy x" + std::to_string(n));
    modes.push_back("staging x" + std::to_string(n));
  }
  std::map<std::string, std::vector<double>> times;
  for (int rep = 0; rep < args.repeat; ++rep) {
    Truncate(conn);
    times["copy"].push_back(RawCopy(conn, ranges));
    Truncate(conn);
    times["copy-text"].push_back(RawCopy(conn, ranges, CopyFormat::kText));
    Truncate(conn);
    times["staging-text"].push_back(
        Write(conn, ranges, WriteMode::kStagingUpsert, true, CopyFormat::kText));
    for (int n : args.connections) {
      if (n == 1) continue;
      Truncate(conn);
      times["copy x" + std::to_string(n)].push_back(bench::RawCopyParallel(*url, ranges, n));
      Truncate(conn);
      times["staging x" + std::to_string(n)].push_back(WriteParallel(*url, ranges, n));
    }
    Truncate(conn);
    times["staging-forced"].push_back(Write(conn, ranges, WriteMode::kStagingUpsert, false));
    Truncate(conn);
    times["staging"].push_back(Write(conn, ranges, WriteMode::kStagingUpsert));
    Check(conn.Exec("CHECKPOINT"), "checkpoint");
    times["staging-rewrite"].push_back(Write(conn, ranges, WriteMode::kStagingUpsert));
    Truncate(conn);
    times["replace"].push_back(Write(conn, ranges, WriteMode::kReplaceRange));
    Check(conn.Exec("CHECKPOINT"), "checkpoint");
    times["replace-rewrite"].push_back(Write(conn, ranges, WriteMode::kReplaceRange));
    std::fprintf(stderr, "repetition %d/%d done\n", rep + 1, args.repeat);
  }

  // Each mode's baseline: raw COPY in the same format over as many connections.
  auto baseline = [](const std::string& mode) -> std::string {
    if (mode.ends_with("-text")) return "copy-text";
    size_t x = mode.rfind(" x");
    return x == std::string::npos ? "copy" : "copy" + mode.substr(x);
  };
  std::printf("\n%-16s %10s %12s %10s %9s   %s\n", "mode", "median s", "rows/s", "tx/s", "vs COPY",
              "all runs (s)");
  for (const std::string& m : modes) {
    double s = Median(times[m]);
    double rate = static_cast<double>(rows) / s;
    double base = static_cast<double>(rows) / Median(times[baseline(m)]);
    std::string all;
    for (double t : times[m]) all += (all.empty() ? "" : " ") + std::to_string(t).substr(0, 5);
    std::printf("%-16s %10.3f %12.0f %10.0f %8.0f%%   %s\n", m.c_str(), s, rate,
                static_cast<double>(txs) / s, 100.0 * rate / base, all.c_str());
  }
  std::printf("\nbinary / text: raw COPY %.2fx, staging (direct) %.2fx\n",
              Median(times["copy-text"]) / Median(times["copy"]),
              Median(times["staging-text"]) / Median(times["staging"]));

  conn_or = Result<std::unique_ptr<PgConn>>(Internal("closed"));
  if (args.keep) return 0;
  Check((*admin)->Exec("DROP DATABASE IF EXISTS gapless_bench WITH (FORCE)"), "drop database");
  return 0;
}

}  // namespace
}  // namespace gapless

int main(int argc, char** argv) { return gapless::Main(argc, argv); }
