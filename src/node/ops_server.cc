#include "node/ops_server.h"

#include <httplib.h>

#include <charconv>
#include <chrono>
#include <mutex>
#include <thread>

#include "core/metrics.h"
#include "events/event.h"
#include "node/readiness.h"
#include "status_page.h"

namespace gapless {

Result<std::pair<std::string, int>> ParseListenAddress(const std::string& address) {
  auto bad = [&](const std::string& why) {
    return FailedPrecondition("--metrics-addr " + address + ": " + why);
  };
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return bad("expected HOST:PORT, e.g. 127.0.0.1:9464");
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) return bad("expected HOST:PORT, e.g. 0.0.0.0:9464 (all interfaces)");
  const std::string port_text = address.substr(colon + 1);
  int port = -1;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 0 || port > 65535) {
    return bad("the port must be a number from 0 to 65535");
  }
  return std::make_pair(host, port);
}

struct OpsServer::Impl {
  OpsServerOptions options;
  // /status.json is gathered by one request at a time: the others get the last body at once (or
  // 503 before the first), so slow servers behind the status never hold the endpoint's threads
  // that /healthz, /readyz and /metrics need.
  std::mutex status_mu;  // held while gathering
  std::mutex last_mu;
  std::string last_status;  // guarded by last_mu
  httplib::Server server;
  std::string host;
  int port = 0;
  std::thread thread;
};

OpsServer::OpsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

OpsServer::~OpsServer() {
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int OpsServer::port() const { return impl_->port; }

std::string OpsServer::url() const {
  const std::string& h = impl_->host;
  return "http://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" +
         std::to_string(impl_->port) + "/";
}

Result<std::unique_ptr<OpsServer>> OpsServer::Start(OpsServerOptions options) {
  GAPLESS_ASSIGN_OR_RETURN(auto address, ParseListenAddress(options.address));
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->host = address.first;
  Impl* self = impl.get();
  httplib::Server& s = impl->server;
  // Two threads: a scrape and a probe at once; more callers wait briefly.
  s.new_task_queue = [] { return new httplib::ThreadPool(2); };
  // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, with which a second process
  // binds the same port without an error and the kernel splits the scrapes between the two.
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  s.set_read_timeout(5, 0);
  s.set_write_timeout(5, 0);
  RegisterProcessMetrics();
  s.Get("/metrics", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(MetricsRegistry::Default().Render(),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain; charset=utf-8");
  });
  s.Get("/readyz", [self](const httplib::Request&, httplib::Response& res) {
    if (self->options.readiness == nullptr) {
      res.set_content("ready\n", "text/plain; charset=utf-8");
      return;
    }
    ReadinessProber::Report report = self->options.readiness->Read();
    res.status = report.ready ? 200 : 503;
    res.set_content(report.text, "text/plain; charset=utf-8");
  });
  s.Get("/status.json", [self](const httplib::Request&, httplib::Response& res) {
    if (!self->options.status_json) {
      res.status = 404;
      res.set_content("this process serves no status\n", "text/plain; charset=utf-8");
      return;
    }
    std::unique_lock<std::mutex> gathering(self->status_mu, std::try_to_lock);
    if (!gathering.owns_lock()) {
      std::lock_guard<std::mutex> lock(self->last_mu);
      if (self->last_status.empty()) {
        res.status = 503;
        res.set_content("{\"error\":\"the status is being gathered; try again\"}\n",
                        "application/json");
      } else {
        res.set_header("Cache-Control", "no-store");
        res.set_content(self->last_status, "application/json");
      }
      return;
    }
    Result<std::string> body = self->options.status_json();
    if (body.ok()) {
      std::lock_guard<std::mutex> lock(self->last_mu);
      self->last_status = *body;
    }
    if (!body.ok()) {
      res.status = 503;
      std::string json = "{\"error\":";
      AppendJsonString(json, body.status().message());
      res.set_content(json + "}\n", "application/json");
      return;
    }
    res.set_header("Cache-Control", "no-store");
    res.set_content(*body, "application/json");
  });
  s.Get("/", [self](const httplib::Request&, httplib::Response& res) {
    if (!self->options.status_json) {
      res.set_content("gapless: /metrics /healthz /readyz (this process serves no status page)\n",
                      "text/plain; charset=utf-8");
      return;
    }
    res.set_content(std::string(page::kFiles[0].second), "text/html; charset=utf-8");
  });
  int port = address.second;
  if (port == 0) {
    port = s.bind_to_any_port(impl->host);
  } else if (!s.bind_to_port(impl->host, port)) {
    port = -1;
  }
  if (port < 0) {
    return FailedPrecondition("--metrics-addr " + impl->options.address +
                              ": cannot listen there (in use, or not an address of this machine)");
  }
  impl->port = port;
  impl->thread = std::thread([self] { self->server.listen_after_bind(); });
  // Until the thread is in its accept loop: a stop() before that would be missed and the
  // destructor's join would wait forever.
  for (int i = 0; i < 5'000 && !impl->server.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::unique_ptr<OpsServer>(new OpsServer(std::move(impl)));
}

}  // namespace gapless
