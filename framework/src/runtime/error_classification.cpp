// failure_kind of an exception: the table of librdkafka codes a job rides out.
#include "runtime/error_classification.hpp"

#include <librdkafka/rdkafka.h>

#include <algorithm>

#include "sluice/error.hpp"

namespace sluice::runtime {
namespace {

/// Codes that mean "the cluster is moving or unreachable right now", whichever flags
/// librdkafka attached. A delivery report carries no retriable flag at all: a record whose
/// retries ran out within message.timeout.ms reports _MSG_TIMED_OUT and nothing else.
bool transient_code(int code) noexcept {
  switch (static_cast<rd_kafka_resp_err_t>(code)) {
    case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE:
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
    case RD_KAFKA_RESP_ERR__WAIT_COORD:
    case RD_KAFKA_RESP_ERR__PURGE_QUEUE:
    case RD_KAFKA_RESP_ERR__PURGE_INFLIGHT:
    case RD_KAFKA_RESP_ERR__STATE:
    case RD_KAFKA_RESP_ERR__PREV_IN_PROGRESS:
    case RD_KAFKA_RESP_ERR__OUTDATED:
    case RD_KAFKA_RESP_ERR__NODE_UPDATE:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION:
    case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION:
    case RD_KAFKA_RESP_ERR_FENCED_LEADER_EPOCH:
    case RD_KAFKA_RESP_ERR_UNKNOWN_LEADER_EPOCH:
    case RD_KAFKA_RESP_ERR_NOT_COORDINATOR:
    case RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
    case RD_KAFKA_RESP_ERR_CONCURRENT_TRANSACTIONS:
    case RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS:
    case RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION:
    case RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID:
    case RD_KAFKA_RESP_ERR_UNKNOWN_PRODUCER_ID:
    case RD_KAFKA_RESP_ERR_INVALID_PRODUCER_ID_MAPPING:
    case RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER:
    case RD_KAFKA_RESP_ERR_INVALID_TXN_STATE:
    case RD_KAFKA_RESP_ERR_TRANSACTION_COORDINATOR_FENCED:
    case RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR: return true;
    default: return false;
  }
}

/// Codes no retry fixes, even when librdkafka marks them fatal for one client only.
bool hopeless_code(int code) noexcept {
  switch (static_cast<rd_kafka_resp_err_t>(code)) {
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED:
    case RD_KAFKA_RESP_ERR__AUTHENTICATION:
    case RD_KAFKA_RESP_ERR_INVALID_SESSION_TIMEOUT:
    case RD_KAFKA_RESP_ERR_UNSUPPORTED_VERSION: return true;
    default: return false;
  }
}

}  // namespace

failure_kind classify_failure(const std::exception& e) noexcept {
  auto* se = dynamic_cast<const sluice::error*>(&e);
  if (!se) return failure_kind::record;
  const auto& flags = se->kafka();
  if (flags.code == RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID) return failure_kind::member_fenced;
  switch (se->code()) {
    case errc::serialization:
    case errc::processing:
    case errc::io:              // a processor's own file or store write failed on this record
    case errc::invalid_config:  // a processor refused its configuration on this record
      return failure_kind::record;
    case errc::fenced:
      // Another producer took our transactional.id: after an outage, that is usually our own
      // previous producer's epoch. Kafka Streams treats it as "task migrated": a new
      // producer, tasks rejoined from their committed offsets.
      return failure_kind::retriable;
    case errc::kafka_fatal:
    case errc::transaction_aborted:
    case errc::timeout:
    case errc::kafka:
      if (hopeless_code(flags.code)) return failure_kind::fatal;
      // A producer's fatal error is fixed by a new producer; the retries are bounded by
      // task.timeout.ms either way.
      if (se->code() != errc::kafka) return failure_kind::retriable;
      if (flags.retriable || flags.txn_requires_abort || transient_code(flags.code)) return failure_kind::retriable;
      // A record Kafka rejects for good (too large, invalid) fails the same way on every
      // retry: stop with its message instead of aborting and rewinding forever.
      return failure_kind::fatal;
    default: return failure_kind::fatal;
  }
}

std::string fatal_advice(const std::exception& e) {
  auto* se = dynamic_cast<const sluice::error*>(&e);
  if (!se) return {};
  if (se->kafka().code == RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID)
    return "another instance joined the consumer group with this instance's group.instance.id (the same "
           "instance.id, or a copied configuration) and took its place; give every instance its own instance.id "
           "(and state.dir), then restart this one";
  return {};
}

std::chrono::milliseconds producer_twin_window(std::chrono::milliseconds transaction_timeout) noexcept {
  return std::min<std::chrono::milliseconds>(std::chrono::seconds(5), transaction_timeout / 2);
}

bool fencing_record::twin_after(std::uint64_t incarnation, clock_type::time_point now) {
  if (any_ && incarnation == last_incarnation_) return false;  // the same fencing, repeated
  any_ = true;
  last_incarnation_ = incarnation;
  fencings_.push_back(now);
  while (now - fencings_.front() >= twin_window) fencings_.pop_front();
  return fencings_.size() >= twin_fencings;
}

std::chrono::seconds fencing_record::span() const noexcept {
  if (fencings_.empty()) return std::chrono::seconds(0);
  return std::chrono::duration_cast<std::chrono::seconds>(fencings_.back() - fencings_.front());
}

std::string fencing_record::twin_evidence(std::string_view clients, std::string_view when) const {
  return std::to_string(count()) + " " + std::string(clients) + " fenced in " + std::to_string(span().count()) +
         " s, each " + std::string(when);
}

}  // namespace sluice::runtime
