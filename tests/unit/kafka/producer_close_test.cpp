// A producer destroyed after a fatal error leaves nothing in flight: the records it never
// sent are dropped and the requests in flight come back before the handle goes, so no
// response reaches librdkafka's fatal-error path during the teardown (with librdkafka 2.0.2
// such a response corrupted the heap of a fenced transactional producer's main thread).
//
// Its own executable: the captures must be the loggers before any client exists in the
// process.
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <chrono>
#include <string_view>

#include "kafka/mock_cluster.hpp"
#include "kafka/producer.hpp"
#include "log_capture.hpp"

using namespace sluice::kafka;
using namespace std::chrono_literals;

TEST(producer_close, after_a_fatal_error_the_handle_is_destroyed_with_nothing_queued_or_in_flight) {
  sluice::test::log_capture rdkafka("rdkafka");     // librdkafka's own lines
  sluice::test::log_capture layer("sluice.kafka");  // the producer's
  mock_cluster cluster;
  cluster.create_topic("close", 1);
  // Every request takes 200 ms, so records are queued or in flight when the error comes.
  rd_kafka_mock_broker_set_rtt(cluster.native(), 1, 200);
  int reports = 0;
  {
    producer_options transactional;
    transactional.mode = producer_mode::transactional;
    transactional.transactional_id = "close-id";
    producer p(config_map{{"bootstrap.servers", cluster.bootstrap_servers()}}, transactional,
               [&](const delivery_report&) { ++reports; });
    p.init_transactions(10s);
    p.begin_transaction();
    for (int i = 0; i < 100; ++i) p.produce("close", 0, std::string_view("k"), std::string_view("v"), 0, {});
    p.poll(50ms);
    ASSERT_GT(p.outstanding(), 0);
    ASSERT_EQ(rd_kafka_test_fatal_error(p.native(), RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, "test fatal"),
              RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  // librdkafka says so when a handle is destroyed with records queued or in flight.
  EXPECT_FALSE(rdkafka.contains("still in queue or transit")) << rdkafka.text();
  EXPECT_TRUE(layer.contains("closing after a fatal error: 100 record(s) not delivered")) << layer.text();
  EXPECT_EQ(reports, 0) << "the dropped records' reports are not passed on";
}
