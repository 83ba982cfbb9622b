// librdkafka statistics JSON to the sluice_kafka_* gauges (runtime/client_statistics.hpp).
#include "runtime/client_statistics.hpp"

#include <gtest/gtest.h>

namespace {

using sluice::runtime::client_kind;
using sluice::runtime::client_statistics;

// The shape librdkafka 2.0 emits (STATISTICS.md), trimmed to the fields read and a few
// around them: a bootstrap broker (nodeid -1), a logical coordinator, two real brokers.
constexpr const char* producer_stats = R"({
  "name": "rdkafka#producer-1", "type": "producer", "ts": 1, "time": 1, "replyq": 3,
  "msg_cnt": 120, "msg_size": 64000, "msg_max": 100000, "msg_size_max": 1073741824,
  "brokers": {
    "127.0.0.1:9092/bootstrap": {"name": "127.0.0.1:9092/bootstrap", "nodeid": -1, "source": "configured",
                                  "outbuf_cnt": 9, "waitresp_cnt": 9, "rtt": {"avg": 999999, "p99": 999999}},
    "GroupCoordinator": {"name": "GroupCoordinator", "nodeid": 1, "source": "logical",
                         "outbuf_cnt": 8, "waitresp_cnt": 8, "rtt": {"avg": 888888, "p99": 888888}},
    "127.0.0.1:9092/1": {"name": "127.0.0.1:9092/1", "nodeid": 1, "source": "learned", "state": "UP",
                         "outbuf_cnt": 2, "outbuf_msg_cnt": 40, "waitresp_cnt": 1,
                         "rtt": {"min": 100, "max": 9000, "avg": 1500, "sum": 30000, "cnt": 20, "p50": 1200, "p99": 8000}},
    "127.0.0.1:9093/2": {"name": "127.0.0.1:9093/2", "nodeid": 2, "source": "learned", "state": "UP",
                         "outbuf_cnt": 0, "waitresp_cnt": 4, "rtt": {"avg": 700, "p99": 2100}}
  },
  "topics": {}
})";

constexpr const char* consumer_stats = R"({
  "type": "consumer", "replyq": 0, "msg_cnt": 0, "msg_size": 0,
  "brokers": {"b/1": {"nodeid": 1, "source": "learned", "outbuf_cnt": 0, "waitresp_cnt": 1, "rtt": {"avg": 400, "p99": 900}}},
  "topics": {
    "in": {"topic": "in", "partitions": {
      "0": {"partition": 0, "fetchq_cnt": 500},
      "1": {"partition": 1, "fetchq_cnt": 250},
      "-1": {"partition": -1, "fetchq_cnt": 0}}}}
})";

TEST(client_statistics, a_producers_queue_and_its_real_brokers_rtt_and_request_queues_become_gauges) {
  sluice::metrics_registry m;
  client_statistics stats(m, "thread=\"0\"", client_kind::producer);
  stats.on_statistics(producer_stats);
  const std::string own = "thread=\"0\",client=\"producer\"";
  EXPECT_EQ(m.get_gauge("sluice_kafka_client_queue_messages", own).value(), 120);
  EXPECT_EQ(m.get_gauge("sluice_kafka_client_queue_bytes", own).value(), 64000);
  EXPECT_EQ(m.get_gauge("sluice_kafka_client_reply_queue_ops", own).value(), 3);
  EXPECT_EQ(m.get_gauge("sluice_kafka_broker_rtt_avg_us", own + ",broker=\"1\"").value(), 1500);
  EXPECT_EQ(m.get_gauge("sluice_kafka_broker_rtt_p99_us", own + ",broker=\"1\"").value(), 8000);
  EXPECT_EQ(m.get_gauge("sluice_kafka_broker_outbuf_requests", own + ",broker=\"1\"").value(), 2);
  EXPECT_EQ(m.get_gauge("sluice_kafka_broker_waitresp_requests", own + ",broker=\"2\"").value(), 4);
  // Bootstrap and logical brokers repeat a real one: no label set of their own.
  const auto text = m.prometheus_text();
  EXPECT_EQ(text.find("broker=\"-1\""), std::string::npos) << text;
  EXPECT_EQ(text.find("999999"), std::string::npos) << text;
  EXPECT_EQ(text.find("0.888888"), std::string::npos) << text;
  EXPECT_NE(text.find("sluice_kafka_broker_rtt_avg_seconds{thread=\"0\",client=\"producer\",broker=\"1\"} 0.0015\n"),
            std::string::npos)
      << text;
}

TEST(client_statistics, a_consumers_fetched_messages_are_summed_over_its_partitions) {
  sluice::metrics_registry m;
  client_statistics stats(m, "thread=\"1\"", client_kind::consumer);
  stats.on_statistics(consumer_stats);
  EXPECT_EQ(m.get_gauge("sluice_kafka_consumer_fetch_queue_messages", "thread=\"1\",client=\"consumer\"").value(), 750);
  EXPECT_EQ(m.get_gauge("sluice_kafka_broker_rtt_avg_us", "thread=\"1\",client=\"consumer\",broker=\"1\"").value(),
            400);
}

TEST(client_statistics, malformed_text_leaves_the_gauges_as_they_were_and_fields_of_a_wrong_type_read_as_absent) {
  sluice::metrics_registry m;
  client_statistics stats(m, "thread=\"0\"", client_kind::producer);
  stats.on_statistics(producer_stats);
  stats.on_statistics("{\"msg_cnt\": 5, \"brokers\": {");  // truncated
  stats.on_statistics("[1, 2]");
  stats.on_statistics("{\"msg_cnt\": \"many\", \"brokers\": {\"x\": 3}}");  // wrong types: read as absent
  EXPECT_EQ(m.get_gauge("sluice_kafka_broker_rtt_avg_us", "thread=\"0\",client=\"producer\",broker=\"1\"").value(),
            1500);
  EXPECT_EQ(m.get_gauge("sluice_kafka_client_queue_messages", "thread=\"0\",client=\"producer\"").value(), 0);
}

}  // namespace
