// sluice-bench-global-bootstrap: how long and how much CPU a job's global table bootstrap
// takes (global_tables::catch_up, which every instance runs before any task processes).
//
// Fills a topic with N records (keys "c<i % keys>", values of --value-bytes), then times a
// job with a global table over it from app::start() until it is running: its input topic is
// empty and has nothing to restore, so the time is the bootstrap's (plus the group join).
// Prints wall seconds, the process's CPU seconds over that span, and the records applied.
// Needs a real broker.
//
//   sluice-bench-global-bootstrap [--bootstrap host:port] [--records N] [--keys K] [--partitions P]
//                                 [--value-bytes B]
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>
#include <sys/resource.h>
#include <unistd.h>

#include "sluice/sluice.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

}  // namespace

int main(int argc, char** argv) {
  std::string bootstrap = std::getenv("SLUICE_BOOTSTRAP") ? std::getenv("SLUICE_BOOTSTRAP") : "127.0.0.1:39092";
  long long records = 1000000, keys = 100000;
  int partitions = 4, value_bytes = 100;
  for (int i = 1; i < argc; i += 2) {
    const std::string a = i + 1 < argc ? argv[i] : "";  // a flag without its value: usage
    if (a == "--bootstrap")
      bootstrap = argv[i + 1];
    else if (a == "--records")
      records = std::atoll(argv[i + 1]);
    else if (a == "--keys")
      keys = std::atoll(argv[i + 1]);
    else if (a == "--partitions")
      partitions = std::atoi(argv[i + 1]);
    else if (a == "--value-bytes")
      value_bytes = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr,
                   "usage: %s [--bootstrap host:port] [--records N] [--keys K] [--partitions P] [--value-bytes B]\n",
                   argv[0]);
      return 2;
    }
  }
  if (records < 1 || keys < 1 || partitions < 1 || value_bytes < 0) {
    std::fprintf(stderr, "%s: --records, --keys and --partitions must be positive\n", argv[0]);
    return 2;
  }
  spdlog::set_level(std::getenv("SLUICE_BENCH_LOG") != nullptr ? spdlog::level::info : spdlog::level::warn);
  const auto app_id = "global-bench-" + std::to_string(::getpid()) + "-" +
                      std::to_string(std::chrono::system_clock::now().time_since_epoch().count() % 1000000007);
  const auto state_dir = std::filesystem::temp_directory_path() / (app_id + "-state");
  const auto table = app_id + "-table", in = app_id + "-in", out = app_id + "-out";

  sluice::config cfg;
  cfg.set("bootstrap.servers", bootstrap);
  cfg.set("application.id", app_id);
  cfg.set("state.dir", state_dir.string());
  try {
    sluice::topic_admin admin(cfg);
    admin.create_topic(table, partitions, sluice::cleanup_policy::compact);
    admin.create_topic(in, partitions);
    admin.create_topic(out, partitions);
    {
      sluice::topic_writer w(cfg);
      const std::string value(static_cast<std::size_t>(value_bytes), 'v');
      for (long long i = 0; i < records; ++i)
        w.send_raw(table, "c" + std::to_string(i % keys), std::string_view(value), 0, {},
                   static_cast<std::int32_t>(i % partitions));
      w.flush(std::chrono::minutes(10));
    }

    sluice::streams_builder b;
    auto g = b.global_table<std::string, std::string>(table, "g");
    b.stream<std::string, std::string>(in)
        .left_join(
            g, [](const std::string& k, const std::string&) { return k; },
            [](const std::string& v, const std::optional<std::string>&) { return v; })
        .to(out);
    sluice::app app(b.build(), cfg);
    const auto started = clock_type::now();
    const double cpu_before = cpu_seconds();
    app.start();
    while (app.state() != sluice::app_state::running) {
      if (app.state() == sluice::app_state::error) throw std::runtime_error(app.error_message());
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const double wall = std::chrono::duration<double>(clock_type::now() - started).count();
    const double cpu = cpu_seconds() - cpu_before;
    const auto applied = static_cast<long long>(app.metrics().total("sluice_global_records_applied_total"));
    app.close();
    std::filesystem::remove_all(state_dir);
    std::printf(
        "| table records | keys | partitions | value bytes | applied | start-to-running s | CPU s | CPU us/record |\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
    std::printf("| %lld | %lld | %d | %d | %lld | %.2f | %.2f | %.2f |\n", records, keys, partitions, value_bytes,
                applied, wall, cpu, cpu * 1e6 / static_cast<double>(records));
    return applied == records ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
}
