// kv_iterator bookkeeping and the checks every store shares.
#include "sluice/state/kv_store.hpp"
#include "sluice/state/kv_backed_store.hpp"

#include <cstdio>
#include <exception>
#include <utility>

#include "store_common.hpp"

namespace sluice::state {

kv_backed_store::kv_backed_store(std::unique_ptr<kv_store> storage, const char* kind) : storage_(std::move(storage)) {
  if (!storage_) throw error(errc::invalid_topology, std::string(kind) + " opened without a kv_store to hold its data");
}

kv_iterator::kv_iterator(std::unique_ptr<detail::kv_iterator_impl> impl, std::size_t* open_count) noexcept
    : impl_(std::move(impl)), open_count_(open_count) {
  if (open_count_ != nullptr) {
    ++*open_count_;
  }
}

kv_iterator::kv_iterator(kv_iterator&& other) noexcept
    : impl_(std::move(other.impl_)), open_count_(std::exchange(other.open_count_, nullptr)) {}

kv_iterator& kv_iterator::operator=(kv_iterator&& other) noexcept {
  if (this != &other) {
    release();
    impl_ = std::move(other.impl_);
    open_count_ = std::exchange(other.open_count_, nullptr);
  }
  return *this;
}

kv_iterator::~kv_iterator() { release(); }

void kv_iterator::release() noexcept {
  impl_.reset();  // before the count drops: the impl may reference the store
  if (open_count_ != nullptr) {
    --*open_count_;
    open_count_ = nullptr;
  }
}

void kv_store::require_no_open_iterators(const char* operation) const noexcept {
  if (open_iterators_ == 0) {
    return;
  }
  // Loud on purpose: continuing would let those iterators read freed memory later.
  std::fprintf(stderr,
               "sluice: fatal: %s of state store '%s' with %zu open iterator(s); destroy every "
               "kv_iterator before closing its store\n",
               operation, name().c_str(), open_iterators_);
  std::fflush(stderr);
  std::terminate();
}

namespace detail {

void validate_store_name(const std::string& name) {
  if (name.empty() || name.front() == '.' || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    throw sluice::error(errc::invalid_config, "invalid state store name '" + name +
                                                  "': a store name is a directory name (non-empty, no '/', not "
                                                  "starting with '.')");
  }
}

}  // namespace detail
}  // namespace sluice::state
