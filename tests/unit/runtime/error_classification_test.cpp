// The one classification of failures the stream thread and the stream task share: which
// errors a job rides out (retriable), which stop it (fatal), which go to the error handlers
// (record).
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include <stdexcept>

#include "kafka/error.hpp"
#include "runtime/error_classification.hpp"
#include "sluice/error.hpp"

namespace sluice::runtime {
namespace {

sluice::error delivery_failure(rd_kafka_resp_err_t code) {
  // What a delivery report turns into: a bare code, no retriable flag.
  return kafka::make_error(code, "delivery to counts[3] failed");
}

TEST(error_classification, a_record_not_acknowledged_in_time_is_ridden_out) {
  // Finding 1 of issue 12: _MSG_TIMED_OUT during a broker outage stopped the job.
  EXPECT_EQ(classify_failure(delivery_failure(RD_KAFKA_RESP_ERR__MSG_TIMED_OUT)), failure_kind::retriable);
}

TEST(error_classification, cluster_movements_are_ridden_out) {
  for (auto code : {RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN, RD_KAFKA_RESP_ERR__TRANSPORT, RD_KAFKA_RESP_ERR__TIMED_OUT,
                    RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION, RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE,
                    RD_KAFKA_RESP_ERR_NOT_COORDINATOR, RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE,
                    RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS, RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
                    RD_KAFKA_RESP_ERR_CONCURRENT_TRANSACTIONS})
    EXPECT_EQ(classify_failure(delivery_failure(code)), failure_kind::retriable) << rd_kafka_err2name(code);
}

TEST(error_classification, librdkafka_flags_decide_for_codes_it_marks) {
  kafka_flags retriable;
  retriable.retriable = true;
  EXPECT_EQ(classify_failure(kafka::make_error(RD_KAFKA_RESP_ERR_UNKNOWN, "commit", retriable)),
            failure_kind::retriable);
  kafka_flags abort;
  abort.txn_requires_abort = true;
  EXPECT_EQ(classify_failure(kafka::make_error(RD_KAFKA_RESP_ERR_UNKNOWN, "commit", abort)), failure_kind::retriable);
}

TEST(error_classification, a_fenced_or_failed_producer_is_recreated) {
  for (auto code :
       {RD_KAFKA_RESP_ERR__FENCED, RD_KAFKA_RESP_ERR_PRODUCER_FENCED, RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH})
    EXPECT_EQ(classify_failure(kafka::make_error(code, "commit_transaction")), failure_kind::retriable)
        << rd_kafka_err2name(code);
  kafka_flags fatal;
  fatal.fatal = true;
  EXPECT_EQ(classify_failure(kafka::make_error(RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, "producer", fatal)),
            failure_kind::retriable);
}

TEST(error_classification, a_fenced_consumer_is_told_apart_with_advice_for_twins) {
  // Finding 2 of issue 12: FENCED_INSTANCE_ID was taken for a transaction problem and
  // retried forever, each retry's new producer fencing the healthy instance. It is its own
  // kind: the thread recreates the consumer once, and stops when fenced again soon after.
  kafka_flags fatal;
  fatal.fatal = true;
  const auto e = kafka::make_error(RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID, "consumer rdkafka#consumer-1", fatal);
  EXPECT_EQ(e.code(), errc::kafka_fatal);
  EXPECT_EQ(classify_failure(e), failure_kind::member_fenced);
  EXPECT_NE(fatal_advice(e).find("give every instance its own instance.id"), std::string::npos) << fatal_advice(e);
}

TEST(fencing_record, a_fenced_consumer_repeating_its_error_is_one_fencing) {
  // Seen in the fault suite: an instance cut off from the brokers was fenced by its own
  // earlier member once; the fenced consumer then answered each poll of the recovery's
  // backoff with the same fatal error, and three of those within a millisecond stopped the
  // instance as if a twin had taken its identity.
  fencing_record r;
  const auto t = fencing_record::clock_type::now();
  EXPECT_FALSE(r.twin_after(1, t));
  EXPECT_FALSE(r.twin_after(1, t));
  EXPECT_FALSE(r.twin_after(1, t + std::chrono::milliseconds(1)));
  EXPECT_EQ(r.count(), 1u);
  EXPECT_FALSE(r.twin_after(2, t + std::chrono::seconds(3)));  // a second fault soon after
  EXPECT_FALSE(r.twin_after(2, t + std::chrono::seconds(3)));
  EXPECT_EQ(r.count(), 2u);
}

TEST(fencing_record, three_consumers_fenced_within_30_s_are_a_twin) {
  fencing_record r;
  const auto t = fencing_record::clock_type::now();
  EXPECT_FALSE(r.twin_after(1, t));
  EXPECT_FALSE(r.twin_after(2, t + std::chrono::seconds(2)));
  EXPECT_TRUE(r.twin_after(3, t + std::chrono::seconds(4)));
  EXPECT_EQ(r.count(), 3u);
  EXPECT_EQ(r.span(), std::chrono::seconds(4));
  EXPECT_EQ(r.twin_evidence("consumers", "right after rejoining"),
            "3 consumers fenced in 4 s, each right after rejoining");
}

TEST(fencing_record, fencings_further_apart_than_30_s_are_separate_faults) {
  fencing_record r;
  const auto t = fencing_record::clock_type::now();
  EXPECT_FALSE(r.twin_after(1, t));
  EXPECT_FALSE(r.twin_after(2, t + std::chrono::seconds(20)));
  EXPECT_FALSE(r.twin_after(3, t + std::chrono::seconds(40)));  // the first left the window
  EXPECT_EQ(r.count(), 2u);
  EXPECT_TRUE(r.twin_after(4, t + std::chrono::seconds(45)));
}

TEST(fencing_record, a_producer_counts_toward_a_twin_only_when_fenced_sooner_than_a_transaction_can_time_out) {
  using std::chrono::seconds;
  EXPECT_EQ(producer_twin_window(seconds(10)), seconds(5));  // the exactly-once default transaction.timeout.ms
  EXPECT_EQ(producer_twin_window(seconds(60)), seconds(5));
  EXPECT_EQ(producer_twin_window(seconds(4)), seconds(2));
}

TEST(error_classification, refusals_no_retry_can_fix_stop_the_job) {
  for (auto code :
       {RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, RD_KAFKA_RESP_ERR_INVALID_RECORD,
        RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED})
    EXPECT_EQ(classify_failure(delivery_failure(code)), failure_kind::fatal) << rd_kafka_err2name(code);
  EXPECT_EQ(classify_failure(sluice::error(errc::state, "state directory locked")), failure_kind::fatal);
  EXPECT_EQ(classify_failure(sluice::error(errc::invalid_topology, "no store named 'x'")), failure_kind::fatal);
}

TEST(error_classification, a_processors_own_failure_goes_to_the_error_handler) {
  EXPECT_EQ(classify_failure(std::runtime_error("user code threw")), failure_kind::record);
  EXPECT_EQ(classify_failure(sluice::error(errc::processing, "bad value")), failure_kind::record);
  EXPECT_EQ(classify_failure(sluice::error(errc::serialization, "not JSON")), failure_kind::record);
}

}  // namespace
}  // namespace sluice::runtime
