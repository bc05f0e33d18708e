// gapless-kafka-mock: librdkafka's mock Kafka cluster (rd_kafka_mock_cluster_new) in a process of
// its own, so a test can drive brokers down and up while its clients talk the real Kafka protocol.
//
//   gapless-kafka-mock [brokers]      (default 3; broker ids are 1..brokers)
//
// Prints the bootstrap servers ("127.0.0.1:p1,127.0.0.1:p2,...") as the first line of stdout,
// then reads one command per line from stdin and answers each with one line, "ok" or
// "error <reason>":
//
//   down <broker_id>                          disconnect the broker, refuse new connections
//   up <broker_id>                            accept connections again
//   create <topic> <partitions> <replication> create a topic (auto-created topics get 4 partitions)
//   leader <topic> <partition> <broker_id>    make the broker the partition's leader
//   errors <api_key> <error_code>...          the next requests of that API (any broker) fail
//                                             with these Kafka error codes, in order
//   quit                                      exit
//
// It exits when stdin reaches end of file, so a test process that dies (even by SIGKILL) does not
// leave the cluster behind. Setting a broker down does not move partition leadership (librdkafka's
// mock does not elect leaders); `leader` does that explicitly.
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

void Reply(rd_kafka_resp_err_t err) {
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    std::cout << "ok\n" << std::flush;
  } else {
    std::cout << "error " << rd_kafka_err2name(err) << ": " << rd_kafka_err2str(err) << "\n"
              << std::flush;
  }
}

}  // namespace

int main(int argc, char** argv) {
  int brokers = 3;
  if (argc > 1) brokers = std::atoi(argv[1]);
  if (brokers <= 0 || brokers > 16) {
    std::cerr << "usage: gapless-kafka-mock [brokers 1..16]\n";
    return 2;
  }
  char errstr[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  // The handle only hosts the mock cluster; keep its own logging quiet.
  rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof(errstr));
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
  if (rk == nullptr) {
    std::cerr << "gapless-kafka-mock: rd_kafka_new: " << errstr << "\n";
    return 1;
  }
  rd_kafka_mock_cluster_t* mcluster = rd_kafka_mock_cluster_new(rk, brokers);
  if (mcluster == nullptr) {
    std::cerr << "gapless-kafka-mock: rd_kafka_mock_cluster_new failed\n";
    rd_kafka_destroy(rk);
    return 1;
  }
  std::cout << rd_kafka_mock_cluster_bootstraps(mcluster) << "\n" << std::flush;

  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    if (cmd.empty()) continue;
    if (cmd == "quit") {
      std::cout << "ok\n" << std::flush;
      break;
    }
    if (cmd == "down" || cmd == "up") {
      int32_t id = -1;
      if (!(in >> id)) {
        std::cout << "error usage: " << cmd << " <broker_id>\n" << std::flush;
        continue;
      }
      Reply(cmd == "down" ? rd_kafka_mock_broker_set_down(mcluster, id)
                          : rd_kafka_mock_broker_set_up(mcluster, id));
    } else if (cmd == "create") {
      std::string topic;
      int partitions = 0;
      int replication = 0;
      if (!(in >> topic >> partitions >> replication) || partitions <= 0 || replication <= 0) {
        std::cout << "error usage: create <topic> <partitions> <replication>\n" << std::flush;
        continue;
      }
      Reply(rd_kafka_mock_topic_create(mcluster, topic.c_str(), partitions, replication));
    } else if (cmd == "leader") {
      std::string topic;
      int32_t partition = -1;
      int32_t id = -1;
      if (!(in >> topic >> partition >> id)) {
        std::cout << "error usage: leader <topic> <partition> <broker_id>\n" << std::flush;
        continue;
      }
      Reply(rd_kafka_mock_partition_set_leader(mcluster, topic.c_str(), partition, id));
    } else if (cmd == "errors") {
      int api_key = -1;
      std::vector<rd_kafka_resp_err_t> errors;
      int code = 0;
      in >> api_key;
      while (in >> code) errors.push_back(static_cast<rd_kafka_resp_err_t>(code));
      if (api_key < 0 || errors.empty()) {
        std::cout << "error usage: errors <api_key> <error_code>...\n" << std::flush;
        continue;
      }
      rd_kafka_mock_push_request_errors_array(mcluster, static_cast<int16_t>(api_key),
                                              errors.size(), errors.data());
      std::cout << "ok\n" << std::flush;
    } else {
      std::cout << "error unknown command: " << cmd << "\n" << std::flush;
    }
  }
  rd_kafka_mock_cluster_destroy(mcluster);
  rd_kafka_destroy(rk);
  return 0;
}
