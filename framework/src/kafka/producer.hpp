// sluice::kafka::producer: an idempotent or transactional librdkafka producer that
// partitions keys as Java producers do and reports deliveries through one callback.
#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kafka/config.hpp"
#include "kafka/handles.hpp"
#include "kafka/types.hpp"
#include "sluice/error.hpp"
#include "sluice/record.hpp"

namespace sluice::kafka {

enum class producer_mode {
  idempotent,     ///< enable.idempotence=true, no transactions
  transactional,  ///< idempotent plus transactions under `transactional_id`
};

struct producer_options {
  // Default: idempotent.
  producer_mode mode = producer_mode::idempotent;
  // Required in transactional mode (or transactional.id in the config). Default: empty.
  std::string transactional_id;
  // How long produce() waits for room in a full local queue before throwing errc::timeout.
  // Default: 30 s.
  std::chrono::milliseconds max_block{std::chrono::seconds(30)};
  // How long the destructor flushes outstanding records before giving up. Default: 5 s.
  std::chrono::milliseconds close_timeout{std::chrono::seconds(5)};
  // Receives the statistics JSON every statistics.interval.ms, from inside poll() or
  // flush(). Default: none.
  statistics_callback on_statistics;
};

/// The outcome of one produced record, passed to the delivery callback. `topic` is valid
/// only during the callback.
struct delivery_report {
  std::string_view topic;
  std::int32_t partition = -1;
  std::int64_t offset = -1;
  std::int64_t timestamp = -1;
  kafka_flags error;       ///< error.code == 0 means delivered
  void* opaque = nullptr;  ///< as passed to produce()

  bool ok() const noexcept { return error.code == 0; }
  /// The failure as a sluice::error (only meaningful when !ok()).
  sluice::error to_error() const;
};

using delivery_callback = std::function<void(const delivery_report&)>;

/// A Kafka producer.
///
/// The partition Kafka's murmur2 partitioner (Java's default for keyed records, and the
/// producer's here) puts `key` in, out of `partitions`.
std::int32_t murmur2_partition(std::string_view key, std::int32_t partitions) noexcept;

/// Keys are partitioned with murmur2_random (what Java's default partitioner computes)
/// unless the config sets `partitioner`. Delivery reports run in the thread that calls
/// poll(), flush() or produce() (produce polls when the queue is full); an exception the
/// callback throws is caught there and rethrown from the next poll() or flush().
///
/// Threading: produce() may be called from several threads; poll(), flush() and the
/// transaction calls from one thread at a time (that thread runs the delivery callback).
/// The object is neither copyable nor movable (librdkafka holds a pointer to it).
class producer {
 public:
  producer(const config_map& config, producer_options options = {}, delivery_callback on_delivery = {});
  /// Flushes for at most options.close_timeout (after a fatal error: drops what was not sent
  /// and waits as long for the requests in flight), logs what was left, never throws.
  ~producer();
  producer(const producer&) = delete;
  producer& operator=(const producer&) = delete;

  /// Enqueues one record (copied; the arguments may die on return). partition -1 uses the
  /// partitioner; a nullopt value is a tombstone; timestamp 0 means now. Waits (polling)
  /// up to max_block while the local queue is full, then throws errc::timeout. Errors
  /// librdkafka reports immediately throw; delivery errors go to the callback.
  void produce(std::string_view topic, std::int32_t partition, const std::optional<std::string_view>& key,
               const std::optional<std::string_view>& value, std::int64_t timestamp, const sluice::headers& headers,
               void* opaque = nullptr);

  /// Serves delivery reports and errors; returns the number of events served.
  int poll(std::chrono::milliseconds timeout);
  /// Waits until every record is delivered (reports served); throws errc::timeout if not.
  void flush(std::chrono::milliseconds timeout);
  /// Records enqueued or in flight, not yet reported.
  int outstanding() const;

  void init_transactions(std::chrono::milliseconds timeout);
  void begin_transaction();
  void send_offsets_to_transaction(const std::vector<topic_partition_offset>& offsets,
                                   const consumer_group_metadata& group, std::chrono::milliseconds timeout);
  void commit_transaction(std::chrono::milliseconds timeout);
  void abort_transaction(std::chrono::milliseconds timeout);

  /// The fatal error that made this producer unusable, if one was raised.
  std::optional<sluice::error> fatal_error() const;

  const std::string& name() const noexcept { return name_; }
  /// The underlying handle, for tests and the mock cluster's fault injection.
  rd_kafka_t* native() const noexcept { return rk_.get(); }

 private:
  static void on_delivery_c(rd_kafka_t* rk, const rd_kafka_message_t* m, void* opaque);
  static void on_error_c(rd_kafka_t* rk, int err, const char* reason, void* opaque);
  static int on_statistics_c(rd_kafka_t* rk, char* json, size_t json_len, void* opaque);
  void rethrow_pending();
  /// After a fatal error: drops the records never sent and waits (up to close_timeout) for
  /// the requests in flight to come back, their reports discarded.
  void drain_after_fatal_error();
  [[noreturn]] void throw_produce_error(rd_kafka_resp_err_t err, std::string_view topic);
  /// The cached handle of `topic`, made on first use: producing by handle skips
  /// librdkafka's locked lookup by name and the copy of the name per record.
  rd_kafka_topic_t* topic_handle(std::string_view topic);

  producer_options options_;
  delivery_callback on_delivery_;
  std::exception_ptr pending_;    // first exception thrown by a callback, rethrown by poll()
  bool discard_reports_ = false;  // closing after a fatal error: reports are not passed on
  std::int64_t undelivered_ = 0;  // and those of records not delivered are counted
  log_throttle throttle_;
  std::string name_;
  handle_ptr rk_;
  // After rk_: topic handles are destroyed before the client handle.
  std::unordered_map<std::string, topic_ptr, string_hash, std::equal_to<>> topics_;
  std::string_view last_topic_;              // key in topics_ of the last handle used
  rd_kafka_topic_t* last_handle_ = nullptr;  // that handle
};

}  // namespace sluice::kafka
