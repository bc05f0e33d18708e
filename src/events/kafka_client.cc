// kafka_client: what the Kafka bus's clients share (kafka_client.h): the error mapping, client
// configuration and logging, the test hook that re-routes broker connections, and Produce.
#include "events/kafka_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "events/kafka_bus.h"

namespace gapless::kafka_internal {

// The one place a librdkafka error code becomes a Status code (see kafka_bus.h's table).
Status KafkaStatus(rd_kafka_resp_err_t err, const std::string& message) {
  Status st;
  switch (err) {
    case RD_KAFKA_RESP_ERR_NO_ERROR:
      return Status::Ok();
    case RD_KAFKA_RESP_ERR__FENCED:
    case RD_KAFKA_RESP_ERR_PRODUCER_FENCED:
    case RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH:
      return Aborted(message).WithReason(kKafkaFencedReason);
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_INVALID_MSG:
    case RD_KAFKA_RESP_ERR_INVALID_RECORD:
    case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
      st = InvalidData(message);
      break;
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED:
    case RD_KAFKA_RESP_ERR__AUTHENTICATION:
    case RD_KAFKA_RESP_ERR__INVALID_ARG:
    case RD_KAFKA_RESP_ERR_INVALID_CONFIG:
    case RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE:
    case RD_KAFKA_RESP_ERR_UNSUPPORTED_VERSION:
    case RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION:
    case RD_KAFKA_RESP_ERR_UNSUPPORTED_FOR_MESSAGE_FORMAT:
      st = FailedPrecondition(message);
      break;
    default:
      // Transport, timeouts, leader changes, a full local queue, a topic not yet created.
      st = Unavailable(message);
      break;
  }
  return st.WithReason("kafka:" + ErrName(err));
}

namespace {

// Test hook (the chaos harness's proxies on broker links): GAPLESS_TEST_KAFKA_CONNECT="p=q,..."
// sends every connection to 127.0.0.1:p to 127.0.0.1:q instead. A broker advertises its own
// address in the metadata, so a proxy in the bootstrap list alone would be bypassed after the
// first request. Read again for every client made (a test may change it); nothing else changes.
std::mutex g_connect_mu;
std::map<int, int> g_connect_map;  // guarded by g_connect_mu

int RemappingConnect(int fd, const struct sockaddr* addr, int addrlen, const char*, void*) {
  struct sockaddr_storage target;
  std::memcpy(&target, addr, std::min<size_t>(static_cast<size_t>(addrlen), sizeof(target)));
  if (target.ss_family == AF_INET) {
    auto* in = reinterpret_cast<struct sockaddr_in*>(&target);
    std::lock_guard<std::mutex> lock(g_connect_mu);
    auto it = g_connect_map.find(ntohs(in->sin_port));
    if (it != g_connect_map.end() && ntohl(in->sin_addr.s_addr) == INADDR_LOOPBACK) {
      in->sin_port = htons(static_cast<uint16_t>(it->second));
    }
  }
  // The socket is non-blocking, but librdkafka takes anything but 0 from a connect callback as
  // a failure (EINPROGRESS included): wait for the connection here (loopback: at once).
  if (connect(fd, reinterpret_cast<struct sockaddr*>(&target), addrlen) == 0) return 0;
  if (errno != EINPROGRESS) return errno;
  struct pollfd pfd = {fd, POLLOUT, 0};
  const int ready = poll(&pfd, 1, 5'000);
  if (ready == 0) return ETIMEDOUT;
  if (ready < 0) return errno;
  int error = 0;
  socklen_t len = sizeof(error);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) return errno;
  return error;
}

}  // namespace

void InstallTestConnect(rd_kafka_conf_t* conf) {
  const char* spec = std::getenv("GAPLESS_TEST_KAFKA_CONNECT");
  if (spec == nullptr || *spec == '\0') return;
  std::map<int, int> parsed;
  std::string text(spec);
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    const std::string pair = text.substr(at, end - at);
    const size_t eq = pair.find('=');
    if (eq != std::string::npos) {
      parsed[std::atoi(pair.substr(0, eq).c_str())] = std::atoi(pair.substr(eq + 1).c_str());
    }
    at = end + 1;
  }
  {
    std::lock_guard<std::mutex> lock(g_connect_mu);
    g_connect_map = std::move(parsed);
  }
  rd_kafka_conf_set_connect_cb(conf, &RemappingConnect);
}

// librdkafka's own log lines, through spdlog (called from librdkafka's threads; spdlog is
// thread-safe).
void LogCb(const rd_kafka_t* rk, int level, const char* fac, const char* buf) {
  if (level <= 4) {
    spdlog::warn("kafka {} {}: {}", rd_kafka_name(rk), fac, buf);
  } else if (std::getenv("GAPLESS_KAFKA_DEBUG") != nullptr) {
    spdlog::info("kafka {} {}: {}", rd_kafka_name(rk), fac, buf);
  } else {
    spdlog::debug("kafka {} {}: {}", rd_kafka_name(rk), fac, buf);
  }
}

// GAPLESS_KAFKA_DEBUG=cgrp,topic,... turns on librdkafka's debug contexts (logged at info).
void SetDebug(rd_kafka_conf_t* conf) {
  const char* debug = std::getenv("GAPLESS_KAFKA_DEBUG");
  if (debug == nullptr || *debug == 0) return;
  char errstr[512];
  rd_kafka_conf_set(conf, "debug", debug, errstr, sizeof(errstr));
}

Result<rd_kafka_t*> NewClient(rd_kafka_type_t type, rd_kafka_conf_t* conf, const char* what) {
  rd_kafka_conf_set_log_cb(conf, &LogCb);
  InstallTestConnect(conf);
  SetDebug(conf);
  char errstr[512];
  rd_kafka_t* rk = rd_kafka_new(type, conf, errstr, sizeof(errstr));
  if (rk == nullptr) {  // rd_kafka_new takes conf only when it succeeds
    rd_kafka_conf_destroy(conf);
    return FailedPrecondition(std::string(what) + ": " + errstr);
  }
  return rk;
}

// Sets each key; the first failure is FailedPrecondition naming the key.
Status SetAll(rd_kafka_conf_t* conf, const std::vector<std::pair<std::string, std::string>>& kv) {
  char errstr[512];
  for (const auto& [k, v] : kv) {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK) {
      return FailedPrecondition("kafka config " + k + "=" + v + ": " + errstr);
    }
  }
  return Status::Ok();
}

// Status from a rd_kafka_error_t (destroys it).
Status TakeError(rd_kafka_error_t* error, const std::string& context) {
  if (error == nullptr) return Status::Ok();
  rd_kafka_resp_err_t code = rd_kafka_error_code(error);
  std::string text = context + ": " + rd_kafka_error_string(error);
  rd_kafka_error_destroy(error);
  return KafkaStatus(code, text);
}

// Produces one message; `headers` are (name, value) pairs, copied.
rd_kafka_resp_err_t Produce(rd_kafka_t* rk, const std::string& topic, const std::string& key,
                            const std::string& body,
                            const std::vector<std::pair<const char*, const std::string*>>& headers,
                            void* tag, int32_t partition) {
  rd_kafka_headers_t* hdrs = rd_kafka_headers_new(headers.size());
  for (const auto& [name, value] : headers) {
    rd_kafka_header_add(hdrs, name, -1, value->data(), static_cast<ssize_t>(value->size()));
  }
  rd_kafka_resp_err_t err =
      rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic.c_str()),
                        RD_KAFKA_V_PARTITION(partition < 0 ? RD_KAFKA_PARTITION_UA : partition),
                        RD_KAFKA_V_KEY(const_cast<char*>(key.data()), key.size()),
                        RD_KAFKA_V_VALUE(const_cast<char*>(body.data()), body.size()),
                        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(hdrs),
                        RD_KAFKA_V_OPAQUE(tag), RD_KAFKA_V_END);
  // On success the message owns the headers; on failure they are still ours.
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) rd_kafka_headers_destroy(hdrs);
  return err;
}

}  // namespace gapless::kafka_internal
