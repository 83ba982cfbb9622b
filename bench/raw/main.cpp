// sluice-bench-raw: the ceiling for passthrough. A minimal librdkafka consume -> produce loop
// (C API, no framework): auto-stored, auto-committed offsets (at-least-once at best), the
// value mapped to ASCII upper-case like the other contenders. Runs until SIGTERM.
//
//   sluice-bench-raw --bootstrap host:port --group G --input T --output T
#include <librdkafka/rdkafka.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

volatile std::sig_atomic_t stop = 0;
void on_signal(int) { stop = 1; }

void set(rd_kafka_conf_t* c, const char* k, const std::string& v) {
  char err[512];
  if (rd_kafka_conf_set(c, k, v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
    std::fprintf(stderr, "sluice-bench-raw: %s\n", err);
    std::exit(2);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string bootstrap = "127.0.0.1:39092", group, input, output;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--bootstrap") bootstrap = argv[i + 1];
    else if (a == "--group") group = argv[i + 1];
    else if (a == "--input") input = argv[i + 1];
    else if (a == "--output") output = argv[i + 1];
  }
  if (group.empty() || input.empty() || output.empty()) {
    std::fprintf(stderr, "usage: %s --bootstrap B --group G --input T --output T\n", argv[0]);
    return 2;
  }
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  char err[512];

  rd_kafka_conf_t* pc = rd_kafka_conf_new();
  set(pc, "bootstrap.servers", bootstrap);
  set(pc, "linger.ms", "5");
  rd_kafka_t* producer = rd_kafka_new(RD_KAFKA_PRODUCER, pc, err, sizeof err);
  if (!producer) { std::fprintf(stderr, "sluice-bench-raw: %s\n", err); return 1; }

  rd_kafka_conf_t* cc = rd_kafka_conf_new();
  set(cc, "bootstrap.servers", bootstrap);
  set(cc, "group.id", group);
  set(cc, "auto.offset.reset", "earliest");
  rd_kafka_t* consumer = rd_kafka_new(RD_KAFKA_CONSUMER, cc, err, sizeof err);
  if (!consumer) { std::fprintf(stderr, "sluice-bench-raw: %s\n", err); return 1; }
  rd_kafka_poll_set_consumer(consumer);
  rd_kafka_topic_partition_list_t* topics = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(topics, input.c_str(), RD_KAFKA_PARTITION_UA);
  rd_kafka_subscribe(consumer, topics);
  rd_kafka_topic_partition_list_destroy(topics);

  rd_kafka_topic_t* out = rd_kafka_topic_new(producer, output.c_str(), nullptr);
  rd_kafka_queue_t* queue = rd_kafka_queue_get_consumer(consumer);
  std::vector<rd_kafka_message_t*> batch(1000);
  std::string value;
  long long n = 0;
  while (!stop) {
    ssize_t got = rd_kafka_consume_batch_queue(queue, 100, batch.data(), batch.size());
    for (ssize_t i = 0; i < got; ++i) {
      rd_kafka_message_t* m = batch[static_cast<std::size_t>(i)];
      if (!m->err) {
        value.assign(static_cast<const char*>(m->payload), m->len);
        for (char& c : value)
          if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
        while (rd_kafka_produce(out, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY, value.data(), value.size(), m->key,
                                m->key_len, nullptr) == -1) {
          if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            std::fprintf(stderr, "sluice-bench-raw: produce: %s\n", rd_kafka_err2str(rd_kafka_last_error()));
            return 1;
          }
          rd_kafka_poll(producer, 10);
        }
        ++n;
      }
      rd_kafka_message_destroy(m);
    }
    rd_kafka_poll(producer, 0);
  }
  rd_kafka_flush(producer, 30000);
  rd_kafka_queue_destroy(queue);
  rd_kafka_consumer_close(consumer);
  rd_kafka_topic_destroy(out);
  rd_kafka_destroy(consumer);
  rd_kafka_destroy(producer);
  std::fprintf(stderr, "sluice-bench-raw: %lld records\n", n);
  return 0;
}
