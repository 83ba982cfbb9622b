// instance_directory: which instance (application.server) runs which partitions, read from
// Kafka itself: each stream thread's consumer carries its instance's application.server in
// its client.id, and the group coordinator's description of the consumer group
// (DescribeConsumerGroups) lists every member's client.id with its assignment. No
// coordinator of sluice's own.
//
// Threading: every method is safe from any thread; describe calls are serialized and the
// answer is cached for a short time (refresh_interval).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kafka/admin.hpp"
#include "sluice/topology.hpp"

namespace sluice::http {

/// The client.id of a stream thread's consumer: `base` plus the instance's application.server.
std::string member_client_id(const std::string& base, const std::string& application_server);
/// The application.server a member's client.id carries; nullopt for a client.id without one.
std::optional<std::string> application_server_of(std::string_view client_id);

struct instance_info {
  std::string application_server;
  std::vector<kafka::topic_partition> partitions;           ///< assigned source partitions
  std::map<std::string, std::vector<std::int32_t>> stores;  ///< store -> partitions of its tasks here
};

struct group_view {
  std::string state;  ///< the consumer group's state: "Stable" when no rebalance is under way
  std::vector<instance_info> instances;
  /// The application.server owning partition `p` of `store`, if any member has it.
  std::optional<std::string> owner(const std::string& store, std::int32_t p) const;
};

class instance_directory {
 public:
  /// `topic_to_subtopology`: resolved source topic -> sub-topology (as the stream threads use).
  instance_directory(kafka::config_map admin_config, std::string group, const topology& topo,
                     std::map<std::string, int> topic_to_subtopology);

  /// The group as last described, refreshed when older than refresh_interval (or when
  /// `fresh`). Throws sluice::error when the coordinator cannot be asked.
  std::shared_ptr<const group_view> view(bool fresh = false);

  static constexpr std::chrono::milliseconds refresh_interval{1000};

 private:
  kafka::config_map admin_config_;
  std::string group_;
  const topology& topo_;
  std::map<std::string, int> topic_to_subtopology_;
  std::mutex mutex_;
  std::unique_ptr<kafka::admin> admin_;
  std::shared_ptr<const group_view> cached_;
  std::chrono::steady_clock::time_point refreshed_;
};

}  // namespace sluice::http
