// sluice-bench-overflow-drain: the overflow buffer's drain, in process (no broker): N records
// over K customers are buffered (every customer's rate 0), then every customer's rate is
// raised at once and one drain tick releases the whole backlog. Times that tick: records/s
// and CPU per drained record (the drain loop: queue-store reads and pops, the customer
// state, emission into the TopologyTestDriver's output capture, the commit after the tick).
//
//   sluice-bench-overflow-drain [--records N] [--customers K] [--value-bytes S]
//
// RocksDB stores (driver_options::rocksdb_stores), as the job runs them. The fill is not
// timed: the driver commits after every piped record, which the job does not.
#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "sluice/sluice.hpp"
#include "sluice/test_driver.hpp"
#include "sluice/topologies/overflow_buffer.hpp"

namespace {

double process_cpu_s() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t records = 1'000'000;
  std::int64_t customers = 10'000;
  std::size_t value_bytes = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--records")
      records = std::strtoll(argv[i + 1], nullptr, 10);
    else if (a == "--customers")
      customers = std::strtoll(argv[i + 1], nullptr, 10);
    else if (a == "--value-bytes")
      value_bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: sluice-bench-overflow-drain [--records N] [--customers K] [--value-bytes S]\n");
      return 2;
    }
  }
  constexpr std::int64_t start_ms = 1'700'000'000'000;
  sluice::topologies::overflow_buffer_options o;
  o.default_rate_per_second = 0;  // hold everything until the rates arrive
  sluice::streams_builder b;
  using bytes = sluice::topologies::overflow_detail::bytes;
  auto out = sluice::topologies::apply_overflow_buffer(b, b.stream<bytes, bytes>("notifications"), o);
  out.emitted.to("out");
  if (out.expired) out.expired->to("expired");
  sluice::testing::topology_test_driver driver(b.build(), sluice::config{},
                                               {.rocksdb_stores = true, .start_wall_clock_ms = start_ms});
  auto clear_all = [&] {
    for (const auto& t : driver.topics()) driver.records(t).clear();
  };

  std::string value = R"({"body":")" + std::string(value_bytes > 12 ? value_bytes - 12 : 0, 'x') + R"("})";
  for (std::int64_t i = 0; i < records; ++i) {
    driver.pipe_raw("notifications", "c" + std::to_string(i % customers), value, start_ms);
    if (i % 10'000 == 9'999) clear_all();
  }
  clear_all();
  const double buffered = driver.metrics().total("sluice_overflow_buffered_total");
  if (buffered != static_cast<double>(records)) {
    std::fprintf(stderr, "expected %lld buffered, got %.0f\n", static_cast<long long>(records), buffered);
    return 1;
  }
  const std::string fast = R"({"rate_per_second":1000000})";
  for (std::int64_t c = 0; c < customers; ++c)
    driver.pipe_raw("customer-rates", "c" + std::to_string(c), fast, start_ms);
  clear_all();

  std::fprintf(stderr, "buffered %lld records; draining\n", static_cast<long long>(records));
  const double cpu0 = process_cpu_s();
  const auto t0 = std::chrono::steady_clock::now();
  driver.advance_wall_clock(o.drain_interval);  // one tick: the whole backlog is due
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = process_cpu_s() - cpu0;
  const auto drained = static_cast<std::int64_t>(driver.records("out").size());
  std::printf("| records | customers | drained | wall s | CPU s | records/s | CPU us/record |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  std::printf("| %lld | %lld | %lld | %.2f | %.2f | %.0f | %.2f |\n", static_cast<long long>(records),
              static_cast<long long>(customers), static_cast<long long>(drained), wall, cpu,
              static_cast<double>(drained) / wall, cpu * 1e6 / static_cast<double>(drained));
  return drained == records ? 0 : 1;
}
