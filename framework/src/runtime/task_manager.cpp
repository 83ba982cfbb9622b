// A stream thread's tasks: created on assignment, restored, started, closed on revocation.
#include "runtime/task_manager.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace sluice::runtime {

task_manager::task_manager(const task_services& services, const std::map<std::string, int>& topic_to_subtopology,
                           record_collector& collector, changelog_reader& reader, kafka::consumer& consumer,
                           std::string thread_label)
    : services_(services),
      topic_to_subtopology_(topic_to_subtopology),
      collector_(collector),
      reader_(reader),
      consumer_(consumer),
      label_(std::move(thread_label)) {}

task_manager::~task_manager() {
  try {
    close_all(close_mode::dirty);
  } catch (const std::exception& e) {
    spdlog::warn("closing tasks failed: {}", e.what());
  }
}

void task_manager::assign(const std::vector<kafka::topic_partition>& parts) {
  for (const auto& p : parts) {
    auto sub = topic_to_subtopology_.find(p.topic);
    if (sub == topic_to_subtopology_.end()) continue;
    const task_id id{sub->second, p.partition};
    auto it = tasks_.find(id);
    if (it == tasks_.end()) {
      auto task = std::make_unique<stream_task>(id, services_, collector_, label_);
      it = tasks_.emplace(id, std::move(task)).first;
      if (reader_.add(*it->second))
        to_pause_.push_back(it->second.get());
      else
        it->second->start();
    }
    auto& task = *it->second;
    const auto& inputs = task.inputs();
    auto index = static_cast<std::size_t>(
        std::find_if(inputs.begin(), inputs.end(), [&](const auto& in) { return in.topic == p.topic; }) -
        inputs.begin());
    if (index == inputs.size()) continue;  // not read by the sub-topology at this partition
    by_partition_[{p.topic, p.partition}] = {&task, index};
  }
}

std::vector<kafka::topic_partition> task_manager::inputs_of(const stream_task& task) const {
  std::vector<kafka::topic_partition> out;
  for (const auto& [tp, input] : by_partition_)
    if (input.task == &task) out.push_back({tp.first, tp.second});
  return out;
}

void task_manager::pause_restoring_inputs() {
  if (to_pause_.empty()) return;
  std::vector<kafka::topic_partition> parts;
  for (auto* t : to_pause_) {
    auto in = inputs_of(*t);
    parts.insert(parts.end(), in.begin(), in.end());
    paused_.push_back(t);
  }
  to_pause_.clear();
  if (!parts.empty()) consumer_.pause(parts);
}

void task_manager::restore() {
  restored_.clear();
  reader_.restore(restored_);
  if (restored_.empty()) return;
  std::vector<kafka::topic_partition> resume;
  for (auto* t : restored_) {
    t->stores().checkpoint();
    t->start();
    if (auto p = std::find(paused_.begin(), paused_.end(), t); p != paused_.end()) {
      paused_.erase(p);
      auto in = inputs_of(*t);
      resume.insert(resume.end(), in.begin(), in.end());
    }
    std::erase(to_pause_, t);  // restored before its pause was applied: nothing to pause
  }
  if (!resume.empty()) consumer_.resume(resume);
}

void task_manager::close_all(close_mode mode) {
  if (!paused_.empty()) {
    // Resumed before they are given up: librdkafka keeps an application pause on a
    // partition across unassign and assign.
    std::vector<kafka::topic_partition> resume;
    for (auto* t : paused_) {
      auto in = inputs_of(*t);
      resume.insert(resume.end(), in.begin(), in.end());
    }
    paused_.clear();
    try {
      if (!resume.empty()) consumer_.resume(resume);
    } catch (const std::exception& e) {
      spdlog::debug("resuming partitions of restoring tasks: {}", e.what());
    }
  }
  to_pause_.clear();
  reader_.clear();
  for (auto& [id, task] : tasks_) {
    if (mode == close_mode::clean && task->running()) task->stores().checkpoint();
    task->close(mode);
  }
  tasks_.clear();
  by_partition_.clear();
}

}  // namespace sluice::runtime
