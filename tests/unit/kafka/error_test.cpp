// Error mapping: librdkafka codes and error objects become the right errc, keep their
// flags, and carry a message a user can act on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <thread>
#include <vector>

#include "kafka/consumer.hpp"
#include "kafka/error.hpp"
#include "kafka/mock_cluster.hpp"
#include "kafka/producer.hpp"
#include "kafka_test_util.hpp"

namespace sluice::kafka {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

kafka_flags fatal_flags() {
  kafka_flags f;
  f.fatal = true;
  return f;
}
kafka_flags retriable_flags() {
  kafka_flags f;
  f.retriable = true;
  return f;
}
kafka_flags abort_flags() {
  kafka_flags f;
  f.txn_requires_abort = true;
  return f;
}
producer_options transactional(std::string id) {
  producer_options o;
  o.mode = producer_mode::transactional;
  o.transactional_id = std::move(id);
  return o;
}

TEST(kafka_error, fenced_codes_map_to_fenced) {
  for (auto code :
       {RD_KAFKA_RESP_ERR__FENCED, RD_KAFKA_RESP_ERR_PRODUCER_FENCED, RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH}) {
    error_ptr err(rd_kafka_error_new(code, "zombie %d", 7));
    const auto e = make_error(err.get(), "commit_transaction");
    EXPECT_EQ(e.code(), errc::fenced) << rd_kafka_err2name(code);
    EXPECT_EQ(e.kafka().code, static_cast<int>(code));
    EXPECT_THAT(e.what(), HasSubstr("commit_transaction: zombie 7 ("));
    EXPECT_THAT(e.what(), HasSubstr("transactional.id"));
  }
}

TEST(kafka_error, fenced_wins_over_fatal_and_fatal_flag_is_kept) {
  const auto e = make_error(RD_KAFKA_RESP_ERR_PRODUCER_FENCED, "init", fatal_flags());
  EXPECT_EQ(e.code(), errc::fenced);
  EXPECT_TRUE(e.kafka().fatal);
}

TEST(kafka_error, flags_are_kept_and_decide_the_errc) {
  const auto fatal = make_error(RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, "produce", fatal_flags());
  EXPECT_EQ(fatal.code(), errc::kafka_fatal);
  EXPECT_TRUE(fatal.kafka().fatal);

  const auto retriable = make_error(RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS, "commit", retriable_flags());
  EXPECT_EQ(retriable.code(), errc::kafka);
  EXPECT_TRUE(retriable.kafka().retriable);
  EXPECT_FALSE(retriable.kafka().fatal);

  const auto abort = make_error(RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, "commit", abort_flags());
  EXPECT_EQ(abort.code(), errc::transaction_aborted);
  EXPECT_TRUE(abort.kafka().txn_requires_abort);
  EXPECT_EQ(abort.kafka().code, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
}

TEST(kafka_error, timed_out_maps_to_timeout) {
  error_ptr err(rd_kafka_error_new(RD_KAFKA_RESP_ERR__TIMED_OUT, "took too long"));
  EXPECT_EQ(make_error(err.get(), "flush").code(), errc::timeout);
}

TEST(kafka_error, message_names_error_and_hint) {
  const auto unknown = make_error(RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART, "produce to 'orders'");
  EXPECT_EQ(unknown.code(), errc::kafka);
  EXPECT_THAT(unknown.what(), HasSubstr("produce to 'orders': "));
  EXPECT_THAT(unknown.what(), HasSubstr("(UNKNOWN_TOPIC_OR_PART)"));
  EXPECT_THAT(unknown.what(), HasSubstr("create the topic or check its name"));

  for (auto code : {RD_KAFKA_RESP_ERR__TRANSPORT, RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN}) {
    error_ptr err(rd_kafka_error_new(code, "connection refused"));
    const auto e = make_error(err.get(), "metadata");
    EXPECT_THAT(e.what(), HasSubstr("metadata: connection refused"));
    EXPECT_THAT(e.what(), HasSubstr("is the broker at bootstrap.servers reachable?"));
  }
}

TEST(kafka_error, throw_if_consumes_and_throws) {
  EXPECT_NO_THROW(throw_if(static_cast<rd_kafka_error_t*>(nullptr), "x"));
  EXPECT_NO_THROW(throw_if(RD_KAFKA_RESP_ERR_NO_ERROR, "x"));
  try {
    throw_if(rd_kafka_error_new(RD_KAFKA_RESP_ERR__STATE, "wrong state"), "begin_transaction");
    FAIL() << "no throw";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), errc::kafka);
    EXPECT_EQ(e.kafka().code, RD_KAFKA_RESP_ERR__STATE);
  }
}

// A real fatal error raised inside librdkafka keeps its flag through rd_kafka_error_t: the
// (mock) coordinator answers EndTxn with PRODUCER_FENCED, as it does for a zombie. (The
// mock does not fence by epoch itself; the integration tier fences with a second producer.)
TEST(kafka_error, fenced_transactional_producer_gets_fatal_fenced_error) {
  mock_cluster cluster;
  cluster.create_topic("fencing", 1);
  producer zombie(config_map{{"bootstrap.servers", cluster.bootstrap_servers()}}, transactional("fencing-id"));
  zombie.init_transactions(10s);
  zombie.begin_transaction();
  zombie.produce("fencing", 0, std::string_view("k"), std::string_view("v"), 0, {});
  zombie.flush(10s);
  rd_kafka_mock_push_request_errors(cluster.native(), 26 /* EndTxn */, 1, RD_KAFKA_RESP_ERR_PRODUCER_FENCED);
  try {
    zombie.commit_transaction(10s);
    FAIL() << "commit_transaction of a fenced producer did not throw";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), errc::fenced) << e.what();
    EXPECT_TRUE(e.kafka().fatal) << e.what();
  }
  const auto fatal = zombie.fatal_error();
  ASSERT_TRUE(fatal.has_value());
  EXPECT_TRUE(fatal->kafka().fatal);
  EXPECT_EQ(fatal->code(), errc::fenced);
}

// rd_kafka_test_fatal_error raises a fatal error; produce() then throws it synchronously.
TEST(kafka_error, produce_after_a_fatal_error_throws_it) {
  mock_cluster cluster;
  producer p(config_map{{"bootstrap.servers", cluster.bootstrap_servers()}});
  EXPECT_FALSE(p.fatal_error().has_value());
  ASSERT_EQ(rd_kafka_test_fatal_error(p.native(), RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, "test fatal"),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  try {
    p.produce("t", 0, std::nullopt, std::string_view("v"), 0, {});
    FAIL() << "produce after a fatal error did not throw";
  } catch (const sluice::error& e) {
    EXPECT_TRUE(e.kafka().fatal);
    EXPECT_EQ(e.code(), errc::kafka_fatal);
    EXPECT_EQ(e.kafka().code, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    EXPECT_THAT(e.what(), HasSubstr("test fatal"));
  }
  ASSERT_TRUE(p.fatal_error().has_value());
  EXPECT_EQ(p.fatal_error()->code(), errc::kafka_fatal);
}

/// A static member of a group reading `topic` (one partition, `records` written) that has
/// polled its first record. fence() has the coordinator answer a heartbeat with
/// FENCED_INSTANCE_ID, as after a twin's join or an outage past the session timeout, and
/// waits until the consumer is in that fatal state.
struct static_member {
  static_member(const std::string& topic, int records)
      : c(config_map{{"bootstrap.servers", cluster.bootstrap_servers()},
                     {"group.id", topic},
                     {"group.instance.id", topic + "-0"},
                     {"heartbeat.interval.ms", "100"},
                     {"auto.offset.reset", "earliest"}}) {
    cluster.create_topic(topic, 1);
    test::write_numbered(cluster.bootstrap_servers(), topic, 0, records);
    c.subscribe({topic});
    while (!c.poll_batch(batch, 1, 100ms) && std::chrono::steady_clock::now() < end) {}
  }
  bool fence() {
    rd_kafka_mock_push_request_errors(cluster.native(), 12 /* Heartbeat */, 1, RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID);
    while (rd_kafka_fatal_error(c.native(), nullptr, 0) == RD_KAFKA_RESP_ERR_NO_ERROR &&
           std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(10ms);
    return rd_kafka_fatal_error(c.native(), nullptr, 0) == RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID;
  }

  mock_cluster cluster;
  consumer c;
  std::vector<message> batch;
  const std::chrono::steady_clock::time_point end = std::chrono::steady_clock::now() + 10s;
};

// A consumer's fatal error (here the FENCED_INSTANCE_ID a twin's join causes) is thrown by
// the next poll, ahead of the records fetched before it: a stream thread learns that its
// consumer was fenced at once, not after draining what was queued.
TEST(kafka_error, a_consumers_fatal_error_is_thrown_before_the_records_fetched_ahead_of_it) {
  static_member m("fetched-ahead", 2000);
  ASSERT_EQ(m.batch.size(), 1u);
  // The rest is fetched and queued; then the consumer is fenced.
  rd_kafka_queue_t* queue = rd_kafka_queue_get_consumer(m.c.native());
  while (rd_kafka_queue_length(queue) < 1999 && std::chrono::steady_clock::now() < m.end)
    std::this_thread::sleep_for(10ms);
  const auto queued = rd_kafka_queue_length(queue);
  rd_kafka_queue_destroy(queue);
  ASSERT_GE(queued, 1999u);
  ASSERT_TRUE(m.fence());
  try {
    m.c.poll_batch(m.batch, 1, 100ms);
    FAIL() << "poll_batch returned a record (offset " << (m.batch.empty() ? -1 : m.batch[0].offset)
           << ") after the consumer's fatal error";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), errc::kafka_fatal) << e.what();
    EXPECT_EQ(e.kafka().code, RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID) << e.what();
  }
}

// A consumer the coordinator fenced (FENCED_INSTANCE_ID, as after a long outage under static
// membership) answers a commit with _FATAL. The commit throws the fencing itself, which a
// stream thread rides out by recreating its consumer; as a bare _FATAL it stopped the job.
TEST(kafka_error, a_commit_of_a_fenced_consumer_throws_the_fencing) {
  static_member m("fenced-commit", 10);
  ASSERT_EQ(m.batch.size(), 1u);
  ASSERT_TRUE(m.fence());
  try {
    m.c.commit({{"fenced-commit", 0, 1}});
    FAIL() << "a fenced consumer's commit did not throw";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), errc::kafka_fatal) << e.what();
    EXPECT_EQ(e.kafka().code, RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID) << e.what();
    EXPECT_TRUE(e.kafka().fatal) << e.what();
  }
}

// An abortable transaction error keeps txn_requires_abort and maps to transaction_aborted.
TEST(kafka_error, abortable_transaction_error_keeps_flag) {
  mock_cluster cluster;
  cluster.create_topic("abortable", 1);
  producer p({{"bootstrap.servers", cluster.bootstrap_servers()}}, transactional("abort-test"));
  p.init_transactions(10s);
  p.begin_transaction();
  // AddPartitionsToTxn (ApiKey 24) refused: the transaction can only be aborted.
  rd_kafka_mock_push_request_errors(cluster.native(), 24, 1, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
  p.produce("abortable", 0, std::string_view("k"), std::string_view("v"), 0, {});
  try {
    p.commit_transaction(10s);
    FAIL() << "commit_transaction did not throw";
  } catch (const sluice::error& e) {
    EXPECT_TRUE(e.kafka().txn_requires_abort) << e.what();
    EXPECT_FALSE(e.kafka().fatal);
    EXPECT_EQ(e.code(), errc::transaction_aborted);
  }
  p.abort_transaction(10s);
}

}  // namespace
}  // namespace sluice::kafka
