// sluice-bench-restore: restore throughput of a RocksDB store from its changelog.
//
// Fills the word count's compacted changelog topic directly with N distinct keys in the
// store's binary encoding (round-robin over the partitions), then times a fresh instance
// with an empty state directory from app::start() until it is running, i.e. until every
// store partition is restored. Prints that wall time, the CPU and peak RSS of the restore
// alone (every thread; the peak reset after the fill), the busiest threads' CPU and that of
// the threads that ended meanwhile (a store's SST threads, one per ingested chunk). Needs a
// real broker (the embedded cluster is not a fair measure of fetch throughput).
//
//   sluice-bench-restore [--bootstrap host:port] [--records N] [--partitions P] [--prefix NAME] [--set KEY=VALUE]...
//   (--set: a setting of the restored job, e.g. consumer.queued.min.messages=100000;
//    --prefix: how its application id and topics begin, default restore-bench-<pid>; bench/run
//    passes its run id so that the run deletes them however it ends)
//   SLUICE_BENCH_LOG=1 ...   the framework's info log (restore progress) on stderr
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include "sluice/sluice.hpp"
#include "word_count/topology.hpp"

// tcmalloc's call that hands its free pages back to the kernel (gperftools'
// malloc_extension_c.h); null when the program runs on glibc's allocator.
extern "C" void MallocExtension_ReleaseFreeMemory() __attribute__((weak));

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

/// CPU seconds (user + system) of every thread of this process so far, and its peak RSS.
std::pair<double, double> cpu_seconds_and_peak_mb() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return {s(u.ru_utime) + s(u.ru_stime), static_cast<double>(u.ru_maxrss) / 1024.0};
}

/// Resets the kernel's peak RSS of this process (VmHWM) to its current RSS, so that the
/// restore's peak is measured without the fill's (Linux 4.0+ and glibc).
void reset_peak_rss() {
  // What the fill's producer freed goes back to the kernel first, from either allocator.
  ::malloc_trim(0);
  if (MallocExtension_ReleaseFreeMemory != nullptr) MallocExtension_ReleaseFreeMemory();
  std::ofstream("/proc/self/clear_refs") << "5";
}

/// VmHWM of /proc/self/status in MB: the peak RSS since the last reset_peak_rss().
double peak_rss_mb_since_reset() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // "VmHWM:  123 kB"
  }
  return 0;
}

/// Seconds each live thread of this process spent waiting for a CPU while runnable, by
/// thread id (/proc/self/task/<tid>/schedstat: on CPU ns, waiting on a run queue ns, slices).
/// On a loaded machine this is the scheduler's share of a thread's wall time.
std::map<int, double> thread_runqueue_seconds() {
  std::map<int, double> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "schedstat");
    double on_cpu = 0, waiting = 0;
    if (in >> on_cpu >> waiting) out[std::stoi(task.path().filename().string())] = waiting / 1e9;
  }
  return out;
}

/// CPU seconds of each live thread of this process by thread id, with its name
/// (/proc/self/task/<tid>/stat: utime and stime, fields 14 and 15, in clock ticks).
std::map<int, std::pair<std::string, double>> thread_cpu_seconds() {
  std::map<int, std::pair<std::string, double>> out;
  const auto ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "stat");
    std::string line;
    if (!std::getline(in, line)) continue;
    const auto open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string field;
    double utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i == 14) utime = std::stod(field);
      if (i == 15) stime = std::stod(field);
    }
    out[std::stoi(task.path().filename().string())] = {line.substr(open + 1, close - open - 1),
                                                       (utime + stime) / ticks};
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string bootstrap = std::getenv("SLUICE_BOOTSTRAP") ? std::getenv("SLUICE_BOOTSTRAP") : "127.0.0.1:39092";
  long long records = 5000000;
  int partitions = 4;
  std::string prefix = "restore-bench-" + std::to_string(::getpid());
  std::vector<std::string> settings;  // KEY=VALUE of --set
  for (int i = 1; i < argc; i += 2) {
    const std::string a = i + 1 < argc ? argv[i] : "";  // a flag without its value: usage
    if (a == "--bootstrap")
      bootstrap = argv[i + 1];
    else if (a == "--records")
      records = std::atoll(argv[i + 1]);
    else if (a == "--partitions")
      partitions = std::atoi(argv[i + 1]);
    else if (a == "--prefix" && argv[i + 1][0] != '\0')
      prefix = argv[i + 1];
    else if (a == "--set" && std::string_view(argv[i + 1]).find('=') != std::string_view::npos)
      settings.emplace_back(argv[i + 1]);
    else {
      std::fprintf(
          stderr,
          "usage: %s [--bootstrap host:port] [--records N] [--partitions P] [--prefix NAME] [--set KEY=VALUE]...\n",
          argv[0]);
      return 2;
    }
  }
  spdlog::set_level(std::getenv("SLUICE_BENCH_LOG") != nullptr ? spdlog::level::info : spdlog::level::warn);
  auto app_id = prefix + "-" + std::to_string(std::chrono::system_clock::now().time_since_epoch().count() % 1000000007);
  auto state_dir = std::filesystem::temp_directory_path() / (app_id + "-state");
  auto in = app_id + "-lines", out = app_id + "-counts", changelog = app_id + "-word-counts-changelog";

  sluice::config cfg;
  cfg.set("bootstrap.servers", bootstrap);
  cfg.set("application.id", app_id);
  cfg.set("state.dir", state_dir.string());
  try {
    sluice::topic_admin admin(cfg);
    admin.create_topic(in, partitions);
    admin.create_topic(out, partitions);
    admin.create_topic(changelog, partitions, sluice::cleanup_policy::compact);

    // The changelog as the store writes it: key and value in the state serdes.
    std::uint64_t payload_bytes = 0;
    auto fill_start = clock_type::now();
    {
      sluice::topic_writer w(cfg);
      std::string key, value;
      for (long long i = 0; i < records; ++i) {
        sluice::default_state_serde<std::string>::serialize("w" + std::to_string(i), key);
        sluice::default_state_serde<std::int64_t>::serialize(1 + i % 97, value);
        payload_bytes += key.size() + value.size();
        w.send_raw(changelog, std::string_view(key), std::string_view(value), 1700000000000 + i, {},
                   static_cast<std::int32_t>(i % partitions));
      }
      w.flush(std::chrono::minutes(10));
    }
    double fill_s = seconds_since(fill_start);

    sluice::config job_cfg = cfg;
    for (const auto& kv : settings) job_cfg.set(kv.substr(0, kv.find('=')), kv.substr(kv.find('=') + 1));
    sluice::app app(examples::word_count_topology(in, out), job_cfg);
    auto start = clock_type::now();
    reset_peak_rss();
    const auto cpu_before = cpu_seconds_and_peak_mb().first;
    const auto threads_before = thread_cpu_seconds();
    const auto waits_before = thread_runqueue_seconds();
    app.start();
    while (app.state() != sluice::app_state::running) {
      if (app.state() == sluice::app_state::error) throw std::runtime_error(app.error_message());
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    double restore_s = seconds_since(start);
    const auto cpu_after = cpu_seconds_and_peak_mb().first;
    const auto peak_mb = peak_rss_mb_since_reset();
    // The busiest threads of the restore: on an idle machine the restore cannot end sooner
    // than the busiest one, whatever the cores.
    // With each, the seconds it waited for a CPU while runnable: on an idle machine those go.
    std::vector<std::tuple<double, std::string, double>> busiest;
    double live = 0;
    const auto waits_after = thread_runqueue_seconds();
    for (const auto& [tid, thread] : thread_cpu_seconds()) {
      auto before = threads_before.find(tid);
      auto wait_before = waits_before.find(tid);
      auto wait_after = waits_after.find(tid);
      const double waited = (wait_after != waits_after.end() ? wait_after->second : 0.0) -
                            (wait_before != waits_before.end() ? wait_before->second : 0.0);
      busiest.emplace_back(thread.second - (before != threads_before.end() ? before->second.second : 0.0), thread.first,
                           waited);
      live += std::get<0>(busiest.back());
    }
    // Threads that ended during the restore (a store's SST threads) are gone from
    // /proc/self/task; their CPU is what the process used beyond the live threads'.
    const double ended = (cpu_after - cpu_before) - live;
    std::sort(busiest.rbegin(), busiest.rend());
    auto restored = static_cast<long long>(app.metrics().total("sluice_restored_records_total"));
    app.close();
    std::filesystem::remove_all(state_dir);

    double mb = static_cast<double>(payload_bytes) / 1e6;
    std::printf(
        "| changelog records | partitions | key+value MB | fill s | restored | start-to-running s | records/s | MB/s | "
        "restore CPU s | restore peak RSS MB |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
    std::printf("| %lld | %d | %.1f | %.1f | %lld | %.2f | %.0f | %.1f | %.2f | %.0f |\n", records, partitions, mb,
                fill_s, restored, restore_s, static_cast<double>(restored) / restore_s,
                mb * static_cast<double>(restored) / static_cast<double>(records) / restore_s, cpu_after - cpu_before,
                peak_mb);
    std::printf("restore CPU s of the busiest threads:");
    for (std::size_t i = 0; i < busiest.size() && i < 5; ++i)
      std::printf(" %s %.2f (waited for a CPU %.2f)", std::get<1>(busiest[i]).c_str(), std::get<0>(busiest[i]),
                  std::get<2>(busiest[i]));
    std::printf("; threads ended during the restore %.2f\n", std::max(ended, 0.0));
    std::printf("command: %s --bootstrap %s --records %lld --partitions %d", argv[0], bootstrap.c_str(), records,
                partitions);
    for (const auto& kv : settings) std::printf(" --set %s", kv.c_str());
    std::printf("\n");
    return restored == records ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice-bench-restore: %s\n", e.what());
    return 1;
  }
}
