// Value types of the librdkafka layer: partitions, offsets, owned messages, and the
// conversions between them and librdkafka's C structures.
#pragma once

#include <librdkafka/rdkafka.h>

#include <compare>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kafka/handles.hpp"
#include "sluice/record.hpp"

namespace sluice::kafka {

/// Hash for unordered containers keyed by std::string that are looked up by
/// std::string_view (with std::equal_to<>), so a lookup never builds a string.
struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

/// Receives a client's statistics JSON (statistics.interval.ms), on the thread that polls
/// the client; the text is valid only during the call. What it throws is caught and dropped.
using statistics_callback = std::function<void(std::string_view json)>;

/// Logical offsets, as librdkafka understands them in assign() and seek().
inline constexpr std::int64_t offset_beginning = RD_KAFKA_OFFSET_BEGINNING;  // -2
inline constexpr std::int64_t offset_end = RD_KAFKA_OFFSET_END;              // -1
inline constexpr std::int64_t offset_stored = RD_KAFKA_OFFSET_STORED;        // -1000
inline constexpr std::int64_t offset_invalid = RD_KAFKA_OFFSET_INVALID;      // -1001

/// Use the configured partitioner (produce) rather than a fixed partition.
inline constexpr std::int32_t any_partition = RD_KAFKA_PARTITION_UA;  // -1

struct topic_partition {
  std::string topic;
  std::int32_t partition = -1;
  friend auto operator<=>(const topic_partition&, const topic_partition&) = default;
};

/// A partition and an offset. In commit() and send_offsets_to_transaction() the offset is
/// the next one to consume (Kafka's convention), i.e. last processed + 1.
struct topic_partition_offset {
  std::string topic;
  std::int32_t partition = -1;
  std::int64_t offset = offset_invalid;
  friend auto operator<=>(const topic_partition_offset&, const topic_partition_offset&) = default;
};

/// One member of a consumer group as the group coordinator describes it.
struct group_member {
  std::string client_id;
  std::string host;
  std::vector<topic_partition> assignment;
};

/// A consumer group: its state ("Stable", "PreparingRebalance", ...) and members.
struct group_description {
  std::string state;
  std::vector<group_member> members;
};

/// One consumed record, owned entirely by sluice: no librdkafka memory is referenced.
/// A null key (or value) is std::nullopt; an empty one is an empty string.
struct message {
  std::string topic;
  std::int32_t partition = -1;
  std::int64_t offset = -1;
  std::int64_t timestamp = -1;  ///< ms since the epoch; -1 when the broker sent none
  std::optional<std::string> key;
  std::optional<std::string> value;
  sluice::headers headers;
};

/// Copies everything of `m` into `out`, reusing `out`'s string and vector capacity.
/// `m` must be a message without error.
void copy_message(const rd_kafka_message_t& m, message& out);

/// The consumer group metadata a transactional producer needs to commit offsets for a
/// group (KIP-447). Owns the librdkafka object; movable, not copyable.
class consumer_group_metadata {
 public:
  /// Takes ownership of `md` (as returned by rd_kafka_consumer_group_metadata()).
  explicit consumer_group_metadata(rd_kafka_consumer_group_metadata_t* md) : md_(md) {}
  /// Metadata with only a group id (no member id or generation: no fencing of zombies).
  explicit consumer_group_metadata(const std::string& group_id)
      : md_(rd_kafka_consumer_group_metadata_new(group_id.c_str())) {}

  const rd_kafka_consumer_group_metadata_t* get() const noexcept { return md_.get(); }

 private:
  group_metadata_ptr md_;
};

/// A new librdkafka list holding `parts` (offsets unset).
partition_list_ptr to_list(const std::vector<topic_partition>& parts);
/// A new librdkafka list holding `offsets`.
partition_list_ptr to_list(const std::vector<topic_partition_offset>& offsets);
std::vector<topic_partition> partitions_of(const rd_kafka_topic_partition_list_t* list);
std::vector<topic_partition_offset> offsets_of(const rd_kafka_topic_partition_list_t* list);
/// Throws make_error for the first element whose err is set.
void throw_on_partition_error(const rd_kafka_topic_partition_list_t* list, std::string_view context);

}  // namespace sluice::kafka
