// The type-independent part of json_serde and of the store codecs' JSON text, compiled
// once here instead of in every unit that names a JSON type: nlohmann's parser and
// serializer are the heaviest templates a topology would otherwise instantiate, and its
// header alone is most of what a unit including sluice.hpp would parse. No public header
// includes nlohmann: parse_document reads with nlohmann's SAX parser into sluice's own
// document (json.hpp), which json_serde's per-type walk reads.
#include <nlohmann/json.hpp>
#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/detail/store_codec.hpp"
#include "sluice/serde/json.hpp"

namespace sluice::serde_detail::json {

namespace {

std::uint32_t hash_of(std::string_view s) {
  std::uint32_t h = 2166136261u;  // FNV-1a
  for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return h;
}

// nlohmann's SAX events into a document. Containers are closed by end_array/end_object,
// which set their `end`; an object then marks the keys that come again later as shadowed.
class document_builder {
 public:
  explicit document_builder(document& doc) : doc_(doc) {}

  bool null() { return value(node_kind::null), true; }
  bool boolean(bool b) { return value(node_kind::boolean).scalar.boolean = b, true; }
  bool number_integer(std::int64_t i) { return value(node_kind::integer).scalar.integer = i, true; }
  bool number_unsigned(std::uint64_t u) { return value(node_kind::unsigned_integer).scalar.unsigned_integer = u, true; }
  bool number_float(double d, const std::string&) { return value(node_kind::floating).scalar.floating = d, true; }
  bool string(std::string& s) { return value(node_kind::string).text = std::move(s), true; }
  bool binary(std::vector<std::uint8_t>&) { return value(node_kind::null), true; }  // not in JSON text
  bool start_object(std::size_t) { return open(node_kind::object), true; }
  bool start_array(std::size_t) { return open(node_kind::array), true; }
  bool key(std::string& k) {
    node& n = push(node_kind::key);
    n.hash = hash_of(k);
    n.text = std::move(k);
    ++doc_.nodes[open_.back()].size;
    return true;
  }
  bool end_array() { return close(), true; }
  bool end_object() {
    const std::uint32_t object = open_.back();
    close();
    mark_shadowed(object);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    throw serialization_error(std::string("invalid JSON: ") + e.what());
  }

 private:
  node& push(node_kind kind) {
    const auto at = static_cast<std::uint32_t>(doc_.nodes.size());
    node& n = doc_.nodes.emplace_back();
    n.kind = kind;
    n.end = at + 1;
    return n;
  }
  node& value(node_kind kind) {
    if (!open_.empty() && doc_.nodes[open_.back()].kind == node_kind::array) ++doc_.nodes[open_.back()].size;
    return push(kind);
  }
  void open(node_kind kind) {
    value(kind);
    open_.push_back(static_cast<std::uint32_t>(doc_.nodes.size() - 1));
  }
  void close() {
    doc_.nodes[open_.back()].end = static_cast<std::uint32_t>(doc_.nodes.size());
    open_.pop_back();
  }
  void mark_shadowed(std::uint32_t object) {
    const node& o = doc_.nodes[object];
    if (o.size < 2) return;
    keys_.clear();
    for (std::uint32_t k = object + 1; k < o.end; k = doc_.nodes[k + 1].end) keys_.push_back(k);
    auto same = [&](std::uint32_t a, std::uint32_t b) {
      return doc_.nodes[a].hash == doc_.nodes[b].hash && doc_.nodes[a].text == doc_.nodes[b].text;
    };
    if (keys_.size() <= 16) {
      for (std::size_t i = 0; i + 1 < keys_.size(); ++i)
        for (std::size_t j = i + 1; j < keys_.size(); ++j)
          if (same(keys_[i], keys_[j])) {
            doc_.nodes[keys_[i]].shadowed = true;
            break;
          }
      return;
    }
    // Many members: sort by (hash, position), then every key equal to its successor is shadowed.
    std::sort(keys_.begin(), keys_.end(), [&](std::uint32_t a, std::uint32_t b) {
      return std::pair(doc_.nodes[a].hash, a) < std::pair(doc_.nodes[b].hash, b);
    });
    for (std::size_t i = 0; i + 1 < keys_.size(); ++i) {
      for (std::size_t j = i + 1; j < keys_.size() && doc_.nodes[keys_[j]].hash == doc_.nodes[keys_[i]].hash; ++j)
        if (same(keys_[i], keys_[j])) {
          doc_.nodes[keys_[i]].shadowed = true;
          break;
        }
    }
  }

  document& doc_;
  std::vector<std::uint32_t> open_;
  std::vector<std::uint32_t> keys_;
};

}  // namespace

document parse_document(std::string_view bytes) {
  if (bytes.empty()) throw serialization_error("invalid JSON: empty input");
  check_json_nesting(bytes, "the JSON");
  document doc;
  doc.nodes.reserve(16);
  document_builder builder(doc);
  nlohmann::json::sax_parse(bytes.begin(), bytes.end(), &builder);
  return doc;
}

std::string number_text(const node& n) {
  switch (n.kind) {
    case node_kind::integer: return nlohmann::json(n.scalar.integer).dump();
    case node_kind::unsigned_integer: return nlohmann::json(n.scalar.unsigned_integer).dump();
    default: return nlohmann::json(n.scalar.floating).dump();
  }
}

std::uint32_t find_member(const document& doc, std::uint32_t object, std::string_view name, std::uint32_t& hint) {
  const auto& nodes = doc.nodes;
  const std::uint32_t first = object + 1, end = nodes[object].end;
  const std::uint32_t start = hint == 0 ? first : hint;
  auto matches = [&](std::uint32_t k) {
    const node& key = nodes[k];
    return !key.shadowed && key.text.size() == name.size() &&
           std::memcmp(key.text.data(), name.data(), name.size()) == 0;
  };
  for (std::uint32_t k = start; k < end; k = nodes[k + 1].end)
    if (matches(k)) return hint = nodes[k + 1].end, k + 1;
  for (std::uint32_t k = first; k < start; k = nodes[k + 1].end)
    if (matches(k)) return hint = nodes[k + 1].end, k + 1;
  return 0;
}

const char* type_name(node_kind kind) {
  switch (kind) {
    case node_kind::null: return "null";
    case node_kind::boolean: return "boolean";
    case node_kind::integer:
    case node_kind::unsigned_integer:
    case node_kind::floating: return "number";
    case node_kind::string: return "string";
    case node_kind::array: return "array";
    case node_kind::object: return "object";
    case node_kind::key: break;
  }
  return "key";
}

}  // namespace sluice::serde_detail::json

namespace sluice::detail {

namespace {
std::string text_of(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}
}  // namespace

std::string scalar_json_text(std::string_view s) { return text_of(nlohmann::json(s)); }
std::string scalar_json_text(bool b) { return text_of(nlohmann::json(b)); }
std::string scalar_json_text(std::int64_t i) { return text_of(nlohmann::json(i)); }
std::string scalar_json_text(std::uint64_t u) { return text_of(nlohmann::json(u)); }
std::string scalar_json_text(double d) { return text_of(nlohmann::json(d)); }

}  // namespace sluice::detail
