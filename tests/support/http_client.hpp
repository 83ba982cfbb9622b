// A small blocking HTTP client for tests of the instance server (Boost.Beast), plus a free
// loopback port for application.server.
#pragma once

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace sluice::test {

struct http_reply {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

/// GET http://127.0.0.1:<port><target> on a new connection, with extra headers.
inline http_reply http_get(std::uint16_t port, const std::string& target,
                           const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  namespace asio = boost::asio;
  namespace bhttp = boost::beast::http;
  asio::io_context ioc;
  asio::ip::tcp::socket socket(ioc);
  socket.connect({asio::ip::make_address("127.0.0.1"), port});
  bhttp::request<bhttp::empty_body> req(bhttp::verb::get, target, 11);
  req.set(bhttp::field::host, "127.0.0.1");
  for (const auto& [n, v] : headers) req.set(n, v);
  bhttp::write(socket, req);
  boost::beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(256u << 20);
  bhttp::read(socket, buffer, parser);
  http_reply out;
  out.status = static_cast<int>(parser.get().result_int());
  out.body = parser.get().body();
  for (const auto& f : parser.get()) out.headers[std::string(f.name_string())] = std::string(f.value());
  return out;
}

/// The status of GET `target` on `port`, or 0 when nothing answers there (not listening yet,
/// or no longer: a server starting, or a process that died).
inline int http_status_or_zero(std::uint16_t port, const std::string& target) {
  try {
    return http_get(port, target).status;
  } catch (const std::exception&) {
    return 0;
  }
}

/// A port on 127.0.0.1 that was free a moment ago (the kernel picks it).
inline std::uint16_t free_port() {
  namespace asio = boost::asio;
  asio::io_context ioc;
  asio::ip::tcp::acceptor a(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  return a.local_endpoint().port();
}

}  // namespace sluice::test
