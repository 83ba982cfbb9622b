// Forwarding a GET to another instance with Boost.Beast.
#include "http/client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "http/instance_server.hpp"

namespace sluice::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

response forward_get(const std::string& application_server, const std::string& target,
                     const std::vector<std::pair<std::string, std::string>>& headers,
                     std::chrono::milliseconds timeout) {
  const auto where = parse_application_server(application_server);
  asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  beast::error_code failure;
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(64u << 20);
  beast::flat_buffer buffer;
  bhttp::request<bhttp::empty_body> req(bhttp::verb::get, target, 11);
  req.set(bhttp::field::host, application_server);
  for (const auto& [n, v] : headers) req.set(n, v);
  // Asynchronous calls run to completion here so that the deadline covers resolve,
  // connect, write and read together.
  stream.expires_after(timeout);
  asio::ip::tcp::resolver resolver(ioc);
  resolver.async_resolve(where.host, std::to_string(where.port), [&](beast::error_code ec, auto results) {
    if (ec) return void(failure = ec);
    stream.async_connect(results, [&](beast::error_code ec, auto) {
      if (ec) return void(failure = ec);
      bhttp::async_write(stream, req, [&](beast::error_code ec, std::size_t) {
        if (ec) return void(failure = ec);
        bhttp::async_read(stream, buffer, parser, [&](beast::error_code ec, std::size_t) { failure = ec; });
      });
    });
  });
  ioc.run_for(timeout + std::chrono::milliseconds(100));
  if (!parser.is_done() && !failure) failure = beast::error::timeout;
  if (failure) {
    const bool timed_out = failure == beast::error::timeout;
    auto r =
        response::error(timed_out ? status::gateway_timeout : status::bad_gateway,
                        "forwarding to the owning instance " + application_server + " failed: " + failure.message());
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  auto& res = parser.get();
  response out;
  out.status = static_cast<int>(res.result_int());
  out.body = std::move(res.body());
  out.content_type = std::string(res[bhttp::field::content_type]);
  for (const char* name : {served_by_header, "Retry-After"})
    if (auto it = res.find(name); it != res.end()) out.headers.emplace_back(name, std::string(it->value()));
  return out;
}

}  // namespace sluice::http
