// kafka_bus: the Kafka URL's parser and the tools' one-off queries (a topic's partition count, a
// group's lag) on a handle that never joins a group. The publisher is in kafka_publisher.cc, the
// subscriber in kafka_subscriber.cc, what they share in kafka_client.h.
#include "events/kafka_bus.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "events/kafka_client.h"

namespace gapless {

Result<KafkaUrl> ParseKafkaUrl(std::string_view url) {
  constexpr std::string_view kScheme = "kafka://";
  auto bad = [&](const std::string& why) {
    return FailedPrecondition("kafka URL \"" + std::string(url) + "\": " + why);
  };
  if (url.substr(0, kScheme.size()) != kScheme) return bad("must start with kafka://");
  std::string_view rest = url.substr(kScheme.size());
  std::string_view query;
  if (size_t q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.empty()) return bad("no host:port");
  KafkaUrl out;
  while (true) {
    size_t comma = rest.find(',');
    std::string_view hp = rest.substr(0, comma);
    size_t colon = hp.rfind(':');
    if (colon == std::string_view::npos || colon == 0) {
      return bad("\"" + std::string(hp) + "\" is not host:port");
    }
    std::string_view port = hp.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        std::stoi(std::string(port)) < 1 || std::stoi(std::string(port)) > 65535) {
      return bad("bad port in \"" + std::string(hp) + "\"");
    }
    if (hp.find_first_of("/@ ") != std::string_view::npos) {
      return bad("bad host in \"" + std::string(hp) + "\"");
    }
    if (!out.bootstrap.empty()) out.bootstrap += ",";
    out.bootstrap += hp;
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view kv = query.substr(0, amp);
    size_t eq = kv.find('=');
    std::string key(kv.substr(0, eq));
    std::string value(eq == std::string_view::npos ? "" : kv.substr(eq + 1));
    if (key == "transactional" && (value == "1" || value == "true")) {
      out.transactional = true;
    } else if (key == "transactional" && (value == "0" || value == "false")) {
      out.transactional = false;
    } else if (key.find('.') != std::string::npos && !value.empty()) {
      // A librdkafka property; librdkafka checks the name and value when the client is made.
      static const std::set<std::string> kReserved = {
          "bootstrap.servers",  "metadata.broker.list",     "group.id",
          "enable.auto.commit", "enable.auto.offset.store", "enable.idempotence",
          "transactional.id",   "auto.offset.reset",        "client.id"};
      if (kReserved.count(key)) return bad("\"" + key + "\" is set by gapless, not the URL");
      out.properties.emplace_back(key, value);
    } else {
      return bad(
          "unknown parameter \"" + std::string(kv) +
          "\" (transactional=0|1 or a librdkafka property such as session.timeout.ms=10000)");
    }
    if (amp == std::string_view::npos) break;
    query = query.substr(amp + 1);
  }
  return out;
}

namespace {

using kafka_internal::KafkaStatus;
using kafka_internal::kMetadataTimeoutMs;
using kafka_internal::NewClient;
using kafka_internal::SetAll;

// A handle for one-off metadata and offset queries of the tools (never joins a group, never
// produces), on the URL's brokers and properties plus `extra`.
Result<rd_kafka_t*> OpenToolHandle(const KafkaUrl& parsed, rd_kafka_type_t type,
                                   const std::vector<std::pair<std::string, std::string>>& extra) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  Status st = SetAll(conf, {{"bootstrap.servers", parsed.bootstrap}});
  if (st.ok()) st = SetAll(conf, extra);
  if (st.ok()) st = SetAll(conf, parsed.properties);
  if (!st.ok()) {
    rd_kafka_conf_destroy(conf);
    return st;
  }
  return NewClient(type, conf, "kafka client");
}

// The partition ids of `topic` (metadata). NotFound when the topic does not exist.
Result<std::vector<int32_t>> TopicPartitions(rd_kafka_t* rk, const std::string& topic) {
  rd_kafka_topic_t* t = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, t, &md, kMetadataTimeoutMs);
  Result<std::vector<int32_t>> out = std::vector<int32_t>();
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    out = KafkaStatus(err, "kafka metadata of " + topic + ": " + rd_kafka_err2str(err));
  } else if (md->topic_cnt != 1 || md->topics[0].err != RD_KAFKA_RESP_ERR_NO_ERROR ||
             md->topics[0].partition_cnt <= 0) {
    out = NotFound("kafka topic " + topic + " does not exist (create it, with its partitions)");
  } else {
    for (int p = 0; p < md->topics[0].partition_cnt; ++p) {
      out->push_back(md->topics[0].partitions[p].id);
    }
  }
  if (md != nullptr) rd_kafka_metadata_destroy(md);
  rd_kafka_topic_destroy(t);
  return out;
}

}  // namespace

Result<int> KafkaPartitionCount(std::string_view url, const std::string& topic) {
  GAPLESS_ASSIGN_OR_RETURN(KafkaUrl parsed, ParseKafkaUrl(url));
  GAPLESS_ASSIGN_OR_RETURN(rd_kafka_t * rk, OpenToolHandle(parsed, RD_KAFKA_PRODUCER, {}));
  Result<std::vector<int32_t>> partitions = TopicPartitions(rk, topic);
  rd_kafka_destroy(rk);
  if (!partitions.ok()) return partitions.status();
  return static_cast<int>(partitions->size());
}

Result<int64_t> KafkaGroupLag(std::string_view url, const SubscribeOptions& options) {
  GAPLESS_ASSIGN_OR_RETURN(KafkaUrl parsed, ParseKafkaUrl(url));
  // A consumer handle that never subscribes: it reads the group's committed offsets without
  // joining the group (no rebalance of its members).
  GAPLESS_ASSIGN_OR_RETURN(rd_kafka_t * rk, OpenToolHandle(parsed, RD_KAFKA_CONSUMER,
                                                           {{"group.id", options.group},
                                                            {"enable.auto.commit", "false"}}));
  Status st;
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(8);
  for (const std::string& topic : options.topics) {
    Result<std::vector<int32_t>> partitions = TopicPartitions(rk, topic);
    if (!partitions.ok()) continue;  // a topic nobody created yet has no lag
    for (int32_t p : *partitions) rd_kafka_topic_partition_list_add(list, topic.c_str(), p);
  }
  int64_t lag = 0;
  bool committed_any = false;
  rd_kafka_resp_err_t err = rd_kafka_committed(rk, list, kMetadataTimeoutMs);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    st = KafkaStatus(err, std::string("kafka committed offsets: ") + rd_kafka_err2str(err));
  }
  for (int i = 0; st.ok() && i < list->cnt; ++i) {
    const rd_kafka_topic_partition_t& p = list->elems[i];
    int64_t low = 0, high = 0;
    err =
        rd_kafka_query_watermark_offsets(rk, p.topic, p.partition, &low, &high, kMetadataTimeoutMs);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      st = KafkaStatus(
          err, std::string("kafka watermarks of ") + p.topic + ": " + rd_kafka_err2str(err));
      break;
    }
    int64_t committed = p.err == RD_KAFKA_RESP_ERR_NO_ERROR ? p.offset : RD_KAFKA_OFFSET_INVALID;
    if (committed >= 0) committed_any = true;
    lag += std::max<int64_t>(high - (committed >= 0 ? committed : low), 0);
  }
  rd_kafka_topic_partition_list_destroy(list);
  rd_kafka_destroy(rk);
  if (!st.ok()) return st;
  if (!committed_any) {
    return NotFound("consumer group " + options.group + " has committed no offset on kafka://" +
                    parsed.bootstrap);
  }
  return lag;
}

}  // namespace gapless
