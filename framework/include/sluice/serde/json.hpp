// json_serde<T>: JSON for any struct described with BOOST_HANA_DEFINE_STRUCT, with no code
// written per struct. This is the default serde for struct keys and values on topics,
// because other teams' consumers (Java, Python, jq) can read it.
//
// Mapping: std::string → string; bool → true/false; integers → numbers; float/double →
// numbers (always with a fraction or exponent, shortest text that round-trips);
// std::vector<X> → array; std::map<std::string, X> → object; described structs → object
// with members in declaration order; std::optional<X> → the value, or, when empty, the
// member is left out of its object (and written as null inside an array or map). On read,
// a missing or null optional member is std::nullopt; unknown members are ignored; a
// missing non-optional member, a wrong JSON type, an integer out of range for its member
// and invalid JSON are serialization_errors that name the field path. Output is compact
// (no whitespace) and escapes '"', '\\' and control characters; other UTF-8 passes
// through. Strings must be valid UTF-8 (JSON cannot carry anything else): serialize
// throws otherwise. NaN and infinities have no JSON form and also throw.
//
// Serialize writes straight into the caller's buffer (no DOM); deserialize parses (with
// nlohmann's parser, compiled once in framework/src/serde/json.cpp: this header does not
// include nlohmann) into a flat document of sluice's own, then walks the type over it,
// moving strings out. A key that occurs twice in an object reads as its last occurrence.
//
// Nesting is bounded: JSON whose arrays and objects nest deeper than max_json_nesting is a
// serialization_error before any parse tree exists. nlohmann parses iteratively, but
// walking a tree recurses once per level, so an 80,000-level document would overflow the
// stack of whoever touches it next. check_json_nesting() is
// the one check every JSON path of sluice uses (json_serde, the throttle's key fields and
// rules).
#pragma once

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <charconv>
#include <cmath>
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

/// The deepest nesting of arrays and objects sluice reads in JSON (as Jackson's default
/// StreamReadConstraints). Deeper documents are rejected before they are parsed.
inline constexpr std::size_t max_json_nesting = 1000;

/// The nesting depth of the arrays and objects in `bytes`, counted up to `limit` + 1 (the
/// scan stops there), ignoring brackets inside strings. Does not validate the JSON.
inline std::size_t json_nesting_depth(std::string_view bytes, std::size_t limit = max_json_nesting) {
  // A document cannot nest deeper than it has bytes: short ones need no scan.
  if (bytes.size() <= limit) return 0;
  std::size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : bytes) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

/// Throws serialization_error when `bytes` nests arrays and objects deeper than `limit`;
/// `what` names the document in the message ("the record value").
inline void check_json_nesting(std::string_view bytes, std::string_view what, std::size_t limit = max_json_nesting) {
  if (json_nesting_depth(bytes, limit) > limit)
    throw serialization_error(std::string(what) + " nests arrays and objects deeper than " + std::to_string(limit) +
                              " levels (" + std::to_string(bytes.size()) +
                              " bytes); sluice rejects such JSON before parsing it, as no producer of real "
                              "data nests that deep");
}

namespace serde_detail::json {

/// Whether a JSON string holds byte `c` as it is, with no escape and no UTF-8 decoding:
/// printable ASCII but the quote and the backslash.
constexpr bool is_plain_string_byte(unsigned char c) noexcept { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }

/// The first byte in [p, end) that is not a plain string byte (is_plain_string_byte), or
/// `end`: a quote, a backslash, a control byte or the lead of a UTF-8 sequence. The one
/// scan of string bytes of every JSON path (the serde's writer, the throttle's key fields,
/// the overflow buffer's value fields), 16 bytes at a time where SSE2 is there.
inline const unsigned char* skip_plain_string_bytes(const unsigned char* p, const unsigned char* end) noexcept {
#if defined(__SSE2__)
  // A byte below 0x20 or from 0x80 (negative as a signed byte) is below 0x20 in one signed
  // comparison, so three comparisons find all four kinds.
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i space = _mm_set1_epi8(0x20);
  while (end - p >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i stop =
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)), _mm_cmplt_epi8(v, space));
    if (const int mask = _mm_movemask_epi8(stop); mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  while (p != end && is_plain_string_byte(*p)) ++p;
  return p;
}

/// Length of the well-formed UTF-8 sequence starting at p (whose first byte is >= 0x80),
/// or 0 when it is malformed, overlong, a surrogate or beyond U+10FFFF.
inline std::size_t utf8_sequence_length(const unsigned char* p, const unsigned char* end) {
  const auto avail = static_cast<std::size_t>(end - p);
  const unsigned char c = p[0];
  auto cont = [&](std::size_t i, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
    return i < avail && p[i] >= lo && p[i] <= hi;
  };
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(1) && cont(2) ? 3 : 0;
  if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
  if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

/// Appends `s` as a JSON string literal. Runs of bytes that need no escape are copied
/// in one append.
inline void write_string(std::string& out, std::string_view s, const field_path& path) {
  static constexpr char hex[] = "0123456789abcdef";
  const auto* begin = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = begin + s.size();
  const auto* run = begin;
  const auto* p = begin;
  out += '"';
  while ((p = skip_plain_string_bytes(p, end)) != end) {
    const unsigned char c = *p;
    if (c >= 0x80) {
      const std::size_t n = utf8_sequence_length(p, end);
      if (n == 0)
        path.fail("string is not valid UTF-8 (byte " + std::to_string(p - begin) + "); JSON can only carry UTF-8 text");
      p += n;
      continue;
    }
    out.append(reinterpret_cast<const char*>(run), static_cast<std::size_t>(p - run));
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        out += "\\u00";
        out += hex[c >> 4];
        out += hex[c & 0xF];
    }
    run = ++p;
  }
  out.append(reinterpret_cast<const char*>(run), static_cast<std::size_t>(end - run));
  out += '"';
}

template <class X>
inline constexpr bool is_json_float = std::is_same_v<X, float> || std::is_same_v<X, double>;

template <class X>
void write(std::string& out, const X& value, const field_path& path) {
  if constexpr (std::is_same_v<X, bool>) {
    out += value ? "true" : "false";
  } else if constexpr (is_integer<X>) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, value);
    out.append(buf, r.ptr);
  } else if constexpr (is_json_float<X>) {
    if (!std::isfinite(value)) path.fail("NaN and infinity cannot be written as JSON");
    char buf[40];
    const auto r = std::to_chars(buf, buf + sizeof buf, value);
    const std::string_view text(buf, static_cast<std::size_t>(r.ptr - buf));
    out += text;
    // "3" would read back as an integer and "-0" as 0: keep it visibly a float.
    if (text.find_first_of(".e") == std::string_view::npos) out += ".0";
  } else if constexpr (std::is_same_v<X, std::string>) {
    write_string(out, value, path);
  } else if constexpr (is_optional<X>) {
    if (value)
      write(out, *value, path);
    else
      out += "null";
  } else if constexpr (is_vector<X>) {
    out += '[';
    std::size_t i = 0;
    for (const auto& element : value) {
      if (i != 0) out += ',';
      write(out, element, path.index(i++));
    }
    out += ']';
  } else if constexpr (is_string_map<X>) {
    out += '{';
    bool first = true;
    for (const auto& [k, v] : value) {
      if (!first) out += ',';
      first = false;
      write_string(out, k, path);
      out += ':';
      write(out, v, path.key(k));
    }
    out += '}';
  } else if constexpr (described_struct<X>) {
    out += '{';
    bool first = true;
    for_each_field(value, [&](const char* name, const auto& member) {
      if constexpr (is_optional<std::remove_cvref_t<decltype(member)>>) {
        if (!member) return;  // an empty optional is left out
      }
      if (!first) out += ',';
      first = false;
      out += '"';
      out += name;  // C++ identifiers never need escaping
      out += "\":";
      write(out, member, path.field(name));
    });
    out += '}';
  } else {
    static_assert(always_false<X>,
                  "json_serde: unsupported member type. Supported: std::string, bool, integer "
                  "types, float, double, std::optional<X>, std::vector<X>, "
                  "std::map<std::string, X> and structs described with "
                  "BOOST_HANA_DEFINE_STRUCT");
  }
}

/// The kind of a node of a parsed document. Non-negative integers are `unsigned_integer`,
/// negative ones `integer`, integers beyond 64 bits `floating` (as nlohmann reads them).
enum class node_kind : std::uint8_t { null, boolean, integer, unsigned_integer, floating, string, array, object, key };

/// One node of a parsed document. A value's descendants follow it: an array's elements in
/// order, an object's members as a `key` node followed by the member's value.
struct node {
  node_kind kind = node_kind::null;
  bool shadowed = false;   // key: the same key comes again later in its object (the last wins)
  std::uint32_t end = 0;   // index one past this node's last descendant
  std::uint32_t size = 0;  // array: its elements; object: its members (shadowed ones included)
  std::uint32_t hash = 0;  // key: a hash of `text`, to find repeated keys
  union {
    bool boolean;
    std::int64_t integer;
    std::uint64_t unsigned_integer;
    double floating;
  } scalar{};
  std::string text;  // string: the value; key: the member's name
};

/// A parsed JSON document: its nodes in document order, the root at index 0. Made by
/// parse_document; json_serde's per-type walk reads it (and moves its strings out).
struct document {
  std::vector<node> nodes;
};

/// `bytes` parsed, after the nesting check; serialization_error for empty or invalid JSON
/// (nlohmann's message). Out of line (framework/src/serde/json.cpp): nlohmann's parser is
/// compiled there once, and no public header includes nlohmann.
document parse_document(std::string_view bytes);

/// The number at `n` as JSON text, as nlohmann writes it (for error messages). Out of line.
std::string number_text(const node& n);

/// The member of the object at `object` named `name`: the index of its value, or 0 when it
/// has none. The search starts at `hint` (a key's index, or 0 for the first) and wraps
/// around; on success `hint` moves past the member, so members read in the order they
/// were written are found at the first comparison. Out of line.
std::uint32_t find_member(const document& doc, std::uint32_t object, std::string_view name, std::uint32_t& hint);

/// nlohmann's name of a node's JSON type ("object", "number", ...), for error messages.
const char* type_name(node_kind kind);

[[noreturn]] inline void fail_type(const node& n, const char* expected, const field_path& path) {
  path.fail(std::string("expected ") + expected + ", got " + type_name(n.kind));
}

inline bool is_number(node_kind k) {
  return k == node_kind::integer || k == node_kind::unsigned_integer || k == node_kind::floating;
}

template <class I>
I read_integer(const node& n, const field_path& path) {
  using limits = std::numeric_limits<I>;
  auto out_of_range = [&](const std::string& text) {
    path.fail("integer " + text + " out of range for " + integer_name<I>());
  };
  if (n.kind == node_kind::unsigned_integer) {
    const std::uint64_t u = n.scalar.unsigned_integer;
    if (u > static_cast<std::uint64_t>(limits::max())) out_of_range(std::to_string(u));
    return static_cast<I>(u);
  }
  if (n.kind == node_kind::integer) {  // negative: non-negatives are unsigned_integer
    const std::int64_t s = n.scalar.integer;
    if (s < static_cast<std::int64_t>(limits::min()) ||
        (s > 0 && static_cast<std::uint64_t>(s) > static_cast<std::uint64_t>(limits::max())))
      out_of_range(std::to_string(s));
    return static_cast<I>(s);
  }
  if (n.kind == node_kind::floating) {
    const double d = n.scalar.floating;
    // Integers beyond 64 bits are read as floating point.
    if (std::isfinite(d) && std::trunc(d) == d) out_of_range(number_text(n));
    path.fail("expected integer, got number " + number_text(n));
  }
  fail_type(n, "integer", path);
}

inline double number_value(const node& n) {
  switch (n.kind) {
    case node_kind::integer: return static_cast<double>(n.scalar.integer);
    case node_kind::unsigned_integer: return static_cast<double>(n.scalar.unsigned_integer);
    default: return n.scalar.floating;
  }
}

/// Decodes the value at index `at` of `doc` into `out`.
template <class X>
void read(document& doc, std::uint32_t at, X& out, const field_path& path) {
  node& n = doc.nodes[at];
  if constexpr (std::is_same_v<X, bool>) {
    if (n.kind != node_kind::boolean) fail_type(n, "boolean", path);
    out = n.scalar.boolean;
  } else if constexpr (is_integer<X>) {
    out = read_integer<X>(n, path);
  } else if constexpr (is_json_float<X>) {
    if (!is_number(n.kind)) fail_type(n, "number", path);
    const double d = number_value(n);
    if (!std::isfinite(d) || (std::is_same_v<X, float> && std::fabs(d) > std::numeric_limits<float>::max()))
      path.fail("number " + number_text(n) + " out of range for " + (std::is_same_v<X, float> ? "float" : "double"));
    out = static_cast<X>(d);
  } else if constexpr (std::is_same_v<X, std::string>) {
    if (n.kind != node_kind::string) fail_type(n, "string", path);
    out = std::move(n.text);
  } else if constexpr (is_optional<X>) {
    if (n.kind == node_kind::null) {
      out.reset();
    } else {
      out.emplace();
      read(doc, at, *out, path);
    }
  } else if constexpr (is_vector<X>) {
    if (n.kind != node_kind::array) fail_type(n, "array", path);
    out.clear();
    out.reserve(n.size);
    const std::uint32_t end = n.end;
    std::size_t i = 0;
    for (std::uint32_t e = at + 1; e < end; e = doc.nodes[e].end) {
      typename X::value_type item{};
      read(doc, e, item, path.index(i++));
      out.push_back(std::move(item));
    }
  } else if constexpr (is_string_map<X>) {
    if (n.kind != node_kind::object) fail_type(n, "object", path);
    out.clear();
    const std::uint32_t end = n.end;
    for (std::uint32_t k = at + 1; k < end; k = doc.nodes[k + 1].end) {
      if (doc.nodes[k].shadowed) continue;
      typename X::mapped_type item{};
      read(doc, k + 1, item, path.key(doc.nodes[k].text));
      out.emplace(std::move(doc.nodes[k].text), std::move(item));
    }
  } else if constexpr (described_struct<X>) {
    if (n.kind != node_kind::object) fail_type(n, "object", path);
    std::uint32_t hint = 0;
    for_each_field(out, [&](const char* name, auto& member) {
      using M = std::remove_cvref_t<decltype(member)>;
      const std::uint32_t value = find_member(doc, at, name, hint);
      if (value == 0) {
        if constexpr (is_optional<M>) {
          member.reset();
          return;
        } else {
          const field_path missing = path.field(name);
          throw serialization_error("missing field '" + missing.str() + "'");
        }
      }
      read(doc, value, member, path.field(name));
    });
  } else {
    static_assert(always_false<X>, "json_serde: unsupported member type (see json.hpp)");
  }
}

}  // namespace serde_detail::json

/// JSON serde for T: a struct described with BOOST_HANA_DEFINE_STRUCT, or any type the
/// mapping above supports (std::vector<X>, std::map<std::string, X>, ...). Stateless and
/// thread-safe. T must be default-constructible; deserialize fills a T{} member by member.
template <class T>
class json_serde {
 public:
  using value_type = T;

  /// Clears `out` and writes `value` as compact JSON. Throws serialization_error for a
  /// string that is not UTF-8 or a non-finite float, naming the field.
  static void serialize(const T& value, std::string& out) {
    out.clear();
    serde_detail::json::write(out, value, serde_detail::field_path{});
  }

  /// Parses `bytes` as JSON and decodes it as T. Throws serialization_error for invalid
  /// JSON (including empty input and trailing garbage), for JSON nested deeper than
  /// max_json_nesting and for JSON that does not fit T.
  static T deserialize(std::string_view bytes) {
    serde_detail::json::document doc = serde_detail::json::parse_document(bytes);
    T value{};
    serde_detail::json::read(doc, 0, value, serde_detail::field_path{});
    return value;
  }
};

}  // namespace sluice
