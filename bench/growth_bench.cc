// growth_bench: how the write rate changes as the database grows (issue 19 item 3).
//
// Writes --steps steps of --step-txs mainnet-shaped transactions (store/testdata.h: 150 a block,
// 300 logs, ~60 token transfers) into one database, block numbers ascending as a backfill writes
// them. Each step, on --connections connections at once, each taking the next range of --range
// blocks when done with one:
//   copy    the step's first --copy-share of blocks by raw COPY (bench/raw_copy.h): what
//           PostgreSQL itself takes into tables of this size, the baseline;
//   writer  the rest by the range writer (store/writer.h WriteRange, default options).
// The step's blocks are generated before its clocks start (two threads). After each step: the
// database size. Reported per step: the transactions in the database after it, both rates and
// their ratio; at the end the last step's rates against the first's (the target: >= 80%).
//
// Secondary indexes (store/partition_indexes.h): --indexes deferred (the default, what the leader
// does far behind the head) writes every partition with its primary key alone and builds the
// secondary indexes of all partitions after the last step, timed; --indexes eager builds them on
// each partition before its first row (what `--index-near-head always` does), so every write
// maintains them. The end line sets writes plus builds against the transactions written.
//
// Usage: growth_bench [--url URL] [--steps 20] [--step-txs 1000000] [--range 50]
//                     [--connections 2] [--copy-share 0.1] [--partition-blocks N]
//                     [--indexes deferred|eager] [--keep]
// --partition-blocks: the database's partition_blocks (store/partitions.h) instead of the default.
// Without --url it uses the dev server of scripts/pg.sh. It creates (and afterwards drops, unless
// --keep) the database gapless_growth there. Disk: ~3.6 KB per transaction with its logs and
// transfers (bench/RESULTS.md), so 20 million take ~73 GB.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "raw_copy.h"
#include "store/migrate.h"
#include "store/partition_indexes.h"
#include "store/partitions.h"
#include "store/pg.h"
#include "store/testdata.h"
#include "store/writer.h"

namespace gapless {
namespace {

using bench::Check;
using bench::Clock;
using bench::Die;
using bench::Seconds;

struct Args {
  std::string url;
  int steps = 20;
  uint64_t step_txs = 1'000'000;
  uint64_t range = 50;
  int connections = 2;
  double copy_share = 0.1;
  uint64_t partition_blocks = 0;  // 0: the database's default (store/partitions.h)
  bool keep = false;
  bool eager_indexes = false;
};

Args ParseArgs(int argc, char** argv) {
  Args a;
  bench::Flags()
      .Switch("--keep", [&] { a.keep = true; })
      .Value("--indexes",
             [&](const std::string& v) {
               if (v != "deferred" && v != "eager") Die("--indexes: deferred or eager");
               a.eager_indexes = v == "eager";
             })
      .Value("--url", [&](const std::string& v) { a.url = v; })
      .Value("--steps", [&](const std::string& v) { a.steps = std::stoi(v); })
      .Value("--step-txs", [&](const std::string& v) { a.step_txs = std::stoull(v); })
      .Value("--range", [&](const std::string& v) { a.range = std::stoull(v); })
      .Value("--connections", [&](const std::string& v) { a.connections = std::stoi(v); })
      .Value("--copy-share", [&](const std::string& v) { a.copy_share = std::stod(v); })
      .Value("--partition-blocks",
             [&](const std::string& v) { a.partition_blocks = std::stoull(v); })
      .Parse(argc, argv);
  if (a.steps <= 0 || a.step_txs == 0 || a.range == 0 || a.connections <= 0 || a.copy_share <= 0 ||
      a.copy_share >= 1) {
    Die("--steps, --step-txs, --range, --connections must be > 0 and --copy-share in (0, 1)");
  }
  return a;
}

// Ranges of `range` blocks covering [from, from + blocks), generated on two threads.
std::vector<RangeWrite> Generate(uint64_t from, uint64_t blocks, uint64_t range) {
  std::vector<RangeWrite> out;
  for (uint64_t f = from; f < from + blocks; f += range) {
    RangeWrite w;
    w.from_block = f;
    w.to_block = std::min(f + range, from + blocks) - 1;
    out.push_back(std::move(w));
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < out.size(); i = next++) {
        out[i] = SyntheticRange(out[i].from_block, out[i].to_block);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

uint64_t Transactions(const std::vector<RangeWrite>& ranges) {
  uint64_t n = 0;
  for (const RangeWrite& w : ranges) {
    for (const BlockData& d : w.blocks) n += d.transactions.size();
  }
  return n;
}

int Main(int argc, char** argv) {
  bench::ProgramName() = "growth_bench";
  Args args = ParseArgs(argc, argv);
  if (args.url.empty()) args.url = bench::DevServerUrl(GAPLESS_SOURCE_DIR);

  auto admin = PgConn::Connect(args.url);
  Check(admin.status(), "connect");
  Check((*admin)->Exec("DROP DATABASE IF EXISTS gapless_growth WITH (FORCE)"), "drop database");
  Check((*admin)->Exec("CREATE DATABASE gapless_growth"), "create database");
  auto url = PgUrlWithDatabase(args.url, "gapless_growth");
  Check(url.status(), "url");
  std::vector<std::unique_ptr<PgConn>> conns = bench::Connections(*url, args.connections);
  Check(Migrate(*conns[0]), "migrate");
  if (args.partition_blocks > 0) {
    Check(SetPartitionBlocks(*conns[0], args.partition_blocks), "partition blocks");
  }
  auto layout = LoadPartitionLayout(*conns[0]);
  Check(layout.status(), "partition layout");

  const uint64_t txs_per_block = SyntheticOptions{}.transactions_per_block;
  const uint64_t step_blocks = (args.step_txs + txs_per_block - 1) / txs_per_block;
  const uint64_t copy_blocks =
      std::max<uint64_t>(args.range, static_cast<uint64_t>(args.copy_share * step_blocks));
  if (copy_blocks >= step_blocks) Die("--copy-share leaves nothing for the writer");
  std::printf(
      "growth_bench: %d steps of %llu blocks (%llu transactions: the first %llu blocks by raw "
      "COPY, the rest by the range writer), ranges of %llu, %d connections, partitions of %llu "
      "blocks\n",
      args.steps, static_cast<unsigned long long>(step_blocks),
      static_cast<unsigned long long>(step_blocks * txs_per_block),
      static_cast<unsigned long long>(copy_blocks), static_cast<unsigned long long>(args.range),
      args.connections, static_cast<unsigned long long>(layout->blocks));
  std::printf("secondary indexes: %s\n", args.eager_indexes
                                             ? "eager (on each partition before its first row)"
                                             : "deferred (built after the last step)");
  std::printf("%5s %12s %12s %12s %7s %10s\n", "step", "txs after", "copy tx/s", "writer tx/s",
              "ratio", "db GB");
  std::fflush(stdout);

  const uint64_t first_block = 1;  // block 0's parent would not chain
  double first_copy = 0, first_writer = 0, last_copy = 0, last_writer = 0;
  uint64_t total = 0;
  double write_s = 0;  // all steps, raw COPY and writer
  for (int step = 0; step < args.steps; ++step) {
    const uint64_t from = first_block + static_cast<uint64_t>(step) * step_blocks;
    if (args.eager_indexes) {
      // Untimed: the partitions are empty, so each build is instant.
      Check(EnsurePartitions(*conns[0], from, from + step_blocks - 1), "ensure partitions");
      auto missing = PartitionsMissingIndexes(*conns[0]);
      Check(missing.status(), "partitions missing indexes");
      for (const PartitionIndexState& p : *missing) {
        Check(BuildPartitionIndexes(*conns[0], p.start).status(), "build indexes");
      }
    }
    std::vector<RangeWrite> copy_ranges = Generate(from, copy_blocks, args.range);
    std::vector<RangeWrite> writer_ranges =
        Generate(from + copy_blocks, step_blocks - copy_blocks, args.range);
    const uint64_t copy_txs = Transactions(copy_ranges);
    const uint64_t writer_txs = Transactions(writer_ranges);

    double copy_s = bench::OverConnections(conns, copy_ranges,
                                           [](PgConn& c, const RangeWrite& w, std::string* buffer) {
                                             bench::RawCopyRange(c, w, buffer);
                                           });
    double writer_s = bench::OverConnections(conns, writer_ranges,
                                             [](PgConn& c, const RangeWrite& w, std::string*) {
                                               Check(WriteRange(c, w), "write range");
                                             });
    total += copy_txs + writer_txs;
    write_s += copy_s + writer_s;
    double copy_rate = static_cast<double>(copy_txs) / copy_s;
    double writer_rate = static_cast<double>(writer_txs) / writer_s;
    if (step == 0) first_copy = copy_rate, first_writer = writer_rate;
    last_copy = copy_rate;
    last_writer = writer_rate;
    auto size = conns[0]->Query("SELECT pg_database_size(current_database())");
    Check(size.status(), "database size");
    std::printf("%5d %12llu %12.0f %12.0f %6.2fx %10.2f\n", step + 1,
                static_cast<unsigned long long>(total), copy_rate, writer_rate,
                writer_rate / copy_rate, static_cast<double>(*size->GetInt64(0, 0)) / 1e9);
    std::fflush(stdout);
  }
  std::printf("\nlast step / first step: raw COPY %.2f, writer %.2f\n", last_copy / first_copy,
              last_writer / first_writer);
  // The secondary indexes the steps left unbuilt, one partition after another as the leader does.
  auto missing = PartitionsMissingIndexes(*conns[0]);
  Check(missing.status(), "partitions missing indexes");
  const auto build_start = Clock::now();
  for (const PartitionIndexState& p : *missing) {
    Check(BuildPartitionIndexes(*conns[0], p.start).status(), "build indexes");
  }
  const double build_s = Seconds(build_start, Clock::now());
  auto size = conns[0]->Query("SELECT pg_database_size(current_database())");
  Check(size.status(), "database size");
  std::printf(
      "index builds: %.1f s for %zu partitions; writes %.1f s + builds: %.0f tx/s over all %llu "
      "transactions; db %.2f GB\n",
      build_s, missing->size(), write_s, static_cast<double>(total) / (write_s + build_s),
      static_cast<unsigned long long>(total), static_cast<double>(*size->GetInt64(0, 0)) / 1e9);

  conns.clear();
  if (!args.keep) {
    Check((*admin)->Exec("DROP DATABASE IF EXISTS gapless_growth WITH (FORCE)"), "drop database");
  }
  return 0;
}

}  // namespace
}  // namespace gapless

int main(int argc, char** argv) { return gapless::Main(argc, argv); }
