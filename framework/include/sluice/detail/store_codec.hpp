// store_codec: a store's key and value types, erased into functions the HTTP server uses to
// answer interactive queries: a key from its text in a URL, keys and values as JSON. Made
// by the DSL where the types are known (count, reduce, aggregate, table) with the same
// serdes the store uses (default_state_serde). Not part of the public API.
#pragma once

#include <charconv>
#include <concepts>
#include <functional>
#include <memory>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "sluice/serde/serde.hpp"

namespace sluice::detail {

struct store_codec {
  /// "string", "integer" or "other": how a key is written in a URL (other: not at all).
  std::string key_kind;
  /// The key's bytes from its text in a URL; nullopt when the text is not a valid key.
  std::optional<std::string> (*key_from_text)(std::string_view) = nullptr;
  /// A stored key / value as JSON text. Throws sluice::serde_error when the bytes do not decode.
  std::string (*key_to_json)(std::string_view) = nullptr;
  std::string (*value_to_json)(std::string_view) = nullptr;
  /// Window stores of the DSL's windowed aggregations (/stores/{store}/keys/{key}/windows):
  /// their windows' size, so a window starting at s ends at s + size (0: not a time-window
  /// store). Values are 8 bytes (the last update's timestamp) and the aggregate.
  std::int64_t window_size_ms = 0;
  /// A session store: each entry's window start is the session's end, and its value is 8
  /// bytes of the session's start and the aggregate.
  bool sessions = false;
};

template <class T>
struct is_optional_type : std::false_type {};
template <class T>
struct is_optional_type<std::optional<T>> : std::true_type {};

/// Strings (invalid UTF-8 replaced by U+FFFD), booleans and numbers as JSON text. Out of
/// line (framework/src/serde/json.cpp), so that no unit compiles nlohmann's serializer.
std::string scalar_json_text(std::string_view s);
std::string scalar_json_text(bool b);
std::string scalar_json_text(std::int64_t i);
std::string scalar_json_text(std::uint64_t u);
std::string scalar_json_text(double d);

/// A typed value as JSON text: strings and numbers as themselves, described structs through
/// json_serde (the format their topics use), optionals as null or their value.
template <class T>
std::string to_json_text(const T& v) {
  if constexpr (is_optional_type<T>::value) {
    return v ? to_json_text(*v) : std::string("null");
  } else if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, bool>) {
    return scalar_json_text(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    return scalar_json_text(static_cast<double>(v));
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    return scalar_json_text(static_cast<std::int64_t>(v));
  } else if constexpr (std::is_integral_v<T>) {
    return scalar_json_text(static_cast<std::uint64_t>(v));
  } else {
    std::string out;
    json_serde<T>::serialize(v, out);
    return out;
  }
}

/// VS's value of a timestamped store's bytes (value_format::timestamped: 8 bytes of
/// timestamp, then VS's bytes), for the codec of a timestamped store.
template <class VS>
struct timestamp_skipping_serde {
  static auto deserialize(std::string_view in) {
    if (in.size() < 8)
      throw serialization_error("a timestamped value needs at least 8 bytes, got " + std::to_string(in.size()));
    return VS::deserialize(in.substr(8));
  }
};

template <class K, class V, class KS = default_state_serde<K>, class VS = default_state_serde<V>>
std::shared_ptr<const store_codec> make_store_codec() {
  auto c = std::make_shared<store_codec>();
  if constexpr (std::is_same_v<K, std::string>) {
    c->key_kind = "string";
    c->key_from_text = [](std::string_view text) -> std::optional<std::string> {
      std::string out;
      KS::serialize(std::string(text), out);
      return out;
    };
  } else if constexpr (std::integral<K> && !std::is_same_v<K, bool>) {
    c->key_kind = "integer";
    c->key_from_text = [](std::string_view text) -> std::optional<std::string> {
      K k{};
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), k);
      if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
      std::string out;
      KS::serialize(k, out);
      return out;
    };
  } else {
    c->key_kind = "other";
    c->key_from_text = [](std::string_view) -> std::optional<std::string> { return std::nullopt; };
  }
  c->key_to_json = [](std::string_view bytes) { return to_json_text(KS::deserialize(bytes)); };
  c->value_to_json = [](std::string_view bytes) { return to_json_text(VS::deserialize(bytes)); };
  return c;
}

/// The codec of a timestamped store of K and V in their state serdes (a table's, an
/// aggregation's, a table–table join's: value_format::timestamped), which shows the values
/// without their timestamps.
template <class K, class V>
std::shared_ptr<const store_codec> make_timestamped_store_codec() {
  return make_store_codec<K, V, default_state_serde<K>, timestamp_skipping_serde<default_state_serde<V>>>();
}

/// The codec of a windowed aggregation's store of K and A (time windows of `window_size_ms`,
/// or sessions): keys and aggregates as make_timestamped_store_codec shows them.
template <class K, class A>
std::shared_ptr<const store_codec> make_window_store_codec(std::int64_t window_size_ms, bool sessions) {
  auto c = std::make_shared<store_codec>(*make_timestamped_store_codec<K, A>());
  c->window_size_ms = window_size_ms;
  c->sessions = sessions;
  return c;
}

// The codecs of the commonest stores (string keys; string or 64-bit integer values) are
// compiled once, in framework/src/dsl/common_nodes.cpp.
extern template std::shared_ptr<const store_codec> make_store_codec<std::string, std::string>();
extern template std::shared_ptr<const store_codec> make_store_codec<std::string, std::int64_t>();
extern template std::shared_ptr<const store_codec>
make_store_codec<std::string, std::string, default_state_serde<std::string>,
                 timestamp_skipping_serde<default_state_serde<std::string>>>();
extern template std::shared_ptr<const store_codec>
make_store_codec<std::string, std::int64_t, default_state_serde<std::string>,
                 timestamp_skipping_serde<default_state_serde<std::int64_t>>>();

}  // namespace sluice::detail
