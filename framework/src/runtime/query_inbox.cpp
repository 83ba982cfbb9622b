// Store queries answered by stream threads between polls (see query_inbox.hpp).
#include "runtime/query_inbox.hpp"

#include "runtime/read_only_context.hpp"
#include "runtime/stream_task.hpp"

namespace sluice::runtime {

query_status store_query::wait_until(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  if (!answered_.wait_until(lock, deadline, [&] { return finished_; })) {
    finished_ = true;  // late answers are ignored; the function never runs after this
    return query_status::timed_out;
  }
  return status_;
}

void store_query::run(detail::task_context& task, state::state_store& s, detail::value_format format) {
  // The lock is held while fn_ runs: the handler's wait cannot time out and release what
  // fn_ writes into until fn_ is done.
  std::lock_guard lock(mutex_);
  if (finished_) return;
  try {
    read_only_context context(task, store_);
    read_only_changelog changelog(store_);
    fn_(detail::store_binding{&s, &changelog, format}, context);
    status_ = query_status::done;
  } catch (const std::exception& e) {
    failure_ = e.what();
    status_ = query_status::failed;
  } catch (...) {
    failure_ = "the query threw a non-standard exception";
    status_ = query_status::failed;
  }
  finished_ = true;
  answered_.notify_all();
}

void store_query::reply(query_status s) {
  std::lock_guard lock(mutex_);
  if (finished_) return;
  if (s == query_status::unavailable) {
    finished_ = true;
    status_ = s;
  } else if (--remaining_ <= 0) {
    finished_ = true;
    status_ = query_status::not_here;
  }
  if (finished_) answered_.notify_all();
}

bool query_inbox::submit(std::shared_ptr<store_query> q) {
  {
    std::lock_guard lock(mutex_);
    if (!closed_) {
      queue_.push_back(std::move(q));
      pending_.store(true, std::memory_order_release);
      if (wake_) wake_();
      return true;
    }
  }
  q->reply(query_status::not_here);
  return false;
}

std::size_t query_inbox::queued() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

void query_inbox::set_waker(std::function<void()> wake) {
  std::lock_guard lock(mutex_);
  wake_ = std::move(wake);
}

void query_inbox::serve(const std::map<task_id, std::unique_ptr<stream_task>>& tasks) {
  std::deque<std::shared_ptr<store_query>> batch;
  {
    std::lock_guard lock(mutex_);
    batch.swap(queue_);
    pending_.store(false, std::memory_order_release);
  }
  for (auto& q : batch) {
    auto it = tasks.find(q->task());
    if (it == tasks.end()) {
      q->reply(query_status::not_here);
      continue;
    }
    auto& task = *it->second;
    if (!task.running()) {
      q->reply(query_status::unavailable);
      continue;
    }
    bool found = false;
    for (auto& s : task.stores().all())
      if (s.spec->name == q->store()) {
        q->run(task, *s.store, s.spec->format);
        found = true;
        break;
      }
    if (!found) q->reply(query_status::not_here);
  }
}

void query_inbox::close() {
  std::deque<std::shared_ptr<store_query>> batch;
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
    wake_ = nullptr;
    batch.swap(queue_);
    pending_.store(false, std::memory_order_release);
  }
  for (auto& q : batch) q->reply(query_status::not_here);
}

}  // namespace sluice::runtime
