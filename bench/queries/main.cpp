// sluice-bench-query-fanout: what a read of every partition of a store costs while the job
// runs under exactly-once. A count job (group_by_key + count, RocksDB store) runs on a topic of
// --partitions partitions while a writer keeps sending records, so a transaction is nearly
// always open and a query waits for the end of one. Each round reads the first 10 keys of
// every partition twice: one partition after another (queries().run per partition, as the
// /stores range and untyped key endpoints did before they asked all at once), then all at
// once (queries().run_each). Prints the latency of both per round, as medians and p90.
//
//   sluice-bench-query-fanout [--bootstrap host:port|embedded] [--partitions P] [--rounds R]
//                             [--commit-interval-ms C]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>
#include <unistd.h>

#include "sluice/sluice.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t).count();
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  std::string bootstrap = "embedded";
  int partitions = 8, rounds = 40;
  std::string commit_interval = "100";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--bootstrap")
      bootstrap = value;
    else if (flag == "--partitions")
      partitions = std::stoi(value);
    else if (flag == "--rounds")
      rounds = std::stoi(value);
    else if (flag == "--commit-interval-ms")
      commit_interval = value;
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  const auto app_id = "bench-fanout-" + std::to_string(::getpid());
  const auto in = app_id + "-in", out = app_id + "-out";
  sluice::config c;
  c.set("bootstrap.servers", bootstrap);
  {
    sluice::topic_admin admin(c);
    admin.create_topic(in, partitions);
    admin.create_topic(out, partitions);
  }
  const auto dir = std::filesystem::temp_directory_path() / app_id;
  c.set("application.id", app_id)
      .set("state.dir", dir.string())
      .set("processing.guarantee", "exactly_once_v2")
      .set("commit.interval.ms", commit_interval);
  sluice::streams_builder b;
  b.stream<std::string, std::string>(in).group_by_key().count("fanout-counts").to_stream().to(out);
  sluice::app job(b.build(), c);
  job.start();

  std::atomic<bool> stop{false};
  std::thread writer([&] {
    sluice::config wc;
    wc.set("bootstrap.servers", bootstrap);
    sluice::topic_writer w(wc);
    for (long long i = 0; !stop.load(); ++i) {
      w.send_raw(in, "k" + std::to_string(i % 1000), "v");
      if (i % 10000 == 9999) w.flush();
    }
    w.flush();
  });
  while (job.metrics().total("sluice_records_processed_total") < 2000)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));

  auto& q = job.queries();
  std::vector<std::int32_t> all(static_cast<std::size_t>(partitions));
  for (int p = 0; p < partitions; ++p) all[static_cast<std::size_t>(p)] = p;
  std::vector<double> one_by_one, at_once;
  int failed = 0;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = clock_type::now();
    for (auto p : all) {
      std::size_t n = 0;
      auto o = q.run("fanout-counts", p, [&](sluice::state::kv_store& s) {
        for (auto it = s.all(); it.valid() && n < 10; it.next()) ++n;
      });
      if (o != sluice::query_outcome::done) ++failed;
    }
    one_by_one.push_back(ms_since(t0));
    std::vector<std::size_t> counts(all.size());
    t0 = clock_type::now();
    for (const auto& o : q.run_each("fanout-counts", all, [&](std::int32_t p, sluice::state::kv_store&s) {
           auto& n = counts[static_cast<std::size_t>(p)];
           for (auto it = s.all(); it.valid() && n < 10; it.next()) ++n;
         }))
      if (o.result != sluice::query_outcome::done) ++failed;
    at_once.push_back(ms_since(t0));
  }
  stop = true;
  writer.join();
  job.close();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::printf("| read of %d partitions, exactly-once, commit.interval.ms=%s | median ms | p90 ms |\n", partitions,
              commit_interval.c_str());
  std::printf("|---|---:|---:|\n");
  std::printf("| one partition after another | %.1f | %.1f |\n", percentile(one_by_one, 0.5),
              percentile(one_by_one, 0.9));
  std::printf("| all at once (run_each) | %.1f | %.1f |\n", percentile(at_once, 0.5), percentile(at_once, 0.9));
  std::printf("rounds %d, reads not done: %d, records processed %.0f\n", rounds, failed,
              job.metrics().total("sluice_records_processed_total"));
  return failed == 0 ? 0 : 1;
}
