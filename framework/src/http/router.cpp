// Route matching and percent-decoding for the instance HTTP server.
#include "http/router.hpp"

#include <algorithm>

#include "sluice/error.hpp"

namespace sluice::http {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// Splits "/a/b/c" into {"a", "b", "c"}; "/" gives {}. A trailing '/' gives a last empty segment.
std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> out;
  if (path.empty() || path == "/") return out;
  std::size_t start = path.front() == '/' ? 1 : 0;
  for (;;) {
    auto slash = path.find('/', start);
    if (slash == std::string_view::npos) {
      out.push_back(path.substr(start));
      return out;
    }
    out.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
}

}  // namespace

std::optional<std::string> percent_decode(std::string_view s, plus_decoding plus) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus == plus_decoding::as_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::optional<request::params> parse_query(std::string_view query) {
  request::params out;
  while (!query.empty()) {
    auto amp = query.find('&');
    auto pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (pair.empty()) continue;
    auto eq = pair.find('=');
    auto name = percent_decode(pair.substr(0, eq), plus_decoding::as_space);
    auto value = percent_decode(eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1),
                                plus_decoding::as_space);
    if (!name || !value) return std::nullopt;
    out.emplace_back(std::move(*name), std::move(*value));
  }
  return out;
}

void router::add(std::string pattern, handler fn) {
  auto refuse = [&](const std::string& why) {
    throw error(errc::invalid_config, "HTTP route '" + pattern + "' " + why);
  };
  if (pattern.empty() || pattern.front() != '/') refuse("must start with '/'");
  if (!fn) refuse("has no handler");
  entry e;
  e.pattern = pattern;
  for (auto seg : split_path(pattern)) {
    if (seg.empty()) refuse("has an empty segment ('//' or a trailing '/')");
    if (seg.front() == '{') {
      if (seg.size() < 3 || seg.back() != '}' ||
          seg.substr(1, seg.size() - 2).find_first_of("{}") != std::string_view::npos)
        refuse("has a malformed placeholder '" + std::string(seg) + "'; write {name}");
      e.segments.push_back({std::string(seg.substr(1, seg.size() - 2)), true});
    } else {
      if (seg.find_first_of("{}") != std::string_view::npos)
        refuse("has a placeholder that is not a whole segment ('" + std::string(seg) + "')");
      e.segments.push_back({std::string(seg), false});
    }
  }
  for (const auto& r : routes_) {
    bool same = r.segments.size() == e.segments.size();
    for (std::size_t i = 0; same && i < r.segments.size(); ++i)
      same = r.segments[i].placeholder == e.segments[i].placeholder &&
             (r.segments[i].placeholder || r.segments[i].text == e.segments[i].text);
    if (same) refuse("is already served by '" + r.pattern + "'; choose another path");
  }
  e.fn = std::move(fn);
  routes_.push_back(std::move(e));
}

std::optional<router::match> router::find(std::string_view path, miss* why) const {
  if (why) *why = miss::not_found;
  auto raw = split_path(path);
  std::vector<std::string> decoded;
  decoded.reserve(raw.size());
  for (auto seg : raw) {
    auto d = percent_decode(seg, plus_decoding::keep);
    if (!d) {
      if (why) *why = miss::bad_encoding;
      return std::nullopt;
    }
    decoded.push_back(std::move(*d));
  }
  const entry* best = nullptr;
  int best_literals = -1;
  for (const auto& r : routes_) {
    if (r.segments.size() != decoded.size()) continue;
    int literals = 0;
    bool ok = true;
    for (std::size_t i = 0; ok && i < decoded.size(); ++i) {
      if (r.segments[i].placeholder)
        ok = !decoded[i].empty();
      else
        ok = r.segments[i].text == decoded[i], literals += ok;
    }
    // More literal segments, earlier: "/metadata/stores" beats "/metadata/{x}".
    if (ok && literals > best_literals) best = &r, best_literals = literals;
  }
  if (!best) return std::nullopt;
  match m;
  m.fn = &best->fn;
  for (std::size_t i = 0; i < decoded.size(); ++i)
    if (best->segments[i].placeholder) m.path_params.emplace_back(best->segments[i].text, decoded[i]);
  m.path = "/";
  for (std::size_t i = 0; i < decoded.size(); ++i) m.path += (i ? "/" : "") + decoded[i];
  return m;
}

}  // namespace sluice::http
