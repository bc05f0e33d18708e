// An RPC pool endpoint's counts (EndpointStats, rpc/endpoint_pool.h) rendered: one line for logs
// and `gapless status` (DescribeStats), and the JSON a fleet process publishes for `gapless
// status` (StatsJson, StatsJsonFields) and its parser (ParseStatsJson). Stateless, thread-safe.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <simdjson.h>

#include "rpc/endpoint_pool.h"

namespace gapless {

std::string DescribeStats(const EndpointStats& s) {
  std::string out = fmt::format(
      "{}, {} requests, {} good, {} failures, {} rate-limited, {} distrusted, {} hedges ({} won), "
      "{} calls served, latency {:.1f} ms",
      s.in ? (s.cooling ? "cooling down" : "in") : "out", s.requests, s.good, s.failures,
      s.rate_limited, s.distrusted, s.hedges, s.hedge_wins, s.calls_served, s.latency_ewma_ms);
  if (s.batch_limit != 0) out += fmt::format(", batch limit {}", s.batch_limit);
  if (!s.missing_methods.empty()) {
    out += fmt::format(", lacks {}", fmt::join(s.missing_methods, " "));
  }
  if (!s.other_chain.empty()) out += fmt::format(", ON ANOTHER CHAIN: serves {}", s.other_chain);
  return out;
}

namespace {

void AppendQuoted(std::string& out, std::string_view s) {
  out.push_back('"');
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<int>(c));
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
}

}  // namespace

std::string StatsJsonFields(const EndpointStats& s) {
  std::string out = "{\"endpoint\":";
  AppendQuoted(out, s.endpoint);
  out += fmt::format(
      ",\"weight\":{},\"in\":{},\"cooling\":{},\"latency_ms\":{:.3f},\"batch_limit\":{},"
      "\"requests\":{},\"good\":{},\"failures\":{},\"rate_limited\":{},\"distrusted\":{},"
      "\"hedges\":{},\"hedge_wins\":{},\"calls_served\":{},\"missing\":[",
      s.weight, s.in ? "true" : "false", s.cooling ? "true" : "false", s.latency_ewma_ms,
      s.batch_limit, s.requests, s.good, s.failures, s.rate_limited, s.distrusted, s.hedges,
      s.hedge_wins, s.calls_served);
  for (size_t i = 0; i < s.missing_methods.size(); ++i) {
    if (i > 0) out.push_back(',');
    AppendQuoted(out, s.missing_methods[i]);
  }
  out += "],\"other_chain\":";
  AppendQuoted(out, s.other_chain);
  return out;
}

std::string StatsJson(const std::vector<EndpointStats>& stats) {
  std::string out = "[";
  for (const auto& s : stats) {
    if (out.size() > 1) out.push_back(',');
    out += StatsJsonFields(s) + "}";
  }
  return out + "]";
}

Result<std::vector<EndpointStats>> ParseStatsJson(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS) {
    return InvalidData("rpc pool stats: not JSON");
  }
  simdjson::dom::array arr;
  if (doc.get_array().get(arr) != simdjson::SUCCESS) {
    return InvalidData("rpc pool stats: not an array");
  }
  std::vector<EndpointStats> out;
  for (simdjson::dom::element e : arr) {
    EndpointStats s;
    std::string_view name;
    if (e["endpoint"].get_string().get(name) != simdjson::SUCCESS) {
      return InvalidData("rpc pool stats: an entry without an endpoint");
    }
    s.endpoint = std::string(name);
    auto u64 = [&](const char* key, uint64_t* v) {
      uint64_t x = 0;
      if (e[key].get_uint64().get(x) == simdjson::SUCCESS) *v = x;
    };
    double d = 0;
    if (e["weight"].get_double().get(d) == simdjson::SUCCESS) s.weight = d;
    if (e["latency_ms"].get_double().get(d) == simdjson::SUCCESS) s.latency_ewma_ms = d;
    bool b = false;
    if (e["in"].get_bool().get(b) == simdjson::SUCCESS) s.in = b;
    if (e["cooling"].get_bool().get(b) == simdjson::SUCCESS) s.cooling = b;
    uint64_t limit = 0;
    u64("batch_limit", &limit);
    s.batch_limit = static_cast<size_t>(limit);
    u64("requests", &s.requests);
    u64("good", &s.good);
    u64("failures", &s.failures);
    u64("rate_limited", &s.rate_limited);
    u64("distrusted", &s.distrusted);
    u64("hedges", &s.hedges);
    u64("hedge_wins", &s.hedge_wins);
    u64("calls_served", &s.calls_served);
    simdjson::dom::array missing;
    if (e["missing"].get_array().get(missing) == simdjson::SUCCESS) {
      for (simdjson::dom::element m : missing) {
        std::string_view method;
        if (m.get_string().get(method) == simdjson::SUCCESS) s.missing_methods.emplace_back(method);
      }
    }
    std::string_view other;
    if (e["other_chain"].get_string().get(other) == simdjson::SUCCESS) s.other_chain = other;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace gapless
