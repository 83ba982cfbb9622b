// Conversions between the layer's value types and librdkafka's C structures.
#include "kafka/types.hpp"

#include <string>

#include "kafka/error.hpp"

namespace sluice::kafka {

void copy_message(const rd_kafka_message_t& m, message& out) {
  out.topic.assign(m.rkt ? rd_kafka_topic_name(m.rkt) : "");
  out.partition = m.partition;
  out.offset = m.offset;
  rd_kafka_timestamp_type_t ts_type = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
  out.timestamp = rd_kafka_message_timestamp(&m, &ts_type);
  if (m.key) {
    if (!out.key) out.key.emplace();
    out.key->assign(static_cast<const char*>(m.key), m.key_len);
  } else {
    out.key.reset();
  }
  if (m.payload) {
    if (!out.value) out.value.emplace();
    out.value->assign(static_cast<const char*>(m.payload), m.len);
  } else {
    out.value.reset();
  }

  auto& items = out.headers.items();
  rd_kafka_headers_t* hdrs = nullptr;
  // rd_kafka_message_headers parses lazily; the list stays owned by the message.
  if (rd_kafka_message_headers(&m, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR || !hdrs) {
    items.clear();
    return;
  }
  const std::size_t count = rd_kafka_header_cnt(hdrs);
  items.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    const void* value = nullptr;
    std::size_t size = 0;
    if (rd_kafka_header_get_all(hdrs, i, &name, &value, &size) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      items.resize(i);
      break;
    }
    items[i].key.assign(name ? name : "");
    if (value) {
      if (!items[i].value) items[i].value.emplace();
      items[i].value->assign(static_cast<const char*>(value), size);
    } else {
      items[i].value.reset();
    }
  }
}

partition_list_ptr to_list(const std::vector<topic_partition>& parts) {
  partition_list_ptr list(rd_kafka_topic_partition_list_new(static_cast<int>(parts.size())));
  for (const auto& p : parts) rd_kafka_topic_partition_list_add(list.get(), p.topic.c_str(), p.partition);
  return list;
}

partition_list_ptr to_list(const std::vector<topic_partition_offset>& offsets) {
  partition_list_ptr list(rd_kafka_topic_partition_list_new(static_cast<int>(offsets.size())));
  for (const auto& o : offsets)
    rd_kafka_topic_partition_list_add(list.get(), o.topic.c_str(), o.partition)->offset = o.offset;
  return list;
}

std::vector<topic_partition> partitions_of(const rd_kafka_topic_partition_list_t* list) {
  std::vector<topic_partition> out;
  if (!list) return out;
  out.reserve(static_cast<std::size_t>(list->cnt));
  for (int i = 0; i < list->cnt; ++i) out.push_back({list->elems[i].topic, list->elems[i].partition});
  return out;
}

std::vector<topic_partition_offset> offsets_of(const rd_kafka_topic_partition_list_t* list) {
  std::vector<topic_partition_offset> out;
  if (!list) return out;
  out.reserve(static_cast<std::size_t>(list->cnt));
  for (int i = 0; i < list->cnt; ++i)
    out.push_back({list->elems[i].topic, list->elems[i].partition, list->elems[i].offset});
  return out;
}

void throw_on_partition_error(const rd_kafka_topic_partition_list_t* list, std::string_view context) {
  if (!list) return;
  for (int i = 0; i < list->cnt; ++i) {
    const auto& e = list->elems[i];
    if (e.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      throw make_error(e.err, std::string(context) + " for " + e.topic + "[" + std::to_string(e.partition) + "]");
    }
  }
}

}  // namespace sluice::kafka
