// librdkafka error → sluice::error.
#include "kafka/error.hpp"

#include <string>

#include "kafka/handles.hpp"

namespace sluice::kafka {

std::string_view hint_for(rd_kafka_resp_err_t code) noexcept {
  switch (code) {
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
    case RD_KAFKA_RESP_ERR__RESOLVE: return "is the broker at bootstrap.servers reachable?";
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC: return "create the topic or check its name";
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION: return "the partition does not exist; check the topic's partition count";
    case RD_KAFKA_RESP_ERR__FENCED:
    case RD_KAFKA_RESP_ERR_PRODUCER_FENCED:
    case RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH:
      return "another instance with the same transactional.id took over; this producer "
             "must be closed";
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED: return "check the ACLs granted to this client's principal";
    case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
      return "the record was not acknowledged within message.timeout.ms; is the broker "
             "reachable and the topic's leader available?";
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
      return "raise message.max.bytes (client) and max.message.bytes (topic) or send "
             "smaller records";
    case RD_KAFKA_RESP_ERR__QUEUE_FULL:
      return "the producer queue is full; raise queue.buffering.max.messages or poll "
             "more often";
    default: return {};
  }
}

errc classify(rd_kafka_resp_err_t code, const kafka_flags& flags) noexcept {
  switch (code) {
    case RD_KAFKA_RESP_ERR__FENCED:
    case RD_KAFKA_RESP_ERR_PRODUCER_FENCED:
    case RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH: return errc::fenced;
    default: break;
  }
  if (flags.fatal) return errc::kafka_fatal;
  if (flags.txn_requires_abort) return errc::transaction_aborted;
  if (code == RD_KAFKA_RESP_ERR__TIMED_OUT) return errc::timeout;
  return errc::kafka;
}

namespace {

std::string compose(std::string_view context, std::string_view reason, std::string_view name, std::string_view hint) {
  std::string msg;
  msg.reserve(context.size() + reason.size() + name.size() + hint.size() + 8);
  if (!context.empty()) msg.append(context).append(": ");
  msg.append(reason).append(" (").append(name).append(")");
  if (!hint.empty()) msg.append("; ").append(hint);
  return msg;
}

}  // namespace

sluice::error make_error(const rd_kafka_error_t* err, std::string_view context) {
  if (!err) return make_error(RD_KAFKA_RESP_ERR_NO_ERROR, context);
  const auto code = rd_kafka_error_code(err);
  kafka_flags flags;
  flags.code = static_cast<int>(code);
  flags.fatal = rd_kafka_error_is_fatal(err) != 0;
  flags.retriable = rd_kafka_error_is_retriable(err) != 0;
  flags.txn_requires_abort = rd_kafka_error_txn_requires_abort(err) != 0;
  const char* reason = rd_kafka_error_string(err);
  return sluice::error(
      classify(code, flags),
      compose(context, reason ? reason : rd_kafka_err2str(code), rd_kafka_error_name(err), hint_for(code)), flags);
}

sluice::error make_error(rd_kafka_resp_err_t code, std::string_view context, kafka_flags flags,
                         std::string_view reason) {
  flags.code = static_cast<int>(code);
  return sluice::error(
      classify(code, flags),
      compose(context, reason.empty() ? rd_kafka_err2str(code) : reason, rd_kafka_err2name(code), hint_for(code)),
      flags);
}

sluice::error make_fatal_error(rd_kafka_t* rk, std::string_view context, rd_kafka_resp_err_t fallback) {
  char reason[512] = {0};
  auto code = rk ? rd_kafka_fatal_error(rk, reason, sizeof reason) : RD_KAFKA_RESP_ERR_NO_ERROR;
  if (code == RD_KAFKA_RESP_ERR_NO_ERROR) code = fallback;
  kafka_flags flags;
  flags.fatal = true;
  return make_error(code, context, flags, reason);
}

void throw_if(rd_kafka_error_t* err, std::string_view context) {
  if (!err) return;
  error_ptr owned(err);
  throw make_error(owned.get(), context);
}

void throw_if(rd_kafka_resp_err_t code, std::string_view context) {
  if (code != RD_KAFKA_RESP_ERR_NO_ERROR) throw make_error(code, context);
}

}  // namespace sluice::kafka
