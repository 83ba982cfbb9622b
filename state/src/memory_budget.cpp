// memory_budget: atomic charges per account, and one mutex that serialises enforcement,
// registration and unregistration (see memory_budget.hpp for the protocol).
#include "sluice/state/memory_budget.hpp"

#include <algorithm>
#include <atomic>
#include <list>
#include <mutex>
#include <utility>
#include <vector>

namespace sluice::state {
namespace detail {

struct memory_account_entry {
  memory_consumer* consumer = nullptr;
  std::atomic<std::size_t> charged{0};
  std::atomic<std::uint64_t> least_recent{memory_budget::account::nothing_to_release};
  std::list<memory_account_entry>::iterator position;
};

struct memory_budget_state {
  explicit memory_budget_state(std::size_t limit) : limit(limit) {}

  const std::size_t limit;
  std::atomic<std::size_t> used{0};
  std::atomic<std::uint64_t> clock{0};
  std::atomic<std::uint64_t> releases{0};

  std::mutex mutex;  // accounts, enforcement
  std::list<memory_account_entry> accounts;

  std::mutex listener_mutex;  // one listener call at a time, in order
  std::size_t granule = 1;
  std::function<void(std::size_t)> listener;
  std::atomic<std::size_t> reported{0};

  void add(std::size_t old_bytes, std::size_t new_bytes) noexcept {
    if (new_bytes >= old_bytes)
      used.fetch_add(new_bytes - old_bytes, std::memory_order_relaxed);
    else
      used.fetch_sub(old_bytes - new_bytes, std::memory_order_relaxed);
    if (!listener) return;
    if (rounded(used.load(std::memory_order_relaxed)) == reported.load(std::memory_order_relaxed)) return;
    std::lock_guard lock(listener_mutex);
    const std::size_t now = rounded(used.load(std::memory_order_relaxed));
    if (now == reported.load(std::memory_order_relaxed)) return;
    reported.store(now, std::memory_order_relaxed);
    try {
      listener(now);
    } catch (...) {  // a listener failing must not take a store down; the next change retries
      reported.store(now + 1, std::memory_order_relaxed);
    }
  }

  std::size_t rounded(std::size_t bytes) const noexcept { return (bytes + granule - 1) / granule * granule; }
};

}  // namespace detail

memory_budget::memory_budget(std::size_t limit_bytes)
    : state_(std::make_shared<detail::memory_budget_state>(limit_bytes)) {}

memory_budget::~memory_budget() = default;

std::size_t memory_budget::limit_bytes() const noexcept { return state_->limit; }

std::size_t memory_budget::used_bytes() const noexcept { return state_->used.load(std::memory_order_relaxed); }

std::uint64_t memory_budget::releases() const noexcept { return state_->releases.load(std::memory_order_relaxed); }

void memory_budget::set_usage_listener(std::size_t granule_bytes, std::function<void(std::size_t)> listener) {
  std::lock_guard lock(state_->listener_mutex);
  state_->granule = granule_bytes == 0 ? 1 : granule_bytes;
  state_->listener = std::move(listener);
  const std::size_t now = state_->rounded(state_->used.load(std::memory_order_relaxed));
  state_->reported.store(now, std::memory_order_relaxed);
  if (state_->listener) state_->listener(now);
}

memory_budget::account memory_budget::open_account(memory_consumer& consumer) {
  std::lock_guard lock(state_->mutex);
  auto& entry = state_->accounts.emplace_back();
  entry.consumer = &consumer;
  entry.position = std::prev(state_->accounts.end());
  return account(state_, &entry);
}

memory_budget::account::account(account&& other) noexcept
    : state_(std::move(other.state_)), entry_(std::exchange(other.entry_, nullptr)) {}

memory_budget::account& memory_budget::account::operator=(account&& other) noexcept {
  if (this != &other) {
    close();
    state_ = std::move(other.state_);
    entry_ = std::exchange(other.entry_, nullptr);
  }
  return *this;
}

memory_budget::account::~account() { close(); }

void memory_budget::account::charge(std::size_t bytes) noexcept {
  if (entry_ == nullptr) return;
  const std::size_t old = entry_->charged.exchange(bytes, std::memory_order_relaxed);
  if (old != bytes) state_->add(old, bytes);
}

void memory_budget::account::set_least_recent(std::uint64_t tick) noexcept {
  if (entry_ != nullptr) entry_->least_recent.store(tick, std::memory_order_relaxed);
}

std::uint64_t memory_budget::account::use_tick() noexcept {
  return state_ ? state_->clock.fetch_add(1, std::memory_order_relaxed) + 1 : 0;
}

bool memory_budget::account::over_limit() const noexcept {
  return state_ && state_->used.load(std::memory_order_relaxed) > state_->limit;
}

void memory_budget::account::enforce() noexcept {
  if (!over_limit()) return;
  auto& s = *state_;
  std::lock_guard lock(s.mutex);
  std::vector<const detail::memory_account_entry*> busy;  // released nothing this round
  while (s.used.load(std::memory_order_relaxed) > s.limit) {
    detail::memory_account_entry* oldest = nullptr;
    std::uint64_t oldest_tick = nothing_to_release;
    for (auto& e : s.accounts) {
      const std::uint64_t t = e.least_recent.load(std::memory_order_relaxed);
      if (t < oldest_tick && std::find(busy.begin(), busy.end(), &e) == busy.end()) {
        oldest = &e;
        oldest_tick = t;
      }
    }
    if (oldest == nullptr) return;
    if (oldest->consumer->release_least_recent() == 0)
      busy.push_back(oldest);
    else
      s.releases.fetch_add(1, std::memory_order_relaxed);
  }
}

void memory_budget::account::close() noexcept {
  if (entry_ == nullptr) return;
  charge(0);
  {
    std::lock_guard lock(state_->mutex);  // waits for an enforce() that may be calling the consumer
    state_->accounts.erase(entry_->position);
  }
  entry_ = nullptr;
  state_.reset();
}

}  // namespace sluice::state
