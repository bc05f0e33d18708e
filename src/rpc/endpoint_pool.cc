#include "rpc/endpoint_pool.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <map>
#include <set>
#include <thread>

#include "core/metrics.h"
#include "core/redact.h"
#include "rpc/json_rpc.h"

namespace gapless {

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::optional<double> PositiveNumber(std::string_view text, bool zero_ok) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  if (v < 0 || (!zero_ok && v == 0) || v != v) return std::nullopt;
  return v;
}

bool ContainsNoCase(std::string_view text, std::string_view word) {
  auto it = std::search(text.begin(), text.end(), word.begin(), word.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) ==
           std::tolower(static_cast<unsigned char>(b));
  });
  return it != text.end();
}

struct PoolMetrics {
  Family<Counter>& requests;
  Family<Counter>& failures;
  Family<Counter>& hedges;
  Family<Counter>& hedge_wins;
  Family<Counter>& calls;
  Family<Gauge>& up;
  Family<Gauge>& latency;
};

PoolMetrics& Metrics() {
  static PoolMetrics m{
      MetricsRegistry::Default().CounterFamily(
          "gapless_rpc_endpoint_requests_total",
          "Requests sent to each endpoint of the RPC pool, hedges included", {"endpoint"}),
      MetricsRegistry::Default().CounterFamily(
          "gapless_rpc_endpoint_failures_total",
          "Unusable answers per endpoint of the RPC pool, by kind (transport, rate_limited, "
          "server_error, client_error, batch_rejected, missing_method, other_chain, distrusted)",
          {"endpoint", "kind"}),
      MetricsRegistry::Default().CounterFamily(
          "gapless_rpc_endpoint_hedges_total",
          "Requests also sent to this endpoint because another was slow", {"endpoint"}),
      MetricsRegistry::Default().CounterFamily("gapless_rpc_endpoint_hedge_wins_total",
                                               "Hedged requests this endpoint answered first",
                                               {"endpoint"}),
      MetricsRegistry::Default().CounterFamily(
          "gapless_rpc_endpoint_calls_served_total",
          "JSON-RPC calls answered usably by each endpoint of the RPC pool", {"endpoint"}),
      MetricsRegistry::Default().GaugeFamily(
          "gapless_rpc_endpoint_up", "1 while the endpoint is in the RPC pool, 0 while taken out",
          {"endpoint"}),
      MetricsRegistry::Default().GaugeFamily("gapless_rpc_endpoint_latency_seconds",
                                             "Latency EWMA of the endpoint's usable answers",
                                             {"endpoint"}),
  };
  return m;
}

}  // namespace

std::string_view EndpointOutcomeName(EndpointOutcome outcome) {
  switch (outcome) {
    case EndpointOutcome::kGood:
      return "good";
    case EndpointOutcome::kTransport:
      return "transport";
    case EndpointOutcome::kRateLimited:
      return "rate_limited";
    case EndpointOutcome::kServerError:
      return "server_error";
    case EndpointOutcome::kClientError:
      return "client_error";
    case EndpointOutcome::kBatchRejected:
      return "batch_rejected";
    case EndpointOutcome::kMissingMethod:
      return "missing_method";
    case EndpointOutcome::kOtherChain:
      return "other_chain";
  }
  return "unknown";
}

std::string DescribeChain(const ChainIdentity& chain) {
  return fmt::format("chain {} (block 0 {})", chain.chain_id, chain.genesis_hash);
}

std::string_view ChainCheckRequest() {
  return R"([{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]},)"
         R"({"jsonrpc":"2.0","id":2,"method":"eth_getBlockByNumber","params":["0x0",false]}])";
}

namespace {

// The two calls of ChainCheckRequest, for an endpoint that refuses batches.
constexpr std::string_view kChainIdCall =
    R"({"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]})";
constexpr std::string_view kGenesisCall =
    R"({"jsonrpc":"2.0","id":2,"method":"eth_getBlockByNumber","params":["0x0",false]})";

}  // namespace

Result<ChainIdentity> ParseChainCheck(std::string_view answer) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array list;
  if (parser.parse(simdjson::padded_string(answer)).get(doc) != simdjson::SUCCESS ||
      doc.get_array().get(list) != simdjson::SUCCESS) {
    return InvalidData("the chain check's answer is not a JSON array");
  }
  std::optional<uint64_t> chain_id;
  std::optional<std::string> genesis;
  for (simdjson::dom::element a : list) {
    uint64_t id = 0;
    if (a["id"].get_uint64().get(id) != simdjson::SUCCESS) continue;
    simdjson::dom::element result;
    if (a["result"].get(result) != simdjson::SUCCESS) continue;
    std::string_view text;
    if (id == 1 && result.get_string().get(text) == simdjson::SUCCESS) {
      Result<uint64_t> n = ParseHexQuantity(text);
      if (n.ok()) chain_id = *n;
    } else if (id == 2 && result["hash"].get_string().get(text) == simdjson::SUCCESS &&
               text.size() == 66 && text.starts_with("0x") &&
               text.find_first_not_of("0123456789abcdefABCDEF", 2) == std::string_view::npos) {
      // Hex only: the hash goes into log lines, `status` and /readyz. Lower case, so that two
      // endpoints (and the database's binding) compare it alike.
      genesis = std::string(text);
      for (char& c : *genesis) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  if (!chain_id.has_value()) return InvalidData("no usable eth_chainId in the chain check");
  if (!genesis.has_value()) return InvalidData("no block 0 with a hash in the chain check");
  return ChainIdentity{*chain_id, std::move(*genesis)};
}

Result<std::vector<EndpointSpec>> ParseEndpointList(std::string_view text) {
  std::vector<EndpointSpec> out;
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    std::string_view item =
        Trim(text.substr(start, comma == std::string_view::npos ? text.npos : comma - start));
    if (item.empty()) {
      return FailedPrecondition(fmt::format("--rpc: endpoint {} of the list is empty ({})",
                                            out.size() + 1, RedactUrlList(text)));
    }
    EndpointSpec spec;
    size_t space = item.find_first_of(" \t");
    spec.url = std::string(item.substr(0, space));
    std::string_view rest = space == item.npos ? std::string_view() : item.substr(space);
    while (!(rest = Trim(rest)).empty()) {
      size_t end = rest.find_first_of(" \t");
      std::string_view setting = rest.substr(0, end);
      rest = end == rest.npos ? std::string_view() : rest.substr(end);
      size_t eq = setting.find('=');
      std::string_view key = setting.substr(0, eq);
      std::string_view value = eq == setting.npos ? std::string_view() : setting.substr(eq + 1);
      std::optional<double> number = PositiveNumber(value, /*zero_ok=*/key == "rate-limit");
      if ((key != "weight" && key != "rate-limit") || !number.has_value()) {
        return FailedPrecondition(fmt::format(
            "--rpc: endpoint {} ({}): '{}' is not a setting (weight=W with W > 0, rate-limit=R "
            "requests/s with R >= 0)",
            out.size() + 1, RedactUrl(spec.url), setting));
      }
      (key == "weight" ? spec.weight : spec.rate_limit) = *number;
    }
    out.push_back(std::move(spec));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (out.size() > 64) return FailedPrecondition("--rpc: at most 64 endpoints");
  return out;
}

std::vector<std::string> MethodsOf(std::string_view body, size_t* calls) {
  std::vector<std::string> methods;
  size_t n = 0;
  constexpr std::string_view kKey = R"("method":")";
  for (size_t at = body.find(kKey); at != body.npos; at = body.find(kKey, at)) {
    at += kKey.size();
    size_t end = body.find('"', at);
    if (end == body.npos) break;
    std::string method(body.substr(at, end - at));
    if (std::find(methods.begin(), methods.end(), method) == methods.end()) {
      methods.push_back(std::move(method));
    }
    ++n;
    at = end;
  }
  if (calls != nullptr) *calls = std::max<size_t>(n, 1);
  return methods;
}

EndpointOutcome ClassifyAnswer(const Result<HttpResponse>& response, size_t calls) {
  if (!response.ok()) return EndpointOutcome::kTransport;
  const HttpResponse& r = *response;
  if (r.status == 429) return EndpointOutcome::kRateLimited;
  if (r.status == 413) return EndpointOutcome::kBatchRejected;
  if (r.status == 408 || r.status >= 500) return EndpointOutcome::kServerError;
  if (r.status < 200 || r.status >= 300) return EndpointOutcome::kClientError;
  std::string_view body = Trim(r.body);
  // A batch answered with one object: the node refused the whole request.
  if (calls > 1 && !body.empty() && body.front() == '{') {
    if (ContainsNoCase(body, "batch")) return EndpointOutcome::kBatchRejected;
    if (body.find("-32005") != body.npos || ContainsNoCase(body, "rate limit") ||
        ContainsNoCase(body, "too many requests")) {
      return EndpointOutcome::kRateLimited;
    }
    return EndpointOutcome::kServerError;
  }
  if (body.find("-32601") != body.npos) return EndpointOutcome::kMissingMethod;
  return EndpointOutcome::kGood;
}

namespace {

// An id as the client matches it (rpc/json_rpc.cc ParseEnvelope): a number and a string of its
// digits are the same id; anything else by its JSON text. "" for none.
std::string IdKey(simdjson::dom::element parent) {
  simdjson::dom::element id;
  if (parent["id"].get(id) != simdjson::SUCCESS) return "";
  std::string_view text;
  if (id.get_string().get(text) == simdjson::SUCCESS && !text.empty() &&
      text.find_first_not_of("0123456789") == std::string_view::npos) {
    return std::string(text);
  }
  return simdjson::minify(id);
}

}  // namespace

std::vector<std::string> MethodsAnsweredMissing(std::string_view request, std::string_view answer) {
  std::vector<std::string> out;
  simdjson::dom::parser parser;
  // The request's calls by id (IdKey: ids may be numbers or strings).
  std::vector<std::pair<std::string, std::string>> calls;
  simdjson::dom::element req;
  if (parser.parse(simdjson::padded_string(request)).get(req) != simdjson::SUCCESS) return out;
  auto add_call = [&](simdjson::dom::element c) {
    std::string_view method;
    if (c["method"].get_string().get(method) != simdjson::SUCCESS) return;
    calls.emplace_back(IdKey(c), std::string(method));
  };
  simdjson::dom::array list;
  if (req.get_array().get(list) == simdjson::SUCCESS) {
    for (simdjson::dom::element c : list) add_call(c);
  } else {
    add_call(req);
  }
  simdjson::dom::element ans;
  if (parser.parse(simdjson::padded_string(answer)).get(ans) != simdjson::SUCCESS) return out;
  auto check = [&](simdjson::dom::element a) {
    int64_t code = 0;
    if (a["error"]["code"].get_int64().get(code) != simdjson::SUCCESS || code != -32601) return;
    const std::string id_text = IdKey(a);
    // The methods of the calls with that id: one, unless the request repeats the id.
    std::set<std::string> matching;
    for (const auto& [call_id, call_method] : calls) {
      if (!id_text.empty() && call_id == id_text) matching.insert(call_method);
    }
    // An answer without a usable id (or one that two calls of other methods share) names a method
    // only when the request has one.
    if (matching.empty()) {
      for (const auto& call : calls) matching.insert(call.second);
    }
    std::optional<std::string> method;
    if (matching.size() == 1) method = *matching.begin();
    if (method.has_value() && std::find(out.begin(), out.end(), *method) == out.end()) {
      out.push_back(std::move(*method));
    }
  };
  if (ans.get_array().get(list) == simdjson::SUCCESS) {
    for (simdjson::dom::element a : list) check(a);
  } else {
    check(ans);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

struct EndpointPool::Endpoint {
  // Whether it serves the pool's chain (the chain check): not known (never asked, or taken out
  // since), yes, or another chain (out until asked again).
  enum class Chain { kUnchecked, kSame, kOther };
  EndpointSpec spec;
  std::string name;  // redacted
  Chain chain = Chain::kUnchecked;
  std::optional<ChainIdentity> offered;  // answered before the pool's chain was settled
  bool in = true;
  bool probing = false;
  int consecutive_failures = 0;
  int64_t out_until = 0;
  int64_t probe_interval = 0;
  int64_t cooling_until = 0;
  double latency_ewma_us = 0;
  std::deque<int64_t> recent;  // latencies of the last good answers, for p95
  size_t batch_limit = 0;
  // Methods answered -32601 here, each with the time from which it may be asked here again (a
  // provider adds methods; a misreading must heal). Kept, and listed, until it is served.
  std::map<std::string, int64_t> missing;
  EndpointStats stats;
  // Whether method m is to be avoided here now.
  bool Lacks(const std::string& m, int64_t now) const {
    auto it = missing.find(m);
    return it != missing.end() && now < it->second;
  }
};

EndpointPool::EndpointPool(std::vector<EndpointSpec> specs, PoolOptions options)
    : options_(options) {
  if (options_.env == nullptr) options_.env = Env::Default();
  for (auto& spec : specs) {
    auto e = std::make_unique<Endpoint>();
    e->name = RedactUrl(spec.url);
    e->spec = std::move(spec);
    e->probe_interval = options_.probe_base_micros;
    e->stats.endpoint = e->name;
    e->stats.weight = e->spec.weight;
    Metrics().up.With({e->name}).Set(1);
    endpoints_.push_back(std::move(e));
  }
}

EndpointPool::~EndpointPool() = default;

const EndpointSpec& EndpointPool::spec(size_t i) const { return endpoints_.at(i)->spec; }

std::string EndpointPool::Key(size_t i) const {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a, 64 bits: stable across processes and builds
  for (unsigned char c : endpoints_.at(i)->spec.url) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return fmt::format("ep-{:016x}", h);
}

void EndpointPool::SetAdmission(EndpointAdmission admission) {
  auto shared = std::make_shared<const EndpointAdmission>(std::move(admission));
  std::lock_guard<std::mutex> lock(mu_);
  admission_ = std::move(shared);
}

Status EndpointPool::Admit(size_t i) {
  std::shared_ptr<const EndpointAdmission> admission;
  {
    std::lock_guard<std::mutex> lock(mu_);
    admission = admission_;
  }
  if (!admission || !admission->acquire) return Status::Ok();
  return admission->acquire(i);
}

void EndpointPool::SlowDown(size_t i) {
  std::shared_ptr<const EndpointAdmission> admission;
  {
    std::lock_guard<std::mutex> lock(mu_);
    admission = admission_;
  }
  if (admission && admission->slow_down) admission->slow_down(i);
}
const std::string& EndpointPool::Describe(size_t i) const { return endpoints_.at(i)->name; }

double EndpointPool::EffectiveWeightLocked(size_t i) const {
  double best = 0;
  for (const auto& e : endpoints_) {
    if (e->in && e->latency_ewma_us > 0 && (best == 0 || e->latency_ewma_us < best)) {
      best = e->latency_ewma_us;
    }
  }
  const Endpoint& e = *endpoints_[i];
  double slower = best > 0 && e.latency_ewma_us > 0 ? e.latency_ewma_us / best : 1.0;
  return e.spec.weight / std::max(1.0, slower);
}

std::vector<size_t> EndpointPool::Route(size_t calls, const std::vector<std::string>& methods,
                                        uint64_t exclude, size_t* usable) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = options_.env->NowMicros();
  std::vector<size_t> probe, fitting, unfit, away;
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    if (exclude & (uint64_t{1} << i)) continue;
    const Endpoint& e = *endpoints_[i];
    const bool cooling = e.cooling_until > now;
    const bool probe_due = !e.in && now >= e.out_until && !e.probing;
    if (cooling || (!e.in && !probe_due)) {
      away.push_back(i);
      continue;
    }
    if (probe_due) {
      probe.push_back(i);
      continue;
    }
    bool fits = e.batch_limit == 0 || calls <= e.batch_limit;
    for (const auto& m : methods) fits = fits && !e.Lacks(m, now);
    (fits ? fitting : unfit).push_back(i);
  }
  std::vector<size_t> order;
  // One probe per request, first: the request that takes it probes (the others wait their turn).
  if (!probe.empty()) {
    endpoints_[probe[0]]->probing = true;
    order.push_back(probe[0]);
    away.insert(away.end(), probe.begin() + 1, probe.end());
  }
  // The first fitting endpoint drawn by effective weight, the rest by it, best first.
  std::vector<double> w(endpoints_.size(), 0);
  for (size_t i : fitting) w[i] = EffectiveWeightLocked(i);
  std::stable_sort(fitting.begin(), fitting.end(), [&](size_t a, size_t b) { return w[a] > w[b]; });
  if (fitting.size() > 1) {
    double total = 0;
    for (size_t i : fitting) total += w[i];
    double draw = static_cast<double>(options_.env->Uniform(1'000'000)) / 1e6 * total;
    size_t pick = 0;
    for (size_t k = 0; k < fitting.size(); ++k) {
      if (draw < w[fitting[k]]) {
        pick = k;
        break;
      }
      draw -= w[fitting[k]];
      pick = k;
    }
    std::rotate(fitting.begin(), fitting.begin() + static_cast<std::ptrdiff_t>(pick),
                fitting.begin() + static_cast<std::ptrdiff_t>(pick) + 1);
  }
  order.insert(order.end(), fitting.begin(), fitting.end());
  // Endpoints that lack a method or refuse this batch size: the ones with fewer gaps first, then
  // the higher batch limit (the client splits what none takes whole).
  std::stable_sort(unfit.begin(), unfit.end(), [&](size_t a, size_t b) {
    const Endpoint& x = *endpoints_[a];
    const Endpoint& y = *endpoints_[b];
    size_t mx = 0, my = 0;
    for (const auto& m : methods) {
      mx += x.Lacks(m, now) ? 1 : 0;
      my += y.Lacks(m, now) ? 1 : 0;
    }
    if (mx != my) return mx < my;
    size_t lx = x.batch_limit == 0 ? SIZE_MAX : x.batch_limit;
    size_t ly = y.batch_limit == 0 ? SIZE_MAX : y.batch_limit;
    return lx > ly;
  });
  order.insert(order.end(), unfit.begin(), unfit.end());
  if (usable != nullptr) *usable = order.size();
  std::stable_sort(away.begin(), away.end(), [&](size_t a, size_t b) {
    auto back = [&](size_t i) {
      const Endpoint& e = *endpoints_[i];
      return std::max(e.cooling_until, e.in ? int64_t{0} : e.out_until);
    };
    return back(a) < back(b);
  });
  order.insert(order.end(), away.begin(), away.end());
  return order;
}

void EndpointPool::FailedLocked(Endpoint& e, int64_t now) {
  e.stats.failures += 1;
  e.consecutive_failures += 1;
  const bool was_probe = e.probing;
  e.probing = false;
  if (was_probe || (e.in && e.consecutive_failures >= options_.take_out_after)) {
    if (was_probe) {
      e.probe_interval = std::min(e.probe_interval * 2, options_.probe_cap_micros);
    }
    if (e.in) {
      spdlog::warn("rpc pool: {} taken out after {} failures in a row; probed again in {:.1f} s",
                   e.name, e.consecutive_failures, static_cast<double>(e.probe_interval) / 1e6);
    }
    e.in = false;
    e.out_until = now + e.probe_interval;
    e.stats.in = false;
    // Asked its chain again when it comes back (a devnet restarted behind the same URL).
    if (e.chain == Endpoint::Chain::kSame) e.chain = Endpoint::Chain::kUnchecked;
    Metrics().up.With({e.name}).Set(0);
  }
}

std::optional<ChainIdentity> EndpointPool::chain() {
  std::lock_guard<std::mutex> lock(mu_);
  return chain_;
}

size_t EndpointPool::BatchLimit(size_t i) {
  std::lock_guard<std::mutex> lock(mu_);
  return endpoints_.at(i)->batch_limit;
}

uint64_t EndpointPool::SettleTargets() {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = options_.env->NowMicros();
  uint64_t targets = 0;
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    Endpoint& e = *endpoints_[i];
    if (e.cooling_until > now) continue;
    if (!e.in) {
      if (now < e.out_until || e.probing) continue;
      e.probing = true;  // a failed check is a failed probe: its interval doubles
    }
    targets |= uint64_t{1} << i;
  }
  return targets;
}

void EndpointPool::BackInLocked(Endpoint& e) {
  e.consecutive_failures = 0;
  e.probing = false;
  if (e.in) return;
  spdlog::info("rpc pool: {} answers again; back in", e.name);
  e.in = true;
  e.stats.in = true;
  e.probe_interval = options_.probe_base_micros;
  Metrics().up.With({e.name}).Set(1);
}

bool EndpointPool::NeedsChainCheck(size_t i) {
  std::lock_guard<std::mutex> lock(mu_);
  return options_.check_chain && chain_.has_value() &&
         endpoints_.at(i)->chain != Endpoint::Chain::kSame;
}

bool EndpointPool::CompareChainLocked(Endpoint& e, const ChainIdentity& chain, int64_t now) {
  if (chain == *chain_) {
    if (e.chain == Endpoint::Chain::kOther) {
      spdlog::info("rpc pool: {} serves the pool's {} now", e.name, DescribeChain(chain));
      e.stats.other_chain.clear();
    }
    e.chain = Endpoint::Chain::kSame;
    return true;
  }
  const std::string seen = DescribeChain(chain);
  if (e.chain != Endpoint::Chain::kOther || e.stats.other_chain != seen) {
    spdlog::warn(
        "rpc pool: {} serves {}, not the pool's {}: taken out, it serves no request until it "
        "serves the pool's chain (asked again every {:.0f} s)",
        e.name, seen, DescribeChain(*chain_), static_cast<double>(options_.probe_cap_micros) / 1e6);
  }
  e.chain = Endpoint::Chain::kOther;
  e.stats.other_chain = seen;
  e.stats.requests += 1;
  e.stats.failures += 1;
  Metrics().requests.With({e.name}).Inc();
  Metrics().failures.With({e.name, EndpointOutcomeName(EndpointOutcome::kOtherChain)}).Inc();
  e.probing = false;
  e.in = false;
  e.stats.in = false;
  e.out_until = now + options_.probe_cap_micros;
  Metrics().up.With({e.name}).Set(0);
  return false;
}

void EndpointPool::AdoptChain(const ChainIdentity& chain) {
  std::lock_guard<std::mutex> lock(mu_);
  if (chain_.has_value()) return;
  chain_ = chain;
  const int64_t now = options_.env->NowMicros();
  for (auto& e : endpoints_) {
    if (e->offered.has_value()) CompareChainLocked(*e, *e->offered, now);
    e->offered.reset();
  }
}

bool EndpointPool::OfferChain(size_t i, const ChainIdentity& chain, bool back_in) {
  std::lock_guard<std::mutex> lock(mu_);
  Endpoint& e = *endpoints_.at(i);
  if (!chain_.has_value()) {
    e.offered = chain;
    return false;
  }
  const bool same = CompareChainLocked(e, chain, options_.env->NowMicros());
  if (same && back_in) BackInLocked(e);
  return same;
}

void EndpointPool::SettleChain(size_t i, const ChainIdentity& chain) {
  std::lock_guard<std::mutex> lock(mu_);
  if (chain_.has_value()) return;
  chain_ = chain;
  spdlog::info(
      "rpc pool: {}, as {} answers (the first endpoint of the list that answers); every "
      "endpoint serves only while it serves this chain",
      DescribeChain(chain), endpoints_.at(i)->name);
  const int64_t now = options_.env->NowMicros();
  for (size_t k = 0; k < endpoints_.size(); ++k) {
    Endpoint& e = *endpoints_[k];
    // The endpoints that answered the pool's chain (the deciding one among them) serve at once,
    // whatever failures took them out before: their answer is a good one.
    if (k == i) {
      e.chain = Endpoint::Chain::kSame;
      BackInLocked(e);
    } else if (e.offered.has_value() && CompareChainLocked(e, *e.offered, now)) {
      BackInLocked(e);
    }
    e.offered.reset();
  }
}

void EndpointPool::Record(size_t i, EndpointOutcome outcome, int64_t latency_micros, size_t calls,
                          const std::vector<std::string>& methods,
                          std::optional<int64_t> retry_after_micros) {
  std::lock_guard<std::mutex> lock(mu_);
  Endpoint& e = *endpoints_.at(i);
  const int64_t now = options_.env->NowMicros();
  ++posts_;
  e.stats.requests += 1;
  Metrics().requests.With({e.name}).Inc();
  if (outcome != EndpointOutcome::kGood) {
    Metrics().failures.With({e.name, EndpointOutcomeName(outcome)}).Inc();
  }
  switch (outcome) {
    case EndpointOutcome::kGood: {
      e.stats.good += 1;
      e.stats.calls_served += calls;
      Metrics().calls.With({e.name}).Inc(static_cast<double>(calls));
      e.consecutive_failures = 0;
      e.probing = false;
      if (!e.in) {
        spdlog::info("rpc pool: {} answers again; back in", e.name);
        e.in = true;
        e.stats.in = true;
        e.probe_interval = options_.probe_base_micros;
        Metrics().up.With({e.name}).Set(1);
      }
      // Quick to see an endpoint slow down, slower to trust it again.
      const double l = static_cast<double>(std::max<int64_t>(latency_micros, 1));
      const double alpha = l > e.latency_ewma_us ? 0.5 : 0.2;
      e.latency_ewma_us = e.latency_ewma_us == 0 ? l : (1 - alpha) * e.latency_ewma_us + alpha * l;
      e.stats.latency_ewma_ms = e.latency_ewma_us / 1e3;
      Metrics().latency.With({e.name}).Set(e.latency_ewma_us / 1e6);
      e.recent.push_back(latency_micros);
      if (e.recent.size() > 64) e.recent.pop_front();
      for (const auto& m : methods) {
        if (e.missing.erase(m) == 0) continue;
        spdlog::info("rpc pool: {} serves {} now", e.name, m);
        auto& listed = e.stats.missing_methods;
        listed.erase(std::remove(listed.begin(), listed.end(), m), listed.end());
      }
      if (e.batch_limit != 0 && calls > e.batch_limit) e.batch_limit = calls;
      e.stats.batch_limit = e.batch_limit;
      break;
    }
    case EndpointOutcome::kRateLimited: {
      e.stats.rate_limited += 1;
      e.probing = false;
      int64_t wait = std::min(retry_after_micros.value_or(options_.cooldown_micros),
                              options_.max_retry_after_micros);
      e.cooling_until = std::max(e.cooling_until, now + wait);
      break;
    }
    case EndpointOutcome::kBatchRejected: {
      e.probing = false;
      size_t limit = std::max<size_t>(1, calls / 2);
      if (calls > 1 && (e.batch_limit == 0 || limit < e.batch_limit)) {
        spdlog::warn(
            "rpc pool: {} refused a batch of {} calls; larger batches than {} go elsewhere", e.name,
            calls, limit);
        e.batch_limit = limit;
        e.stats.batch_limit = limit;
      }
      break;
    }
    case EndpointOutcome::kMissingMethod: {
      // `methods` are those answered -32601 (MethodsAnsweredMissing), not the whole request's: a
      // block+receipts batch to a node without eth_getBlockReceipts leaves its blocks here.
      e.probing = false;
      const int64_t again = now + options_.missing_method_retry_micros;
      for (const auto& m : methods) {
        if (e.missing.insert_or_assign(m, again).second) {
          spdlog::warn(
              "rpc pool: {} does not serve {}; it goes to the other endpoints (asked here again "
              "in {:.0f} s)",
              e.name, m, static_cast<double>(options_.missing_method_retry_micros) / 1e6);
          e.stats.missing_methods.push_back(m);
        }
      }
      break;
    }
    case EndpointOutcome::kClientError:
      // A bad key or path at this provider: out at once, probed back as any other.
      e.consecutive_failures = std::max(e.consecutive_failures, options_.take_out_after - 1);
      FailedLocked(e, now);
      break;
    case EndpointOutcome::kTransport:
    case EndpointOutcome::kServerError:
      FailedLocked(e, now);
      break;
    case EndpointOutcome::kOtherChain:
      break;  // OfferChain's
  }
}

void EndpointPool::Distrust(size_t i) {
  std::lock_guard<std::mutex> lock(mu_);
  Endpoint& e = *endpoints_.at(i);
  e.stats.distrusted += 1;
  Metrics().failures.With({e.name, "distrusted"}).Inc();
  FailedLocked(e, options_.env->NowMicros());
}

void EndpointPool::CountHedge(size_t i) {
  std::lock_guard<std::mutex> lock(mu_);
  Endpoint& e = *endpoints_.at(i);
  e.stats.hedges += 1;
  Metrics().hedges.With({e.name}).Inc();
}

void EndpointPool::CountHedgeWin(size_t i) {
  std::lock_guard<std::mutex> lock(mu_);
  Endpoint& e = *endpoints_.at(i);
  e.stats.hedge_wins += 1;
  Metrics().hedge_wins.With({e.name}).Inc();
}

std::optional<int64_t> EndpointPool::HedgeDelayMicros(size_t i) {
  if (!options_.hedge || endpoints_.size() < 2) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  auto p95 = [](std::vector<int64_t> v) -> std::optional<int64_t> {
    if (v.size() < 8) return std::nullopt;
    size_t k = std::min(v.size() - 1, v.size() * 95 / 100);
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return v[k];
  };
  // Its own p95, or the other endpoints' when lower: an endpoint that turned slow has a p95
  // that soon says "slow is normal", and waiting that long before hedging would hedge nothing;
  // what the others take is what a request should take.
  const Endpoint& e = *endpoints_.at(i);
  std::optional<int64_t> own = p95(std::vector<int64_t>(e.recent.begin(), e.recent.end()));
  std::vector<int64_t> others;
  for (size_t k = 0; k < endpoints_.size(); ++k) {
    if (k == i) continue;
    others.insert(others.end(), endpoints_[k]->recent.begin(), endpoints_[k]->recent.end());
  }
  std::optional<int64_t> pool = p95(std::move(others));
  if (!own && !pool) return std::nullopt;
  int64_t delay = std::min(own.value_or(INT64_MAX), pool.value_or(INT64_MAX));
  return std::max(delay, options_.hedge_min_micros);
}

bool EndpointPool::TakeHedge() {
  std::lock_guard<std::mutex> lock(mu_);
  // With this hedge counted: at most budget x requests + burst, never one over.
  if (static_cast<double>(hedges_ + 1) >
      options_.hedge_budget * static_cast<double>(posts_) + options_.hedge_burst) {
    return false;
  }
  ++hedges_;
  return true;
}

std::vector<EndpointStats> EndpointPool::Stats() {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = options_.env->NowMicros();
  std::vector<EndpointStats> out;
  for (const auto& e : endpoints_) {
    out.push_back(e->stats);
    out.back().cooling = e->cooling_until > now;
  }
  return out;
}

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

// ---------------------------------------------------------------------------------------------

// One request to one endpoint, possibly on a thread of its own. `done` and `result` are guarded
// by the signal's mutex, shared by the flights of one Post.
struct PoolTransport::FlightSignal {
  std::mutex mu;
  std::condition_variable cv;
};

struct PoolTransport::Flight {
  std::shared_ptr<FlightSignal> signal;
  size_t endpoint = 0;
  bool done = false;
  Result<HttpResponse> result = Unavailable("not sent");
  EndpointOutcome outcome = EndpointOutcome::kTransport;
  std::optional<ChainIdentity> chain;  // a chain check's answer
  std::thread thread;
};

PoolTransport::PoolTransport(std::shared_ptr<EndpointPool> pool,
                             std::vector<std::unique_ptr<HttpTransport>> transports)
    : pool_(std::move(pool)), transports_(std::move(transports)) {
  in_flight_.resize(transports_.size());
}

PoolTransport::~PoolTransport() {
  for (size_t i = 0; i < in_flight_.size(); ++i) WaitIdle(i);
}

uint64_t PoolTransport::BusyMask() const {
  uint64_t busy = 0;
  for (size_t i = 0; i < in_flight_.size(); ++i) {
    if (!in_flight_[i]) continue;
    std::lock_guard<std::mutex> lock(in_flight_[i]->signal->mu);
    if (!in_flight_[i]->done) busy |= uint64_t{1} << i;
  }
  return busy;
}

void PoolTransport::WaitIdle(size_t i) {
  if (in_flight_[i] && in_flight_[i]->thread.joinable()) in_flight_[i]->thread.join();
  in_flight_[i].reset();
}

std::shared_ptr<PoolTransport::Flight> PoolTransport::Launch(
    size_t i, std::string_view body, size_t calls, const std::vector<std::string>* methods,
    bool async, std::shared_ptr<FlightSignal> signal) {
  WaitIdle(i);
  auto flight = std::make_shared<Flight>();
  flight->signal = std::move(signal);
  flight->endpoint = i;
  auto run = [this, flight, i, body = std::string(body), calls, methods = *methods] {
    Env* env = pool_->options().env;
    if (pool_->NeedsChainCheck(i)) {
      // Its first request since it joined or came back: its chain first.
      Result<HttpResponse> failure = Unavailable("not sent");
      bool same = false;
      Result<ChainIdentity> chain = CheckChainOf(i, &failure, &same, /*settling=*/false);
      if (!same) {
        std::lock_guard<std::mutex> lock(flight->signal->mu);
        flight->result = chain.ok() ? Result<HttpResponse>(Unavailable(
                                          fmt::format("{} serves {}, not the pool's chain",
                                                      pool_->Describe(i), DescribeChain(*chain))))
                                    : std::move(failure);
        flight->outcome = EndpointOutcome::kOtherChain;
        flight->done = true;
        flight->signal->cv.notify_all();
        return;
      }
    }
    Status admitted = pool_->Admit(i);
    if (!admitted.ok()) {
      // The limiter's own failure (its Redis away): not the endpoint's.
      std::lock_guard<std::mutex> lock(flight->signal->mu);
      flight->result = admitted;
      flight->outcome = EndpointOutcome::kTransport;
      flight->done = true;
      flight->signal->cv.notify_all();
      return;
    }
    const int64_t start = env->NowMicros();
    Result<HttpResponse> r = transports_[i]->Post(body);
    const int64_t latency = env->NowMicros() - start;
    EndpointOutcome outcome = ClassifyAnswer(r, calls);
    std::optional<int64_t> retry_after;
    if (r.ok()) retry_after = r->retry_after_micros;
    pool_->Record(i, outcome, latency, calls,
                  outcome == EndpointOutcome::kMissingMethod ? MethodsAnsweredMissing(body, r->body)
                                                             : methods,
                  retry_after);
    if (outcome == EndpointOutcome::kRateLimited) pool_->SlowDown(i);
    std::lock_guard<std::mutex> lock(flight->signal->mu);
    flight->result = std::move(r);
    flight->outcome = outcome;
    flight->done = true;
    flight->signal->cv.notify_all();
  };
  if (async) {
    flight->thread = std::thread(std::move(run));
    in_flight_[i] = flight;
  } else {
    run();
  }
  return flight;
}

Result<ChainIdentity> PoolTransport::CheckChainOf(size_t i, Result<HttpResponse>* failure,
                                                  bool* same, bool settling) {
  Env* env = pool_->options().env;
  *same = false;
  // One request of the check, admitted as any other request to the endpoint (its rate-limit=).
  // No outcome: the limiter's own failure (its Redis away), not the endpoint's.
  struct Sent {
    std::optional<EndpointOutcome> outcome;
    Result<HttpResponse> r = Unavailable("not sent");
    int64_t latency = 0;
  };
  auto send = [&](std::string_view body, size_t calls) {
    Sent s;
    Status admitted = pool_->Admit(i);
    if (!admitted.ok()) {
      s.r = admitted;
      return s;
    }
    const int64_t start = env->NowMicros();
    s.r = transports_[i]->Post(body);
    s.latency = env->NowMicros() - start;
    s.outcome = ClassifyAnswer(s.r, calls);
    return s;
  };
  auto record = [&](const Sent& s, EndpointOutcome outcome, size_t calls) {
    std::optional<int64_t> retry_after;
    if (s.r.ok()) retry_after = s.r->retry_after_micros;
    pool_->Record(i, outcome, s.latency, calls, {}, retry_after);
    if (outcome == EndpointOutcome::kRateLimited) pool_->SlowDown(i);
  };
  auto usable = [](const Sent& s) {
    return s.outcome == EndpointOutcome::kGood || s.outcome == EndpointOutcome::kMissingMethod;
  };
  // In one batch, unless the endpoint refuses batches (refused now, or known to take one call):
  // then its two calls one at a time, their answers read as the batch's.
  Sent s;
  size_t calls = 2;
  std::string answer;
  const bool takes_one = pool_->BatchLimit(i) == 1;
  if (!takes_one) {
    s = send(ChainCheckRequest(), calls);
    if (usable(s)) answer = std::move(s.r->body);
  }
  if (takes_one || s.outcome == EndpointOutcome::kBatchRejected) {
    if (!takes_one) record(s, *s.outcome, calls);  // learns its limit of 1
    calls = 1;
    for (std::string_view call : {kChainIdCall, kGenesisCall}) {
      s = send(call, calls);
      if (!usable(s)) break;
      answer += (answer.empty() ? "[" : ",") + s.r->body;
    }
    if (usable(s)) answer += "]";
  }
  if (!s.outcome.has_value()) {
    *failure = s.r.status();
    return s.r.status();
  }
  EndpointOutcome outcome = *s.outcome;
  Status why =
      Unavailable(fmt::format("{}: no usable answer to the chain check", pool_->Describe(i)));
  if (usable(s)) {
    Result<ChainIdentity> chain = ParseChainCheck(answer);
    if (chain.ok()) {
      *same = pool_->OfferChain(i, *chain, /*back_in=*/settling);
      return chain;
    }
    // A node that cannot say its chain (or block 0) cannot be checked: a failure of it.
    outcome = EndpointOutcome::kServerError;
    why = Unavailable(fmt::format("{}: its chain id and block 0 cannot be read: {}",
                                  pool_->Describe(i), chain.status().message()));
    *failure = why;
  } else if (s.r.ok() && s.r->status >= 200 && s.r->status < 300) {
    // A failure in a 2xx body (the batch refused as a whole with one object): handed back, the
    // client would read it as the answer to its own request.
    why = Unavailable(fmt::format("{}: the chain check was refused ({})", pool_->Describe(i),
                                  EndpointOutcomeName(outcome)));
    if (outcome == EndpointOutcome::kRateLimited) {
      why = why.WithReason(std::string(kRpcRateLimitedReason));
    }
    *failure = why;
  } else {
    *failure = s.r;
  }
  record(s, outcome, calls);
  return why;
}

std::optional<Result<HttpResponse>> PoolTransport::SettleChain() {
  std::lock_guard<std::mutex> settling(pool_->settle_mutex());
  if (pool_->chain().has_value()) return std::nullopt;  // another client settled it
  // Those that may be asked now: not out (unless a probe is due) nor cooling down after a 429.
  const uint64_t targets = pool_->SettleTargets();
  if (targets == 0) {
    return Unavailable(
               fmt::format("every endpoint of the RPC pool is out or cooling down ({}); the "
                           "pool's chain is not settled yet",
                           Describe()))
        .WithReason("http:429");
  }
  auto signal = std::make_shared<FlightSignal>();
  std::vector<std::shared_ptr<Flight>> flights;
  for (size_t i = 0; i < transports_.size(); ++i) {
    if (!(targets & (uint64_t{1} << i))) continue;
    WaitIdle(i);
    auto flight = std::make_shared<Flight>();
    flight->signal = signal;
    flight->endpoint = i;
    flight->thread = std::thread([this, flight, i] {
      Result<HttpResponse> failure = Unavailable("not sent");
      bool same = false;
      Result<ChainIdentity> chain = CheckChainOf(i, &failure, &same, /*settling=*/true);
      std::lock_guard<std::mutex> lock(flight->signal->mu);
      if (chain.ok()) {
        flight->chain = *chain;
        flight->outcome = EndpointOutcome::kGood;
      } else {
        flight->result = std::move(failure);
      }
      flight->done = true;
      flight->signal->cv.notify_all();
    });
    in_flight_[i] = flight;  // a check still running when the chain is settled: joined before reuse
    flights.push_back(std::move(flight));
  }
  // The first endpoint of the list that answers, once every one before it has failed.
  std::unique_lock<std::mutex> lock(signal->mu);
  std::shared_ptr<Flight> first;
  signal->cv.wait(lock, [&] {
    for (auto& f : flights) {
      if (!f->done) return false;
      if (f->chain.has_value()) {
        first = f;
        return true;
      }
    }
    return true;
  });
  if (first == nullptr) {
    // No endpoint answered. A pool of one: its failure as it is (the client reads an HTTP 429's
    // Retry-After). Otherwise every endpoint asked is named (redacted), with what it did.
    if (transports_.size() == 1) return std::move(flights.back()->result);
    std::vector<std::string> parts;
    bool all_client_errors = true;
    std::optional<std::string> reason;
    for (size_t k = 0; k < flights.size(); ++k) {
      const Result<HttpResponse>& r = flights[k]->result;
      const std::string& name = pool_->Describe(flights[k]->endpoint);
      std::string what;
      std::string why;
      if (!r.ok()) {
        what = r.status().message();
        why = r.status().reason();
        all_client_errors = all_client_errors && r.status().code() == Code::kFailedPrecondition;
      } else {
        what = fmt::format("HTTP {}", r->status);
        why = HttpStatusReason(r->status);
        all_client_errors =
            all_client_errors && ClassifyAnswer(r, 2) == EndpointOutcome::kClientError;
      }
      if (what.find(name) == std::string::npos) what = name + ": " + what;
      parts.push_back(std::move(what));
      if (k == 0) reason = why;
      if (reason != why) reason = "";
    }
    // Stop (FailedPrecondition) only when every endpoint asked refused the configuration (a bad
    // key at each): otherwise one may come back.
    Status st(all_client_errors ? Code::kFailedPrecondition : Code::kUnavailable,
              fmt::format("no endpoint of the RPC pool answered its chain check{}: {}",
                          flights.size() == transports_.size()
                              ? std::string()
                              : fmt::format(" ({} of {} asked, the others out or cooling down)",
                                            flights.size(), transports_.size()),
                          fmt::join(parts, "; ")));
    if (reason.has_value() && !reason->empty()) st = st.WithReason(*reason);
    return Result<HttpResponse>(st);
  }
  const ChainIdentity chain = *first->chain;
  lock.unlock();
  pool_->SettleChain(first->endpoint, chain);
  return std::nullopt;
}

Result<HttpResponse> PoolTransport::Post(std::string_view body) {
  if (pool_->options().check_chain && !pool_->chain().has_value()) {
    if (pool_->options().chain_from) {
      // Another pool of the process decides the chain (PoolOptions::chain_from).
      std::optional<ChainIdentity> known = pool_->options().chain_from();
      if (!known.has_value()) {
        return Unavailable("the RPC pool's chain is not settled yet (the node is being checked)");
      }
      pool_->AdoptChain(*known);
    } else {
      std::optional<Result<HttpResponse>> failure = SettleChain();
      if (failure.has_value()) return std::move(*failure);
    }
  }
  size_t calls = 1;
  const std::vector<std::string> methods = MethodsOf(body, &calls);
  // Endpoints whose answers this client found wrong are not asked for a while (unless that is
  // all of them).
  const uint64_t all =
      transports_.size() >= 64 ? ~uint64_t{0} : (uint64_t{1} << transports_.size()) - 1;
  if (avoid_ != 0 && pool_->options().env->NowMicros() >= avoid_until_) avoid_ = 0;
  uint64_t tried = (avoid_ & all) == all ? 0 : avoid_;
  std::optional<Result<HttpResponse>> last_failure;
  while (true) {
    size_t usable = 0;
    // An endpoint still answering a lost hedge of this client would make the request wait for
    // it: the others first (a Route that finds none usable marks no probe, so asking again is
    // safe).
    const uint64_t busy = BusyMask();
    std::vector<size_t> order = pool_->Route(calls, methods, tried | busy, &usable);
    if (usable == 0 && busy != 0) order = pool_->Route(calls, methods, tried, &usable);
    if (usable == 0 && !last_failure.has_value() && tried != 0 && tried == avoid_) {
      tried = 0;  // the others are out or cooling: the distrusted ones rather than none
      continue;
    }
    if (usable == 0) {
      // Nothing left to try now: every endpoint tried, out or cooling down. The error names
      // them all, not only the last one tried (issue 35).
      if (last_failure.has_value() && !last_failure->ok() && std::popcount(tried) > 1) {
        return last_failure->status().WithContext(
            fmt::format("every endpoint of the RPC {} failed; the last", Describe()));
      }
      if (last_failure.has_value()) return std::move(*last_failure);
      return Unavailable(fmt::format("every endpoint of the RPC pool is out or cooling down ({})",
                                     Describe()))
          .WithReason("http:429");
    }
    const size_t first = order[0];
    std::optional<size_t> second;
    if (usable > 1) second = order[1];
    std::optional<int64_t> delay;
    if (second.has_value()) delay = pool_->HedgeDelayMicros(first);

    auto signal = std::make_shared<FlightSignal>();
    std::vector<std::shared_ptr<Flight>> flights;
    if (!delay.has_value()) {
      flights.push_back(Launch(first, body, calls, &methods, /*async=*/false, signal));
    } else {
      flights.push_back(Launch(first, body, calls, &methods, /*async=*/true, signal));
      std::unique_lock<std::mutex> lock(signal->mu);
      signal->cv.wait_for(lock, std::chrono::microseconds(*delay),
                          [&] { return flights[0]->done; });
      // Not answered within the p95: the same request to the next endpoint, if the budget
      // allows, and to the one after while the hedges fail at once (refused, 429) and the
      // primary still runs; the first usable answer wins.
      size_t next = 1;
      while (!flights[0]->done && next < usable) {
        bool hedge_running = false;
        for (size_t k = 1; k < flights.size(); ++k) hedge_running |= !flights[k]->done;
        if (hedge_running) break;
        lock.unlock();
        bool taken = next <= 2 && pool_->TakeHedge();
        if (taken) {
          flights.push_back(Launch(order[next], body, calls, &methods, /*async=*/true, signal));
          pool_->CountHedge(order[next]);
        }
        lock.lock();
        if (!taken) break;
        ++next;
        signal->cv.wait(lock, [&] {
          if (flights[0]->done) return true;
          return flights.back()->done;  // a hedge that failed at once lets the next one go
        });
        if (flights.back()->done && flights.back()->outcome == EndpointOutcome::kGood) break;
      }
      signal->cv.wait(lock, [&] {
        bool all_done = true;
        for (auto& f : flights) {
          if (f->done && f->outcome == EndpointOutcome::kGood) return true;
          all_done = all_done && f->done;
        }
        return all_done;
      });
    }
    std::unique_lock<std::mutex> lock(signal->mu);
    std::shared_ptr<Flight> winner;
    for (auto& f : flights) {
      if (f->done && f->outcome == EndpointOutcome::kGood) {
        winner = f;
        break;
      }
    }
    if (winner && winner != flights[0]) pool_->CountHedgeWin(winner->endpoint);
    if (winner) {
      answered_ |= uint64_t{1} << winner->endpoint;
      if (winner->result.ok()) winner->result->served_by = uint64_t{1} << winner->endpoint;
      return std::move(winner->result);
    }
    // Nothing usable: the next endpoint. (A flight still running finishes on its own thread.)
    for (auto& f : flights) {
      tried |= uint64_t{1} << f->endpoint;
      if (f->done) last_failure = std::move(f->result);
    }
    if (!last_failure.has_value()) last_failure = Unavailable("no answer from the RPC pool");
  }
}

std::string PoolTransport::Describe() const {
  std::string out = fmt::format("pool of {} (", transports_.size());
  for (size_t i = 0; i < transports_.size(); ++i) {
    if (i > 0) out += ", ";
    out += transports_[i]->Describe();
  }
  return out + ")";
}

std::string PoolTransport::Scrub(std::string text) const {
  for (const auto& t : transports_) text = t->Scrub(std::move(text));
  return text;
}

void PoolTransport::Distrust(uint64_t served_by) {
  for (size_t i = 0; i < transports_.size(); ++i) {
    if (served_by & (uint64_t{1} << i)) pool_->Distrust(i);
  }
  if (served_by == 0) return;
  avoid_ |= served_by;
  avoid_until_ = pool_->options().env->NowMicros() + kAvoidDistrustedMicros;
}

std::string PoolTransport::DescribeServers(uint64_t served_by) const {
  std::string out;
  for (size_t i = 0; i < transports_.size(); ++i) {
    if (!(served_by & (uint64_t{1} << i))) continue;
    if (!out.empty()) out += ", ";
    out += transports_[i]->Describe();
  }
  return out.empty() ? Describe() : out;
}

}  // namespace gapless
