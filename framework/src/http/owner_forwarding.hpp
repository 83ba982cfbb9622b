// owner_forwarding: the one hop a query takes to the instance that runs the partition it
// needs, when this instance does not. The built-in /stores endpoints and every endpoint a
// topology adds (through http::store_access::forward, e.g. the leaderboard's) use this one
// rule: find the owner in the consumer group's description (instance_directory), ask it the
// same request once, marked X-Sluice-Forwarded-By so it never forwards again, and answer 503
// with Retry-After while the partition has no other owner (unassigned, or moving here).
//
// Lifecycle: made by the instance_server; the directory_slot it reads is filled once the app
// knows its group. Threading: every method is safe from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/instance_directory.hpp"
#include "sluice/http.hpp"

namespace sluice::http {

/// Where the forwarding finds other instances: set once the app knows its group.
class directory_slot {
 public:
  void set(std::unique_ptr<instance_directory> d) {
    owned_ = std::move(d);
    current_.store(owned_.get(), std::memory_order_release);
  }
  instance_directory* get() const noexcept { return current_.load(std::memory_order_acquire); }

 private:
  std::unique_ptr<instance_directory> owned_;
  std::atomic<instance_directory*> current_{nullptr};
};

class owner_forwarding {
 public:
  /// `self`: this instance's application.server; `auth_token`: http.auth.token (sent on
  /// forwarded requests when set).
  owner_forwarding(std::string self, std::string auth_token, const directory_slot& directory)
      : self_(std::move(self)), auth_token_(std::move(auth_token)), directory_(directory) {}

  /// The owner's answer to `req` (same path and query) for partition `partition` of `store`;
  /// 503 + Retry-After when `req` was itself forwarded, before the group is known, or while
  /// the partition has no owner but this instance (it is moving).
  response forward(const request& req, std::string_view store, std::int32_t partition) const;
  /// `r` with X-Sluice-Served-By: this instance (unless it already names who served it).
  response stamp(response r) const;
  /// The answer when the group's description could not be had (`failure`: a broker outage,
  /// the coordinator moving): 503 with Retry-After, saying what the request wanted to learn.
  response owners_unknown(std::string_view wanted, const std::exception& failure) const;
  /// The headers a forwarded request carries (X-Sluice-Forwarded-By, Authorization).
  std::vector<std::pair<std::string, std::string>> forward_headers() const;
  const std::string& self() const noexcept { return self_; }
  instance_directory* directory() const noexcept { return directory_.get(); }

 private:
  std::string self_;
  std::string auth_token_;
  const directory_slot& directory_;
};

}  // namespace sluice::http
