// Field paths for serde error messages ("items[3].price", "limits[\"eu\"].rate").
//
// A path is a chain of nodes on the decoder's stack, one per level of nesting, each
// pointing at its parent. Building one costs nothing on the happy path; the text is
// rendered only when a decode fails.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "sluice/serde/serde.hpp"

namespace sluice::serde_detail {

class field_path {
 public:
  /// The root: the value being decoded as a whole.
  field_path() = default;
  field_path(const field_path&) = delete;
  field_path& operator=(const field_path&) = delete;

  field_path field(std::string_view name) const { return {this, kind::field, name, 0}; }
  field_path index(std::size_t i) const { return {this, kind::index, {}, i}; }
  field_path key(std::string_view k) const { return {this, kind::key, k, 0}; }

  bool is_root() const { return kind_ == kind::root; }

  std::string str() const {
    std::string s;
    append_to(s);
    return s;
  }

  /// Throws serialization_error: "field '<path>': <what>", or just <what> at the root.
  [[noreturn]] void fail(std::string_view what) const {
    if (is_root()) throw serialization_error(std::string(what));
    throw serialization_error("field '" + str() + "': " + std::string(what));
  }

 private:
  enum class kind : unsigned char { root, field, index, key };

  field_path(const field_path* parent, kind k, std::string_view name, std::size_t i)
      : parent_(parent), kind_(k), name_(name), index_(i) {}

  void append_to(std::string& s) const {
    if (parent_ != nullptr) parent_->append_to(s);
    switch (kind_) {
      case kind::root: break;
      case kind::field:
        if (!s.empty()) s += '.';
        s += name_;
        break;
      case kind::index:
        s += '[';
        s += std::to_string(index_);
        s += ']';
        break;
      case kind::key:
        s += "[\"";
        s += name_;
        s += "\"]";
        break;
    }
  }

  const field_path* parent_ = nullptr;
  kind kind_ = kind::root;
  std::string_view name_;
  std::size_t index_ = 0;
};

}  // namespace sluice::serde_detail
