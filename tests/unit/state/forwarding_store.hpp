// A kv_store for the state unit tests that forwards every call to another store: a test
// derives from it and overrides the calls it counts or records (evidence of what a store
// kind asked of its storage: scans, deletes, compactions).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "sluice/state/kv_store.hpp"

namespace sluice::state::test {

/// Owns `inner` and forwards to it; closes it when closed or destroyed. Used on one thread,
/// as the store it wraps.
class forwarding_store : public kv_store {
 public:
  explicit forwarding_store(std::unique_ptr<kv_store> inner) : inner_(std::move(inner)) {}
  ~forwarding_store() override { forwarding_store::close(); }

  const std::string& name() const noexcept override { return inner_->name(); }
  using kv_store::get;
  bool get(std::string_view key, std::string& out) override { return inner_->get(key, out); }
  void put(std::string_view key, std::string_view value) override { inner_->put(key, value); }
  bool put_if_absent(std::string_view key, std::string_view value) override {
    return inner_->put_if_absent(key, value);
  }
  void remove(std::string_view key) override { inner_->remove(key); }
  void remove_range(std::string_view from, std::string_view to) override { inner_->remove_range(from, to); }
  void compact_range(std::string_view from, std::string_view to, compaction_mode mode) override {
    inner_->compact_range(from, to, mode);
  }
  std::uint64_t approximate_count() override { return inner_->approximate_count(); }
  std::optional<changelog_offset> committed_offset() const noexcept override { return inner_->committed_offset(); }
  void commit(changelog_offset o) override { inner_->commit(o); }
  void abort() override { inner_->abort(); }
  void restore(std::span<const restore_record> b, changelog_offset o) override { inner_->restore(b, o); }
  void flush() override { inner_->flush(); }
  bool begin_flush() override { return inner_->begin_flush(); }
  std::optional<std::uint64_t> unflushed_entries() const noexcept override { return inner_->unflushed_entries(); }
  std::size_t pending_bytes() const noexcept override { return inner_->pending_bytes(); }
  void close() override {
    if (inner_) inner_->close();
  }

 protected:
  kv_iterator make_range(std::string_view f, std::string_view t, direction d) override {
    return inner_->range(f, t, d);
  }
  kv_iterator make_prefix(std::string_view p, direction d) override { return inner_->prefix(p, d); }
  kv_iterator make_all(direction d) override { return inner_->all(d); }

 private:
  std::unique_ptr<kv_store> inner_;
};

}  // namespace sluice::state::test
