// Serdes: how typed keys and values become the bytes Kafka and the state stores hold.
//
// A serde is a stateless type with two static functions, `serialize(value, out)` and
// `deserialize(bytes)`, and a `value_type`. The DSL is typed at the edge and moves bytes
// inside; serdes are the edge. This header holds the concept, the error a serde throws,
// the Kafka-compatible primitive serdes (the byte layouts of Kafka's StringSerializer,
// ShortSerializer, IntegerSerializer, LongSerializer, FloatSerializer, DoubleSerializer,
// BooleanSerializer and VoidSerializer), and `default_serde` / `default_state_serde`, which
// pick a serde when the user names none. JSON and the compact binary state format for
// structs described with BOOST_HANA_DEFINE_STRUCT live in json.hpp and binary.hpp; this
// header includes both so that `default_serde` always names a complete type.
#pragma once

#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include <boost/hana/concept/struct.hpp>

#include "sluice/error.hpp"

namespace sluice {

/// Thrown by a serde when a value cannot be encoded or decoded. The code is always
/// errc::serialization; the message names the field path when there is one
/// ("field 'items[3].price': expected number, got string") and the problem
/// ("expected 8 bytes for int64, got 3"). The runtime catches it per record and hands
/// the record to the configured deserialization / production handler.
class serialization_error : public error {
 public:
  explicit serialization_error(const std::string& message) : error(errc::serialization, message) {}
};

/// Raw bytes. An alias, not a new type: a std::string owns bytes as well as text.
using bytes = std::string;

/// `S` is a serde for `T`: `S::value_type` is `T`, `S::serialize(value, out)` clears `out`
/// and writes the encoding of `value` into it (so a buffer reused across records stops
/// allocating once it is large enough), and `S::deserialize(bytes)` returns the decoded
/// value or throws serialization_error. Both are static: a serde holds no state and is
/// safe to use from any number of threads at once.
template <class S, class T>
concept serde_for = requires(const T& value, std::string& out, std::string_view in) {
  typename S::value_type;
  requires std::same_as<typename S::value_type, T>;
  { S::serialize(value, out) } -> std::same_as<void>;
  { S::deserialize(in) } -> std::same_as<T>;
};

/// A type that is a serde for its own value_type.
template <class S>
concept serde = requires {
  typename S::value_type;
}
&&serde_for<S, typename S::value_type>;

/// A struct described with BOOST_HANA_DEFINE_STRUCT: json_serde and binary_serde can
/// encode it with no code written for it.
template <class T>
concept described_struct = boost::hana::Struct<T>::value;

namespace serde_detail {

/// "int32", "uint16", ...: names for messages.
template <class I>
std::string integer_name() {
  return std::string(std::is_signed_v<I> ? "int" : "uint") +
         std::to_string(std::numeric_limits<std::make_unsigned_t<I>>::digits);
}

// Big-endian fixed width, the layout of Kafka's numeric serializers.
template <class U>
void put_big_endian(U value, std::string& out) {
  char buf[sizeof(U)];
  for (std::size_t i = 0; i < sizeof(U); ++i)
    buf[sizeof(U) - 1 - i] = static_cast<char>(static_cast<unsigned char>(value >> (8 * i)));
  out.assign(buf, sizeof(U));
}

template <class U>
U get_big_endian(std::string_view in, const char* type_name) {
  if (in.size() != sizeof(U))
    throw serialization_error("expected " + std::to_string(sizeof(U)) + " bytes for " + type_name + ", got " +
                              std::to_string(in.size()));
  U value = 0;
  for (std::size_t i = 0; i < sizeof(U); ++i) value = static_cast<U>((value << 8) | static_cast<unsigned char>(in[i]));
  return value;
}

}  // namespace serde_detail

/// UTF-8 text as its raw bytes, like Kafka's StringSerializer. Deserialize does not
/// validate UTF-8 (Kafka's does not reject either); every byte string round-trips.
struct string_serde {
  using value_type = std::string;
  static void serialize(const std::string& value, std::string& out) { out.assign(value); }
  static std::string deserialize(std::string_view in) { return std::string(in); }
};

/// Opaque bytes, unchanged (Kafka's ByteArraySerializer). Same encoding as string_serde;
/// the name says the intent.
struct bytes_serde {
  using value_type = bytes;
  static void serialize(const bytes& value, std::string& out) { out.assign(value); }
  static bytes deserialize(std::string_view in) { return bytes(in); }
};

/// Any integer type as sizeof(I) big-endian two's-complement bytes. int16/int32/int64 are
/// byte for byte Kafka's ShortSerializer, IntegerSerializer and LongSerializer
/// (258 as int32 is 00 00 01 02). Deserialize requires exactly sizeof(I) bytes.
template <std::integral I>
requires(!std::same_as<I, bool>) struct fixed_int_serde {
  using value_type = I;
  static void serialize(const I& value, std::string& out) {
    serde_detail::put_big_endian(static_cast<std::make_unsigned_t<I>>(value), out);
  }
  static I deserialize(std::string_view in) {
    return static_cast<I>(
        serde_detail::get_big_endian<std::make_unsigned_t<I>>(in, serde_detail::integer_name<I>().c_str()));
  }
};

using int16_serde = fixed_int_serde<std::int16_t>;  ///< Kafka ShortSerializer
using int32_serde = fixed_int_serde<std::int32_t>;  ///< Kafka IntegerSerializer
using int64_serde = fixed_int_serde<std::int64_t>;  ///< Kafka LongSerializer

/// IEEE 754 binary32, big-endian (Kafka's FloatSerializer). NaN payloads round-trip.
struct float_serde {
  using value_type = float;
  static void serialize(const float& value, std::string& out) {
    serde_detail::put_big_endian(std::bit_cast<std::uint32_t>(value), out);
  }
  static float deserialize(std::string_view in) {
    return std::bit_cast<float>(serde_detail::get_big_endian<std::uint32_t>(in, "float"));
  }
};

/// IEEE 754 binary64, big-endian (Kafka's DoubleSerializer). NaN payloads round-trip.
struct double_serde {
  using value_type = double;
  static void serialize(const double& value, std::string& out) {
    serde_detail::put_big_endian(std::bit_cast<std::uint64_t>(value), out);
  }
  static double deserialize(std::string_view in) {
    return std::bit_cast<double>(serde_detail::get_big_endian<std::uint64_t>(in, "double"));
  }
};

/// One byte, 0x01 for true and 0x00 for false (Kafka's BooleanSerializer). Like Kafka's
/// deserializer, any non-zero byte reads as true; a length other than 1 is an error.
struct bool_serde {
  using value_type = bool;
  static void serialize(const bool& value, std::string& out) { out.assign(1, value ? '\x01' : '\x00'); }
  static bool deserialize(std::string_view in) {
    if (in.size() != 1) throw serialization_error("expected 1 byte for bool, got " + std::to_string(in.size()));
    return in[0] != 0;
  }
};

/// For topics whose keys (or values) carry nothing (Kafka's VoidSerializer): writes no
/// bytes and accepts only empty input. The runtime still sends a Kafka null for an absent
/// key; this serde is what a typed `std::monostate` key means.
struct void_serde {
  using value_type = std::monostate;
  static void serialize(const std::monostate&, std::string& out) { out.clear(); }
  static std::monostate deserialize(std::string_view in) {
    if (!in.empty()) throw serialization_error("expected no bytes for void, got " + std::to_string(in.size()));
    return {};
  }
};

/// JSON for described structs (and the member types they may hold). See json.hpp.
template <class T>
class json_serde;

/// Compact binary for described structs, meant for state stores. See binary.hpp.
template <class T>
class binary_serde;

namespace serde_detail {

template <class T>
inline constexpr bool no_default_serde = false;

template <class T>
struct default_serde_for {
  static_assert(no_default_serde<T>,
                "no default serde for this type: describe it with BOOST_HANA_DEFINE_STRUCT "
                "or pass a serde explicitly");
  using type = void;
};
template <>
struct default_serde_for<std::string> {
  using type = string_serde;
};
template <>
struct default_serde_for<bool> {
  using type = bool_serde;
};
template <>
struct default_serde_for<float> {
  using type = float_serde;
};
template <>
struct default_serde_for<double> {
  using type = double_serde;
};
template <>
struct default_serde_for<std::monostate> {
  using type = void_serde;
};
template <std::integral I>
requires(!std::same_as<I, bool>) struct default_serde_for<I> {
  using type = fixed_int_serde<I>;
};
template <described_struct T>
struct default_serde_for<T> {
  using type = json_serde<T>;
};

template <class T>
struct default_state_serde_for : default_serde_for<T> {};
template <described_struct T>
struct default_state_serde_for<T> {
  using type = binary_serde<T>;
};

}  // namespace serde_detail

/// The serde the DSL uses for a record key or value when the user passes none:
/// std::string → string_serde, bool → bool_serde, any other integer → fixed_int_serde
/// (Kafka's layouts for int16/int32/int64), float/double → float_serde/double_serde,
/// std::monostate → void_serde, described structs → json_serde<T>. Any other type is a
/// compile error that says what to do.
template <class T>
using default_serde = typename serde_detail::default_serde_for<T>::type;

/// The serde a state store uses when the user passes none: like default_serde, except that
/// described structs use the compact binary_serde<T>.
template <class T>
using default_state_serde = typename serde_detail::default_state_serde_for<T>::type;

}  // namespace sluice

// Last, so that json_serde and binary_serde are complete wherever serde.hpp is included.
#include "sluice/serde/binary.hpp"
#include "sluice/serde/json.hpp"
