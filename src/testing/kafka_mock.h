// KafkaMockCluster: a private mock Kafka cluster of one test, run by the helper process
// gapless-kafka-mock (testing/kafka_mock_main.cc, librdkafka's rd_kafka_mock_cluster), driven over
// the helper's stdin/stdout. Clients reach it at bootstrap() like a real cluster.
//
// Broker ids are 1..brokers. SetBrokerDown disconnects one broker and refuses new connections
// until SetBrokerUp; it does not move partition leadership (SetLeader does). Topics that are not
// created explicitly are auto-created with 4 partitions when a producer first writes to them;
// consumers do not auto-create, so tests create the topics they subscribe to.
//
// The helper exits when its stdin closes, so it dies with the test process even on SIGKILL; the
// destructor closes stdin, waits briefly, then SIGKILLs the helper by its pid and reaps it.
//
// Thread-safety: not thread-safe; one owner.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace gapless {

class KafkaMockCluster {
 public:
  // Starts the helper with `brokers` brokers and reads its bootstrap line. `binary` defaults to
  // the gapless-kafka-mock built beside this library.
  static Result<std::unique_ptr<KafkaMockCluster>> Start(int brokers = 3, std::string binary = "");
  ~KafkaMockCluster();
  KafkaMockCluster(const KafkaMockCluster&) = delete;
  KafkaMockCluster& operator=(const KafkaMockCluster&) = delete;

  const std::string& bootstrap() const { return bootstrap_; }  // "127.0.0.1:p1,127.0.0.1:p2"
  std::string url() const { return "kafka://" + bootstrap_; }
  pid_t pid() const { return pid_; }

  Status SetBrokerDown(int32_t broker_id);
  Status SetBrokerUp(int32_t broker_id);
  // replication <= 0: min(3, brokers).
  Status CreateTopic(const std::string& name, int partitions, int replication = 0);
  Status SetLeader(const std::string& topic, int32_t partition, int32_t broker_id);
  // The next requests with Kafka API key `api_key` (0 Produce, 26 EndTxn, ...) fail with these
  // Kafka error codes in order (rd_kafka_mock_push_request_errors).
  Status PushRequestErrors(int api_key, const std::vector<int>& error_codes);

 private:
  KafkaMockCluster() = default;
  // Sends one command line and reads the one-line answer: Ok for "ok", Internal otherwise.
  Status Command(const std::string& line);
  Result<std::string> ReadLine(int64_t timeout_ms);
  void Stop();

  int brokers_ = 0;
  pid_t pid_ = -1;
  int to_child_ = -1;    // the helper's stdin
  int from_child_ = -1;  // the helper's stdout
  std::string buffered_;
  std::string bootstrap_;
};

}  // namespace gapless
