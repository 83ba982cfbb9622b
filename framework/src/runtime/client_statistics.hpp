// client_statistics: what matters of one librdkafka client's statistics JSON, exported as
// gauges of the metrics registry: per broker the round-trip time (average and p99) and the
// requests waiting to be sent (outbuf) and waiting for a response (waitresp); per client
// the messages and bytes in the producer queue, the operations waiting in the reply queue
// and (consumers) the messages fetched but not yet consumed.
//
// Labels stay bounded: the client's own (thread and client kind) and a broker's node id;
// bootstrap and logical brokers (coordinators) are left out, they repeat a real one.
//
// Lifecycle: one per client, made before the client and passed to it as its
// statistics_callback; it outlives the client. Threading: on_statistics() runs on the
// client's polling thread; the gauges it sets are read from any thread.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "sluice/metrics.hpp"

namespace sluice::runtime {

enum class client_kind { consumer, producer };

class client_statistics {
 public:
  /// `labels`: the owner's labels, e.g. thread="0"; client="consumer" or "producer" is added.
  client_statistics(metrics_registry& metrics, const std::string& labels, client_kind kind);

  /// Parses one statistics JSON and sets the gauges. Malformed text leaves them as they
  /// are and is logged (a few times, then rarely); it never throws.
  void on_statistics(std::string_view json) noexcept;

 private:
  metrics_registry& metrics_;
  std::string labels_;
  client_kind kind_;
  gauge& queue_messages_;
  gauge& queue_bytes_;
  gauge& reply_queue_;
  gauge* fetch_queue_ = nullptr;  ///< consumers only
  std::uint64_t malformed_ = 0;
};

}  // namespace sluice::runtime
