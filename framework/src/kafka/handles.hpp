// Ownership of librdkafka's C objects: one stateless deleter per C type and a unique_ptr
// alias, so every object has exactly one owner and is destroyed on every path.
#pragma once

#include <librdkafka/rdkafka.h>

#include <memory>

namespace sluice::kafka {

/// Stateless deleter calling the matching rd_kafka_*_destroy function.
template <class T, void (*destroy)(T*)>
struct c_deleter {
  void operator()(T* p) const noexcept {
    if (p) destroy(p);
  }
};

template <class T, void (*destroy)(T*)>
using c_ptr = std::unique_ptr<T, c_deleter<T, destroy>>;

/// A client handle. Destroying it blocks until librdkafka's threads have stopped; close
/// consumers (rd_kafka_consumer_close) before letting the handle go.
using handle_ptr = c_ptr<rd_kafka_t, rd_kafka_destroy>;
using conf_ptr = c_ptr<rd_kafka_conf_t, rd_kafka_conf_destroy>;
using topic_conf_ptr = c_ptr<rd_kafka_topic_conf_t, rd_kafka_topic_conf_destroy>;
using topic_ptr = c_ptr<rd_kafka_topic_t, rd_kafka_topic_destroy>;
using partition_list_ptr = c_ptr<rd_kafka_topic_partition_list_t, rd_kafka_topic_partition_list_destroy>;
using error_ptr = c_ptr<rd_kafka_error_t, rd_kafka_error_destroy>;
using group_metadata_ptr = c_ptr<rd_kafka_consumer_group_metadata_t, rd_kafka_consumer_group_metadata_destroy>;
using headers_ptr = c_ptr<rd_kafka_headers_t, rd_kafka_headers_destroy>;
using message_ptr = c_ptr<rd_kafka_message_t, rd_kafka_message_destroy>;
using queue_ptr = c_ptr<rd_kafka_queue_t, rd_kafka_queue_destroy>;
using event_ptr = c_ptr<rd_kafka_event_t, rd_kafka_event_destroy>;
using admin_options_ptr = c_ptr<rd_kafka_AdminOptions_t, rd_kafka_AdminOptions_destroy>;
using new_topic_ptr = c_ptr<rd_kafka_NewTopic_t, rd_kafka_NewTopic_destroy>;
using delete_topic_ptr = c_ptr<rd_kafka_DeleteTopic_t, rd_kafka_DeleteTopic_destroy>;
using config_resource_ptr = c_ptr<rd_kafka_ConfigResource_t, rd_kafka_ConfigResource_destroy>;

namespace detail {
// rd_kafka_metadata_destroy takes a const pointer; adapt it to the deleter's signature.
inline void destroy_metadata(rd_kafka_metadata_t* md) { rd_kafka_metadata_destroy(md); }
}  // namespace detail
using metadata_ptr = c_ptr<rd_kafka_metadata_t, detail::destroy_metadata>;

}  // namespace sluice::kafka
