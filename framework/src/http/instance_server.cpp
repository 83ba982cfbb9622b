// The built-in endpoints of an instance (/metrics, /health, /ready, /topology) and the
// configuration of its HTTP server.
#include "http/instance_server.hpp"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <vector>
#include <sstream>

#include "sluice/error.hpp"

namespace sluice::http {
namespace {

/// `, "reason": "…"` for a state that has one (error: the first fatal error; degraded: what
/// the degraded threads ride out), else nothing.
std::string reason_field(const app::status_snapshot& s) {
  if (s.state != app_state::error && s.state != app_state::degraded) return {};
  return ", \"reason\": \"" + json_escape(s.reason) + "\"";
}

/// The current restore of the threads restoring now (gauges per thread, see
/// runtime/changelog_reader.hpp); when none is, the last restore of each thread.
std::string restore_json(app& a) {
  struct figures {
    std::int64_t done = 0, total = 0, remaining = 0;
  };
  std::map<std::string, figures> by_thread;
  for (const auto& s : a.metrics().snapshot()) {
    const auto v = static_cast<std::int64_t>(s.value);
    if (s.name == "sluice_restore_done_records")
      by_thread[s.labels].done = v;
    else if (s.name == "sluice_restore_total_records")
      by_thread[s.labels].total = v;
    else if (s.name == "sluice_restore_remaining_records")
      by_thread[s.labels].remaining = v;
  }
  const bool any_restoring =
      std::any_of(by_thread.begin(), by_thread.end(), [](auto& t) { return t.second.remaining > 0; });
  figures sum;
  for (const auto& [labels, f] : by_thread) {
    if (any_restoring && f.remaining == 0) continue;
    sum.done += f.done;
    sum.total += f.total;
  }
  return "{\"done\": " + std::to_string(sum.done) + ", \"total\": " + std::to_string(sum.total) + "}";
}

}  // namespace

host_port parse_application_server(const std::string& value) {
  auto refuse = [&] {
    throw error(errc::invalid_config, "configuration key 'application.server' has value '" + value +
                                          "'; allowed: host:port, the address other instances and clients use to "
                                          "reach this one (e.g. job-0.job:8080)");
  };
  auto colon = value.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == value.size()) refuse();
  host_port out;
  out.host = value.substr(0, colon);
  if (out.host.front() == '[' && out.host.back() == ']') out.host = out.host.substr(1, out.host.size() - 2);
  unsigned port = 0;
  auto digits = std::string_view(value).substr(colon + 1);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (ec != std::errc{} || end != digits.data() + digits.size() || port == 0 || port > 65535) refuse();
  out.port = static_cast<std::uint16_t>(port);
  return out;
}

server_options options_from_config(const config& cfg) {
  server_options o;
  auto server = cfg.get("application.server");
  if (server && !server->empty()) o.port = parse_application_server(*server).port;
  o.bind_address = cfg.get("http.bind.address").value_or("127.0.0.1");
  o.auth_token = cfg.get("http.auth.token").value_or("");
  o.max_connections = static_cast<std::size_t>(cfg.get_int("http.max.connections", 1, 100000));
  o.request_timeout = cfg.get_ms("http.request.timeout.ms");
  if (o.request_timeout.count() <= 0)
    throw error(errc::invalid_config,
                "configuration key 'http.request.timeout.ms' has value '0'; allowed: 1 or more milliseconds");
  return o;
}

std::string process_metrics_text() {
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help, double value) {
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
           std::string(buf, ec == std::errc{} ? end : buf) + "\n";
  };
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces) start at field 3.
  if (auto close = stat.rfind(')'); close != std::string::npos) {
    std::istringstream fields(stat.substr(close + 2));
    std::vector<std::string> f{std::istream_iterator<std::string>(fields), std::istream_iterator<std::string>()};
    auto field = [&](std::size_t n) { return n - 3 < f.size() ? std::stod(f[n - 3]) : 0.0; };  // 1-based, man 5 proc
    family("process_cpu_seconds_total", "counter", "User and system CPU time spent, seconds.",
           (field(14) + field(15)) / ticks);
    family("process_virtual_memory_bytes", "gauge", "Virtual memory size, bytes.", field(23));
    family("process_resident_memory_bytes", "gauge", "Resident memory size, bytes.", field(24) * page);
    family("process_threads", "gauge", "Threads of the process.", field(20));
    std::ifstream boot("/proc/stat");
    std::string word;
    double btime = 0;
    while (boot >> word)
      if (word == "btime") {
        boot >> btime;
        break;
      }
    family("process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch, seconds.",
           btime + field(22) / ticks);
  }
  if (DIR* fds = opendir("/proc/self/fd")) {
    double count = 0;
    while (auto* e = readdir(fds))
      if (e->d_name[0] != '.') ++count;
    closedir(fds);
    family("process_open_fds", "gauge", "Open file descriptors.", count - 1);  // minus the one reading the folder
    family("process_max_fds", "gauge", "Limit of open file descriptors.", static_cast<double>(sysconf(_SC_OPEN_MAX)));
  }
  return out;
}

std::unique_ptr<instance_server> instance_server::from_config(const config& cfg, app& owner,
                                                              runtime::app_queries& stores) {
  auto server = cfg.get("application.server");
  if (!server || server->empty()) return nullptr;
  return std::make_unique<instance_server>(options_from_config(cfg), *server, owner, stores);
}

instance_server::instance_server(server_options options, std::string application_server, app& owner,
                                 runtime::app_queries& stores)
    : app_(owner), stores_(stores), server_(options, routes_, owner.metrics(), &stores_) {
  add_builtin_endpoints();
  // One forwarding rule for the built-in store endpoints and the topology's own (through
  // store_access::forward).
  auto forwarding =
      std::make_shared<const owner_forwarding>(std::move(application_server), options.auth_token, directory_);
  stores_.set_forwarding([forwarding](const request& req, std::string_view store, std::int32_t partition) {
    return forwarding->forward(req, store, partition);
  });
  add_store_endpoints(routes_, stores_, app_.get_topology(), forwarding, globals_);
  // A topology's answers say which instance served them, as the store endpoints' do (a
  // forwarded answer keeps its owner's).
  for (const auto& r : app_.get_topology().endpoints())
    routes_.add(r.pattern, [forwarding, fn = r.fn](const request& req) { return forwarding->stamp(fn(req)); });
}

instance_server::~instance_server() { stores_.set_forwarding(nullptr); }

void instance_server::add_builtin_endpoints() {
  routes_.add("/metrics", [this](const request&) {
    response r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = app_.metrics().prometheus_text() + process_metrics_text();
    return r;
  });
  routes_.add("/health", [this](const request&) {
    const auto now = app_.status();
    if (now.state == app_state::error)
      return response::json(status::service_unavailable,
                            "{\"status\": \"error\", \"state\": \"error\"" + reason_field(now) + "}");
    // A guard: close() stops the server before the app is not_running, so no request sees it.
    if (now.state == app_state::not_running)
      return response::json(
          status::service_unavailable,
          "{\"status\": \"stopped\", \"state\": \"not_running\", \"reason\": \"the app was closed\"}");
    return response::json(status::ok, std::string("{\"status\": \"ok\", \"state\": \"") + to_string(now.state) + "\"" +
                                          reason_field(now) + "}");
  });
  routes_.add("/ready", [this](const request&) {
    const auto now = app_.status();
    std::string body = std::string("{\"state\": \"") + to_string(now.state) + "\", \"restore\": " + restore_json(app_);
    body += reason_field(now) + "}";
    return response::json(now.state == app_state::running ? status::ok : status::service_unavailable, std::move(body));
  });
  routes_.add("/topology", [this](const request& req) {
    auto format = req.query("format").value_or("text");
    response r;
    if (format == "text") {
      r.content_type = "text/plain; charset=utf-8";
      r.body = app_.get_topology().describe();
    } else if (format == "dot") {
      r.content_type = "text/vnd.graphviz; charset=utf-8";
      r.body = app_.get_topology().to_dot();
    } else {
      return response::error(status::bad_request,
                             "unknown format '" + std::string(format) + "'; allowed: text (the default) or dot");
    }
    return r;
  });
}

}  // namespace sluice::http
