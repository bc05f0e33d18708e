// kafka_subscriber: the Subscriber of the Kafka bus (events/kafka_bus.h states its contract): a
// KafkaConsumer in a group that tracks acks per partition and commits up to the lowest
// outstanding offset, follows rebalances (pauses kept across them), hands deliveries back by
// seeking, produces dead letters, and reports its lag.
#include <librdkafka/rdkafka.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "events/kafka_bus.h"
#include "events/kafka_client.h"

namespace gapless {
namespace {

using kafka_internal::KafkaStatus;
using kafka_internal::kMetadataTimeoutMs;
using kafka_internal::NewClient;
using kafka_internal::NowMs;
using kafka_internal::PendingBatch;
using kafka_internal::Produce;
using kafka_internal::ProduceAndWait;
using kafka_internal::SetAll;
using kafka_internal::TakeError;

constexpr int64_t kDeadLetterTimeoutMs = 10'000;

std::string DefaultClientId() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "gapless");
  return std::string(host) + "-" + std::to_string(getpid());
}

class KafkaSubscriber final : public Subscriber {
 public:
  KafkaSubscriber(KafkaUrl url, SubscribeOptions options)
      : url_(std::move(url)), options_(std::move(options)) {}

  ~KafkaSubscriber() override {
    if (rk_ != nullptr) {
      (void)CommitAll(/*sync=*/true);
      // Leaves the group; the revoke callback runs inside and commits synchronously again.
      rd_kafka_consumer_close(rk_);
      rd_kafka_destroy(rk_);
    }
    if (dlq_ != nullptr) {
      rd_kafka_flush(dlq_, 1'000);
      rd_kafka_destroy(dlq_);
    }
  }

  Status Open() {
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    std::string client_id =
        options_.consumer_name.empty() ? DefaultClientId() : options_.consumer_name;
    Status st =
        SetAll(conf, {
                         {"bootstrap.servers", url_.bootstrap},
                         {"group.id", options_.group},
                         {"client.id", client_id},
                         {"enable.auto.commit", "false"},
                         {"enable.auto.offset.store", "false"},
                         {"auto.offset.reset", options_.from_beginning ? "earliest" : "latest"},
                         {"socket.keepalive.enable", "true"},
                     });
    if (st.ok() && options_.max_queue_bytes > 0) {
      const uint64_t bytes = std::max<uint64_t>(options_.max_queue_bytes, 1 << 20);
      // fetch.max.bytes, left unset, follows it (librdkafka caps it at the queue's size).
      st = SetAll(conf, {{"queued.max.messages.kbytes", std::to_string(bytes / 1024)}});
    }
    if (st.ok()) st = SetAll(conf, url_.properties);
    if (!st.ok()) {
      rd_kafka_conf_destroy(conf);
      return st;
    }
    rd_kafka_conf_set_opaque(conf, this);
    rd_kafka_conf_set_rebalance_cb(conf, &KafkaSubscriber::RebalanceCb);
    rd_kafka_conf_set_offset_commit_cb(conf, &KafkaSubscriber::CommitCb);
    GAPLESS_ASSIGN_OR_RETURN(rk_, NewClient(RD_KAFKA_CONSUMER, conf, "kafka consumer"));
    rd_kafka_poll_set_consumer(rk_);
    rd_kafka_topic_partition_list_t* topics =
        rd_kafka_topic_partition_list_new(static_cast<int>(options_.topics.size()));
    for (const auto& t : options_.topics) {
      rd_kafka_topic_partition_list_add(topics, t.c_str(), RD_KAFKA_PARTITION_UA);
    }
    rd_kafka_resp_err_t err = rd_kafka_subscribe(rk_, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return KafkaStatus(err, std::string("kafka subscribe: ") + rd_kafka_err2str(err));
    }
    return Status::Ok();
  }

  std::string name() const override { return "kafka://" + url_.bootstrap; }

  Result<std::vector<Delivery>> Poll(size_t max, int64_t timeout_ms) override {
    if (commit_again_) {
      commit_again_ = false;
      Status st = CommitAll(/*sync=*/false);
      if (!st.ok()) spdlog::warn("kafka subscriber {}: {}", options_.group, st.ToString());
    }
    std::vector<Delivery> out;
    int64_t deadline = NowMs() + std::max<int64_t>(timeout_ms, 0);
    while (out.size() < max) {
      // Wait (up to the deadline) only while nothing has come; then take what is already here.
      int wait = out.empty() ? static_cast<int>(std::max<int64_t>(deadline - NowMs(), 0)) : 0;
      rd_kafka_message_t* msg = rd_kafka_consumer_poll(rk_, wait);
      if (msg == nullptr) break;
      if (msg->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_resp_err_t err = msg->err;
        std::string text = rd_kafka_message_errstr(msg);
        rd_kafka_message_destroy(msg);
        if (err == RD_KAFKA_RESP_ERR__PARTITION_EOF) continue;
        if (err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC ||
            err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
            err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION) {
          spdlog::warn("kafka subscriber {}: {}", options_.group, text);
          continue;
        }
        if (!out.empty()) break;  // deliver what we have; the error shows again if it persists
        return KafkaStatus(err, "kafka consumer (group " + options_.group + "): " + text);
      }
      out.push_back(Track(msg));
      rd_kafka_message_destroy(msg);
    }
    return out;
  }

  Status Ack(const Delivery& delivery) override { return AckAll({delivery}); }

  // One asynchronous commit for all of them: per partition, up to the lowest delivery still
  // outstanding.
  Status AckAll(const std::vector<Delivery>& deliveries) override {
    std::set<TopicPartition> touched;
    for (const Delivery& delivery : deliveries) {
      auto it = pending_.find(delivery.handle);
      if (it == pending_.end()) continue;  // its partition was revoked meanwhile
      Pending p = std::move(it->second);
      pending_.erase(it);
      auto tr = tracks_.find(p.tp);
      if (tr == tracks_.end()) continue;
      tr->second.outstanding.erase(p.offset);
      touched.insert(p.tp);
    }
    std::vector<std::pair<TopicPartition, int64_t>> offsets;
    for (const TopicPartition& tp : touched) {
      PartitionTrack& track = tracks_.at(tp);
      int64_t commit_to =
          track.outstanding.empty() ? track.highest + 1 : *track.outstanding.begin();
      if (commit_to <= track.committed) continue;
      track.committed = commit_to;
      offsets.emplace_back(tp, commit_to);
    }
    return Commit(offsets, /*sync=*/false);
  }

  Status DeadLetter(const Delivery& delivery, std::string_view error) override {
    if (dlq_ == nullptr) {
      rd_kafka_conf_t* conf = rd_kafka_conf_new();
      Status st = SetAll(conf, {
                                   {"bootstrap.servers", url_.bootstrap},
                                   {"client.id", "gapless-dlq"},
                                   {"enable.idempotence", "true"},
                                   {"acks", "all"},
                                   {"linger.ms", "0"},
                                   {"message.timeout.ms", std::to_string(kDeadLetterTimeoutMs)},
                               });
      if (st.ok()) st = SetAll(conf, url_.properties);
      if (!st.ok()) {
        rd_kafka_conf_destroy(conf);
        return st;
      }
      rd_kafka_conf_set_opaque(conf, this);
      rd_kafka_conf_set_dr_msg_cb(conf, &KafkaSubscriber::DeadLetterReport);
      GAPLESS_ASSIGN_OR_RETURN(dlq_,
                               NewClient(RD_KAFKA_PRODUCER, conf, "kafka dead-letter producer"));
    }
    std::string topic = delivery.topic + ".dlq";
    std::string error_text(error);
    std::string key, event_id, event_type;
    if (auto it = pending_.find(delivery.handle); it != pending_.end()) {
      key = it->second.key;
      event_id = it->second.event_id;
      event_type = it->second.event_type;
    }
    std::vector<std::pair<const char*, const std::string*>> headers = {{"error", &error_text}};
    if (!event_id.empty()) headers.emplace_back("event_id", &event_id);
    if (!event_type.empty()) headers.emplace_back("event_type", &event_type);
    auto produce = [&](size_t, void* tag) {
      return Produce(dlq_, topic, key, delivery.body, headers, tag);
    };
    Status st = ProduceAndWait(dlq_, dlq_batch_, 1, NowMs() + kDeadLetterTimeoutMs,
                               /*purge_on_timeout=*/true, produce, {topic});
    if (!st.ok()) {
      char errstr[512];
      if (rd_kafka_fatal_error(dlq_, errstr, sizeof(errstr)) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_destroy(dlq_);
        dlq_ = nullptr;
        dlq_batch_.Start(0);
        st = Unavailable(st.message()).WithReason(st.reason());
      }
    }
    return st.WithContext("dead letter");
  }

  Status HandBack(const Delivery& delivery) override {
    auto it = pending_.find(delivery.handle);
    if (it == pending_.end()) return Status::Ok();  // its partition was revoked meanwhile
    // Forgotten, but its offset stays outstanding: commits stay below it until it comes again.
    const TopicPartition tp = it->second.tp;
    const int64_t offset = it->second.offset;
    pending_.erase(it);
    // A lower offset of the partition handed back and not delivered again yet: the seek to it
    // brings this one too (a seek to this one would skip the lower).
    if (auto back = handed_back_.find(tp); back != handed_back_.end() && back->second <= offset) {
      return Status::Ok();
    }
    handed_back_[tp] = offset;
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, tp.first.c_str(), tp.second)->offset = offset;
    // Asynchronous (timeout 0): the fetcher restarts at the offset, the messages after it already
    // fetched are discarded and come again.
    rd_kafka_error_t* error = rd_kafka_seek_partitions(rk_, list, 0);
    rd_kafka_topic_partition_list_destroy(list);
    return TakeError(error, "kafka seek " + tp.first + "[" + std::to_string(tp.second) + "] to " +
                                std::to_string(offset));
  }

  Status Pause(const std::string& topic, int32_t partition) override {
    paused_.insert({topic, partition});
    return SetPaused({topic, partition}, true);
  }

  Status Resume(const std::string& topic, int32_t partition) override {
    paused_.erase({topic, partition});
    return SetPaused({topic, partition}, false);
  }

  Result<int64_t> Lag() override {
    if (tracks_.empty()) return int64_t{0};
    rd_kafka_topic_partition_list_t* list =
        rd_kafka_topic_partition_list_new(static_cast<int>(tracks_.size()));
    for (const auto& [tp, track] : tracks_) {
      rd_kafka_topic_partition_list_add(list, tp.first.c_str(), tp.second);
    }
    rd_kafka_resp_err_t err = rd_kafka_committed(rk_, list, kMetadataTimeoutMs);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_topic_partition_list_destroy(list);
      return KafkaStatus(err, std::string("kafka committed offsets: ") + rd_kafka_err2str(err));
    }
    int64_t lag = 0;
    Status st;
    for (int i = 0; i < list->cnt && st.ok(); ++i) {
      const rd_kafka_topic_partition_t& p = list->elems[i];
      int64_t low = 0, high = 0;
      err = rd_kafka_query_watermark_offsets(rk_, p.topic, p.partition, &low, &high,
                                             kMetadataTimeoutMs);
      if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        st = KafkaStatus(err, std::string("kafka watermarks of ") + p.topic + "[" +
                                  std::to_string(p.partition) + "]: " + rd_kafka_err2str(err));
        break;
      }
      int64_t committed = p.err == RD_KAFKA_RESP_ERR_NO_ERROR ? p.offset : RD_KAFKA_OFFSET_INVALID;
      auto tr = tracks_.find({p.topic, p.partition});
      if (tr != tracks_.end()) committed = std::max(committed, tr->second.committed);
      if (committed < 0) committed = options_.from_beginning ? low : high;
      lag += std::max<int64_t>(high - committed, 0);
    }
    rd_kafka_topic_partition_list_destroy(list);
    if (!st.ok()) return st;
    return lag;
  }

  std::vector<std::string> Assignment() const override {
    std::vector<std::string> out;
    for (const auto& [tp, track] : tracks_) {
      out.push_back(tp.first + "[" + std::to_string(tp.second) + "]");
    }
    return out;
  }

 private:
  using TopicPartition = std::pair<std::string, int32_t>;

  // Ack tracking of one assigned partition.
  struct PartitionTrack {
    std::set<int64_t> outstanding;  // delivered, not yet acknowledged
    int64_t highest = -1;           // highest offset delivered
    // The last commit offset sent, or the first offset delivered (where the group stood); -1:
    // nothing delivered yet. CommitAll sends it again on revoke and close.
    int64_t committed = -1;
  };
  struct Pending {
    TopicPartition tp;
    int64_t offset = 0;
    std::string key, event_id, event_type;
  };

  static std::string Header(rd_kafka_headers_t* hdrs, const char* name) {
    const void* value = nullptr;
    size_t size = 0;
    if (hdrs == nullptr ||
        rd_kafka_header_get_last(hdrs, name, &value, &size) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        value == nullptr) {
      return "";
    }
    return std::string(static_cast<const char*>(value), size);
  }

  Delivery Track(rd_kafka_message_t* msg) {
    Delivery d;
    d.topic = rd_kafka_topic_name(msg->rkt);
    d.partition = msg->partition;
    d.position = std::to_string(msg->offset);
    d.body.assign(static_cast<const char*>(msg->payload), msg->len);
    d.handle = next_handle_++;
    Pending p;
    p.tp = {d.topic, d.partition};
    p.offset = msg->offset;
    if (msg->key != nullptr) p.key.assign(static_cast<const char*>(msg->key), msg->key_len);
    rd_kafka_headers_t* hdrs = nullptr;
    if (rd_kafka_message_headers(msg, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      p.event_id = Header(hdrs, "event_id");
      p.event_type = Header(hdrs, "event_type");
    }
    if (auto back = handed_back_.find(p.tp);
        back != handed_back_.end() && msg->offset <= back->second) {
      handed_back_.erase(back);  // the partition is back where it was handed back
    }
    PartitionTrack& track = tracks_[p.tp];
    // The first delivery of an assignment starts at the group's committed offset (or the reset
    // point), so committing it again would be a no-op.
    if (track.highest < 0 && track.committed < 0) track.committed = msg->offset;
    track.outstanding.insert(msg->offset);
    track.highest = std::max(track.highest, msg->offset);
    pending_.emplace(d.handle, std::move(p));
    return d;
  }

  Status Commit(const std::vector<std::pair<TopicPartition, int64_t>>& offsets, bool sync) {
    // A transient subscription (events tail) leaves no trace in the group.
    if (offsets.empty() || options_.transient) return Status::Ok();
    rd_kafka_topic_partition_list_t* list =
        rd_kafka_topic_partition_list_new(static_cast<int>(offsets.size()));
    for (const auto& [tp, offset] : offsets) {
      rd_kafka_topic_partition_list_add(list, tp.first.c_str(), tp.second)->offset = offset;
    }
    rd_kafka_resp_err_t err = rd_kafka_commit(rk_, list, sync ? 0 : 1);
    rd_kafka_topic_partition_list_destroy(list);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR || err == RD_KAFKA_RESP_ERR__NO_OFFSET) {
      return Status::Ok();
    }
    return KafkaStatus(err,
                       "kafka commit (group " + options_.group + "): " + rd_kafka_err2str(err));
  }

  // Commits the commit point of every tracked partition (or only of `only`).
  Status CommitAll(bool sync, const std::set<TopicPartition>* only = nullptr) {
    std::vector<std::pair<TopicPartition, int64_t>> offsets;
    for (const auto& [tp, track] : tracks_) {
      if (track.committed < 0) continue;
      if (only != nullptr && only->count(tp) == 0) continue;
      offsets.emplace_back(tp, track.committed);
    }
    return Commit(offsets, sync);
  }

  Status SetPaused(const TopicPartition& tp, bool pause) {
    if (tracks_.count(tp) == 0) return Status::Ok();  // applied when the partition is assigned
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, tp.first.c_str(), tp.second);
    rd_kafka_resp_err_t err =
        pause ? rd_kafka_pause_partitions(rk_, list) : rd_kafka_resume_partitions(rk_, list);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) err = list->elems[0].err;
    rd_kafka_topic_partition_list_destroy(list);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (pause) {
        lib_paused_.insert(tp);
      } else {
        lib_paused_.erase(tp);
      }
      return Status::Ok();
    }
    return KafkaStatus(err, std::string(pause ? "kafka pause " : "kafka resume ") + tp.first + "[" +
                                std::to_string(tp.second) + "]: " + rd_kafka_err2str(err));
  }

  void OnAssign(rd_kafka_topic_partition_list_t* parts) {
    for (int i = 0; i < parts->cnt; ++i) {
      tracks_[{parts->elems[i].topic, parts->elems[i].partition}] = PartitionTrack{};
    }
  }

  void OnRevoke(rd_kafka_topic_partition_list_t* parts, bool lost) {
    std::set<TopicPartition> revoked;
    for (int i = 0; i < parts->cnt; ++i) {
      revoked.insert({parts->elems[i].topic, parts->elems[i].partition});
    }
    if (!lost) {
      Status st = CommitAll(/*sync=*/true, &revoked);
      if (!st.ok()) spdlog::warn("kafka subscriber {}: {}", options_.group, st.ToString());
    }
    for (const auto& tp : revoked) {
      tracks_.erase(tp);
      handed_back_.erase(tp);
    }
    for (auto it = pending_.begin(); it != pending_.end();) {
      it = revoked.count(it->second.tp) ? pending_.erase(it) : std::next(it);
    }
  }

  static void RebalanceCb(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                          rd_kafka_topic_partition_list_t* parts, void* opaque) {
    auto* self = static_cast<KafkaSubscriber*>(opaque);
    bool cooperative = std::strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
      self->OnAssign(parts);
      // The pause state asked for, both ways: librdkafka keeps a partition's pause across a
      // re-assignment, so one resumed while it was revoked (its Resume found it unassigned)
      // would otherwise stay paused for good. Set before the assign, and only where it differs
      // from what librdkafka holds: a pause or resume right after assign() can outdate the
      // assign's fetch start, and the partition then never fetches (librdkafka issue 2190; the
      // chaos harness's balances consumer saw a partition deliver nothing, for good).
      std::vector<TopicPartition> late;
      for (int i = 0; i < parts->cnt; ++i) {
        TopicPartition tp{parts->elems[i].topic, parts->elems[i].partition};
        const bool want = self->paused_.count(tp) > 0;
        if (want == (self->lib_paused_.count(tp) > 0)) continue;
        if (!self->SetPaused(tp, want).ok()) late.push_back(tp);
      }
      if (cooperative) {
        Status st = TakeError(rd_kafka_incremental_assign(rk, parts), "kafka assign");
        if (!st.ok()) spdlog::warn("{}", st.ToString());
      } else {
        rd_kafka_assign(rk, parts);
      }
      // A partition librdkafka did not know before the assign: its state after it.
      for (const TopicPartition& tp : late) (void)self->SetPaused(tp, self->paused_.count(tp) > 0);
      return;
    }
    if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
      self->OnRevoke(parts, rd_kafka_assignment_lost(rk));
      if (cooperative) {
        Status st = TakeError(rd_kafka_incremental_unassign(rk, parts), "kafka unassign");
        if (!st.ok()) spdlog::warn("{}", st.ToString());
      } else {
        rd_kafka_assign(rk, nullptr);
      }
      return;
    }
    spdlog::warn("kafka subscriber {}: rebalance error {}", self->options_.group,
                 rd_kafka_err2name(err));
    self->OnRevoke(parts, /*lost=*/true);
    rd_kafka_assign(rk, nullptr);
  }

  static void CommitCb(rd_kafka_t*, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t*,
                       void* opaque) {
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR || err == RD_KAFKA_RESP_ERR__NO_OFFSET) return;
    auto* self = static_cast<KafkaSubscriber*>(opaque);
    // The next Poll sends the commit points again: an idle group would otherwise stay behind
    // for good (its lag a lie, and a restart would deliver it all again). Runs on the polling
    // thread (inside rd_kafka_consumer_poll).
    self->commit_again_ = true;
    spdlog::warn("kafka subscriber {}: async commit failed: {}; sending it again",
                 self->options_.group, rd_kafka_err2str(err));
  }

  static void DeadLetterReport(rd_kafka_t*, const rd_kafka_message_t* msg, void* opaque) {
    static_cast<KafkaSubscriber*>(opaque)->dlq_batch_.Report(msg->_private, msg->err);
  }

  KafkaUrl url_;
  SubscribeOptions options_;
  rd_kafka_t* rk_ = nullptr;
  rd_kafka_t* dlq_ = nullptr;
  PendingBatch dlq_batch_;
  uint64_t next_handle_ = 1;
  std::map<TopicPartition, PartitionTrack> tracks_;  // the current assignment
  std::unordered_map<uint64_t, Pending> pending_;    // by Delivery::handle
  std::set<TopicPartition> paused_;
  // Those paused in librdkafka (it keeps a pause across revoke and re-assignment).
  std::set<TopicPartition> lib_paused_;
  // Per partition, the lowest offset handed back (HandBack) and not delivered again yet.
  std::map<TopicPartition, int64_t> handed_back_;
  bool commit_again_ = false;  // an asynchronous commit failed: send the commit points again
};

}  // namespace

Result<std::unique_ptr<Subscriber>> OpenKafkaSubscriber(std::string_view url,
                                                        const SubscribeOptions& options) {
  GAPLESS_ASSIGN_OR_RETURN(KafkaUrl parsed, ParseKafkaUrl(url));
  // ?transactional=1 concerns publishers; a subscriber given the same URL ignores it (it reads
  // committed data either way: librdkafka's isolation.level defaults to read_committed).
  if (options.group.empty()) return FailedPrecondition("kafka subscriber: no consumer group");
  if (options.topics.empty()) return FailedPrecondition("kafka subscriber: no topics");
  auto sub = std::make_unique<KafkaSubscriber>(std::move(parsed), options);
  GAPLESS_RETURN_IF_ERROR(sub->Open());
  return std::unique_ptr<Subscriber>(std::move(sub));
}

}  // namespace gapless
