// sluice-pipeline: the quick-start job. With --demo N it feeds N generated orders into its
// input topic, processes them, prints a summary and exits; without it, it runs until
// SIGTERM like any job.
//
//   sluice-pipeline --demo 20000                       (embedded cluster, nothing installed)
//   sluice-pipeline --set bootstrap.servers=host:9092  (your Kafka; create the topics first)
//   sluice-pipeline --describe | --dot                 (the topology as text or Graphviz DOT)
#include <utility>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/topology.hpp"

using namespace std::chrono_literals;

namespace {

int run_demo(sluice::config cfg, long count) {
  sluice::topic_admin admin(cfg);
  admin.create_topic("orders", 4);
  admin.create_topic("large-orders", 4);
  admin.create_topic("orders-per-customer", 4);

  std::mt19937 rng(42);
  std::vector<std::string> customers;
  for (int i = 0; i < 50; ++i) customers.push_back("customer-" + std::to_string(i));
  std::map<std::string, std::int64_t> expected_counts;
  long expected_large = 0;
  {
    sluice::topic_writer writer(cfg);
    for (long i = 0; i < count; ++i) {
      examples::order o{"order-" + std::to_string(i), customers[rng() % customers.size()],
                        static_cast<std::int64_t>(rng() % 20000)};
      writer.send("orders", o.id, o);
      ++expected_counts[o.customer];
      if (o.amount_cents >= 10000) ++expected_large;
    }
    writer.flush();
  }
  std::cout << "demo: produced " << count << " orders into 'orders' (4 partitions)\n";

  auto started = std::chrono::steady_clock::now();
  sluice::app app(examples::pipeline_topology(), cfg);
  std::cout << app.get_topology().describe() << "\n";
  app.start();

  sluice::topic_reader large(cfg, {"large-orders"});
  sluice::topic_reader counts(cfg, {"orders-per-customer"});
  long large_seen = 0;
  std::map<std::string, std::int64_t> final_counts;
  auto deadline = std::chrono::steady_clock::now() + 120s;
  auto done = [&] {
    if (large_seen < expected_large) return false;
    for (auto& [c, n] : expected_counts)
      if (final_counts[c] != n) return false;
    return true;
  };
  while (!done() && std::chrono::steady_clock::now() < deadline && app.state() != sluice::app_state::error) {
    large_seen += static_cast<long>(large.poll(200ms).size());
    for (auto& m : counts.poll(200ms)) {
      if (!m.key || !m.value || m.value->size() != 8) continue;
      std::int64_t v = sluice::default_serde<std::int64_t>::deserialize(*m.value);
      final_counts[*m.key] = std::max(final_counts[*m.key], v);
    }
  }
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  auto processed = app.metrics().total("sluice_records_processed_total");
  app.close();

  std::cout << "demo: processed " << static_cast<long>(processed)
            << " records (orders and their repartitioned copies) in " << seconds << " s\n";
  std::cout << "demo: large orders out: " << large_seen << " (expected " << expected_large << ")\n";
  std::cout << "demo: orders per customer (first 5 of " << final_counts.size() << "):\n";
  int shown = 0;
  for (auto& [c, n] : final_counts) {
    if (shown++ == 5) break;
    std::cout << "  " << c << ": " << n << " (expected " << expected_counts[c] << ")\n";
  }
  bool ok = done();
  std::cout << (ok ? "demo: all outputs match the expected results\n" : "demo: outputs do NOT match\n");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    long demo = -1;
    std::vector<const char*> args;
    for (int i = 0; i < argc; ++i) {
      if (std::strcmp(argv[i], "--describe") == 0 || std::strcmp(argv[i], "--dot") == 0) {
        auto t = examples::pipeline_topology();
        std::cout << (std::strcmp(argv[i], "--dot") == 0 ? t.to_dot() : t.describe());
        return 0;
      }
      if (std::strcmp(argv[i], "--demo") == 0 && i + 1 < argc) {
        demo = std::stol(argv[++i]);
        continue;
      }
      args.push_back(argv[i]);
    }
    auto command = sluice::config::from_args(static_cast<int>(args.size()), args.data(),
                                             "Orders pipeline: large orders out, orders counted per customer.");
    if (command.action == sluice::command_line::request::print_help) {
      std::cout << command.help;
      return 0;
    }
    auto cfg = std::move(command.settings);
    if (!cfg.contains("application.id")) cfg.set("application.id", "sluice-pipeline");
    // --demo feeds and reads in this process, so it asks for the embedded cluster unless
    // bootstrap.servers names another.
    if (demo > 0 && !cfg.contains("bootstrap.servers")) cfg.set("bootstrap.servers", "embedded");
    if (demo > 0) return run_demo(cfg, demo);
    sluice::app app(examples::pipeline_topology(), cfg);
    return app.run();
  } catch (const std::exception& e) {
    // The logger's call for a finished message, not spdlog::error's format string: formatting
    // an argument would compile fmt's formatting core into this unit (a third of its build).
    const std::string message = std::string("sluice-pipeline: ") + e.what();
    spdlog::default_logger_raw()->log(spdlog::level::err, spdlog::string_view_t(message));
    return 1;
  }
}
