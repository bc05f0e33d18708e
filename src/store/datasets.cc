#include "store/datasets.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <utility>

namespace gapless {
namespace {

constexpr uint64_t kMaxBigint = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

using Intervals = std::vector<std::pair<uint64_t, uint64_t>>;

Result<uint64_t> ParseBlock(std::string_view text, std::string_view what) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return InvalidData(std::string(what) + " is not a number: " + std::string(text));
  }
  return v;
}

// Sorts and merges touching or overlapping inclusive intervals.
Intervals Merge(Intervals in) {
  std::sort(in.begin(), in.end());
  Intervals out;
  for (const auto& [a, b] : in) {
    if (!out.empty() && (a <= out.back().second || a - 1 <= out.back().second)) {
      out.back().second = std::max(out.back().second, b);
    } else {
      out.emplace_back(a, b);
    }
  }
  return out;
}

// The blocks of `all` that `held` does not cover; both merged.
Intervals Subtract(const Intervals& all, const Intervals& held) {
  Intervals out;
  size_t j = 0;
  for (auto [a, b] : all) {
    uint64_t cursor = a;
    bool done = false;
    while (j < held.size() && held[j].second < cursor) ++j;
    for (size_t k = j; k < held.size() && held[k].first <= b && !done; ++k) {
      if (held[k].first > cursor) out.emplace_back(cursor, held[k].first - 1);
      if (held[k].second >= b) {
        done = true;
      } else {
        cursor = std::max(cursor, held[k].second + 1);
      }
    }
    if (!done) out.emplace_back(cursor, b);
  }
  return out;
}

}  // namespace

std::string DecodedDataset(std::string_view config_id) {
  return "decoded:" + std::string(config_id);
}

Datasets Datasets::Blocks() {
  Datasets d;
  d.Add(kBlocksDataset);
  return d;
}

Datasets& Datasets::Add(std::string_view name) {
  auto it = std::lower_bound(names_.begin(), names_.end(), name);
  if (it == names_.end() || *it != name) names_.insert(it, std::string(name));
  return *this;
}

bool Datasets::Has(std::string_view name) const {
  return std::binary_search(names_.begin(), names_.end(), name);
}

bool Datasets::Contains(const Datasets& other) const {
  return std::includes(names_.begin(), names_.end(), other.names_.begin(), other.names_.end());
}

Datasets Datasets::Minus(const Datasets& other) const {
  Datasets out;
  std::set_difference(names_.begin(), names_.end(), other.names_.begin(), other.names_.end(),
                      std::back_inserter(out.names_));
  return out;
}

std::string Datasets::ToString() const {
  if (names_.empty()) return "none";
  std::string out;
  for (const std::string& n : names_) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string Datasets::SqlArray() const {
  std::string out = "{";
  for (const std::string& n : names_) {
    if (out.size() > 1) out += ',';
    out += '"';
    for (char c : n) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

Result<Datasets> Datasets::ParseSqlArray(std::string_view text) {
  if (text.size() < 2 || text.front() != '{' || text.back() != '}') {
    return InvalidData("not a text[]: " + std::string(text));
  }
  Datasets out;
  std::string_view body = text.substr(1, text.size() - 2);
  size_t i = 0;
  while (i < body.size()) {
    std::string name;
    if (body[i] == '"') {
      for (++i; i < body.size() && body[i] != '"'; ++i) {
        if (body[i] == '\\' && i + 1 < body.size()) ++i;
        name += body[i];
      }
      if (i >= body.size()) return InvalidData("unterminated quote in " + std::string(text));
      ++i;
    } else {
      size_t end = body.find(',', i);
      if (end == std::string_view::npos) end = body.size();
      name = std::string(body.substr(i, end - i));
      i = end;
    }
    out.Add(name);
    if (i < body.size()) {
      if (body[i] != ',') return InvalidData("malformed text[]: " + std::string(text));
      ++i;
    }
  }
  return out;
}

Result<std::vector<DatasetGap>> RangesLacking(PgConn& conn, const Datasets& asked, uint64_t from,
                                              uint64_t to) {
  std::vector<DatasetGap> out;
  if (from > to || asked.empty()) return out;
  to = std::min(to, kMaxBigint - 1);
  // Rows whose write has not committed are invisible here; a row's '{}' (a write in flight,
  // store/writer.cc) is never committed.
  GAPLESS_ASSIGN_OR_RETURN(auto res,
                           conn.Query("SELECT from_block, to_block, datasets FROM indexed_ranges"
                                      " WHERE blocks && int8range($1, $2, '[]')",
                                      {std::to_string(from), std::to_string(to)}));
  Intervals committed;
  std::map<std::string, Intervals> holding;
  for (int i = 0; i < res.rows(); ++i) {
    GAPLESS_ASSIGN_OR_RETURN(uint64_t a, ParseBlock(res.Get(i, 0), "indexed_ranges.from_block"));
    GAPLESS_ASSIGN_OR_RETURN(uint64_t b, ParseBlock(res.Get(i, 1), "indexed_ranges.to_block"));
    GAPLESS_ASSIGN_OR_RETURN(Datasets held, Datasets::ParseSqlArray(res.Get(i, 2)));
    a = std::max(a, from);
    b = std::min(b, to);
    committed.emplace_back(a, b);
    for (const std::string& name : held.names()) holding[name].emplace_back(a, b);
  }
  committed = Merge(std::move(committed));
  for (const std::string& name : asked.names()) {
    for (const auto& [a, b] : Subtract(committed, Merge(holding[name]))) {
      out.push_back(DatasetGap{name, a, b});
    }
  }
  return out;
}

Status RecordDatasetRequest(PgConn& conn, const Datasets& asked, uint64_t from, uint64_t to) {
  to = std::min(to, kMaxBigint);
  if (from > to) return Status::Ok();
  for (const std::string& name : asked.names()) {
    if (name == kBlocksDataset) continue;
    GAPLESS_RETURN_IF_ERROR(
        conn.Query("INSERT INTO dataset_requests AS q (dataset, from_block, to_block)"
                   " VALUES ($1, $2, $3) ON CONFLICT (dataset, from_block) DO UPDATE"
                   " SET to_block = GREATEST(q.to_block, EXCLUDED.to_block), asked_at = now()",
                   {name, std::to_string(from), std::to_string(to)})
            .status()
            .WithContext("record the request for " + name));
  }
  return Status::Ok();
}

Result<std::vector<DatasetGap>> MissingRequestedDatasets(PgConn& conn, uint64_t from, uint64_t to) {
  std::vector<DatasetGap> out;
  if (from > to) return out;
  to = std::min(to, kMaxBigint - 1);
  // A database from before migrations/014 (read by a command that does not migrate): nothing
  // was asked for.
  GAPLESS_ASSIGN_OR_RETURN(auto table,
                           conn.Query("SELECT to_regclass('dataset_requests') IS NOT NULL"));
  if (table.Get(0, 0) != "t") return out;
  GAPLESS_ASSIGN_OR_RETURN(
      auto res, conn.Query("SELECT dataset, greatest(from_block, $1), least(to_block, $2)"
                           " FROM dataset_requests WHERE from_block <= $2 AND to_block >= $1"
                           " ORDER BY dataset, from_block",
                           {std::to_string(from), std::to_string(to)}));
  std::map<std::string, Intervals> asked;
  for (int i = 0; i < res.rows(); ++i) {
    GAPLESS_ASSIGN_OR_RETURN(uint64_t a, ParseBlock(res.Get(i, 1), "dataset_requests.from_block"));
    GAPLESS_ASSIGN_OR_RETURN(uint64_t b, ParseBlock(res.Get(i, 2), "dataset_requests.to_block"));
    asked[std::string(res.Get(i, 0))].emplace_back(a, b);
  }
  for (auto& [name, intervals] : asked) {
    Datasets one;
    one.Add(name);
    for (const auto& [a, b] : Merge(std::move(intervals))) {
      GAPLESS_ASSIGN_OR_RETURN(auto gaps, RangesLacking(conn, one, a, b));
      out.insert(out.end(), gaps.begin(), gaps.end());
    }
  }
  return out;
}

Result<Datasets> HeldBeyond(PgConn& conn, uint64_t from, uint64_t to, const Datasets& asked) {
  Datasets beyond;
  if (from > to) return beyond;
  to = std::min(to, kMaxBigint - 1);
  Datasets with_blocks = asked;
  with_blocks.Add(kBlocksDataset);
  GAPLESS_ASSIGN_OR_RETURN(
      auto res, conn.Query("SELECT DISTINCT d FROM indexed_ranges, unnest(datasets) d"
                           " WHERE blocks && int8range($1, $2, '[]') AND NOT d = ANY($3::text[])"
                           // A replacing write deletes only the decoded tables it writes.
                           " AND d NOT LIKE 'decoded:%'",
                           {std::to_string(from), std::to_string(to), with_blocks.SqlArray()}));
  for (int i = 0; i < res.rows(); ++i) beyond.Add(res.Get(i, 0));
  return beyond;
}

Status BackfillWouldDrop(uint64_t from, uint64_t to, const Datasets& beyond) {
  std::string names, how;
  for (const std::string& d : beyond.names()) {
    names += (names.empty() ? "" : ", ") + d;
    how += (how.empty() ? "" : " ") + HowToAskFor(d);
  }
  return FailedPrecondition(fmt::format(
      "blocks {}-{} hold {}, which this run does not ask for: writing them again for a dataset "
      "they lack replaces their rows and would delete it; ask for it too ({})",
      from, to, names, how));
}

std::string HowToAskFor(std::string_view dataset) {
  if (dataset == kTracesDataset) return "--traces";
  if (dataset == kTokenMetadataDataset) return "--token-metadata on";
  if (dataset.starts_with("decoded:")) return "its contracts config";
  return std::string(dataset);
}

std::string DescribeGaps(const std::vector<DatasetGap>& gaps, size_t max_listed) {
  std::string out;
  size_t listed = 0;
  for (const DatasetGap& g : gaps) {
    if (listed == max_listed) {
      out += "; and " + std::to_string(gaps.size() - listed) + " more";
      break;
    }
    out +=
        (out.empty() ? "" : "; ") +
        (g.to != g.from ? "blocks " + std::to_string(g.from) + "-" + std::to_string(g.to) + " lack "
                        : "block " + std::to_string(g.from) + " lacks ") +
        g.dataset;
    ++listed;
  }
  return out;
}

}  // namespace gapless
