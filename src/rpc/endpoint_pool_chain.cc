// The RPC endpoint pool's chain check (rpc/endpoint_pool.h, "Chain check"): the request and its
// answer read (ChainCheckRequest, ParseChainCheck); in the pool, the pool's chain settled or
// adopted and each endpoint's answer compared with it (an endpoint on another chain taken out);
// in PoolTransport, asking one endpoint (CheckChainOf) and settling the pool's chain at the
// first request (SettleChain).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <cctype>
#include <thread>

#include "rpc/endpoint_pool.h"
#include "rpc/endpoint_pool_internal.h"
#include "rpc/json_rpc.h"

namespace gapless {

using pool_internal::Metrics;

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

std::optional<ChainIdentity> EndpointPool::chain() {
  std::lock_guard<std::mutex> lock(mu_);
  return chain_;
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

}  // namespace gapless
