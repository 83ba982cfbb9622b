// The in-process mock cluster and the registry admin uses to recognise it.
#include "kafka/mock_cluster.hpp"

#include <librdkafka/rdkafka_mock.h>

#include <algorithm>
#include <vector>

#include "kafka/error.hpp"
#include "sluice/error.hpp"

namespace sluice::kafka {
namespace {

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::vector<mock_cluster*>& registry() {
  static std::vector<mock_cluster*> clusters;
  return clusters;
}

}  // namespace

mock_cluster::mock_cluster(int brokers) {
  if (brokers < 1) throw sluice::error(errc::invalid_config, "mock_cluster needs at least one broker");
  // The mock's own handle must not connect anywhere: it only hosts the cluster threads.
  // Notices are off for it: librdkafka would announce that it has no bootstrap.servers,
  // which is true and intended, and alarms a user who did configure theirs.
  rk_ = new_handle(RD_KAFKA_PRODUCER, make_conf({{"client.id", "sluice-mock-cluster"}, {"log_level", "4"}}));
  cluster_ = rd_kafka_mock_cluster_new(rk_.get(), brokers);
  if (!cluster_) throw sluice::error(errc::kafka, "could not start the mock Kafka cluster");
  bootstrap_ = rd_kafka_mock_cluster_bootstraps(cluster_);
  std::lock_guard lock(registry_mutex());
  registry().push_back(this);
}

mock_cluster::~mock_cluster() {
  {
    std::lock_guard lock(registry_mutex());
    std::erase(registry(), this);
  }
  if (cluster_) rd_kafka_mock_cluster_destroy(cluster_);
}

void mock_cluster::create_topic(const std::string& name, int partitions, int replication, const config_map& configs) {
  std::lock_guard lock(mutex_);
  if (topics_.contains(name)) return;
  const auto err = rd_kafka_mock_topic_create(cluster_, name.c_str(), partitions, replication);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR && err != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
    throw make_error(err, "create topic '" + name + "' on the mock cluster");
  topics_.emplace(name, configs);
}

std::optional<config_map> mock_cluster::topic_configs(const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto it = topics_.find(name);
  if (it == topics_.end()) return std::nullopt;
  return it->second;
}

void mock_cluster::set_member(const std::string& group, const std::string& member, group_member m) {
  std::lock_guard lock(mutex_);
  groups_[group][member] = std::move(m);
}

void mock_cluster::remove_member(const std::string& group, const std::string& member) {
  std::lock_guard lock(mutex_);
  auto it = groups_.find(group);
  if (it == groups_.end()) return;
  it->second.erase(member);
  if (it->second.empty()) groups_.erase(it);
}

group_description mock_cluster::describe_group(const std::string& group) const {
  std::lock_guard lock(mutex_);
  group_description d;
  d.state = "Empty";
  auto it = groups_.find(group);
  if (it == groups_.end()) return d;
  d.state = "Stable";
  for (const auto& [name, m] : it->second) d.members.push_back(m);
  return d;
}

mock_cluster& embedded_cluster() {
  static mock_cluster* const cluster = new mock_cluster(1);  // never destroyed, on purpose
  return *cluster;
}

bool apply_embedded(config_map& config) {
  auto it = config.find("bootstrap.servers");
  if (it == config.end() || it->second != "embedded") return false;
  it->second = embedded_cluster().bootstrap_servers();
  return true;
}

mock_cluster* find_mock_cluster(std::string_view bootstrap_servers) {
  std::lock_guard lock(registry_mutex());
  for (auto* c : registry())
    if (c->bootstrap_servers() == bootstrap_servers) return c;
  return nullptr;
}

}  // namespace sluice::kafka
