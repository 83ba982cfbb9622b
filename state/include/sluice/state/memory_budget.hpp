// sluice::state::memory_budget: the process-wide account of the memory that store kinds keep
// beside their kv_store (today the ranked index's order-statistic lists), drawn from
// `state.memory.budget.bytes` together with RocksDB's block cache and write buffers
// (README.md, "Memory budget").
//
// A store kind that holds such memory registers itself as a memory_consumer and keeps its
// account's charge up to date. When the sum over all accounts passes the limit, the budget
// asks consumers to release items, least recently used first across every store of the
// process (a tick of one use clock orders uses across accounts), until the sum is under the
// limit or nothing more can go. A consumer never gives up its most recently used item, so the
// sum may stay above the limit by at most one item per consumer (a single index larger than
// the budget still works).
//
// Threading: thread-safe. Stores of different tasks, on different stream threads, share one
// budget. charge(), set_least_recent() and use_tick() are lock-free; enforce(), open_account()
// and account::close() take the budget's mutex. While it holds that mutex the budget calls
// consumers' release_least_recent(), which must never wait for a lock (it returns 0 when its
// store is busy), so no thread ever waits on a store while holding the budget, and no store may
// call enforce() or close() while holding a lock its release_least_recent() takes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>

namespace sluice::state {

namespace detail {
struct memory_budget_state;
struct memory_account_entry;
}  // namespace detail

class memory_budget;

/// What a store kind holding memory of its own implements so that a memory_budget can take
/// memory back from it.
class memory_consumer {
 public:
  virtual ~memory_consumer() = default;

  /// Releases the consumer's least recently used item, never its most recently used one, and
  /// updates its account's charge; returns the bytes released (0: nothing to release now).
  /// Called by the budget from any thread, possibly while the consumer's own thread uses it:
  /// it must not wait for a lock (when its store is busy it returns 0) and must not throw.
  virtual std::size_t release_least_recent() noexcept = 0;
};

/// A store kind whose in-memory structures count against the process's memory_budget (the
/// ranked index). The runtime calls charge_memory_to() once, right after the store factory
/// returned the store and before any other use, on the task's thread, with the budget of
/// rocksdb_environment::index_memory(); from then on the store keeps an account there.
class memory_charged_store {
 public:
  virtual ~memory_charged_store() = default;
  virtual void charge_memory_to(memory_budget& memory) = 0;
};

/// The limit and the accounts. Create one per process (rocksdb_environment owns the app's)
/// and hand it to every store kind that holds memory of its own. It must outlive its
/// accounts' use; accounts keep its state alive, so destruction order is safe.
class memory_budget {
 public:
  class account;

  /// `limit_bytes`: what all accounts together may hold before items are released.
  explicit memory_budget(std::size_t limit_bytes);
  memory_budget(const memory_budget&) = delete;
  memory_budget& operator=(const memory_budget&) = delete;
  ~memory_budget();

  std::size_t limit_bytes() const noexcept;
  /// The sum of every account's charge.
  std::size_t used_bytes() const noexcept;
  /// Items released because the budget was over its limit, since construction.
  std::uint64_t releases() const noexcept;

  /// Calls `listener(used_bytes() rounded up to granule_bytes)` now and whenever that rounded
  /// figure changes, one call at a time, from whichever thread changed a charge.
  /// rocksdb_environment uses it to give its block cache what the accounts do not hold.
  /// Set it before any account opens; the listener must be quick and must not call back into
  /// the budget.
  void set_usage_listener(std::size_t granule_bytes, std::function<void(std::size_t used_rounded)> listener);

  /// Registers `consumer` (which must stay valid until the account is closed).
  account open_account(memory_consumer& consumer);

 private:
  std::shared_ptr<detail::memory_budget_state> state_;
};

/// One consumer's registration. Movable; closing (or destroying) it sets its charge to 0 and
/// waits for a release of its consumer in progress on another thread, after which the budget
/// never calls the consumer again. Used by the consumer's own thread(s); see the file comment.
class memory_budget::account {
 public:
  /// set_least_recent() value of a consumer with nothing it could release.
  static constexpr std::uint64_t nothing_to_release = std::numeric_limits<std::uint64_t>::max();

  account() noexcept = default;
  account(account&& other) noexcept;
  account& operator=(account&& other) noexcept;
  account(const account&) = delete;
  account& operator=(const account&) = delete;
  ~account();

  /// Sets the bytes the consumer holds now.
  void charge(std::size_t bytes) noexcept;
  /// The use tick of the consumer's least recently used releasable item (the one
  /// release_least_recent() would release), or nothing_to_release.
  void set_least_recent(std::uint64_t tick) noexcept;
  /// The next tick of the budget's use clock (increasing across all accounts).
  std::uint64_t use_tick() noexcept;
  /// When the budget is over its limit, releases items least recently used first across all
  /// accounts until it is not or no consumer can release more. Never call it while holding a
  /// lock your consumer's release_least_recent() takes.
  void enforce() noexcept;
  /// Whether the budget is over its limit now (one atomic read).
  bool over_limit() const noexcept;
  void close() noexcept;

 private:
  friend class memory_budget;
  account(std::shared_ptr<detail::memory_budget_state> state, detail::memory_account_entry* entry) noexcept
      : state_(std::move(state)), entry_(entry) {}

  std::shared_ptr<detail::memory_budget_state> state_;
  detail::memory_account_entry* entry_ = nullptr;
};

}  // namespace sluice::state
