// binary_serde<T>: a compact binary encoding of described structs, for state stores and
// their changelogs, where no other team reads the bytes and size and speed matter more
// than readability.
//
// Format (version 1): one byte 0x01 (the format version), then the value:
//   bool                 1 byte, 0x00 or 0x01 (anything else is rejected)
//   unsigned integers    LEB128 varint
//   signed integers      zigzag, then LEB128 varint (small magnitudes take one byte)
//   float / double       IEEE 754, 4 / 8 bytes little-endian
//   std::string          varint byte length, then the bytes (any bytes, not only UTF-8)
//   std::optional<X>     presence byte 0x00 (empty) or 0x01 followed by X
//   std::vector<X>       varint count, then the elements
//   std::map<string, X>  varint count, then (key, value) pairs in key order
//   described struct     its members in declaration order, no names, no tags
// Because members carry no names or tags, the layout of T is part of the format: adding,
// removing, reordering or retyping members makes old bytes unreadable, except appending
// members at the end, which still fails loudly (truncated input) rather than misreading.
// Change a state struct by bumping the store's changelog (or migrating), not in place.
//
// Decoding checks every length against the bytes left before it allocates or reads, so
// truncated or garbage input throws serialization_error naming the field path; it never
// reads out of bounds and never allocates more than the input could describe.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <boost/hana/define_struct.hpp>

// serde.hpp first: it includes this header at its end, after what the detail headers need.
#include "sluice/serde/serde.hpp"
#include "sluice/serde/detail/field_path.hpp"
#include "sluice/serde/detail/reflect.hpp"

namespace sluice {
namespace serde_detail::binary {

inline constexpr unsigned char format_version = 1;

inline void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>(static_cast<unsigned char>(v | 0x80));
    v >>= 7;
  }
  out += static_cast<char>(static_cast<unsigned char>(v));
}

inline std::uint64_t zigzag(std::int64_t v) {
  return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
}

inline std::int64_t unzigzag(std::uint64_t u) {
  return static_cast<std::int64_t>(u >> 1) ^ -static_cast<std::int64_t>(u & 1);
}

template <class U>
void put_little_endian(std::string& out, U v) {
  for (std::size_t i = 0; i < sizeof(U); ++i) out += static_cast<char>(static_cast<unsigned char>(v >> (8 * i)));
}

/// The fewest bytes any value of X encodes to; bounds element counts read from input.
template <class X>
constexpr std::size_t min_size() {
  if constexpr (std::is_same_v<X, float>) {
    return 4;
  } else if constexpr (std::is_same_v<X, double>) {
    return 8;
  } else if constexpr (described_struct<X>) {
    return unpack_member_types<X>(
        [](auto... members) { return (std::size_t{0} + ... + min_size<typename decltype(members)::type>()); });
  } else {
    return 1;
  }
}

template <class X>
void write(std::string& out, const X& value) {
  if constexpr (std::is_same_v<X, bool>) {
    out += value ? '\x01' : '\x00';
  } else if constexpr (is_integer<X> && std::is_unsigned_v<X>) {
    put_varint(out, value);
  } else if constexpr (is_integer<X>) {
    put_varint(out, zigzag(value));
  } else if constexpr (std::is_same_v<X, float>) {
    put_little_endian(out, std::bit_cast<std::uint32_t>(value));
  } else if constexpr (std::is_same_v<X, double>) {
    put_little_endian(out, std::bit_cast<std::uint64_t>(value));
  } else if constexpr (std::is_same_v<X, std::string>) {
    put_varint(out, value.size());
    out += value;
  } else if constexpr (is_optional<X>) {
    out += value ? '\x01' : '\x00';
    if (value) write(out, *value);
  } else if constexpr (is_vector<X>) {
    put_varint(out, value.size());
    for (const auto& element : value) write(out, static_cast<const typename X::value_type&>(element));
  } else if constexpr (is_string_map<X>) {
    put_varint(out, value.size());
    for (const auto& [k, v] : value) {
      write(out, k);
      write(out, v);
    }
  } else if constexpr (described_struct<X>) {
    for_each_field(value, [&](const char*, const auto& member) { write(out, member); });
  } else {
    static_assert(always_false<X>,
                  "binary_serde: unsupported member type. Supported: std::string, bool, "
                  "integer types, float, double, std::optional<X>, std::vector<X>, "
                  "std::map<std::string, X> and structs described with "
                  "BOOST_HANA_DEFINE_STRUCT");
  }
}

/// A bounds-checked cursor over the input.
class reader {
 public:
  explicit reader(std::string_view in) : p_(reinterpret_cast<const unsigned char*>(in.data())), end_(p_ + in.size()) {}

  std::size_t remaining() const { return static_cast<std::size_t>(end_ - p_); }

  void need(std::size_t n, const char* what, const field_path& path) const {
    if (remaining() < n)
      path.fail("truncated input: expected " + std::to_string(n) + " bytes for " + what + ", got " +
                std::to_string(remaining()));
  }

  unsigned char byte(const char* what, const field_path& path) {
    need(1, what, path);
    return *p_++;
  }

  std::uint64_t varint(const field_path& path) {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) path.fail("truncated input: varint runs past the end");
      const unsigned char b = *p_++;
      if (shift == 63 && b > 1) path.fail("malformed varint: more than 64 bits");
      value |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return value;
    }
    path.fail("malformed varint: more than 10 bytes");
  }

  /// A count or length from the input, checked against the bytes left: each of `count`
  /// items takes at least `item_size` bytes.
  std::size_t count(std::size_t item_size, const char* what, const field_path& path) {
    const std::uint64_t n = varint(path);
    if (item_size != 0 && n > remaining() / item_size)
      path.fail("truncated input: " + std::string(what) + " of " + std::to_string(n) + " needs at least " +
                std::to_string(n) + " x " + std::to_string(item_size) + " bytes, got " + std::to_string(remaining()));
    return static_cast<std::size_t>(n);
  }

  template <class U>
  U little_endian(const char* what, const field_path& path) {
    need(sizeof(U), what, path);
    U v = 0;
    for (std::size_t i = 0; i < sizeof(U); ++i) v |= static_cast<U>(static_cast<U>(p_[i]) << (8 * i));
    p_ += sizeof(U);
    return v;
  }

  std::string_view take(std::size_t n) {
    std::string_view s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }

 private:
  const unsigned char* p_;
  const unsigned char* end_;
};

template <class X>
void read(reader& in, X& out, const field_path& path) {
  if constexpr (std::is_same_v<X, bool>) {
    const unsigned char b = in.byte("bool", path);
    if (b > 1) path.fail("invalid bool byte " + std::to_string(b));
    out = b == 1;
  } else if constexpr (is_integer<X>) {
    using limits = std::numeric_limits<X>;
    const std::uint64_t raw = in.varint(path);
    if constexpr (std::is_unsigned_v<X>) {
      if (raw > limits::max()) path.fail("integer " + std::to_string(raw) + " out of range for " + integer_name<X>());
      out = static_cast<X>(raw);
    } else {
      const std::int64_t s = unzigzag(raw);
      if (s < limits::min() || s > limits::max())
        path.fail("integer " + std::to_string(s) + " out of range for " + integer_name<X>());
      out = static_cast<X>(s);
    }
  } else if constexpr (std::is_same_v<X, float>) {
    out = std::bit_cast<float>(in.little_endian<std::uint32_t>("float", path));
  } else if constexpr (std::is_same_v<X, double>) {
    out = std::bit_cast<double>(in.little_endian<std::uint64_t>("double", path));
  } else if constexpr (std::is_same_v<X, std::string>) {
    out.assign(in.take(in.count(1, "string length", path)));
  } else if constexpr (is_optional<X>) {
    const unsigned char present = in.byte("optional presence", path);
    if (present > 1) path.fail("invalid optional presence byte " + std::to_string(present));
    if (present == 0) {
      out.reset();
    } else {
      out.emplace();
      read(in, *out, path);
    }
  } else if constexpr (is_vector<X>) {
    using E = typename X::value_type;
    static_assert(min_size<E>() > 0, "binary_serde: vectors of empty structs are not supported");
    const std::size_t n = in.count(min_size<E>(), "vector", path);
    out.clear();
    out.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      E item{};
      read(in, item, path.index(i));
      out.push_back(std::move(item));
    }
  } else if constexpr (is_string_map<X>) {
    using V = typename X::mapped_type;
    const std::size_t n = in.count(1 + min_size<V>(), "map", path);
    out.clear();
    for (std::size_t i = 0; i < n; ++i) {
      std::string k;
      read(in, k, path.index(i));
      V item{};
      read(in, item, path.key(k));
      if (!out.emplace(std::move(k), std::move(item)).second)
        path.fail("duplicate map key at entry " + std::to_string(i));
    }
  } else if constexpr (described_struct<X>) {
    for_each_field(out, [&](const char* name, auto& member) { read(in, member, path.field(name)); });
  } else {
    static_assert(always_false<X>, "binary_serde: unsupported member type (see binary.hpp)");
  }
}

}  // namespace serde_detail::binary

/// Compact binary serde for T (see the format above): the default for described structs in
/// state stores. Stateless and thread-safe. T must be default-constructible.
template <class T>
class binary_serde {
 public:
  using value_type = T;

  /// Clears `out` and writes the version byte and `value`. Never throws on valid values.
  static void serialize(const T& value, std::string& out) {
    out.clear();
    out += static_cast<char>(serde_detail::binary::format_version);
    serde_detail::binary::write(out, value);
  }

  /// Decodes bytes written by serialize. Throws serialization_error for empty input, an
  /// unknown version byte, truncated input, malformed varints, out-of-range integers,
  /// invalid bool/presence bytes, duplicate map keys and trailing bytes.
  static T deserialize(std::string_view bytes) {
    const serde_detail::field_path root;
    if (bytes.empty()) throw serialization_error("binary: empty input, expected a version byte");
    const auto version = static_cast<unsigned char>(bytes[0]);
    if (version != serde_detail::binary::format_version)
      throw serialization_error("binary: unknown format version " + std::to_string(version) +
                                ", this build reads version 1");
    serde_detail::binary::reader in(bytes.substr(1));
    T value{};
    serde_detail::binary::read(in, value, root);
    if (in.remaining() != 0)
      throw serialization_error("binary: " + std::to_string(in.remaining()) + " trailing bytes after the value");
    return value;
  }
};

}  // namespace sluice
