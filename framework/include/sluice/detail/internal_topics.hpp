// The names of the topics a job owns. The one place that spells them: the builder, the
// topology's description, the startup checks, the sinks and the stores all ask here.
#pragma once

#include <string>
#include <string_view>

namespace sluice::detail {

/// "<application.id>-<store>-changelog": where a logged store's writes go, one partition
/// per task.
inline std::string changelog_topic(std::string_view application_id, std::string_view store) {
  std::string out;
  out.reserve(application_id.size() + store.size() + 11);
  out.append(application_id).append("-").append(store).append("-changelog");
  return out;
}

/// "<application.id>-<name>-repartition": the topic a re-keyed stream goes through before a
/// stateful operation; `name` is the one given to repartitioned() / group_by().
inline std::string repartition_topic(std::string_view application_id, std::string_view name) {
  std::string out;
  out.reserve(application_id.size() + name.size() + 13);
  out.append(application_id).append("-").append(name).append("-repartition");
  return out;
}

}  // namespace sluice::detail
