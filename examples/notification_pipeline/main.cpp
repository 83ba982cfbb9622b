// sluice-notification-pipeline: two shipped processors composed into one job, the way a
// notification service would use them (seeds 000, 003, 004):
//
//   notifications ─► throttle (at most 3 per workflow and recipient per minute)
//                      ├─ throttled ─► notifications-throttled
//                      └─ passed ─► overflow buffer (per-customer rate from customer-rates)
//                                     ├─ emitted ─► push-out
//                                     └─ expired ─► notifications-expired
//
// With --demo N it runs on the embedded cluster: writes customer rates, feeds N
// notifications (some customers over their rate, some scheduled, a few expiring, a few
// repeating a workflow to a recipient), prints one progress line per second and checks the
// outcome against what it fed. Without --demo it runs until SIGTERM like any job.
//
//   sluice-notification-pipeline --demo 20000
//   sluice-notification-pipeline --set bootstrap.servers=host:9092  (create the topics first)
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "sluice/sluice.hpp"
#include "sluice/topologies/overflow_buffer.hpp"
#include "sluice/topologies/throttle.hpp"

using namespace std::chrono_literals;

namespace {

using bytes = std::optional<std::string>;

sluice::topology notification_topology() {
  sluice::streams_builder b;
  sluice::topologies::throttle_options t;
  t.window = 60s;
  t.limit = 3;
  t.key_fields = {"workflow", "recipient"};
  t.on_throttled = sluice::topologies::throttled_action::forward;
  auto throttled = sluice::topologies::apply_throttle(b, b.stream<bytes, bytes>("notifications"), t);
  throttled.throttled->to("notifications-throttled");
  sluice::topologies::overflow_buffer_options o;
  o.default_rate_per_second = 50;
  o.rates_topic = "customer-rates";
  auto out = sluice::topologies::apply_overflow_buffer(b, throttled.passed, o);
  out.emitted.to("push-out");
  out.expired->to("notifications-expired");
  return b.build();
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int run_demo(sluice::config cfg, long count) {
  sluice::topic_admin admin(cfg);
  for (const char* t : {"notifications", "notifications-throttled", "push-out", "notifications-expired"})
    admin.create_topic(t, 4);
  admin.create_topic("customer-rates", 1, sluice::cleanup_policy::compact);

  // 200 customers, all sending a burst at once: every tenth has rate 20/s from the rates
  // table, the others the default 50/s; what exceeds a customer's burst is buffered and
  // drained at its rate.
  constexpr int customers = 200;
  sluice::topic_writer writer(cfg);
  for (int c = 0; c < customers; c += 10)
    writer.send_raw("customer-rates", "customer-" + std::to_string(c), R"({"rate_per_second": 20})");
  writer.flush();

  long expected_throttled = 0, expected_expired = 0, scheduled = 0;
  const std::int64_t t0 = now_ms();
  std::map<std::string, int> per_pair;
  for (long i = 0; i < count; ++i) {
    const int c = static_cast<int>(i % 23 == 0 ? (i / 23) % customers : (i * 7) % customers);
    const std::string customer = "customer-" + std::to_string(c);
    // Every 50th notification repeats workflow "digest" to recipient r0 of its customer:
    // past 3 per minute the throttle stops them.
    const bool repeat = i % 50 == 0;
    const std::string workflow = repeat ? "digest" : "wf" + std::to_string(i % 5);
    const std::string recipient = repeat ? customer + "/r0" : "r" + std::to_string(i);
    std::string value = R"({"id":)" + std::to_string(i) + R"(,"workflow":")" + workflow + R"(","recipient":")" +
                        recipient + R"(","body":"hello")";
    const bool throttled = ++per_pair[workflow + "," + recipient] > 3;
    if (throttled) ++expected_throttled;
    if (i % 97 == 0) {
      value += R"(,"ttl_ms":1)";  // expires on arrival
      if (!throttled) ++expected_expired;
    } else if (i % 31 == 0) {
      value += R"(,"deliver_at_ms":)" + std::to_string(t0 + 3000);  // held 3 s
      ++scheduled;
    }
    value += "}";
    writer.send_raw("notifications", customer, value, t0 - 10);
  }
  writer.flush();
  std::cout << "demo: produced " << count << " notifications for " << customers << " customers (" << scheduled
            << " scheduled 3 s ahead)\n";

  sluice::app app(notification_topology(), cfg);
  std::cout << app.get_topology().describe() << "\n";
  app.start();
  sluice::topic_reader reader(cfg, {"push-out", "notifications-expired", "notifications-throttled"});
  long out = 0, expired = 0, throttled = 0;
  std::map<std::string, long> last_id;
  long out_of_order = 0;
  auto deadline = std::chrono::steady_clock::now() + 120s;
  auto next_line = std::chrono::steady_clock::now() + 1s;
  auto& m = app.metrics();
  auto progress = [&] {
    std::printf("in %6.0f  direct %6.0f  buffered %6.0f  drained %6.0f  expired %4.0f  throttled %4.0f\n",
                m.total("sluice_throttle_passed_total") + m.total("sluice_throttle_throttled_total"),
                m.total("sluice_overflow_direct_total"), m.total("sluice_overflow_buffered_total"),
                m.total("sluice_overflow_drained_total"), m.total("sluice_overflow_expired_total"),
                m.total("sluice_throttle_throttled_total"));
    std::fflush(stdout);
  };
  while (out + expired + throttled < count && std::chrono::steady_clock::now() < deadline &&
         app.state() != sluice::app_state::error) {
    for (auto& r : reader.poll(200ms)) {
      if (r.topic == "push-out") {
        ++out;
        const std::string v = r.value.value_or("");
        const long id = std::stol(v.substr(v.find(':') + 1));
        const bool was_scheduled = v.find("deliver_at_ms") != std::string::npos;
        // Order holds per customer and throttle key: the throttle repartitions by (workflow,
        // recipient), so a customer's records with different throttle keys reach its buffer
        // through different partitions, in no fixed order between them.
        const auto wf = v.find("\"workflow\"");
        const auto throttle_key = v.substr(wf, v.find(",\"body\"") - wf);
        auto& last = last_id[r.key.value_or("") + "|" + throttle_key];
        if (!was_scheduled) {
          if (id < last) ++out_of_order;
          last = std::max(last, id);
        }
      } else if (r.topic == "notifications-expired") {
        ++expired;
      } else {
        ++throttled;
      }
    }
    if (std::chrono::steady_clock::now() >= next_line) {
      progress();
      next_line += 1s;
    }
  }
  progress();
  app.close();

  const long expected_out = count - expected_throttled - expected_expired;
  std::cout << "demo: push-out " << out << " (expected " << expected_out << "), expired " << expired << " (expected "
            << expected_expired << "), throttled " << throttled << " (expected " << expected_throttled
            << "), per-customer order violations (per throttle key) " << out_of_order << "\n";
  const bool ok =
      out == expected_out && expired == expected_expired && throttled == expected_throttled && out_of_order == 0;
  std::cout << (ok ? "demo: every notification accounted for as expected\n" : "demo: outcome does NOT match\n");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    long demo = -1;
    std::vector<const char*> args;
    for (int i = 0; i < argc; ++i) {
      if (std::strcmp(argv[i], "--describe") == 0) {
        std::cout << notification_topology().describe();
        return 0;
      }
      if (std::strcmp(argv[i], "--demo") == 0 && i + 1 < argc) {
        demo = std::stol(argv[++i]);
        continue;
      }
      args.push_back(argv[i]);
    }
    auto line = sluice::config::from_args(static_cast<int>(args.size()), args.data(),
                                          "Notification pipeline: throttle per workflow and recipient, then a "
                                          "per-customer rate with an overflow buffer.");
    if (line.action == sluice::command_line::request::print_help) {
      std::cout << line.help;
      return 0;
    }
    auto cfg = std::move(line.settings);
    if (!cfg.contains("application.id")) cfg.set("application.id", "sluice-notification-pipeline");
    if (!cfg.contains("processing.error.handler")) cfg.set("processing.error.handler", "dead_letter");
    // --demo feeds and reads in this process, so it asks for the embedded cluster unless
    // bootstrap.servers names another.
    if (demo > 0 && !cfg.contains("bootstrap.servers")) cfg.set("bootstrap.servers", "embedded");
    if (demo > 0) return run_demo(cfg, demo);
    sluice::app app(notification_topology(), cfg);
    return app.run();
  } catch (const std::exception& e) {
    spdlog::error("sluice-notification-pipeline: {}", e.what());
    return 1;
  }
}
