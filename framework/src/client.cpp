// The edge clients: thin typed-free wrappers over the librdkafka layer.
#include "sluice/client.hpp"

#include <algorithm>
#include <span>

#include "kafka/admin.hpp"
#include "kafka/mock_cluster.hpp"
#include "kafka/producer.hpp"
#include "kafka/topic_scan.hpp"
#include "sluice/error.hpp"

namespace sluice {

using namespace std::chrono_literals;

namespace {
kafka::config_map client_map(const config& c, std::string_view client) {
  auto props = c.client_properties(client);
  props["bootstrap.servers"] = c.bootstrap_servers();
  kafka::apply_embedded(props);
  return props;
}

/// Copies a polled batch into `out` (the batch keeps its capacity for the next poll).
void append_batch(const std::vector<kafka::message>& batch, std::vector<raw_message>& out) {
  for (const auto& m : batch) out.push_back({m.topic, m.partition, m.offset, m.timestamp, m.key, m.value, m.headers});
}
}  // namespace

struct topic_admin::impl {
  explicit impl(const kafka::config_map& m) : admin(m) {}
  kafka::admin admin;
};

topic_admin::topic_admin(const config& c) : impl_(std::make_unique<impl>(client_map(c, "admin"))) {}
topic_admin::~topic_admin() = default;

void topic_admin::create_topic(const std::string& name, int partitions, cleanup_policy policy) {
  kafka::new_topic t{.name = name, .partitions = partitions};
  if (policy == cleanup_policy::compact) t.configs["cleanup.policy"] = "compact";
  impl_->admin.create_topics({t}, 30s);
}

void topic_admin::create_topic(const std::string& name, int partitions,
                               const std::map<std::string, std::string>& configs) {
  kafka::new_topic t{.name = name, .partitions = partitions};
  t.configs = configs;
  impl_->admin.create_topics({t}, 30s);
}

std::optional<int> topic_admin::partition_count(const std::string& name) {
  return impl_->admin.partition_count(name, 30s);
}

struct topic_writer::impl {
  explicit impl(const kafka::config_map& m)
      : producer(m, {}, [this](const kafka::delivery_report& r) {
          if (!r.ok() && !failure) failure = r.to_error();
          if (!r.ok()) ++failed;
        }) {}
  /// Throws the first delivery failure since the last call, with how many records failed.
  void throw_failure() {
    if (!failure) return;
    sluice::error e(failure->code(),
                    std::to_string(failed) + " record(s) were not delivered; the first: " + failure->what());
    failure.reset();
    failed = 0;
    throw e;
  }
  std::optional<sluice::error> failure;
  std::size_t failed = 0;
  kafka::producer producer;  // last: its callback uses the members above
};

topic_writer::topic_writer(const config& c) : impl_(std::make_unique<impl>(client_map(c, "producer"))) {}
topic_writer::~topic_writer() = default;

void topic_writer::send_raw(const std::string& topic, const std::optional<std::string_view>& key,
                            const std::optional<std::string_view>& value, std::int64_t timestamp,
                            const sluice::headers& headers, std::int32_t partition) {
  impl_->producer.produce(topic, partition, key, value, timestamp, headers);
}

void topic_writer::flush(std::chrono::milliseconds timeout) {
  impl_->producer.flush(timeout);
  impl_->throw_failure();
}

struct topic_reader::impl {
  impl(const kafka::config_map& m, const std::vector<kafka::topic_partition>& partitions) : scan(m, partitions) {}
  kafka::topic_scan scan;
  std::vector<kafka::message> batch;
};

topic_reader::topic_reader(const config& c, const std::vector<std::string>& topics, isolation level) {
  auto props = client_map(c, "consumer");
  props["isolation.level"] = level == isolation::read_committed ? "read_committed" : "read_uncommitted";
  kafka::admin admin(client_map(c, "admin"));
  std::vector<std::pair<std::string, int>> counts;
  for (const auto& t : topics) {
    auto count = admin.partition_count(t, 30s);
    if (!count) throw error(errc::invalid_config, "topic '" + t + "' does not exist");
    counts.emplace_back(t, *count);
  }
  impl_ = std::make_unique<impl>(props, kafka::all_partitions(counts));
}

topic_reader::~topic_reader() = default;

std::vector<raw_message> topic_reader::poll(std::chrono::milliseconds timeout, std::size_t max) {
  std::vector<raw_message> out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (out.size() < max && std::chrono::steady_clock::now() < deadline) {
    impl_->scan.poll_batch(impl_->batch, std::min<std::size_t>(10000, max - out.size()), 50ms);
    append_batch(impl_->batch, out);
  }
  return out;
}

std::size_t topic_reader::poll_views(std::chrono::milliseconds timeout,
                                     const std::function<void(const raw_view&)>& each, std::size_t max) {
  std::size_t lent = 0;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (lent < max && std::chrono::steady_clock::now() < deadline) {
    impl_->scan.poll_lent(std::min<std::size_t>(10000, max - lent), 50ms, [&](std::span<const raw_view> run) {
      for (const auto& m : run) each(m);
      lent += run.size();
    });
  }
  return lent;
}

std::vector<raw_message> topic_reader::read_at_least(std::size_t count, std::chrono::milliseconds timeout) {
  std::vector<raw_message> out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (out.size() < count && std::chrono::steady_clock::now() < deadline) {
    auto more = poll(100ms, count - out.size());
    out.insert(out.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  return out;
}

std::vector<raw_message> topic_reader::read_to_end(std::chrono::milliseconds timeout) {
  std::vector<raw_message> out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!impl_->scan.at_end() && std::chrono::steady_clock::now() < deadline) {
    impl_->scan.poll_batch(impl_->batch, 10000, 50ms);
    append_batch(impl_->batch, out);
  }
  return out;
}

}  // namespace sluice
