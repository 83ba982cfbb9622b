// A stream thread's tasks: created on assignment, restored, started, closed on revocation.
#include "runtime/task_manager.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <system_error>
#include <thread>

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

std::map<task_id, task_storage> task_manager::open_storage(const std::vector<task_id>& ids) const {
  std::vector<task_storage> opened(ids.size());
  if (ids.size() < 2 || services_.memory_stores_only) {
    for (std::size_t i = 0; i < ids.size(); ++i) opened[i] = open_task_storage(ids[i], services_);
  } else {
    // A RocksDB open costs dozens of fsyncs (about 85 ms each on a loaded 2-core machine, one
    // store after the other before): the tasks' storage opens at once, a few threads taking
    // the next task until none is left. open_task_storage() keeps failures for the tasks.
    constexpr std::size_t max_threads = 8;
    std::atomic<std::size_t> next{0};
    auto work = [&] {
      for (auto i = next.fetch_add(1); i < ids.size(); i = next.fetch_add(1))
        opened[i] = open_task_storage(ids[i], services_);
    };
    std::vector<std::jthread> threads;
    try {
      for (std::size_t t = 1; t < std::min(ids.size(), max_threads); ++t) threads.emplace_back(work);
    } catch (const std::system_error& e) {
      spdlog::debug("opening stores on fewer threads: {}", e.what());  // this thread opens the rest
    }
    work();
  }  // the threads join here
  std::map<task_id, task_storage> out;
  for (std::size_t i = 0; i < ids.size(); ++i) out.emplace(ids[i], std::move(opened[i]));
  return out;
}

void task_manager::assign(const std::vector<kafka::topic_partition>& parts) {
  // The new tasks' storage opens first, all at once; the tasks are then built in assignment
  // order over it, and the first failure throws from there, as it did when each task opened
  // its own.
  std::vector<task_id> fresh;
  for (const auto& p : parts) {
    auto sub = topic_to_subtopology_.find(p.topic);
    if (sub == topic_to_subtopology_.end()) continue;
    const task_id id{sub->second, p.partition};
    if (!tasks_.contains(id) && std::find(fresh.begin(), fresh.end(), id) == fresh.end()) fresh.push_back(id);
  }
  auto storage = open_storage(fresh);
  std::vector<stream_task*> created;
  for (const auto& p : parts) {
    auto sub = topic_to_subtopology_.find(p.topic);
    if (sub == topic_to_subtopology_.end()) continue;
    const task_id id{sub->second, p.partition};
    auto it = tasks_.find(id);
    if (it == tasks_.end()) {
      auto task = std::make_unique<stream_task>(id, services_, collector_, label_, std::move(storage.at(id)));
      it = tasks_.emplace(id, std::move(task)).first;
      created.push_back(it->second.get());
    }
    auto& task = *it->second;
    const auto& inputs = task.inputs();
    auto index = static_cast<std::size_t>(
        std::find_if(inputs.begin(), inputs.end(), [&](const auto& in) { return in.topic == p.topic; }) -
        inputs.begin());
    if (index == inputs.size()) continue;  // not read by the sub-topology at this partition
    by_partition_[{p.topic, p.partition}] = {&task, index};
  }
  // Then whether each new task has stores to restore: one ask for all their changelogs' ends.
  const auto restoring = reader_.add(created);
  for (std::size_t i = 0; i < created.size(); ++i) {
    if (restoring[i])
      to_pause_.push_back(created[i]);
    else
      created[i]->start();
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
  checkpointing_.insert(checkpointing_.end(), restored_.begin(), restored_.end());
  if (checkpointing_.empty()) return;
  // While other tasks restore, a restored task waits for its stores' background work
  // (begin_checkpoint) and starts once that is done; the stream thread goes on reading the
  // other changelogs meanwhile. With nothing left to read, the stream thread waits until every
  // store's work is done, handing each store's last chunk to its thread as soon as the chunk
  // in flight before it is ingested: the stores' last chunks are then ingested in parallel,
  // where the checkpoints below would seal them one after the other (bench/README.md,
  // "Restore").
  const bool wait = !reader_.restoring();
  for (;;) {
    restored_.clear();
    for (auto* t : checkpointing_)  // every one, ready or not
      if (t->stores().begin_checkpoint()) restored_.push_back(t);
    if (!wait || restored_.size() == checkpointing_.size()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (restored_.empty()) return;
  std::vector<kafka::topic_partition> resume;
  for (auto* t : restored_) {
    std::erase(checkpointing_, t);
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
  checkpointing_.clear();
  reader_.clear();
  for (auto& [id, task] : tasks_) {
    if (mode == close_mode::clean && task->running()) task->stores().checkpoint();
    task->close(mode);
  }
  tasks_.clear();
  by_partition_.clear();
}

}  // namespace sluice::runtime
