// metrics: the process's Prometheus metrics (counters, gauges, fixed-bucket histograms), rendered
// in the Prometheus text exposition format (version 0.0.4) for the /metrics endpoint
// (node/ops_server.h) and docs/operations.md's list.
//
// One registry per process (MetricsRegistry::Default()): metrics are counted where the work
// happens (the RPC client, the range writer, the queue, the elector, the relay), deep below the
// composition root, and a scrape shows the whole process. Passing a registry down every
// constructor would touch every module for no gain in a process that has exactly one.
//
// Names and units follow Prometheus's conventions: gapless_<what>_total for counters,
// _seconds/_bytes/_blocks suffixes for units, base units only. Label values are fixed words
// (a method, a typed reason, a bus name already redacted by core/redact.h), never a URL or any
// other input that could carry a secret, and never unbounded (no block numbers).
//
// Usage, typically with a function-local static:
//   static Counter& posts = MetricsRegistry::Default().CounterFamily("gapless_rpc_requests_total",
//                                                               "JSON-RPC POSTs sent").Get();
//   posts.Inc();
//   MetricsRegistry::Default().CounterFamily("gapless_rpc_errors_total", "...", {"reason"})
//       .With({reason}).Inc();
//
// Thread-safety: everything is thread-safe. Inc/Set/Observe are lock-free; With() takes the
// family's mutex (cache the returned reference where it is hot). Returned references stay valid
// for the life of the process.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace gapless {

class Counter {
 public:
  void Inc(double by = 1);  // by >= 0
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double by);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  // bounds: the buckets' upper bounds, strictly increasing (+Inf is implied).
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf (== count)
    uint64_t count = 0;
    double sum = 0;
  };
  Snapshot Read() const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // per bucket, not cumulative; last = +Inf
  std::atomic<double> sum_{0};
};

// Seconds buckets for request and write latencies: 1 ms .. 60 s.
const std::vector<double>& LatencyBuckets();

enum class MetricType { kCounter, kGauge, kHistogram };

// The metrics of one name, one per combination of label values.
template <class M>
class Family {
 public:
  Family(std::vector<std::string> label_names, std::function<std::unique_ptr<M>()> make)
      : label_names_(std::move(label_names)), make_(std::move(make)) {}

  // The metric with these label values (as many as the family has label names; extra or missing
  // ones are an Internal programming error: std::abort()).
  M& With(std::initializer_list<std::string_view> values);
  M& Get() { return With({}); }

  const std::vector<std::string>& label_names() const { return label_names_; }
  // Calls f(label values, metric) for each metric, in label order.
  void ForEach(const std::function<void(const std::vector<std::string>&, const M&)>& f) const;

 private:
  std::vector<std::string> label_names_;
  std::function<std::unique_ptr<M>()> make_;
  mutable std::mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<M>> metrics_;
};

class MetricsRegistry {
 public:
  static MetricsRegistry& Default();

  // The family of this name, created at the first call; later calls return the same one (the
  // help and labels of the first call stand; another type under the same name aborts).
  Family<Counter>& CounterFamily(std::string_view name, std::string_view help,
                                 std::vector<std::string> labels = {});
  Family<Gauge>& GaugeFamily(std::string_view name, std::string_view help,
                             std::vector<std::string> labels = {});
  Family<Histogram>& HistogramFamily(std::string_view name, std::string_view help,
                                     std::vector<double> bounds,
                                     std::vector<std::string> labels = {});
  // A gauge read when it is rendered (process memory, a queue depth held elsewhere). Registering
  // a name again replaces the function.
  void GaugeFunction(std::string_view name, std::string_view help, std::function<double()> read);

  // Every metric in the text exposition format, families sorted by name.
  std::string Render() const;

 private:
  struct Entry {
    MetricType type;
    std::string help;
    std::unique_ptr<Family<gapless::Counter>> counter;
    std::unique_ptr<Family<gapless::Gauge>> gauge;
    std::unique_ptr<Family<gapless::Histogram>> histogram;
    std::function<double()> read;
  };
  Entry& Find(std::string_view name, MetricType type, std::string_view help);

  mutable std::mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_;
};

// The process's resident set size in bytes (/proc/self/statm), 0 when unreadable. Also the
// consumer's status report (events/consumer.h).
double ProcessResidentBytes();

// Registers process-level gauges on the default registry (RSS, start time), once.
void RegisterProcessMetrics();

// ---- implementation of the template ----

template <class M>
M& Family<M>::With(std::initializer_list<std::string_view> values) {
  if (values.size() != label_names_.size()) std::abort();
  std::vector<std::string> key(values.begin(), values.end());
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = metrics_[key];
  if (slot == nullptr) slot = make_();
  return *slot;
}

template <class M>
void Family<M>::ForEach(
    const std::function<void(const std::vector<std::string>&, const M&)>& f) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [labels, metric] : metrics_) f(labels, *metric);
}

}  // namespace gapless
