// The instance HTTP server against real sockets on 127.0.0.1 (no broker): limits on headers,
// bodies, connections and time, the auth token, and handler failures.
#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include "http/server.hpp"
#include "eventually.hpp"
#include "http_client.hpp"

using namespace std::chrono_literals;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

/// A router with /echo/{word} and /boom, served with small limits.
struct served {
  explicit served(sluice::http::server_options o = {}) : server(adjust(std::move(o)), routes, metrics) {}
  static sluice::http::server_options adjust(sluice::http::server_options o) {
    o.port = 0;
    return o;
  }
  void start() {
    routes.add("/echo/{word}", [](const sluice::http::request& r) {
      return sluice::http::response::json(200, "{\"word\": \"" + std::string(r.path_param("word")) + "\"}");
    });
    routes.add("/health", [](const sluice::http::request&) { return sluice::http::response::json(200, "{}"); });
    routes.add("/boom", [](const sluice::http::request&) -> sluice::http::response {
      throw std::runtime_error("the handler failed");
    });
    server.start();
  }
  std::uint16_t port() const { return server.port(); }
  double metric(const std::string& name) const { return metrics.total(name); }

  sluice::metrics_registry metrics;
  sluice::http::router routes;
  sluice::http::server server;
};

struct raw_connection {
  explicit raw_connection(std::uint16_t port) : socket(ioc) {
    socket.connect({asio::ip::make_address("127.0.0.1"), port});
  }
  /// Sends `bytes`; the server may close the connection before all of them are written.
  void send(const std::string& bytes) {
    boost::system::error_code ignored;
    asio::write(socket, asio::buffer(bytes), ignored);
  }
  /// Everything the server sends until it closes the connection.
  std::string read_until_closed() {
    std::string out;
    char buf[4096];
    for (;;) {
      boost::system::error_code ec;
      auto n = socket.read_some(asio::buffer(buf), ec);
      out.append(buf, n);
      if (ec) return out;
    }
  }
  asio::io_context ioc;
  tcp::socket socket;
};

/// Waits (up to 10 s) for the server's I/O thread to count what the client already saw.
double await_metric(const served& s, const std::string& name, double expected) {
  for (int i = 0; i < 1000 && s.metric(name) != expected; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return s.metric(name);
}

int status_of(const std::string& raw) {
  if (raw.size() < 12 || !raw.starts_with("HTTP/1.1 ")) return 0;
  return std::stoi(raw.substr(9, 3));
}

}  // namespace

TEST(http_server, routes_answer_and_unknown_paths_and_methods_are_refused) {
  served s;
  s.start();
  auto ok = sluice::test::http_get(s.port(), "/echo/h%C3%A9llo");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "{\"word\": \"h\xC3\xA9llo\"}");
  EXPECT_EQ(ok.header("Content-Type"), "application/json");
  EXPECT_EQ(sluice::test::http_get(s.port(), "/nothing").status, 404);
  EXPECT_EQ(sluice::test::http_get(s.port(), "/echo/a%2").status, 400);
  raw_connection post(s.port());
  post.send("POST /echo/x HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
  auto answer = post.read_until_closed();
  EXPECT_EQ(status_of(answer), 405) << answer;
  EXPECT_NE(answer.find("Allow: GET"), std::string::npos) << answer;
  // A reply to HEAD has no body: a body would be read as the start of the next reply on a
  // kept-alive connection. HEAD then GET on one connection: two replies, nothing between.
  raw_connection head(s.port());
  head.send("HEAD /echo/x HTTP/1.1\r\nHost: x\r\n\r\nGET /echo/y HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const auto both = head.read_until_closed();
  EXPECT_EQ(status_of(both), 405) << both;
  const auto second = both.find("HTTP/1.1 ", 1);
  ASSERT_NE(second, std::string::npos) << both;
  EXPECT_TRUE(both.substr(0, second).ends_with("\r\n\r\n")) << both;
  EXPECT_EQ(status_of(both.substr(second)), 200) << both;
  EXPECT_TRUE(both.ends_with("{\"word\": \"y\"}")) << both;
}

TEST(http_server, a_handler_that_throws_answers_500_with_its_message_and_the_server_goes_on) {
  served s;
  s.start();
  auto r = sluice::test::http_get(s.port(), "/boom");
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body, "{\"error\": \"the handler failed\"}");
  EXPECT_EQ(sluice::test::http_get(s.port(), "/echo/x").status, 200);
}

TEST(http_server, oversized_headers_get_431_and_a_100_mb_body_gets_413_without_being_read) {
  served s;
  s.start();
  raw_connection big_header(s.port());
  big_header.send("GET /echo/x HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n");
  EXPECT_EQ(status_of(big_header.read_until_closed()), 431);

  raw_connection big_body(s.port());
  big_body.send("GET /echo/x HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\n\r\n" + std::string(65536, 'b'));
  auto answer = big_body.read_until_closed();
  EXPECT_EQ(status_of(answer), 413) << answer;
  EXPECT_NE(answer.find("request body exceeds 4096 bytes"), std::string::npos) << answer;
  EXPECT_EQ(sluice::test::http_get(s.port(), "/echo/x").status, 200);
}

TEST(http_server, a_request_that_never_completes_is_closed_after_the_request_timeout) {
  served s({.request_timeout = 300ms});
  s.start();
  raw_connection slow(s.port());
  slow.send("GET /echo/x HTTP/1.1\r\nHost: x\r\n");  // and never the blank line
  EXPECT_EQ(slow.read_until_closed(), "");           // returns only because the server closed it
  EXPECT_EQ(await_metric(s, "sluice_http_requests_timed_out_total", 1), 1);
  raw_connection idle(s.port());  // an idle connection is closed too
  EXPECT_EQ(idle.read_until_closed(), "");
  EXPECT_EQ(await_metric(s, "sluice_http_requests_timed_out_total", 2), 2);
  EXPECT_EQ(sluice::test::http_get(s.port(), "/echo/x").status, 200);
}

TEST(http_server, connections_beyond_the_limit_are_closed_on_accept_and_served_again_once_others_leave) {
  served s({.max_connections = 8});
  s.start();
  std::vector<std::unique_ptr<raw_connection>> idle;
  for (int i = 0; i < 8; ++i) idle.push_back(std::make_unique<raw_connection>(s.port()));
  // A request on each proves all 8 are accepted and served (and keeps them open: keep-alive).
  for (auto& c : idle) {
    c->send("GET /echo/x HTTP/1.1\r\nHost: x\r\n\r\n");
    char buf[512];
    auto n = c->socket.read_some(asio::buffer(buf));
    EXPECT_EQ(status_of(std::string(buf, n)), 200);
  }
  raw_connection ninth(s.port());
  ninth.send("GET /echo/x HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(ninth.read_until_closed(), "");
  EXPECT_EQ(await_metric(s, "sluice_http_connections_refused_total", 1), 1);
  for (auto& c : idle) c->socket.close();
  idle.clear();
  // The server notices the closes on its I/O thread; a fresh connection is served once it has.
  EXPECT_TRUE(sluice::test::eventually([&] { return sluice::test::http_status_or_zero(s.port(), "/echo/x") == 200; }));
}

TEST(http_server, a_thousand_idle_connections_do_not_keep_requests_from_being_served) {
  served s({.max_connections = 1100});
  s.start();
  std::vector<std::unique_ptr<raw_connection>> idle;
  for (int i = 0; i < 1000; ++i) idle.push_back(std::make_unique<raw_connection>(s.port()));
  // Half-sent requests on some of them: the server waits for those without a thread each.
  for (int i = 0; i < 1000; i += 2) idle[static_cast<std::size_t>(i)]->send("GET /echo/x HTTP/1.1\r\nHo");
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sluice::test::http_get(s.port(), "/echo/y").status, 200);
  EXPECT_EQ(s.metric("sluice_http_connections_refused_total"), 0);
}

TEST(http_server, the_auth_token_guards_every_path_but_health) {
  served s({.auth_token = "s3cret"});
  s.start();
  auto none = sluice::test::http_get(s.port(), "/echo/x");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.header("WWW-Authenticate"), "Bearer");
  EXPECT_EQ(sluice::test::http_get(s.port(), "/echo/x", {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(sluice::test::http_get(s.port(), "/nothing").status, 401) << "unknown paths reveal nothing either";
  EXPECT_EQ(sluice::test::http_get(s.port(), "/echo/x", {{"Authorization", "Bearer s3cret"}}).status, 200);
  EXPECT_EQ(sluice::test::http_get(s.port(), "/health").status, 200);
}
