// PoolTransport (rpc/endpoint_pool.h): one client's requests through the RPC endpoint pool. Post
// routes each request (EndpointPool::Route), fails over to the next endpoint within the same
// Post, hedges a slow one (SendHedged), and keeps away from endpoints whose answers the client
// found wrong (Distrust). PostFor does the same for a request whose body depends on the endpoint
// (JsonRpcClient::GetLogs: each endpoint asked the range its own sizer gives). Launch sends to one
// endpoint, after its chain check when it needs one (endpoint_pool_chain.cc).
#include <fmt/format.h>

#include <bit>
#include <chrono>
#include <thread>

#include "rpc/endpoint_pool.h"
#include "rpc/endpoint_pool_internal.h"

namespace gapless {

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
    size_t i, std::string body, size_t calls, const std::vector<std::string>* methods, bool async,
    std::shared_ptr<FlightSignal> signal) {
  WaitIdle(i);
  auto flight = std::make_shared<Flight>();
  flight->signal = std::move(signal);
  flight->endpoint = i;
  auto run = [this, flight, i, body = std::move(body), calls, methods = *methods] {
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

std::vector<std::shared_ptr<PoolTransport::Flight>> PoolTransport::SendHedged(
    const std::vector<size_t>& order, size_t usable, const BodyFor& body_for, size_t calls,
    const std::vector<std::string>& methods) {
  const size_t first = order[0];
  std::optional<size_t> second;
  if (usable > 1) second = order[1];
  std::optional<int64_t> delay;
  if (second.has_value()) delay = pool_->HedgeDelayMicros(first);

  auto signal = std::make_shared<FlightSignal>();
  std::vector<std::shared_ptr<Flight>> flights;
  if (!delay.has_value()) {
    flights.push_back(Launch(first, body_for(first), calls, &methods, /*async=*/false, signal));
  } else {
    flights.push_back(Launch(first, body_for(first), calls, &methods, /*async=*/true, signal));
    std::unique_lock<std::mutex> lock(signal->mu);
    signal->cv.wait_for(lock, std::chrono::microseconds(*delay), [&] { return flights[0]->done; });
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
        flights.push_back(
            Launch(order[next], body_for(order[next]), calls, &methods, /*async=*/true, signal));
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
  return flights;
}

Result<HttpResponse> PoolTransport::Post(std::string_view body) {
  size_t calls = 1;
  const std::vector<std::string> methods = MethodsOf(body, &calls);
  return Send(calls, methods, [body](size_t) { return std::string(body); });
}

Result<HttpResponse> PoolTransport::PostFor(std::string_view method, const BodyFor& body_for) {
  return Send(1, {std::string(method)}, body_for);
}

Result<HttpResponse> PoolTransport::Send(size_t calls, const std::vector<std::string>& methods,
                                         const BodyFor& body_for) {
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
    std::vector<std::shared_ptr<Flight>> flights =
        SendHedged(order, usable, body_for, calls, methods);
    std::unique_lock<std::mutex> lock(flights[0]->signal->mu);
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
