// The record size limits of the topics a job writes, and a record's size on the wire.
#include "runtime/record_size.hpp"

#include <algorithm>

#include "sluice/error.hpp"

namespace sluice::runtime {

std::int64_t producer_max_message_bytes(const config& cfg) {
  // The key the producer's properties take it from (config::client_properties): the
  // "producer." one over a bare one.
  for (const char* key : {"producer.message.max.bytes", "message.max.bytes"})
    if (cfg.contains(key)) return cfg.get_int(key, 1000, 1000000000);  // librdkafka's range
  return default_producer_max_message_bytes;
}

std::int64_t record_wire_bytes(const std::optional<std::string_view>& key, const std::optional<std::string_view>& value,
                               const sluice::headers& headers) noexcept {
  auto bytes = record_framing_bytes;
  if (key) bytes += static_cast<std::int64_t>(key->size());
  if (value) bytes += static_cast<std::int64_t>(value->size());
  for (const auto& h : headers)
    bytes += header_framing_bytes + static_cast<std::int64_t>(h.key.size() + (h.value ? h.value->size() : 0));
  return bytes;
}

record_size_limits::record_size_limits(std::int64_t producer_max_message_bytes)
    : producer_max_(producer_max_message_bytes), smallest_(producer_max_message_bytes) {}

void record_size_limits::set_topic_max_message_bytes(const std::string& topic, std::int64_t max_message_bytes) {
  // The broker counts the batch's own header against the topic's limit; librdkafka counts
  // only the record against message.max.bytes.
  if (max_message_bytes - batch_framing_bytes >= producer_max_) {
    topics_.erase(topic);
    return;
  }
  topics_[topic] = max_message_bytes;
  smallest_ = std::min(smallest_, max_message_bytes - batch_framing_bytes);
}

record_limit record_size_limits::limit(std::string_view topic) const {
  if (auto it = topics_.find(topic); it != topics_.end())
    return {it->second - batch_framing_bytes,
            "max.message.bytes (" + std::to_string(it->second) + ") of topic '" + std::string(topic) + "'"};
  return {producer_max_, "the producer's message.max.bytes (" + std::to_string(producer_max_) + ")"};
}

std::string record_size_limits::oversized_message(std::string_view topic, std::int64_t wire_bytes) const {
  const auto l = limit(topic);
  const std::string name(topic);
  std::string fix = topics_.contains(topic) ? "raise max.message.bytes of topic '" + name +
                                                  "' (kafka-configs --alter --entity-type topics --entity-name " +
                                                  name + " --add-config max.message.bytes=N) and restart the job"
                                            : "raise producer.message.max.bytes (and max.message.bytes of topic '" +
                                                  name + "' if it is lower)";
  return "a record of " + std::to_string(wire_bytes) + " bytes (key, value, headers and framing) for topic '" + name +
         "' exceeds the limit of " + std::to_string(l.bytes) + " bytes set by " + l.setting +
         "; it was not produced: " + fix + ", or make the record smaller";
}

}  // namespace sluice::runtime
