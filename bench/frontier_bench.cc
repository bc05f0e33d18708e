// frontier_bench: the cost of a frontier step as indexed_ranges grows (issue 35 item 5).
//
// A range write leaves a row in indexed_ranges per part (store/writer.h). For each size in
// --sizes (default 1,000 and 20,000) this makes a database and writes that many one-block parts
// into it, each its own fenced range write as a worker under a memory budget writes its parts,
// moving the frontier every --step-every parts as the leader does (store/state.h
// PersistFrontier, with compaction's delay --compact-after: 0 merges what the frontier passed at
// once, -1 never merges). Then --probes rounds, each visiting every database in turn (the order
// alternating, so that the load of a shared machine falls on all sizes alike): one more part,
// then one frontier step, timed, and the rows of indexed_ranges it read (pg_stat_user_tables:
// seq_tup_read + idx_tup_fetch, the backend's counts flushed by pg_stat_force_next_flush()).
// For comparison, the read a step made before issue 35, every committed range from the run's
// start (store/queries.h CommittedRanges from block 0), timed and counted the same way. Reported
// per size: the rows in the table, the step's median (and p90) ms, its median rows read, the old
// read's; the end line sets the largest size's median step against the smallest's (the target:
// within 1.5x).
//
// Usage: frontier_bench [--url URL] [--sizes 1000,20000] [--step-every 100] [--probes 100]
//                       [--compact-after 0] [--keep]
// Without --url it uses the dev server of scripts/pg.sh. It creates (and afterwards drops, unless
// --keep) the databases gapless_frontier_<size> there.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "store/migrate.h"
#include "store/pg.h"
#include "store/queries.h"
#include "store/state.h"
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
  std::vector<uint64_t> sizes = {1'000, 20'000};
  uint64_t step_every = 100;
  int probes = 100;
  int64_t compact_after = 0;
  bool keep = false;
};

Args ParseArgs(int argc, char** argv) {
  Args a;
  bench::Flags()
      .Switch("--keep", [&] { a.keep = true; })
      .Value("--url", [&](const std::string& v) { a.url = v; })
      .Value("--sizes",
             [&](const std::string& v) {
               a.sizes.clear();
               for (size_t at = 0; at <= v.size();) {
                 size_t comma = std::min(v.find(',', at), v.size());
                 a.sizes.push_back(std::stoull(v.substr(at, comma - at)));
                 at = comma + 1;
               }
             })
      .Value("--step-every", [&](const std::string& v) { a.step_every = std::stoull(v); })
      .Value("--probes", [&](const std::string& v) { a.probes = std::stoi(v); })
      .Value("--compact-after", [&](const std::string& v) { a.compact_after = std::stoll(v); })
      .Parse(argc, argv);
  if (a.sizes.empty() || a.step_every == 0 || a.probes <= 0) Die("--sizes, --step-every, --probes");
  std::sort(a.sizes.begin(), a.sizes.end());
  if (a.sizes.front() == 0) Die("--sizes: above 0");
  return a;
}

int64_t Count(PgConn& conn, const std::string& sql) {
  auto res = conn.Query(sql);
  Check(res.status(), sql.c_str());
  auto v = res->GetInt64(0, 0);
  Check(v.status(), sql.c_str());
  return *v;
}

// The rows of indexed_ranges this backend has read so far, its pending counts flushed first (the
// flush happens as the statement that asks for it ends, before its answer).
int64_t RowsRead(PgConn& conn) {
  Check(conn.Exec("SELECT pg_stat_force_next_flush()"), "flush statistics");
  return Count(conn,
               "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)"
               " FROM pg_stat_user_tables WHERE relname = 'indexed_ranges'");
}

struct Probe {
  double step_ms = 0;
  double old_ms = 0;
  double step_rows = 0;
  double old_rows = 0;
};

// One database of `parts` one-block parts and its frontier.
class History {
 public:
  History(const Args& args, PgConn& admin, uint64_t parts)
      : args_(args), name_("gapless_frontier_" + std::to_string(parts)) {
    Check(admin.Exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)"), "drop database");
    Check(admin.Exec("CREATE DATABASE " + name_), "create database");
    auto url = PgUrlWithDatabase(args.url, name_);
    Check(url.status(), "url");
    auto conn = PgConn::Connect(*url);
    Check(conn.status(), "connect");
    conn_ = std::move(*conn);
    Check(Migrate(*conn_), "migrate");
    for (uint64_t since = 0; written_ < parts;) {
      WritePart();
      if (++since == args.step_every || written_ == parts) {
        Step();
        since = 0;
      }
    }
  }
  ~History() { conn_.reset(); }

  const std::string& name() const { return name_; }
  PgConn& conn() { return *conn_; }

  // One more part, then a frontier step measured, then the old read.
  Probe Measure() {
    WritePart();
    Probe p;
    int64_t before = RowsRead(*conn_);
    auto t0 = Clock::now();
    Step();
    p.step_ms = Seconds(t0, Clock::now()) * 1e3;
    int64_t after = RowsRead(*conn_);
    p.step_rows = static_cast<double>(after - before);
    t0 = Clock::now();
    auto old = CommittedRanges(*conn_, 0, written_ - 1);
    p.old_ms = Seconds(t0, Clock::now()) * 1e3;
    Check(old.status(), "committed ranges");
    p.old_rows = static_cast<double>(RowsRead(*conn_) - after);
    return p;
  }

 private:
  void WritePart() {
    static const SyntheticOptions kEmpty = {.transactions_per_block = 0,
                                            .logs_per_block = 0,
                                            .token_transfers_per_block = 0,
                                            .withdrawals_per_block = 0};
    RangeWrite w = SyntheticRange(written_, written_, kEmpty, static_cast<int64_t>(written_) + 1);
    w.fence_owner = "bench";
    Check(WriteRange(*conn_, w), "write");
    ++written_;
  }
  void Step() {
    auto moved = PersistFrontier(*conn_, 0, written_, args_.compact_after);
    Check(moved.status(), "frontier step");
    if (*moved != written_) Die("the frontier did not reach " + std::to_string(written_));
  }

  const Args& args_;
  std::string name_;
  std::unique_ptr<PgConn> conn_;
  uint64_t written_ = 0;  // blocks 0..written_-1, one part each
};

int Main(int argc, char** argv) {
  bench::ProgramName() = "frontier_bench";
  Args args = ParseArgs(argc, argv);
  if (args.url.empty()) args.url = bench::DevServerUrl(GAPLESS_SOURCE_DIR);
  auto admin = PgConn::Connect(args.url);
  Check(admin.status(), "connect");
  std::printf(
      "frontier_bench: histories of %zu sizes of one-block parts, a frontier step every %llu, "
      "compaction after %lld s; %d probes each, interleaved\n",
      args.sizes.size(), static_cast<unsigned long long>(args.step_every),
      static_cast<long long>(args.compact_after), args.probes);
  std::vector<std::unique_ptr<History>> histories;
  for (uint64_t size : args.sizes) {
    auto t0 = Clock::now();
    histories.push_back(std::make_unique<History>(args, **admin, size));
    std::printf("  %llu parts written in %.1f s\n", static_cast<unsigned long long>(size),
                Seconds(t0, Clock::now()));
    std::fflush(stdout);
  }
  std::vector<std::vector<Probe>> probes(histories.size());
  for (int round = 0; round < args.probes; ++round) {
    for (size_t k = 0; k < histories.size(); ++k) {
      size_t i = round % 2 == 0 ? k : histories.size() - 1 - k;
      probes[i].push_back(histories[i]->Measure());
    }
  }
  std::printf("%8s %8s %10s %10s %10s %12s %12s\n", "parts", "rows", "step ms", "p90 ms",
              "step rows", "old read ms", "old rows");
  std::vector<double> medians;
  for (size_t i = 0; i < histories.size(); ++i) {
    auto pct = [&](double Probe::*field, double p) {
      std::vector<double> v;
      for (const Probe& probe : probes[i]) v.push_back(probe.*field);
      return bench::Percentile(v, p);
    };
    medians.push_back(pct(&Probe::step_ms, 50));
    std::printf(
        "%8llu %8lld %10.3f %10.3f %10.0f %12.3f %12.0f\n",
        static_cast<unsigned long long>(args.sizes[i]),
        static_cast<long long>(Count(histories[i]->conn(), "SELECT count(*) FROM indexed_ranges")),
        medians.back(), pct(&Probe::step_ms, 90), pct(&Probe::step_rows, 50),
        pct(&Probe::old_ms, 50), pct(&Probe::old_rows, 50));
  }
  std::printf("step at %llu parts / at %llu parts: %.2fx (target: within 1.5x)\n",
              static_cast<unsigned long long>(args.sizes.back()),
              static_cast<unsigned long long>(args.sizes.front()),
              medians.back() / medians.front());
  std::vector<std::string> names;
  for (const auto& h : histories) names.push_back(h->name());
  histories.clear();
  if (!args.keep) {
    for (const std::string& name : names) {
      Check((*admin)->Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"), "drop database");
    }
  }
  return 0;
}

}  // namespace
}  // namespace gapless

int main(int argc, char** argv) { return gapless::Main(argc, argv); }
