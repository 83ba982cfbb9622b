// sluice-bench-raw: the hand-written contender of bench/run, no framework. A minimal
// librdkafka consume -> produce loop (C API) with auto-stored, auto-committed offsets
// (at-least-once at best), one producer, one processing thread. Runs until SIGTERM.
//
//   sluice-bench-raw --bootstrap host:port --group G --input T --output T
//                    [--workload passthrough|count] [--state-dir D] [--changelog T]
//
// passthrough: the value mapped to ASCII upper-case, key kept.
// count: what a hand-written service would do for the count workload, with the same I/O as
// sluice's count: per record one RocksDB Get and Put (the C++ API, a plain DB in --state-dir,
// WAL off because the changelog is the durability, as sluice does), then the new count
// (int64 big-endian, like sluice's fixed_int_serde) produced to the output topic and to the
// changelog topic (compacted, created here with the input's partition count unless it
// exists), into the input record's partition, as a changelog of a co-partitioned store is.
// No restoration from the changelog: the bench always starts with an empty state dir.
#include <librdkafka/rdkafka.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace {

volatile std::sig_atomic_t stop = 0;
void on_signal(int) { stop = 1; }

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "sluice-bench-raw: %s\n", what.c_str());
  std::exit(1);
}

void set(rd_kafka_conf_t* c, const char* k, const std::string& v) {
  char err[512];
  if (rd_kafka_conf_set(c, k, v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
    std::fprintf(stderr, "sluice-bench-raw: %s\n", err);
    std::exit(2);
  }
}

// Produces one record, waiting for room in librdkafka's queue when it is full.
void produce(rd_kafka_t* producer, rd_kafka_topic_t* topic, std::int32_t partition, const void* value,
             std::size_t value_len, const void* key, std::size_t key_len) {
  while (rd_kafka_produce(topic, partition, RD_KAFKA_MSG_F_COPY, const_cast<void*>(value), value_len, key, key_len,
                          nullptr) == -1) {
    if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL)
      die(std::string("produce: ") + rd_kafka_err2str(rd_kafka_last_error()));
    rd_kafka_poll(producer, 10);
  }
}

int partition_count(rd_kafka_t* rk, const std::string& topic) {
  rd_kafka_topic_t* t = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, t, &md, 10000);
  rd_kafka_topic_destroy(t);
  if (err) die("metadata of " + topic + ": " + rd_kafka_err2str(err));
  int n = md->topic_cnt == 1 && !md->topics[0].err ? md->topics[0].partition_cnt : 0;
  rd_kafka_metadata_destroy(md);
  if (n <= 0) die("topic " + topic + " has no partitions (does it exist?)");
  return n;
}

// Creates `topic` compacted with `partitions` partitions; an existing topic is fine.
void create_changelog(rd_kafka_t* rk, const std::string& topic, int partitions) {
  char err[512];
  rd_kafka_NewTopic_t* nt = rd_kafka_NewTopic_new(topic.c_str(), partitions, -1, err, sizeof err);
  if (!nt) die(err);
  rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "compact");
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
  rd_kafka_CreateTopics(rk, &nt, 1, nullptr, q);
  rd_kafka_event_t* ev = rd_kafka_queue_poll(q, 30000);
  if (!ev) die("creating " + topic + ": no answer in 30 s");
  const rd_kafka_CreateTopics_result_t* res = rd_kafka_event_CreateTopics_result(ev);
  std::size_t n = 0;
  const rd_kafka_topic_result_t** results = res ? rd_kafka_CreateTopics_result_topics(res, &n) : nullptr;
  rd_kafka_resp_err_t e = rd_kafka_event_error(ev);
  if (!e && n == 1) e = rd_kafka_topic_result_error(results[0]);
  std::string message = e ? rd_kafka_err2str(e) : "";
  rd_kafka_event_destroy(ev);
  rd_kafka_queue_destroy(q);
  rd_kafka_NewTopic_destroy(nt);
  if (e && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) die("creating " + topic + ": " + message);
}

}  // namespace

int main(int argc, char** argv) {
  std::string bootstrap = "127.0.0.1:39092", group, input, output, workload = "passthrough", state_dir, changelog;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--bootstrap")
      bootstrap = argv[i + 1];
    else if (a == "--group")
      group = argv[i + 1];
    else if (a == "--input")
      input = argv[i + 1];
    else if (a == "--output")
      output = argv[i + 1];
    else if (a == "--workload")
      workload = argv[i + 1];
    else if (a == "--state-dir")
      state_dir = argv[i + 1];
    else if (a == "--changelog")
      changelog = argv[i + 1];
  }
  const bool count = workload == "count";
  if (group.empty() || input.empty() || output.empty() || (workload != "passthrough" && !count) ||
      (count && state_dir.empty())) {
    std::fprintf(stderr,
                 "usage: %s --bootstrap B --group G --input T --output T [--workload passthrough|count]"
                 " [--state-dir D (count)] [--changelog T (count; default <G>-counts-changelog)]\n",
                 argv[0]);
    return 2;
  }
  if (count && changelog.empty()) changelog = group + "-counts-changelog";
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  char err[512];

  rd_kafka_conf_t* pc = rd_kafka_conf_new();
  set(pc, "bootstrap.servers", bootstrap);
  set(pc, "linger.ms", "5");
  rd_kafka_t* producer = rd_kafka_new(RD_KAFKA_PRODUCER, pc, err, sizeof err);
  if (!producer) {
    std::fprintf(stderr, "sluice-bench-raw: %s\n", err);
    return 1;
  }

  std::unique_ptr<rocksdb::DB> db;
  rd_kafka_topic_t* log_topic = nullptr;
  if (count) {
    create_changelog(producer, changelog, partition_count(producer, input));
    log_topic = rd_kafka_topic_new(producer, changelog.c_str(), nullptr);
    rocksdb::Options o;
    o.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    auto s = rocksdb::DB::Open(o, state_dir, &raw);
    if (!s.ok()) die("opening RocksDB at " + state_dir + ": " + s.ToString());
    db.reset(raw);
  }

  rd_kafka_conf_t* cc = rd_kafka_conf_new();
  set(cc, "bootstrap.servers", bootstrap);
  set(cc, "group.id", group);
  set(cc, "auto.offset.reset", "earliest");
  // The prefetch bounds sluice's consumers use (docs/configuration.md): with librdkafka's
  // defaults the loop waits on fetches that stopped at 100,000 queued records.
  set(cc, "queued.min.messages", "1000000");
  set(cc, "queued.max.messages.kbytes", "32768");
  rd_kafka_t* consumer = rd_kafka_new(RD_KAFKA_CONSUMER, cc, err, sizeof err);
  if (!consumer) {
    std::fprintf(stderr, "sluice-bench-raw: %s\n", err);
    return 1;
  }
  rd_kafka_poll_set_consumer(consumer);
  rd_kafka_topic_partition_list_t* topics = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(topics, input.c_str(), RD_KAFKA_PARTITION_UA);
  rd_kafka_subscribe(consumer, topics);
  rd_kafka_topic_partition_list_destroy(topics);

  rd_kafka_topic_t* out = rd_kafka_topic_new(producer, output.c_str(), nullptr);
  rd_kafka_queue_t* queue = rd_kafka_queue_get_consumer(consumer);
  std::vector<rd_kafka_message_t*> batch(1000);
  std::string value;
  rocksdb::ReadOptions read_options;
  rocksdb::WriteOptions write_options;
  write_options.disableWAL = true;
  rocksdb::PinnableSlice stored;
  char encoded[8];
  long long n = 0;
  while (!stop) {
    ssize_t got = rd_kafka_consume_batch_queue(queue, 100, batch.data(), batch.size());
    for (ssize_t i = 0; i < got; ++i) {
      rd_kafka_message_t* m = batch[static_cast<std::size_t>(i)];
      if (!m->err) {
        if (count) {
          rocksdb::Slice key(static_cast<const char*>(m->key), m->key_len);
          stored.Reset();
          auto s = db->Get(read_options, db->DefaultColumnFamily(), key, &stored);
          std::uint64_t c = 0;
          if (s.ok() && stored.size() == 8) {
            for (unsigned char b : std::string_view(stored.data(), 8)) c = (c << 8) | b;
          } else if (!s.IsNotFound()) {
            die("RocksDB get: " + s.ToString());
          }
          ++c;
          for (int b = 7; b >= 0; --b, c >>= 8) encoded[b] = static_cast<char>(c & 0xFF);
          s = db->Put(write_options, key, rocksdb::Slice(encoded, sizeof encoded));
          if (!s.ok()) die("RocksDB put: " + s.ToString());
          produce(producer, log_topic, m->partition, encoded, sizeof encoded, m->key, m->key_len);
          produce(producer, out, RD_KAFKA_PARTITION_UA, encoded, sizeof encoded, m->key, m->key_len);
        } else {
          value.assign(static_cast<const char*>(m->payload), m->len);
          for (char& c : value)
            if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
          produce(producer, out, RD_KAFKA_PARTITION_UA, value.data(), value.size(), m->key, m->key_len);
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
  if (log_topic) rd_kafka_topic_destroy(log_topic);
  rd_kafka_destroy(consumer);
  rd_kafka_destroy(producer);
  if (db) db->Close();
  std::fprintf(stderr, "sluice-bench-raw: %lld records\n", n);
  return 0;
}
