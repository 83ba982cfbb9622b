// parse_fields: the two optional top-level fields of a record value (`ttl_ms`,
// `deliver_at_ms`), read while the whole value is validated as JSON, on the direct path of
// every record. A hand-written scanner in one pass, with no allocation for an ordinary value:
// nlohmann's SAX parser builds a std::string per key and string value and cost about 15 % of
// the direct path's CPU (bench/README.md, "Overflow buffer").
//
// It accepts exactly what nlohmann::json (3.11, strict) accepts, and reports the same error at
// the same point: RFC 8259 grammar; strings validated as UTF-8 (no overlong forms, no encoded
// surrogates, nothing above U+10FFFF), escapes checked (\u surrogate pairs complete); a UTF-8
// BOM skipped at the start; a number whose value overflows a double refused as malformed
// wherever it is; keys compared after unescaping. Nesting is kept on a heap stack, never
// the C++ stack, so any depth would be safe here; but the value goes on to the output topic
// and to whoever reads it next, so it is refused past sluice's JSON nesting limit
// (max_json_nesting, as json_serde), unlike nlohmann, which takes any depth.
// tests/driver/overflow_buffer_driver_test.cpp checks it against nlohmann's SAX parser on randomized values.
#include <cmath>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sluice/error.hpp"
#include "sluice/serde/json.hpp"
#include "sluice/topologies/overflow_buffer.hpp"

namespace sluice::topologies::overflow_detail {
namespace {

class field_scanner {
 public:
  explicit field_scanner(std::string_view in) : begin_(in.data()), p_(in.data()), end_(in.data() + in.size()) {}

  parsed_fields scan() {
    if (p_ < end_ && static_cast<unsigned char>(*p_) == 0xEF) {  // a UTF-8 byte order mark
      if (end_ - p_ < 3 || static_cast<unsigned char>(p_[1]) != 0xBB || static_cast<unsigned char>(p_[2]) != 0xBF)
        malformed();
      p_ += 3;
    }
    skip_ws();
    if (p_ >= end_ || *p_ != '{') malformed();  // whatever follows, the root is not an object
    ++p_;
    nest_.push_back('{');
    bool first = true;  // no member or element read yet in the innermost container
    for (;;) {
      skip_ws();
      field pending = field::none;
      if (nest_.back() == '{') {
        if (first && p_ < end_ && *p_ == '}') {
          ++p_;
          if (close_container()) return fields_;
          first = false;
          continue;
        }
        if (p_ >= end_ || *p_ != '"') malformed();
        const bool top_level = nest_.size() == 1;
        const char* key_begin = p_ + 1;
        bool escaped = false;
        scan_string(escaped);
        if (top_level)
          pending = classify(std::string_view(key_begin, static_cast<std::size_t>(p_ - 1 - key_begin)), escaped);
        skip_ws();
        if (p_ >= end_ || *p_ != ':') malformed();
        ++p_;
        skip_ws();
      } else if (first && p_ < end_ && *p_ == ']') {
        ++p_;
        if (close_container()) return fields_;
        first = false;
        continue;
      }
      if (p_ >= end_) malformed();
      switch (*p_) {
        case '{':
        case '[':
          if (pending != field::none) wrong_type(pending, *p_ == '{' ? "object" : "array");
          if (nest_.size() == max_json_nesting) too_deep();
          nest_.push_back(*p_);
          ++p_;
          first = true;
          continue;
        case '"': {
          bool escaped = false;
          scan_string(escaped);
          if (pending != field::none) wrong_type(pending, "string");
          break;
        }
        case 't':
          literal("true");
          if (pending != field::none) wrong_type(pending, "boolean");
          break;
        case 'f':
          literal("false");
          if (pending != field::none) wrong_type(pending, "boolean");
          break;
        case 'n':
          literal("null");
          if (pending != field::none) (pending == field::ttl_ms ? fields_.ttl_ms : fields_.deliver_at_ms).reset();
          break;
        default: scan_number(pending); break;
      }
      if (close_values()) return fields_;
      first = false;
    }
  }

 private:
  enum class field { none, ttl_ms, deliver_at_ms };

  [[noreturn]] static void malformed() {
    throw error(errc::processing, "overflow buffer: the record value is not a JSON object");
  }
  [[noreturn]] void too_deep() const {
    throw error(errc::processing, "overflow buffer: the record value nests arrays and objects deeper than " +
                                      std::to_string(max_json_nesting) + " levels (" + std::to_string(end_ - begin_) +
                                      " bytes); sluice refuses such JSON, as no producer of real data nests that deep");
  }
  static const char* name(field f) noexcept { return f == field::ttl_ms ? "ttl_ms" : "deliver_at_ms"; }
  [[noreturn]] static void wrong_type(field f, const char* type) {
    throw error(errc::processing,
                std::string("overflow buffer: field '") + name(f) + "' must be a number (got " + type + ")");
  }

  void skip_ws() noexcept {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }

  /// After a value: the separators and closing brackets up to the next member or element.
  /// True when the root closed (and nothing but whitespace follows it).
  bool close_values() {
    for (;;) {
      skip_ws();
      if (p_ >= end_) malformed();
      if (*p_ == ',') {
        ++p_;
        return false;
      }
      if (*p_ != (nest_.back() == '{' ? '}' : ']')) malformed();
      ++p_;
      if (nest_.size() == 1) return close_container();
      nest_.pop_back();
    }
  }
  /// Pops the innermost container (its closing bracket read); true when it was the root. The
  /// root may be followed by whitespace only, or a NUL byte (nlohmann's end of input).
  bool close_container() {
    nest_.pop_back();
    if (!nest_.empty()) return close_values();
    skip_ws();
    if (p_ != end_ && *p_ != '\0') malformed();
    return true;
  }

  void literal(std::string_view word) {
    if (static_cast<std::size_t>(end_ - p_) < word.size() || std::memcmp(p_, word.data(), word.size()) != 0)
      malformed();
    p_ += word.size();
  }

  static int hex(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  /// Four hex digits after "\u" (p_ at the first); the code unit.
  unsigned code_unit() {
    if (end_ - p_ < 4) malformed();
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      const int h = hex(p_[i]);
      if (h < 0) malformed();
      v = (v << 4) | static_cast<unsigned>(h);
    }
    p_ += 4;
    return v;
  }
  static const unsigned char* bytes(const char* p) noexcept { return reinterpret_cast<const unsigned char*>(p); }

  /// A string at p_ (the opening quote), validated; p_ ends after the closing quote.
  /// `escaped` tells whether it held any escape.
  void scan_string(bool& escaped) {
    ++p_;
    for (;;) {
      // Plain ASCII is skipped 16 bytes at a time, up to the first byte that may matter.
      p_ = reinterpret_cast<const char*>(serde_detail::json::skip_plain_string_bytes(bytes(p_), bytes(end_)));
      if (p_ >= end_) malformed();
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return;
      }
      if (c < 0x20) malformed();
      if (c == '\\') {
        escaped = true;
        if (++p_ >= end_) malformed();
        const char e = *p_++;
        if (e == 'u') {
          const unsigned u = code_unit();
          if (u >= 0xDC00 && u <= 0xDFFF) malformed();  // a low surrogate alone
          if (u >= 0xD800 && u <= 0xDBFF) {             // a high one needs its low one
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') malformed();
            p_ += 2;
            const unsigned low = code_unit();
            if (low < 0xDC00 || low > 0xDFFF) malformed();
          }
        } else if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r' && e != 't') {
          malformed();
        }
        continue;
      }
      // UTF-8 (the rest stops the skip): as every JSON path of sluice checks it (serde_detail::json).
      const std::size_t n = serde_detail::json::utf8_sequence_length(bytes(p_), bytes(end_));
      if (n == 0) malformed();
      p_ += n;
    }
  }

  /// Which field a top-level key (its raw text between the quotes, already validated) names.
  static field classify(std::string_view raw, bool escaped) {
    if (!escaped) return raw == "ttl_ms" ? field::ttl_ms : raw == "deliver_at_ms" ? field::deliver_at_ms : field::none;
    // Unescape: the two names are ASCII, so any other code point means neither.
    char decoded[16];
    std::size_t n = 0;
    for (std::size_t i = 0; i < raw.size(); ++i) {
      char c = raw[i];
      if (c == '\\') {
        const char e = raw[++i];
        if (e == 'u') {
          unsigned v = 0;
          for (int k = 1; k <= 4; ++k) v = (v << 4) | static_cast<unsigned>(hex(raw[i + static_cast<std::size_t>(k)]));
          i += 4;
          if (v >= 0x80) return field::none;
          c = static_cast<char>(v);
        } else {
          c = e == 'b' ? '\b' : e == 'f' ? '\f' : e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e;
        }
      }
      if (n == sizeof decoded) return field::none;
      decoded[n++] = c;
    }
    return classify(std::string_view(decoded, n), false);
  }

  /// A number at p_, per the JSON grammar; for a pending field, its value range-checked and stored.
  void scan_number(field pending) {
    const char* begin = p_;
    bool negative = false, integral = true, exponent = false;
    if (*p_ == '-') {
      negative = true;
      ++p_;
    }
    if (p_ >= end_) malformed();
    if (*p_ == '0') {
      ++p_;
    } else if (*p_ >= '1' && *p_ <= '9') {
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    } else {
      malformed();
    }
    if (p_ < end_ && *p_ == '.') {
      integral = false;
      ++p_;
      if (p_ >= end_ || *p_ < '0' || *p_ > '9') malformed();
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      integral = false;
      exponent = true;
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ >= end_ || *p_ < '0' || *p_ > '9') malformed();
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    const std::string_view text(begin, static_cast<std::size_t>(p_ - begin));
    // Only a float's value can overflow (an integer too long for 64 bits becomes one): it
    // needs an exponent or more than 300 digits, so ordinary numbers skip the conversion.
    if (pending == field::none && !exponent && text.size() <= 300) return;
    std::string buffer(text);  // strtod and strtoll need a terminated string
    if (integral) {
      errno = 0;
      if (negative) {
        const long long v = std::strtoll(buffer.c_str(), nullptr, 10);
        if (errno == 0) return store_integer(pending, static_cast<double>(v), v, std::to_string(v));
      } else {
        const unsigned long long v = std::strtoull(buffer.c_str(), nullptr, 10);
        if (errno == 0)
          return store_integer(pending, static_cast<double>(v),
                               v > 9'200'000'000'000'000'000ULL ? -1 : static_cast<std::int64_t>(v), std::to_string(v));
      }
    }
    const double d = std::strtod(buffer.c_str(), nullptr);
    if (!std::isfinite(d)) malformed();  // a number that overflows a double is malformed anywhere
    if (pending == field::none) return;
    check_range(pending, d, buffer);
    store(pending, static_cast<std::int64_t>(d));
  }

  void store_integer(field pending, double d, std::int64_t v, const std::string& text) {
    if (pending == field::none) return;
    check_range(pending, d, text);
    store(pending, v);
  }
  static void check_range(field f, double d, const std::string& text) {
    if (!std::isfinite(d) || d < 0 || d > 9.2e15)
      throw error(errc::processing, std::string("overflow buffer: field '") + name(f) + "' is out of range (" + text +
                                        "); use milliseconds >= 0");
  }
  void store(field f, std::int64_t v) { (f == field::ttl_ms ? fields_.ttl_ms : fields_.deliver_at_ms) = v; }

  const char* begin_;
  const char* p_;
  const char* end_;
  std::string nest_;  ///< open containers, '{' or '[' (the heap, whatever the depth)
  parsed_fields fields_;
};

}  // namespace

parsed_fields parse_fields(const bytes& value) {
  if (!value)
    throw error(errc::processing, "overflow buffer: the record has a null value; values must be JSON objects");
  return field_scanner(*value).scan();
}

}  // namespace sluice::topologies::overflow_detail
