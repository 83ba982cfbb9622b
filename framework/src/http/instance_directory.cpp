// The instances of an application and their partitions, from the consumer group's description.
#include "http/instance_directory.hpp"

#include <algorithm>

namespace sluice::http {
namespace {
constexpr std::string_view marker = "|sluice-server=";
}

std::string member_client_id(const std::string& base, const std::string& application_server) {
  return base + std::string(marker) + application_server;
}

std::optional<std::string> application_server_of(std::string_view client_id) {
  auto at = client_id.rfind(marker);
  if (at == std::string_view::npos) return std::nullopt;
  return std::string(client_id.substr(at + marker.size()));
}

std::optional<std::string> group_view::owner(const std::string& store, std::int32_t p) const {
  for (const auto& i : instances)
    if (auto it = i.stores.find(store); it != i.stores.end())
      if (std::find(it->second.begin(), it->second.end(), p) != it->second.end()) return i.application_server;
  return std::nullopt;
}

instance_directory::instance_directory(kafka::config_map admin_config, std::string group, const topology& topo,
                                       std::map<std::string, int> topic_to_subtopology)
    : admin_config_(std::move(admin_config)),
      group_(std::move(group)),
      topo_(topo),
      topic_to_subtopology_(std::move(topic_to_subtopology)) {}

std::shared_ptr<const group_view> instance_directory::view(bool fresh) {
  std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  if (cached_ && !fresh && now - refreshed_ < refresh_interval) return cached_;
  if (!admin_) admin_ = std::make_unique<kafka::admin>(admin_config_);
  auto group = admin_->describe_group(group_, std::chrono::seconds(5));
  auto v = std::make_shared<group_view>();
  v->state = group.state;
  std::map<std::string, instance_info> by_server;
  for (const auto& m : group.members) {
    auto server = application_server_of(m.client_id);
    if (!server) continue;
    auto& info = by_server[*server];
    info.application_server = *server;
    for (const auto& tp : m.assignment) {
      info.partitions.push_back(tp);
      auto sub = topic_to_subtopology_.find(tp.topic);
      if (sub == topic_to_subtopology_.end()) continue;
      for (const auto& s : topo_.subtopologies())
        if (s.id == sub->second)
          for (const auto& store : s.stores) {
            auto& parts = info.stores[store];
            if (std::find(parts.begin(), parts.end(), tp.partition) == parts.end()) parts.push_back(tp.partition);
          }
    }
  }
  for (auto& [server, info] : by_server) {
    std::sort(info.partitions.begin(), info.partitions.end());
    for (auto& [store, parts] : info.stores) std::sort(parts.begin(), parts.end());
    v->instances.push_back(std::move(info));
  }
  cached_ = v;
  refreshed_ = now;
  return cached_;
}

}  // namespace sluice::http
