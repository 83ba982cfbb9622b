// sluice::kafka::admin: the topic administration sluice needs (create internal topics,
// check partition counts and cleanup.policy, delete test topics).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "kafka/config.hpp"
#include "kafka/handles.hpp"
#include "kafka/types.hpp"

namespace sluice::kafka {

class mock_cluster;

struct new_topic {
  std::string name;
  int partitions = 1;
  // -1 uses the broker's default.replication.factor. Default: -1.
  int replication_factor = -1;
  // Topic configs, e.g. {"cleanup.policy", "compact"}. Default: none.
  config_map configs;
};

/// Admin operations over one client handle (a producer-type handle with a private result
/// queue). Against a mock_cluster (recognised by its bootstrap address) topic creation and
/// config description are served by the mock directly.
///
/// Threading: one call at a time (each call waits for its own result).
class admin {
 public:
  explicit admin(const config_map& config);
  ~admin();
  admin(const admin&) = delete;
  admin& operator=(const admin&) = delete;

  /// Creates the topics; one that already exists is not an error (its partition count is
  /// not checked here: use partition_count). Waits until the metadata shows every topic,
  /// so records can be produced right after. Throws on the first failure or errc::timeout.
  void create_topics(const std::vector<new_topic>& topics, std::chrono::milliseconds timeout);
  /// Deletes the topics; one that does not exist is not an error.
  void delete_topics(const std::vector<std::string>& topics, std::chrono::milliseconds timeout);
  /// Asks the cluster for its brokers (a metadata request naming no topic); throws the
  /// client's error (_TRANSPORT, _TIMED_OUT) when no broker answers within `timeout`.
  void reach(std::chrono::milliseconds timeout);
  /// The partition count from metadata, or nullopt when the topic does not exist.
  std::optional<int> partition_count(const std::string& topic, std::chrono::milliseconds timeout);
  /// Every config entry of the topic (name → value), defaults included.
  config_map describe_topic_configs(const std::string& topic, std::chrono::milliseconds timeout);
  /// The consumer group `group` as its coordinator sees it (DescribeConsumerGroups); on a
  /// mock cluster, as its consumers reported it (mock_cluster::describe_group).
  group_description describe_group(const std::string& group, std::chrono::milliseconds timeout);

 private:
  /// Polls the private queue until an event of `type` arrives or the timeout passes.
  event_ptr wait_for(int type, std::chrono::milliseconds timeout, const char* what);

  handle_ptr rk_;
  queue_ptr queue_;
  mock_cluster* mock_ = nullptr;
};

}  // namespace sluice::kafka
