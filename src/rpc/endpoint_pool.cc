// The RPC endpoint pool's routing and health state (rpc/endpoint_pool.h): the --rpc list, Route's
// draw by effective weight, Record (taking out, probing back, cooling after a 429, the learned
// batch limits and missing methods, the latency EWMA), distrust, the hedge delay and budget, and
// the gapless_rpc_endpoint_* metrics. The chain check is in endpoint_pool_chain.cc, the reading
// of answers in endpoint_pool_answers.cc, the counts' rendering in endpoint_pool_stats.cc, and
// PoolTransport in endpoint_pool_transport.cc.
#include "rpc/endpoint_pool.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>

#include "core/metrics.h"
#include "core/redact.h"
#include "rpc/endpoint_pool_internal.h"

namespace gapless {

using pool_internal::Metrics;
using pool_internal::Trim;

namespace {

std::optional<double> PositiveNumber(std::string_view text, bool zero_ok) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  if (v < 0 || (!zero_ok && v == 0) || v != v) return std::nullopt;
  return v;
}

}  // namespace

namespace pool_internal {

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

}  // namespace pool_internal

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
  log_sizers_ = std::make_unique<GetLogsSizers>(endpoints_.size(), options_.env, options_.get_logs);
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

size_t EndpointPool::BatchLimit(size_t i) {
  std::lock_guard<std::mutex> lock(mu_);
  return endpoints_.at(i)->batch_limit;
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

}  // namespace gapless
