// librdkafka's statistics JSON (STATISTICS.md of librdkafka) to gauges.
#include "runtime/client_statistics.hpp"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

namespace sluice::runtime {
namespace {

std::int64_t integer(const nlohmann::json& object, const char* field) {
  auto it = object.find(field);
  return it != object.end() && it->is_number() ? it->get<std::int64_t>() : 0;
}

}  // namespace

client_statistics::client_statistics(metrics_registry& metrics, const std::string& labels, client_kind kind)
    : metrics_(metrics),
      labels_(labels + (labels.empty() ? "" : ",") + "client=\"" +
              (kind == client_kind::consumer ? "consumer" : "producer") + "\""),
      kind_(kind),
      queue_messages_(metrics.get_gauge("sluice_kafka_client_queue_messages", labels_)),
      queue_bytes_(metrics.get_gauge("sluice_kafka_client_queue_bytes", labels_)),
      reply_queue_(metrics.get_gauge("sluice_kafka_client_reply_queue_ops", labels_)) {
  if (kind_ == client_kind::consumer)
    fetch_queue_ = &metrics.get_gauge("sluice_kafka_consumer_fetch_queue_messages", labels_);
}

void client_statistics::on_statistics(std::string_view json) noexcept {
  try {
    // librdkafka's own output: a few levels deep, no untrusted input; still parsed without
    // exceptions so a truncated text is only counted.
    auto doc = nlohmann::json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
    if (!doc.is_object()) {
      if (++malformed_ <= 3 || malformed_ % 1000 == 0)
        spdlog::warn("librdkafka statistics of {} are not a JSON object; the kafka gauges keep their last values",
                     labels_);
      return;
    }
    // msg_cnt / msg_size: messages in the producer queue (a consumer's are 0).
    queue_messages_.set(integer(doc, "msg_cnt"));
    queue_bytes_.set(integer(doc, "msg_size"));
    reply_queue_.set(integer(doc, "replyq"));
    if (auto brokers = doc.find("brokers"); brokers != doc.end() && brokers->is_object()) {
      for (const auto& [name, b] : brokers->items()) {
        if (!b.is_object()) continue;
        const auto node = integer(b, "nodeid");
        auto source = b.find("source");
        if (node < 0 || (source != b.end() && source->is_string() && *source == "logical")) continue;
        const auto labels = labels_ + ",broker=\"" + std::to_string(node) + "\"";
        if (auto rtt = b.find("rtt"); rtt != b.end() && rtt->is_object()) {
          metrics_.get_gauge("sluice_kafka_broker_rtt_avg_us", labels).set(integer(*rtt, "avg"));
          metrics_.get_gauge("sluice_kafka_broker_rtt_p99_us", labels).set(integer(*rtt, "p99"));
        }
        metrics_.get_gauge("sluice_kafka_broker_outbuf_requests", labels).set(integer(b, "outbuf_cnt"));
        metrics_.get_gauge("sluice_kafka_broker_waitresp_requests", labels).set(integer(b, "waitresp_cnt"));
      }
    }
    if (fetch_queue_) {
      std::int64_t fetched = 0;
      if (auto topics = doc.find("topics"); topics != doc.end() && topics->is_object())
        for (const auto& [topic, t] : topics->items()) {
          auto parts = t.find("partitions");
          if (parts == t.end() || !parts->is_object()) continue;
          for (const auto& [id, p] : parts->items())
            if (p.is_object() && integer(p, "partition") >= 0) fetched += integer(p, "fetchq_cnt");
        }
      fetch_queue_->set(fetched);
    }
  } catch (const std::exception& e) {
    if (++malformed_ <= 3 || malformed_ % 1000 == 0)
      spdlog::warn("librdkafka statistics of {} could not be read: {}", labels_, e.what());
  }
}

}  // namespace sluice::runtime
