// sluice-page-views: the getting-started job (docs/getting-started.md).
//
//   sluice-page-views [--config FILE] [--set key=value]...   run the job until SIGTERM / SIGINT
//   sluice-page-views --create-topics N ...   create page-views and page-view-counts (N partitions), exit
//   sluice-page-views --produce N ...         write N generated page views (every 10th from a bot), exit
//   sluice-page-views --read SECONDS ...      print what arrives on page-view-counts for SECONDS, exit
//   sluice-page-views --demo N ...            all of the above in one process (for bootstrap.servers=embedded)
//   sluice-page-views --describe              print the topology
#include <utility>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "getting_started/topology.hpp"

using namespace std::chrono_literals;
using getting_started::page_view;

namespace {

constexpr sluice::config_key job_keys[] = {
    {"report.interval.ms", "10000", "How often the latest count of each changed page goes to page-view-counts."},
};

const char* const pages[] = {"/home", "/pricing", "/docs", "/blog", "/signup"};

void create_topics(const sluice::config& cfg, int partitions) {
  sluice::topic_admin admin(cfg);
  admin.create_topic("page-views", partitions);
  admin.create_topic("page-view-counts", partitions);
  std::cout << "created page-views and page-view-counts (" << partitions << " partitions)\n";
}

/// Writes `count` page views; returns the expected count per page (bots excluded).
std::map<std::string, std::int64_t> produce(const sluice::config& cfg, long count) {
  std::map<std::string, std::int64_t> expected;
  sluice::topic_writer writer(cfg);
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch());
  for (long i = 0; i < count; ++i) {
    bool bot = i % 10 == 9;
    page_view v{pages[(i * 7 + i / 5) % 5], bot ? "Googlebot/2.1" : "Mozilla/5.0", 100 + i % 5000};
    if (!bot) ++expected[v.page];
    writer.send("page-views", bot ? std::string("crawler") : "user-" + std::to_string(i % 100), v, now.count() + i);
  }
  writer.flush();
  std::cout << "produced " << count << " page views into page-views\n";
  return expected;
}

/// Reads page-view-counts, printing each record, until `done(latest)` or `timeout`.
std::map<std::string, std::int64_t> read_counts(
    const sluice::config& cfg, std::chrono::milliseconds timeout,
    const std::function<bool(const std::map<std::string, std::int64_t>&)>& done) {
  std::map<std::string, std::int64_t> latest;
  sluice::topic_reader reader(cfg, {"page-view-counts"});
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline && !done(latest)) {
    for (auto& m : reader.poll(200ms)) {
      if (!m.key || !m.value) continue;
      auto views = sluice::default_serde<std::int64_t>::deserialize(*m.value);
      latest[*m.key] = views;
      std::cout << "page-view-counts[" << m.partition << "]@" << m.offset << ": " << *m.key << " = " << views << "\n";
    }
  }
  return latest;
}

int demo(sluice::config cfg, long count) {
  if (!cfg.contains("report.interval.ms")) cfg.set("report.interval.ms", "1000");
  create_topics(cfg, 4);
  auto expected = produce(cfg, count);
  sluice::app app(getting_started::page_views_topology(cfg.get_ms("report.interval.ms")), cfg);
  app.start();
  auto latest = read_counts(cfg, 60s, [&](const auto& l) { return l == expected; });
  app.close();
  bool ok = latest == expected;
  std::cout << (ok ? "demo: the counts match the page views produced (bots excluded)\n"
                   : "demo: the counts do NOT match the page views produced\n");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string mode;
    long number = 0;
    std::vector<const char*> args;
    for (int i = 0; i < argc; ++i) {
      std::string_view a = argv[i];
      if (a == "--describe") {
        std::cout << getting_started::page_views_topology().describe();
        return 0;
      }
      if ((a == "--create-topics" || a == "--produce" || a == "--read" || a == "--demo") && i + 1 < argc) {
        mode = a;
        number = std::stol(argv[++i]);
        continue;
      }
      args.push_back(argv[i]);
    }
    sluice::config::declare_keys(job_keys);
    auto command =
        sluice::config::from_args(static_cast<int>(args.size()), args.data(),
                                  "Page views: bots dropped, views counted per page, reported per interval.");
    if (command.action == sluice::command_line::request::print_help) {
      std::cout << command.help;
      return 0;
    }
    auto cfg = std::move(command.settings);
    if (!cfg.contains("application.id")) cfg.set("application.id", "page-views");

    if (mode == "--create-topics") create_topics(cfg, static_cast<int>(number));
    if (mode == "--produce") produce(cfg, number);
    if (mode == "--read") read_counts(cfg, std::chrono::seconds(number), [](const auto&) { return false; });
    // --demo feeds and reads in this process, so it asks for the embedded cluster unless
    // bootstrap.servers names another.
    if (mode == "--demo" && !cfg.contains("bootstrap.servers")) cfg.set("bootstrap.servers", "embedded");
    if (mode == "--demo") return demo(cfg, number);
    if (!mode.empty()) return 0;

    sluice::app app(getting_started::page_views_topology(cfg.get_ms("report.interval.ms")), cfg);
    return app.run();
  } catch (const std::exception& e) {
    spdlog::error("sluice-page-views: {}", e.what());
    return 1;
  }
}
