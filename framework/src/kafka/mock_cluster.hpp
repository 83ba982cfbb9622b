// sluice::kafka::mock_cluster: librdkafka's in-process mock Kafka cluster, behind
// `bootstrap.servers=embedded` and in unit tests.
//
// It speaks the Kafka protocol on loopback ports, with producing, fetching, consumer
// groups, offset commits and transactions. It does NOT compact topics, does not enforce
// topic configs (they are only remembered, so describe_topic_configs returns what was
// asked for), and its topics live as long as the cluster. Topics are created explicitly
// with create_topic (admin::create_topics does so when it targets a mock cluster).
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "kafka/config.hpp"
#include "kafka/handles.hpp"
#include "kafka/types.hpp"

struct rd_kafka_mock_cluster_s;

namespace sluice::kafka {

/// One in-process mock cluster. Every client connected to it must be destroyed before it.
/// Thread-safe (create_topic may race with clients).
class mock_cluster {
 public:
  explicit mock_cluster(int brokers = 1);
  ~mock_cluster();
  mock_cluster(const mock_cluster&) = delete;
  mock_cluster& operator=(const mock_cluster&) = delete;

  /// The value for bootstrap.servers ("127.0.0.1:port,...").
  const std::string& bootstrap_servers() const noexcept { return bootstrap_; }

  /// Creates `name` with `partitions` partitions; creating an existing topic is a no-op.
  /// `configs` are remembered for describe_topic_configs, not enforced.
  void create_topic(const std::string& name, int partitions, int replication = 1, const config_map& configs = {});
  /// The configs `name` was created with, or nullopt if it was not created here.
  std::optional<config_map> topic_configs(const std::string& name) const;

  /// The consumer groups on this cluster, as their consumers report them: librdkafka's mock
  /// cannot describe groups, so each group consumer connected to it records its own
  /// assignment after every rebalance (set_member, keyed by the consumer's handle name)
  /// and leaves when it closes (remove_member). describe_group answers from that: state
  /// "Stable" with members, "Empty" without (the mock's rebalances are not observed).
  void set_member(const std::string& group, const std::string& member, group_member m);
  void remove_member(const std::string& group, const std::string& member);
  group_description describe_group(const std::string& group) const;

  rd_kafka_mock_cluster_s* native() const noexcept { return cluster_; }

 private:
  handle_ptr rk_;  // the handle that owns the mock cluster's threads
  rd_kafka_mock_cluster_s* cluster_ = nullptr;
  std::string bootstrap_;
  mutable std::mutex mutex_;
  std::map<std::string, config_map> topics_;
  std::map<std::string, std::map<std::string, group_member>> groups_;  // group -> handle name -> member
};

/// The process-wide cluster behind bootstrap.servers=embedded: created on first use,
/// never destroyed (clients may outlive static destructors).
mock_cluster& embedded_cluster();

/// If config["bootstrap.servers"] is "embedded", replaces it with embedded_cluster()'s
/// address. Returns true when it did.
bool apply_embedded(config_map& config);

/// The live mock cluster whose address is `bootstrap_servers`, or nullptr.
mock_cluster* find_mock_cluster(std::string_view bootstrap_servers);

}  // namespace sluice::kafka
