// task_id: which task, as Kafka Streams names it: a sub-topology and one partition of its
// input topics. Printed "<subtopology>_<partition>", which is the task directory's name under
// state.dir and the `task` label of the metrics. A value type; ordered, so it keys maps.
#pragma once

#include <compare>
#include <cstdint>
#include <string>

namespace sluice::runtime {

struct task_id {
  int subtopology = 0;
  std::int32_t partition = 0;

  std::string to_string() const { return std::to_string(subtopology) + "_" + std::to_string(partition); }
  friend auto operator<=>(const task_id&, const task_id&) = default;
};

}  // namespace sluice::runtime
