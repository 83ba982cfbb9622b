// The one-hop forwarding of a query to the instance owning its partition (owner_forwarding.hpp).
#include "http/owner_forwarding.hpp"

#include <algorithm>
#include <chrono>
#include <optional>

#include "http/client.hpp"

namespace sluice::http {

response owner_forwarding::stamp(response r) const {
  if (!r.header(served_by_header)) r.headers.emplace_back(served_by_header, self_);
  return r;
}

response owner_forwarding::owners_unknown(std::string_view wanted, const std::exception& failure) const {
  auto r = response::error(status::service_unavailable,
                           "cannot learn " + std::string(wanted) + ": " + failure.what() + "; retry");
  r.headers.emplace_back("Retry-After", "1");
  return stamp(std::move(r));
}

std::vector<std::pair<std::string, std::string>> owner_forwarding::forward_headers() const {
  std::vector<std::pair<std::string, std::string>> h{{forwarded_header, self_}};
  if (!auth_token_.empty()) h.emplace_back("Authorization", "Bearer " + auth_token_);
  return h;
}

response owner_forwarding::forward(const request& req, std::string_view store, std::int32_t partition) const {
  auto* directory = directory_.get();
  if (req.header(forwarded_header) || !directory)
    return stamp(store_access::refusal(store_access::outcome::unavailable, store, partition));
  std::optional<std::string> owner;
  const std::string store_name(store);
  try {
    owner = directory->view()->owner(store_name, partition);
    if (!owner || *owner == self_) owner = directory->view(true)->owner(store_name, partition);
  } catch (const std::exception& e) {
    return owners_unknown("which instance owns the key", e);
  }
  if (!owner || *owner == self_)  // unassigned, or still moving here
    return stamp(store_access::refusal(store_access::outcome::unavailable, store, partition));
  // The owner's answer names the owner; a 502 or 504 of an owner not reached names this one.
  return stamp(forward_get(*owner, std::string(req.target()), forward_headers(), std::chrono::seconds(3)));
}

}  // namespace sluice::http
