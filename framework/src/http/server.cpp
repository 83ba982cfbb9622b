// The instance HTTP server on Boost.Beast: an asynchronous accept/read/write loop on one
// I/O thread, handlers on a thread pool, and the limits that keep hostile clients cheap.
#include "http/server.hpp"

#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>
#include <thread>

#include "sluice/error.hpp"

namespace sluice::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

bool is_unauthenticated_path(std::string_view path) noexcept { return path == "/health" || path == "/ready"; }

bool bearer_matches(std::string_view authorization, std::string_view token) noexcept {
  // The scheme's name is case-insensitive (RFC 7235); the token is compared exactly.
  constexpr std::string_view scheme = "bearer ";
  if (authorization.size() != scheme.size() + token.size()) return false;
  for (std::size_t i = 0; i < scheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != scheme[i]) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < token.size(); ++i)
    diff |= static_cast<unsigned char>(authorization[scheme.size() + i] ^ token[i]);
  return diff == 0;
}

struct server::impl {
  impl(server_options o, const router& r, metrics_registry& m, store_access* s)
      : opts(std::move(o)),
        routes(r),
        stores(s),
        metrics(m),
        refused(m.get_counter("sluice_http_connections_refused_total")),
        timed_out(m.get_counter("sluice_http_requests_timed_out_total")),
        open_gauge(m.get_gauge("sluice_http_open_connections")) {}

  void accept();
  void count_response(int status) {
    metrics.get_counter("sluice_http_responses_total", "code=\"" + std::to_string(status) + "\"").add();
  }

  // Declared before the Asio objects: sessions destroyed with the io_context still count down.
  server_options opts;
  const router& routes;
  store_access* stores;
  metrics_registry& metrics;
  counter& refused;
  counter& timed_out;
  gauge& open_gauge;
  std::atomic<std::int64_t> open{0};
  asio::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  asio::steady_timer accept_backoff{ioc};
  std::unique_ptr<asio::thread_pool> pool;
  std::thread io_thread;
  std::uint16_t bound_port = 0;
};

namespace {

std::string json_error(std::string_view message) { return "{\"error\": \"" + json_escape(message) + "\"}"; }

/// One connection: read a request, answer it, repeat while the client keeps it alive.
class session : public std::enable_shared_from_this<session> {
 public:
  session(tcp::socket socket, server::impl& srv)
      : stream_(std::move(socket)), buffer_(srv.opts.max_header_bytes + srv.opts.max_body_bytes + 1024), srv_(srv) {
    srv_.open_gauge.set(++srv_.open);
  }
  ~session() { srv_.open_gauge.set(--srv_.open); }

  void run() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read(); });
  }

 private:
  void read() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(srv_.opts.max_header_bytes));
    parser_->body_limit(srv_.opts.max_body_bytes);
    stream_.expires_after(srv_.opts.request_timeout);
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec == beast::error::timeout) {
      // A request that did not arrive whole in time, or an idle keep-alive connection.
      srv_.timed_out.add();
      return close();
    }
    if (ec == bhttp::error::header_limit)
      return reply_and_close(status::header_fields_too_large,
                             "request headers exceed " + std::to_string(srv_.opts.max_header_bytes) + " bytes");
    if (ec == bhttp::error::body_limit || ec == bhttp::error::buffer_overflow)
      return reply_and_close(status::payload_too_large, "request body exceeds " +
                                                            std::to_string(srv_.opts.max_body_bytes) +
                                                            " bytes; every endpoint is a GET without a body");
    if (ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == asio::error::operation_aborted)
      return close();
    if (ec) {
      if (parser_->got_some() || buffer_.size() > 0)
        return reply_and_close(status::bad_request, "malformed HTTP request: " + ec.message());
      return close();
    }
    handle(parser_->get());
  }

  void handle(const bhttp::request<bhttp::string_body>& req) {
    keep_alive_ = req.keep_alive();
    head_ = req.method() == bhttp::verb::head;
    if (req.method() != bhttp::verb::get) {
      response r = response::json(status::method_not_allowed, json_error("only GET is served"));
      r.headers.emplace_back("Allow", "GET");
      return write(std::move(r));
    }
    std::string_view target(req.target().data(), req.target().size());
    auto question = target.find('?');
    auto raw_path = target.substr(0, question);
    auto raw_query = question == std::string_view::npos ? std::string_view{} : target.substr(question + 1);
    if (!srv_.opts.auth_token.empty() && !is_unauthenticated_path(raw_path)) {
      auto auth = req[bhttp::field::authorization];
      if (!bearer_matches(std::string_view(auth.data(), auth.size()), srv_.opts.auth_token)) {
        response r =
            response::json(status::unauthorized,
                           json_error("this endpoint needs the header 'Authorization: Bearer <http.auth.token>'"));
        r.headers.emplace_back("WWW-Authenticate", "Bearer");
        return write(std::move(r));
      }
    }
    router::miss why{};
    auto match = srv_.routes.find(raw_path, &why);
    if (!match) {
      if (why == router::miss::bad_encoding)
        return write(response::json(status::bad_request, json_error("the path has a malformed %-escape")));
      return write(response::json(status::not_found, json_error("no endpoint at " + std::string(raw_path))));
    }
    auto query = parse_query(raw_query);
    if (!query)
      return write(response::json(status::bad_request, json_error("the query string has a malformed %-escape")));
    // The handler may wait (a store query waits for its stream thread): run it off the I/O thread.
    request::params headers;
    for (const auto& f : req) headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    asio::post(*srv_.pool, [self = shared_from_this(), m = std::move(*match), q = std::move(*query),
                            target = std::string(target), h = std::move(headers)]() mutable {
      response r;
      try {
        r = (*m.fn)(request(m.path, std::move(m.path_params), std::move(q), self->srv_.stores, target, std::move(h)));
      } catch (const std::exception& e) {
        r = response::json(status::internal_server_error, json_error(e.what()));
      } catch (...) {
        r = response::json(status::internal_server_error, json_error("the handler threw a non-standard exception"));
      }
      asio::post(self->stream_.get_executor(), [self, r = std::move(r)]() mutable { self->write(std::move(r)); });
    });
  }

  void reply_and_close(status code, const std::string& message) {
    keep_alive_ = false;
    write(response::json(code, json_error(message)));
  }

  void write(response r) {
    srv_.count_response(r.status);
    res_ = {};
    res_.version(11);
    res_.result(static_cast<unsigned>(r.status));
    res_.set(bhttp::field::server, "sluice");
    res_.set(bhttp::field::content_type, r.content_type);
    for (auto& [name, value] : r.headers) res_.set(name, value);
    res_.body() = std::move(r.body);
    res_.keep_alive(keep_alive_);
    res_.prepare_payload();
    if (head_) res_.body().clear();  // a reply to HEAD has no body (its Content-Length is GET's)
    stream_.expires_after(srv_.opts.write_timeout);
    bhttp::async_write(stream_, res_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec || !self->keep_alive_) return self->close();
      self->read();
    });
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bhttp::response<bhttp::string_body> res_;
  bool keep_alive_ = false;
  bool head_ = false;  ///< the request being answered is a HEAD
  server::impl& srv_;
};

}  // namespace

void server::impl::accept() {
  acceptor.async_accept(asio::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (!acceptor.is_open()) return;
    if (ec) {
      // Out of file descriptors or similar: back off instead of spinning on the error.
      spdlog::warn("http: accepting a connection failed: {}", ec.message());
      accept_backoff.expires_after(std::chrono::milliseconds(100));
      accept_backoff.async_wait([this](beast::error_code) { accept(); });
      return;
    }
    if (open.load() >= static_cast<std::int64_t>(opts.max_connections)) {
      refused.add();
      beast::error_code ignored;
      socket.close(ignored);
    } else {
      std::make_shared<session>(std::move(socket), *this)->run();
    }
    accept();
  });
}

server::server(server_options options, const router& routes, metrics_registry& metrics, store_access* stores)
    : impl_(std::make_unique<impl>(std::move(options), routes, metrics, stores)) {}

server::~server() { stop(); }

void server::start() {
  auto& d = *impl_;
  beast::error_code ec;
  auto address = asio::ip::make_address(d.opts.bind_address, ec);
  if (ec)
    throw error(errc::invalid_config, "configuration key 'http.bind.address' has value '" + d.opts.bind_address +
                                          "'; allowed: an IPv4 or IPv6 address such as 127.0.0.1 or 0.0.0.0");
  tcp::endpoint endpoint(address, d.opts.port);
  auto fail = [&](const char* step) {
    throw error(errc::invalid_config, std::string("the HTTP server cannot ") + step + " " + d.opts.bind_address + ":" +
                                          std::to_string(d.opts.port) + ": " + ec.message() +
                                          "; check application.server and http.bind.address");
  };
  d.acceptor.open(endpoint.protocol(), ec);
  if (ec) fail("open a socket for");
  d.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  d.acceptor.bind(endpoint, ec);
  if (ec) fail("bind");
  d.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) fail("listen on");
  d.bound_port = d.acceptor.local_endpoint().port();
  d.pool = std::make_unique<asio::thread_pool>(static_cast<std::size_t>(std::max(1, d.opts.handler_threads)));
  d.accept();
  d.io_thread = std::thread([&d] {
    try {
      d.ioc.run();
    } catch (const std::exception& e) {
      spdlog::error("http: the server's I/O thread stopped: {}", e.what());
    }
  });
  spdlog::info("http: serving on {}:{}", d.opts.bind_address, d.bound_port);
}

void server::stop() noexcept {
  auto& d = *impl_;
  if (!d.io_thread.joinable()) return;
  d.ioc.stop();
  d.io_thread.join();
  beast::error_code ignored;
  d.acceptor.close(ignored);
  // Handlers in flight finish; what they post back to the stopped io_context is dropped
  // with it, closing their connections.
  d.pool->join();
}

std::uint16_t server::port() const noexcept { return impl_->bound_port; }

}  // namespace sluice::http
