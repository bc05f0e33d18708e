#include "core/metrics.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>

namespace gapless {
namespace {

void AddTo(std::atomic<double>& a, double by) {
  double old = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(old, old + by, std::memory_order_relaxed)) {
  }
}

// A sample value: integers without a fraction, others with full precision, infinities as
// Prometheus writes them.
std::string FormatValue(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // the shortest exact form
  return std::string(buf, end);
}

std::string EscapeLabel(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// {a="x",b="y"} with an extra label (le) when given; "" without labels.
std::string LabelText(const std::vector<std::string>& names, const std::vector<std::string>& values,
                      std::string_view extra_name = {}, std::string_view extra_value = {}) {
  if (names.empty() && extra_name.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out.push_back(',');
    out += names[i] + "=\"" + EscapeLabel(values[i]) + "\"";
  }
  if (!extra_name.empty()) {
    if (!names.empty()) out.push_back(',');
    out += std::string(extra_name) + "=\"" + std::string(extra_value) + "\"";
  }
  out.push_back('}');
  return out;
}

}  // namespace

void Counter::Inc(double by) {
  if (by > 0) AddTo(value_, by);
}

void Gauge::Add(double by) { AddTo(value_, by); }

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0);
}

void Histogram::Observe(double v) {
  size_t i =
      static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  AddTo(sum_, v);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(running);
  }
  s.count = running;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

const std::vector<double>& LatencyBuckets() {
  static const std::vector<double> kBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                               0.5,   1,      2.5,   5,    10,    30,   60};
  return kBuckets;
}

MetricsRegistry& MetricsRegistry::Default() {
  static MetricsRegistry* registry = new MetricsRegistry();  // never destroyed: used at exit
  return *registry;
}

MetricsRegistry::Entry& MetricsRegistry::Find(std::string_view name, MetricType type,
                                              std::string_view help) {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    it = entries_.emplace(std::string(name), Entry{type, std::string(help), {}, {}, {}, {}}).first;
  } else if (it->second.type != type) {
    std::fprintf(stderr, "metrics: %.*s registered with two types\n", static_cast<int>(name.size()),
                 name.data());
    std::abort();
  }
  return it->second;
}

Family<Counter>& MetricsRegistry::CounterFamily(std::string_view name, std::string_view help,
                                                std::vector<std::string> labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = Find(name, MetricType::kCounter, help);
  if (e.counter == nullptr) {
    e.counter = std::make_unique<Family<gapless::Counter>>(
        std::move(labels), [] { return std::make_unique<gapless::Counter>(); });
  }
  return *e.counter;
}

Family<Gauge>& MetricsRegistry::GaugeFamily(std::string_view name, std::string_view help,
                                            std::vector<std::string> labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = Find(name, MetricType::kGauge, help);
  if (e.gauge == nullptr) {
    e.gauge = std::make_unique<Family<gapless::Gauge>>(
        std::move(labels), [] { return std::make_unique<gapless::Gauge>(); });
  }
  return *e.gauge;
}

Family<Histogram>& MetricsRegistry::HistogramFamily(std::string_view name, std::string_view help,
                                                    std::vector<double> bounds,
                                                    std::vector<std::string> labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = Find(name, MetricType::kHistogram, help);
  if (e.histogram == nullptr) {
    e.histogram = std::make_unique<Family<gapless::Histogram>>(
        std::move(labels), [bounds] { return std::make_unique<gapless::Histogram>(bounds); });
  }
  return *e.histogram;
}

void MetricsRegistry::GaugeFunction(std::string_view name, std::string_view help,
                                    std::function<double()> read) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = Find(name, MetricType::kGauge, help);
  e.read = std::move(read);
}

std::string MetricsRegistry::Render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& entry : entries_) {
    // Not a structured binding: clang 14 (the fuzz build) cannot capture one in the lambdas below.
    const std::string& name = entry.first;
    const Entry& e = entry.second;
    const char* type = e.type == MetricType::kCounter ? "counter"
                       : e.type == MetricType::kGauge ? "gauge"
                                                      : "histogram";
    out += "# HELP " + name + " " + EscapeHelp(e.help) + "\n";
    out += "# TYPE " + name + " " + type + "\n";
    if (e.read) out += name + " " + FormatValue(e.read()) + "\n";
    if (e.counter != nullptr) {
      e.counter->ForEach([&](const std::vector<std::string>& labels, const gapless::Counter& c) {
        out += name + LabelText(e.counter->label_names(), labels) + " " + FormatValue(c.Value()) +
               "\n";
      });
    }
    if (e.gauge != nullptr) {
      e.gauge->ForEach([&](const std::vector<std::string>& labels, const gapless::Gauge& g) {
        out +=
            name + LabelText(e.gauge->label_names(), labels) + " " + FormatValue(g.Value()) + "\n";
      });
    }
    if (e.histogram != nullptr) {
      const auto& names = e.histogram->label_names();
      e.histogram->ForEach([&](const std::vector<std::string>& labels,
                               const gapless::Histogram& h) {
        gapless::Histogram::Snapshot s = h.Read();
        for (size_t i = 0; i < h.bounds().size(); ++i) {
          out += name + "_bucket" + LabelText(names, labels, "le", FormatValue(h.bounds()[i])) +
                 " " + std::to_string(s.cumulative[i]) + "\n";
        }
        out += name + "_bucket" + LabelText(names, labels, "le", "+Inf") + " " +
               std::to_string(s.count) + "\n";
        out += name + "_sum" + LabelText(names, labels) + " " + FormatValue(s.sum) + "\n";
        out += name + "_count" + LabelText(names, labels) + " " + std::to_string(s.count) + "\n";
      });
    }
  }
  return out;
}

double ProcessResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

void RegisterProcessMetrics() {
  static std::once_flag once;
  std::call_once(once, [] {
    MetricsRegistry& m = MetricsRegistry::Default();
    m.GaugeFunction("gapless_process_resident_memory_bytes", "Resident set size of the process",
                    ProcessResidentBytes);
    const double start =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    m.GaugeFunction("gapless_process_start_time_seconds",
                    "When the process started, Unix time in seconds", [start] { return start; });
  });
}

}  // namespace gapless
