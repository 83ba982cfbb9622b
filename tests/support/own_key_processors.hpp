// Processors whose stores are not keyed by the records' keys, and a topology of one: each
// keeps a record under "seen:<key>", so murmur2 of a store key does not name the partition
// holding it. Tests of the interactive queries that look a key of an untyped (Processor
// API) store up in every partition use them.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "sluice/sluice.hpp"

namespace sluice::test {

/// Keeps each record's value under "seen:<key>" in key-value store "seen".
struct keeps_under_its_own_key final : processor<std::string, std::string> {
  void init(processor_context<std::string, std::string>& ctx) override {
    seen_.emplace(ctx.store<std::string, std::string>("seen"));
  }
  void process(const record<std::string, std::string>& r) override { seen_->put("seen:" + r.key, r.value); }
  std::optional<key_value_store<std::string, std::string>> seen_;
};

/// Records of `in` kept by keeps_under_its_own_key in store "seen".
inline topology keeping_under_own_keys(const std::string& in) {
  streams_builder b;
  b.stream<std::string, std::string>(in).process([] { return std::make_unique<keeps_under_its_own_key>(); },
                                                 materialized{.name = "seen"});
  return b.build();
}

/// Keeps each record's value under "seen:<key>" in window store "seen-windows", in the
/// minute of its timestamp.
struct windows_under_its_own_key final : processor<std::string, std::string> {
  void init(processor_context<std::string, std::string>& ctx) override {
    seen_.emplace(ctx.state_store<window_store_handle<std::string, std::string>>("seen-windows"));
  }
  void process(const record<std::string, std::string>& r) override {
    seen_->put("seen:" + r.key, r.timestamp / 60'000 * 60'000, r.value);
  }
  std::optional<window_store_handle<std::string, std::string>> seen_;
};

}  // namespace sluice::test
