// endpoint_pool: several JSON-RPC endpoints behind one HttpTransport (issue 18 item 1), so that
// one provider failing, slowing down, rate-limiting or answering from a lagging backend neither
// stops nor slows the fleet.
//
// `--rpc "URL [weight=W] [rate-limit=R], URL ..."` (ParseEndpointList) makes an EndpointPool (one
// per process, shared by every client: the health of an endpoint is what the whole process has
// seen of it) and, per client, a PoolTransport holding one transport per endpoint. The JSON-RPC
// client above (rpc/json_rpc.h) keeps its retry policy and sees one endpoint that fails less.
//
// Per request (one POST: one call or one batch), in PoolTransport::Post:
//  - Routing: among the endpoints that are in (see below), not cooling down after a 429, not
//    known to lack a method of the request, and not known to refuse a batch of this size, one is
//    drawn with probability proportional to its weight divided by how much slower it has been
//    than the fastest (latency EWMA, quick to rise, slow to fall): a 10x slower endpoint gets a
//    tenth of its share.
//  - Failover: a transport failure, HTTP 408/429/5xx, another 4xx (a bad key at one provider), a
//    batch rejected as a whole, or "method not found" (-32601) from this endpoint: the request
//    goes to the next endpoint at once, within the same Post. Only when no endpoint gave a usable
//    answer does the client see the last failure (and apply its own retries and backoff).
//  - Health: `take_out_after` consecutive failures take an endpoint out; it is probed back in
//    with one request after probe_base (doubling up to probe_cap while it keeps failing). A 429
//    cools that endpoint alone for its Retry-After (or a backoff). An answer the caller found
//    wrong (a block hash that differs from the head log, a lagging or forked backend) counts as
//    a failure ("distrusted") of the endpoint that gave it, named by the answer's
//    HttpResponse::served_by (the client keeps it per block: core/raw_block.h), and that
//    client's requests go to the other endpoints for kAvoidDistrustedMicros (all of them ask it
//    again when the others are out or cooling).
//  - Learned limits: a batch refused as a whole (HTTP 413, or one error object naming the batch)
//    records that the endpoint takes fewer calls; larger batches go elsewhere (and when no
//    endpoint takes them, to the one with the highest limit, where the client splits them). A
//    method an endpoint answers -32601 (attributed per call id: in a block+receipts batch, only the
//    receipts) is routed to the others (eth_getBlockReceipts, trace_block,
//    debug_traceBlockByNumber) and asked there again after missing_method_retry (10 min); the
//    client's own fallback applies only when none serves it.
//  - eth_getLogs sizing: the pool owns one GetLogsSizer per endpoint (rpc/get_logs_limits.h
//    GetLogsSizers, timed by the pool's Env), since a provider's cap on a request's range is that
//    endpoint's alone. JsonRpcClient::GetLogs sends its requests through PostFor: the pool routes
//    the request first, and the range asked of each endpoint tried (the first choice, a failover,
//    a hedge) is the one that endpoint's sizer gives; the answer's served_by says which endpoint
//    answered or refused, and its sizer alone learns from it. DescribeLogSizing shows them.
//  - Chain check (check_chain): an endpoint serves requests only once it answered eth_chainId
//    and block 0's hash (64 hex digits) equal to the pool's chain: in one batch
//    (ChainCheckRequest), or one call at a time where it refuses batches; each request admitted
//    by its rate limit as any other. The first request through the pool asks every endpoint that
//    may be asked now (not out before its probe is due, not cooling down) at once; the pool's
//    chain is the answer of the first endpoint of the list that answers (list order is the
//    user's preference; a tie between two chains goes to the first), and the endpoints that
//    answered it are in. When none answers, the request fails naming each endpoint asked. An
//    endpoint on another chain is taken out, logged and shown in Stats (other_chain) and never
//    serves a request; it is asked again every probe_cap, and serves once it is on the pool's
//    chain. One that did not answer is asked before its first request, and every endpoint taken out
//    (failures, distrust) is asked again when it comes back: a devnet restarted behind the same URL
//    is another chain. So a database bound to the chain of the answers it got (node/app.h
//    CheckChain) only ever receives blocks of that chain. A helper pool of the same process (the
//    head tracker's, the readiness probe's) takes the chain the serving pool settled (chain_from)
//    rather than settling its own.
//  - Hedging: when an endpoint has not answered within its recent p95 latency (or the other
//    endpoints', when lower: an endpoint that turned slow soon has a slow p95 of its own; at least
//    hedge_min), the same request also goes to the next endpoint, and to the one after if that
//    hedge fails at once (at most two), and the first usable answer wins. At most hedge_budget of
//    the requests (plus a burst of hedge_burst) are hedged; each hedge and each win is counted.
// Every endpoint's requests, failures by kind, hedges and calls served are counted (Stats) and
// exported as gapless_rpc_endpoint_* metrics labelled by the redacted endpoint.
//
// The implementation, by part (endpoint_pool_internal.h says more): endpoint_pool.cc (routing and
// health), endpoint_pool_answers.cc (what an answer means), endpoint_pool_chain.cc (the chain
// check), endpoint_pool_stats.cc (the counts as a line and JSON), endpoint_pool_transport.cc
// (PoolTransport: routing, failover and hedging of one request).
//
// Thread-safety: EndpointPool is thread-safe. A PoolTransport is used by one thread at a time
// (like CurlTransport); with hedging it runs requests on threads of its own and waits for them
// before it is destroyed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "rpc/get_logs_limits.h"
#include "rpc/http_transport.h"

namespace gapless {

struct EndpointSpec {
  std::string url;
  double weight = 1.0;      // > 0: the share of requests it gets while healthy
  double rate_limit = 0.0;  // requests/s for this endpoint across the fleet; 0: the --rate-limit
};

// "URL [weight=W] [rate-limit=R], URL ...": endpoints separated by commas, each a URL followed by
// optional space-separated settings. One URL alone is a pool of one. Errors name the item (its
// URL redacted) and the setting.
Result<std::vector<EndpointSpec>> ParseEndpointList(std::string_view text);

// What an endpoint says its chain is, from one answer: eth_chainId and block 0's hash.
struct ChainIdentity {
  uint64_t chain_id = 0;
  std::string genesis_hash;  // "0x" + 64 hex digits
  bool operator==(const ChainIdentity&) const = default;
};

struct PoolOptions {
  int take_out_after = 3;  // consecutive failures
  int64_t probe_base_micros = 1'000'000;
  int64_t probe_cap_micros = 30'000'000;
  int64_t cooldown_micros = 1'000'000;  // after a 429 without Retry-After
  int64_t max_retry_after_micros = 30'000'000;
  // A method an endpoint answered -32601 is asked there again after this (providers add methods).
  int64_t missing_method_retry_micros = 600'000'000;
  bool hedge = true;
  double hedge_budget = 0.1;  // hedged requests at most this fraction of all, plus hedge_burst
  int hedge_burst = 5;
  int64_t hedge_min_micros = 50'000;
  // Check each endpoint's chain before it serves (see the file comment).
  bool check_chain = true;
  // Where another pool of the process already settled the chain (the one whose answers bound the
  // database): this pool takes that chain instead of settling its own by the list rule, so a
  // helper pool (the leader's head tracker, the readiness probe) cannot bind another chain when
  // the first endpoint is slow or away at its start. While it returns nullopt (that pool not
  // settled yet), requests fail Unavailable. Empty: the pool settles its own chain.
  std::function<std::optional<ChainIdentity>()> chain_from;
  // The eth_getLogs sizing of each endpoint (EndpointPool::log_sizers).
  GetLogsSizerOptions get_logs;
  Env* env = nullptr;  // time and the routing draw; nullptr = Env::Default()
};

// "chain 31337 (block 0 0xabc...)".
std::string DescribeChain(const ChainIdentity& chain);
// The batch that asks an endpoint its chain, and its answer read (InvalidData naming what is
// missing). Exposed for tests.
std::string_view ChainCheckRequest();
Result<ChainIdentity> ParseChainCheck(std::string_view answer);

// What one endpoint's answer (or failure) to a request means for the pool.
enum class EndpointOutcome {
  kGood,           // a usable answer (JSON-RPC errors of single calls included)
  kTransport,      // no answer: refused, timeout, reset
  kRateLimited,    // HTTP 429, or the whole request refused for rate limiting
  kServerError,    // HTTP 408/5xx, or the whole request refused otherwise
  kClientError,    // HTTP 4xx but 408/413/429: the endpoint's configuration (a bad key)
  kBatchRejected,  // HTTP 413, or one error object naming the batch
  kMissingMethod,  // -32601 in the answer
  kOtherChain,     // the chain check: another chain id or block 0 than the pool's
};
std::string_view EndpointOutcomeName(EndpointOutcome outcome);

// Classifies `response` (or its failure) to a request of `calls` calls. Exposed for tests.
EndpointOutcome ClassifyAnswer(const Result<HttpResponse>& response, size_t calls);

// The methods of `request` whose calls `answer` answers with -32601, matched by id as the client
// matches them (5 and "5" alike; distinct, in answer order). An error without a matching id, or
// with an id that calls of two methods share, names a method only when the request has one.
std::vector<std::string> MethodsAnsweredMissing(std::string_view request, std::string_view answer);

struct EndpointStats {
  std::string endpoint;  // redacted
  double weight = 1;
  bool in = true;        // not taken out
  bool cooling = false;  // after a 429
  double latency_ewma_ms = 0;
  size_t batch_limit = 0;  // 0: none learned
  std::vector<std::string> missing_methods;
  uint64_t requests = 0;  // answers and failures
  uint64_t good = 0;
  uint64_t failures = 0;
  uint64_t rate_limited = 0;
  uint64_t distrusted = 0;    // answers the caller found wrong
  uint64_t hedges = 0;        // requests sent here as a hedge
  uint64_t hedge_wins = 0;    // of which answered first
  uint64_t calls_served = 0;  // JSON-RPC calls in good answers
  // While the endpoint serves another chain than the pool's: DescribeChain of its answer.
  std::string other_chain;
};

// How requests to one endpoint are admitted: the fleet-wide rate limiter's window for that
// endpoint (node wires coord/rate_limiter.h RateLimiter here, one per endpoint). `acquire` waits
// for a slot (an error stops the request without counting against the endpoint); `slow_down`
// is told of the endpoint's 429s. Either may be empty.
struct EndpointAdmission {
  std::function<Status(size_t endpoint)> acquire;
  std::function<void(size_t endpoint)> slow_down;
};

class EndpointPool {
 public:
  EndpointPool(std::vector<EndpointSpec> specs, PoolOptions options = {});
  ~EndpointPool();
  EndpointPool(const EndpointPool&) = delete;
  EndpointPool& operator=(const EndpointPool&) = delete;

  size_t size() const { return endpoints_.size(); }
  const EndpointSpec& spec(size_t i) const;
  // "http://host:8545/***" (core/redact.h).
  const std::string& Describe(size_t i) const;
  const PoolOptions& options() const { return options_; }
  // A name for endpoint i that is the same in every process given the same URL and carries no
  // secret: "ep-" + 16 hex digits of a hash of the URL (for rate-limit keys).
  std::string Key(size_t i) const;

  // Set once, before or while clients use the pool.
  void SetAdmission(EndpointAdmission admission);
  Status Admit(size_t i);
  void SlowDown(size_t i);

  // The endpoints to try for a request of `calls` calls of `methods`, best first, skipping those
  // in `exclude` (bit i: endpoint i). The first is drawn by weight (see the file comment); the
  // rest follow by effective weight. Endpoints that are out or cooling come last, soonest back
  // first, unless a probe of an out one is due (then it goes first, and is marked probing until
  // its answer is recorded). `usable` (nullable) gets how many of the first ones may be asked now;
  // the rest are out or cooling. Never empty unless every endpoint is excluded.
  std::vector<size_t> Route(size_t calls, const std::vector<std::string>& methods, uint64_t exclude,
                            size_t* usable = nullptr);

  // The outcome of a request sent to endpoint i: its latency, its size and methods (a good answer
  // clears them from the endpoint's missing methods; with kMissingMethod, `methods` are the ones
  // answered -32601, MethodsAnsweredMissing), the server's Retry-After.
  void Record(size_t i, EndpointOutcome outcome, int64_t latency_micros, size_t calls,
              const std::vector<std::string>& methods, std::optional<int64_t> retry_after_micros);
  // An answer of endpoint i turned out wrong (a block hash not the head log's).
  void Distrust(size_t i);
  // The chain check. The pool's chain, once settled (SettleChain).
  std::optional<ChainIdentity> chain();
  // Whether endpoint i is to be asked its chain before it serves a request: the pool's chain is
  // settled, and i is not known to serve it (not asked yet, taken out since, or on another chain).
  bool NeedsChainCheck(size_t i);
  // Endpoint i answered the chain check with `chain`. Before the pool's chain is settled the
  // answer is kept; afterwards (and for the kept ones when it settles) it is compared: the same
  // chain lets i serve, another takes it out (logged once, Stats::other_chain, asked again every
  // probe_cap). Returns whether i serves the pool's chain (false while unsettled). `back_in`: the
  // check was the whole request (settling the chain), so an endpoint out for failures that
  // answers the pool's chain is back in; otherwise the request that follows decides.
  bool OfferChain(size_t i, const ChainIdentity& chain, bool back_in = false);
  // Settles the pool's chain as endpoint i's answer (first one wins; later calls change nothing).
  // The endpoints whose kept answers are that chain, i among them, are back in.
  void SettleChain(size_t i, const ChainIdentity& chain);
  // The endpoints to ask while settling the chain (bit i: endpoint i): those in and not cooling
  // down after a 429, and those out whose probe is due (marked probing: a failed check is a
  // failed probe, and its interval doubles). 0: none may be asked now.
  uint64_t SettleTargets();
  // The batch size endpoint i is known to take (0: no limit learned).
  size_t BatchLimit(size_t i);
  // Settles the pool's chain as `chain`, known from elsewhere (PoolOptions::chain_from); every
  // endpoint is then checked before its first request. Does nothing once settled.
  void AdoptChain(const ChainIdentity& chain);
  // Held by the client that settles the pool's chain, so the others wait for it.
  std::mutex& settle_mutex() { return settle_mu_; }

  // A request sent to endpoint i as a hedge; one it answered first.
  void CountHedge(size_t i);
  void CountHedgeWin(size_t i);

  // How long to wait for endpoint i before hedging: its recent p95 latency or the other
  // endpoints', whichever is lower (each known from 8 answers on), at least hedge_min; nullopt when
  // hedging is off or neither is known.
  std::optional<int64_t> HedgeDelayMicros(size_t i);
  // Takes one hedge from the budget; false when hedging now would exceed it.
  bool TakeHedge();

  std::vector<EndpointStats> Stats();

  // The endpoints' eth_getLogs sizers (see the file comment), endpoint i's at index i.
  GetLogsSizers& log_sizers() { return *log_sizers_; }
  // For `gapless status`: each endpoint's sizing, in endpoint order (GetLogsSizer::Describe:
  // "width 2000, cap 500 (stated, probe in 312 s)", "width 8000, no cap").
  std::vector<std::string> DescribeLogSizing() const { return log_sizers_->Describe(); }

 private:
  struct Endpoint;
  double EffectiveWeightLocked(size_t i) const;
  void FailedLocked(Endpoint& e, int64_t now);
  bool CompareChainLocked(Endpoint& e, const ChainIdentity& chain, int64_t now);
  // Endpoint e gave a good answer outside Record (the chain check while settling): in again.
  void BackInLocked(Endpoint& e);

  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  PoolOptions options_;
  std::mutex mu_;
  std::mutex settle_mu_;                                // taken before mu_, never while holding it
  std::shared_ptr<const EndpointAdmission> admission_;  // guarded by mu_
  std::optional<ChainIdentity> chain_;                  // guarded by mu_
  uint64_t posts_ = 0;
  uint64_t hedges_ = 0;
  std::unique_ptr<GetLogsSizers> log_sizers_;  // locks itself
};

// One client's view of the pool: a transport per endpoint (made by the caller, e.g. CurlTransport
// with the client's timeouts), routed by `pool`.
class PoolTransport : public HttpTransport {
 public:
  PoolTransport(std::shared_ptr<EndpointPool> pool,
                std::vector<std::unique_ptr<HttpTransport>> transports);
  ~PoolTransport() override;

  Result<HttpResponse> Post(std::string_view body) override;
  // Routed, failed over and hedged as Post, each endpoint asked its own body_for(i).
  Result<HttpResponse> PostFor(std::string_view method, const BodyFor& body_for) override;
  GetLogsSizers* log_sizers() override { return &pool_->log_sizers(); }
  // "pool of 3 (http://a/***, http://b, ...)".
  std::string Describe() const override;
  std::string Scrub(std::string text) const override;
  void Distrust(uint64_t served_by) override;
  // "http://a/***, http://b" for the endpoints in served_by.
  std::string DescribeServers(uint64_t served_by) const override;

  // For tests: the endpoints (bit i: endpoint i) that gave answers since MarkAnswers.
  void MarkAnswers() { answered_ = 0; }
  uint64_t answered() const { return answered_; }

 private:
  struct FlightSignal;
  struct Flight;
  // Sends body to endpoint i, on this thread or (hedging) on a thread of its own; `signal` is
  // notified when it ends.
  std::shared_ptr<Flight> Launch(size_t i, std::string body, size_t calls,
                                 const std::vector<std::string>* methods, bool async,
                                 std::shared_ptr<FlightSignal> signal);
  void WaitIdle(size_t i);
  // Sends body to order[0], the first of the `usable` endpoints that may be asked now, and hedges
  // it (see the file comment): when that endpoint has not answered within
  // EndpointPool::HedgeDelayMicros, the same request also goes to order[1], and to order[2] when
  // that hedge fails at once while order[0] still runs, as the hedge budget allows. Returns once
  // one of them answered usably or all of them ended: the flights sent, order[0]'s first (a
  // flight that lost may still be running on its own thread). Endpoint i is sent body_for(i).
  std::vector<std::shared_ptr<Flight>> SendHedged(const std::vector<size_t>& order, size_t usable,
                                                  const BodyFor& body_for, size_t calls,
                                                  const std::vector<std::string>& methods);
  // Post's and PostFor's routing and failover of one request of `calls` calls of `methods`.
  Result<HttpResponse> Send(size_t calls, const std::vector<std::string>& methods,
                            const BodyFor& body_for);
  // Asks endpoint i its chain over its own transport and tells the pool (OfferChain; a failure is
  // recorded as any request's). One batch, or its two calls one at a time where the endpoint
  // refuses batches; each request admitted as any other (EndpointPool::Admit). On failure,
  // `failure` gets what the client is to see (never a 2xx answer: the client would read it as
  // the answer to its own request); `same`: whether it serves the pool's chain. `settling`: the
  // check is the whole request (SettleChain).
  Result<ChainIdentity> CheckChainOf(size_t i, Result<HttpResponse>* failure, bool* same,
                                     bool settling);
  // Settles the pool's chain (the first request of any client of the pool): the endpoints that
  // may be asked now (EndpointPool::SettleTargets) asked at once, the first of the list that
  // answers decides; the others' checks finish on their own threads. When no endpoint answered,
  // fails naming each one asked and its failure (a pool of one: its failure as it is).
  std::optional<Result<HttpResponse>> SettleChain();
  // Endpoints with a request of this client still running (a hedge that lost).
  uint64_t BusyMask() const;

  std::shared_ptr<EndpointPool> pool_;
  std::vector<std::unique_ptr<HttpTransport>> transports_;
  std::vector<std::shared_ptr<Flight>> in_flight_;  // per endpoint, the last async request
  uint64_t answered_ = 0;                           // since MarkAnswers
  uint64_t avoid_ = 0;  // distrusted: not asked by this client until avoid_until_
  int64_t avoid_until_ = 0;
};

// How long a client keeps its requests away from an endpoint whose answer it found wrong: long
// enough for the unit of work's retries (a range refetched after the worker's backoff) to be
// served elsewhere, short enough that a backend that lagged a moment is soon asked again.
inline constexpr int64_t kAvoidDistrustedMicros = 10'000'000;

// The methods of a request body ("method":"..." of each call, distinct, in order) and the number of
// calls in it. Exposed for tests.
std::vector<std::string> MethodsOf(std::string_view body, size_t* calls);

// One line of an endpoint's counts, for logs and `gapless status`: "in, 120 requests, 100 good,
// 2 failures, 3 rate-limited, 1 distrusted, 4 hedges (3 won), 980 calls served, latency 5.2 ms,
// batch limit 10, lacks eth_getBlockReceipts".
std::string DescribeStats(const EndpointStats& stats);

// The pool's counts as JSON (an array of objects, one per endpoint), as a fleet process publishes
// them for `gapless status`, and back. The parser ignores what it does not know.
std::string StatsJson(const std::vector<EndpointStats>& stats);
// One endpoint's object of StatsJson, without its closing brace (a caller may add fields).
std::string StatsJsonFields(const EndpointStats& stats);
Result<std::vector<EndpointStats>> ParseStatsJson(std::string_view json);

}  // namespace gapless
