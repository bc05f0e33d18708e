// server_faults: the faults on the deployment's servers (faults.h). lock-node: a lock node
// killed, restarted empty when healed (no persistence); coord-redis: the coordination Redis the
// same; coord-failover: its replica, made to lag, promoted and every coordination link moved to
// it, a new replica started when healed; bus-down: the Redis bus paused, RabbitMQ stopped or a
// Kafka broker down, back when healed; pg-restart: the harness's PostgreSQL restarted (only drawn
// when the server is the harness's own).
#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "chaos/faults/faults.h"

namespace gapless::chaos {
namespace {

RedisServer& LockNode(Deployment* d, const Fault& f) {
  return *d->lock_nodes_[std::stoi(f.target.substr(5)) - 1];  // "lock-2"
}

class LockNodeFault : public FaultType {
 public:
  explicit LockNodeFault(Deployment* d) : d_(d) {}
  void Inject(const Fault& f) override { LockNode(d_, f).Kill(); }
  bool Heal(const Fault& f) override {
    Status st = LockNode(d_, f).Restart();
    if (!st.ok()) d_->Note("  restart failed: " + st.ToString());
    return true;
  }

 private:
  Deployment* d_;
};

class CoordRedisFault : public FaultType {
 public:
  explicit CoordRedisFault(Deployment* d) : d_(d) {}
  void Inject(const Fault& f) override {
    (void)f;
    d_->coord_->Kill();
  }
  bool Heal(const Fault& f) override {
    (void)f;
    Status st = d_->coord_->Restart();
    if (!st.ok()) d_->Note("  restart failed: " + st.ToString());
    return true;
  }

 private:
  Deployment* d_;
};

// The replica stops receiving the primary's writes for latency_ms, the primary is killed and the
// replica promoted: the writes of those moments are lost, as in a failover to a lagging replica.
class CoordFailoverFault : public FaultType {
 public:
  explicit CoordFailoverFault(Deployment* d) : d_(d) {}
  void Inject(const Fault& f) override {
    if (d_->coord_replica_ == nullptr) {
      d_->Note("  no replica yet (the last failover's replacement has not joined): skipped");
      return;
    }
    // The replica stops receiving the primary's writes, and misses those of the next moments.
    d_->replication_->Pause();
    std::this_thread::sleep_for(std::chrono::milliseconds(f.latency_ms));
    d_->coord_->Kill();
    auto conn = ConnectAnyRole(d_->coord_replica_->url());
    Status st = conn.ok() ? (*conn)->Command({"REPLICAOF", "NO", "ONE"}).status() : conn.status();
    if (!st.ok()) d_->Note("  promotion failed: " + st.ToString());
    // Every process's coordination link now leads to the promoted replica.
    for (auto& [name, link] : d_->links_) {
      if (name.size() > 6 && name.compare(name.size() - 6, 6, ">coord") == 0) {
        link->SetTarget("127.0.0.1", d_->coord_replica_->port());
        link->CloseAll();
      }
    }
    d_->coord_ = std::move(d_->coord_replica_);
    d_->replication_->CloseAll();  // the bytes it held back are lost with the old primary
    d_->replication_->SetTarget("127.0.0.1", d_->coord_->port());
    d_->replication_->Resume();
    d_->Note(
        fmt::format("  the replica on port {} is the coordination Redis now", d_->coord_->port()));
  }
  bool Heal(const Fault& f) override {
    (void)f;
    if (d_->coord_replica_ != nullptr) return false;
    Status st = d_->StartCoordReplica();
    d_->Note(st.ok() ? fmt::format("  a new replica on port {} follows the coordination Redis",
                                   d_->coord_replica_->port())
                     : "  the new replica did not start: " + st.ToString());
    return true;
  }

 private:
  Deployment* d_;
};

class BusDownFault : public FaultType {
 public:
  explicit BusDownFault(Deployment* d) : d_(d) {}
  void Inject(const Fault& f) override {
    Deployment* d = d_;
    if (f.target == "redis" && d->bus_ != nullptr) {
      d->bus_->Pause();
    } else if (f.target == "amqp" && d->amqp_ != nullptr) {
      // A graceful stop takes a few seconds: off the fault loop (the start waits for it).
      d->bus_ops_.emplace_back([d] {
        std::lock_guard<std::mutex> lock(d->amqp_mu_);
        d->amqp_->Stop();
        d->Note("  RabbitMQ stopped");
      });
    } else if (f.target.rfind("kafka-", 0) == 0 && d->kafka_ != nullptr) {
      Status st = d->kafka_->SetBrokerDown(std::stoi(f.target.substr(6)));
      if (!st.ok()) d->Note("  " + st.ToString());
    }
  }
  bool Heal(const Fault& f) override {
    Deployment* d = d_;
    if (f.target == "redis" && d->bus_ != nullptr) {
      d->bus_->Resume();
    } else if (f.target == "amqp" && d->amqp_ != nullptr) {
      d->bus_ops_.emplace_back([d] {
        std::lock_guard<std::mutex> lock(d->amqp_mu_);
        // Under heavy load a start can miss its 60 s (seed 274): try again, as
        // scripts/rabbitmq.sh does, rather than leave the bus down for the rest of the seed.
        Status st;
        for (int attempt = 1; attempt <= 3; ++attempt) {
          st = d->amqp_->Restart();
          if (st.ok()) break;
          d->Note(
              fmt::format("  RabbitMQ restart failed (try {} of 3): {}", attempt, st.ToString()));
        }
        if (st.ok()) d->Note("  RabbitMQ started again");
      });
    } else if (f.target.rfind("kafka-", 0) == 0 && d->kafka_ != nullptr) {
      Status st = d->kafka_->SetBrokerUp(std::stoi(f.target.substr(6)));
      if (!st.ok()) d->Note("  " + st.ToString());
    }
    return true;
  }

 private:
  Deployment* d_;
};

// A fast restart: every connection cut, the data kept. Not healed (it is over when it is done).
class PgRestartFault : public FaultType {
 public:
  explicit PgRestartFault(Deployment* d) : d_(d) {}
  void Inject(const Fault& f) override {
    (void)f;
    if (d_->pg_ == nullptr) return;  // the server is not the harness's: never drawn
    Status st = d_->pg_->Restart();
    d_->Note(st.ok() ? "  PostgreSQL is back" : "  PostgreSQL restart failed: " + st.ToString());
  }

 private:
  Deployment* d_;
};

}  // namespace

std::unique_ptr<FaultType> MakeLockNodeFault(Deployment* d) {
  return std::make_unique<LockNodeFault>(d);
}
std::unique_ptr<FaultType> MakeCoordRedisFault(Deployment* d) {
  return std::make_unique<CoordRedisFault>(d);
}
std::unique_ptr<FaultType> MakeCoordFailoverFault(Deployment* d) {
  return std::make_unique<CoordFailoverFault>(d);
}
std::unique_ptr<FaultType> MakeBusDownFault(Deployment* d) {
  return std::make_unique<BusDownFault>(d);
}
std::unique_ptr<FaultType> MakePgRestartFault(Deployment* d) {
  return std::make_unique<PgRestartFault>(d);
}

}  // namespace gapless::chaos
