// sluice-bench-hotpath: the per-record processing path of the count, the throttle and the
// overflow buffer job, in process and without a broker, for instruction counts
// (bench/callgrind) and quick CPU figures.
//
//   sluice-bench-hotpath --workload count|throttle|overflow [--records N] [--keys K] [--commit-every C]
//                        [--changelog-buffer-bytes B]   (statestore.changelog.buffer.bytes; 0 = every write)
//
// The records are those bench/run loads (sluice-bench-tool load): key k<i % K> (default: 10,000
// keys for count; N/100 for throttle, bench/run's density, so the same share is throttled); count: 100-byte
// values; throttle: ~200-byte JSON notifications {"id":…,"workflow":"wf<k % 100>",
// "recipient":"user<k>",…} with timestamps over the last 600 s, a fifth up to 5 s late. They
// are made before the measured loop. The topologies are the jobs': count =
// group_by_key().count("bench-counts") into RocksDB; throttle = throttle_job_topology (key
// fields workflow,recipient, window 60 s, limit 3, throttled records forwarded with their
// reason), so every record goes through the repartition topic and the throttle processor;
// overflow = the sluice-overflow-buffer job's topology (overflow_buffer_job_topology with a
// rates table, expired records forwarded) on its direct path as bench/run measures it: rate
// 1,000,000/s for every customer, ~100-byte JSON notifications (bench/run's overflow load:
// 10,000 customers, timestamps = the wall clock), so every record goes out in process().
// They run through the TopologyTestDriver with RocksDB stores and 4 partitions, committing
// every C records (default 10,000: a job commits once per interval, not per record); the
// driver stands in for the consumer and producer (records are copied into and out of it).
//
// The measured loop is process_records() (not inlined), which bench/callgrind counts with
// --toggle-collect. Prints one JSON line: records, outputs, CPU seconds and µs per record.
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/sluice.hpp"
#include "sluice/test_driver.hpp"
#include "sluice/topologies/overflow_buffer.hpp"
#include "sluice/topologies/throttle.hpp"

namespace {

constexpr std::int64_t span_ms = 600'000;
constexpr std::int64_t now_ms = 1'800'000'000'000;  // fixed: the same records, and decisions, every run

struct input {
  std::string key;
  std::string value;
  std::int64_t timestamp;
};

std::vector<input> make_inputs(std::string_view workload, long long records, long long keys) {
  std::vector<input> out;
  out.reserve(static_cast<std::size_t>(records));
  std::string value(100, 'a');
  std::uint64_t lateness = 42;  // the loader's xorshift sequence
  for (long long i = 0; i < records; ++i) {
    const long long k = i % keys;
    input in{"k" + std::to_string(k), {}, now_ms};
    if (workload == "throttle" || workload == "overflow") {
      // bench/run's JSON values: 200 bytes for the throttle, 100 for the overflow buffer.
      const long long size = workload == "throttle" ? 200 : 100;
      in.value = "{\"id\":" + std::to_string(i) + ",\"workflow\":\"wf" + std::to_string(k % 100) +
                 "\",\"recipient\":\"user" + std::to_string(k) + "\",\"tenant\":\"t" + std::to_string(k % 8) +
                 "\",\"channel\":\"email\",\"body\":\"";
      in.value.append(static_cast<std::size_t>(std::max(0LL, size - static_cast<long long>(in.value.size()) - 2)),
                      static_cast<char>('a' + i % 26));
      in.value += "\"}";
    }
    if (workload == "throttle") {
      in.timestamp = now_ms - span_ms + span_ms * i / records;
      lateness ^= lateness << 13;
      lateness ^= lateness >> 7;
      lateness ^= lateness << 17;
      if (lateness % 5 == 0) in.timestamp -= static_cast<std::int64_t>(lateness / 5 % 5001);
    } else if (workload == "count") {
      value[static_cast<std::size_t>(i % 100)] = static_cast<char>('a' + i % 26);
      in.value = value;
    }
    out.push_back(std::move(in));
  }
  return out;
}

double process_cpu_s() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Output, changelog and repartition records pile up in the driver: count the outputs and
// drop everything every 10,000 records, as a producer would have sent them.
// A digest of the records on "out" (order-independent: a sum of FNV-1a hashes of key and
// value; for the overflow buffer also of the timestamp and the headers it adds) lets two
// builds be compared for the same outputs, e.g. the same throttle decisions.
struct output_counter {
  bool with_headers = false;       // overflow: the emission timestamp and headers count too
  std::size_t out = 0, other = 0;  // other: the throttled or expired records
  std::uint64_t out_digest = 0;
  void drain(sluice::testing::topology_test_driver& driver) {
    for (const auto& name : driver.topics()) {
      auto& q = driver.records(name);
      if (name == "out") {
        out += q.size();
        for (const auto& m : q) {
          std::uint64_t h = fnv1a(m.key.value_or("")) * 31 + fnv1a(m.value.value_or(""));
          if (with_headers) {
            h = h * 31 + static_cast<std::uint64_t>(m.timestamp);
            for (const auto& hd : m.headers) h = h * 31 + fnv1a(hd.key) * 7 + fnv1a(hd.value.value_or(""));
          }
          out_digest += h;
        }
      } else if (name == "throttled" || name == "expired") {
        other += q.size();
      }
      q.clear();
    }
  }
  static std::uint64_t fnv1a(std::string_view s) {
    std::uint64_t h = 1469598103934665603ULL;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
    return h;
  }
};

// The loop callgrind counts (bench/callgrind: --toggle-collect=*process_records*).
[[gnu::noinline]] void process_records(sluice::testing::topology_test_driver& driver, const std::vector<input>& in,
                                       output_counter& outputs) {
  for (std::size_t i = 0; i < in.size(); ++i) {
    driver.pipe_raw("in", std::string_view(in[i].key), std::string_view(in[i].value), in[i].timestamp);
    if (i % 10'000 == 9'999) outputs.drain(driver);
  }
  outputs.drain(driver);
}

sluice::topology count_topology() {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("in").group_by_key().count("bench-counts").to_stream().to("out");
  return b.build();
}

sluice::topology throttle_topology() {
  sluice::topologies::throttle_options o;
  o.window = std::chrono::milliseconds(60'000);
  o.limit = 3;
  o.key_fields = {"workflow", "recipient"};
  return sluice::topologies::throttle_job_topology("in", "out", "throttled", o, 0);
}

// The sluice-overflow-buffer job as bench/run runs it (overflow_buffer.properties plus a rate
// far above what a customer sends): every record takes the direct path.
sluice::topology overflow_topology() {
  sluice::topologies::overflow_buffer_options o;
  o.default_rate_per_second = 1'000'000;
  o.http_endpoints = false;
  return sluice::topologies::overflow_buffer_job_topology("in", "out", "expired", o);
}

}  // namespace

int main(int argc, char** argv) {
  std::string workload;
  long long records = 100'000, keys = 0, commit_every = 10'000;
  std::string changelog_buffer_bytes;  // empty: the configuration's default
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (i + 1 < argc && a == "--workload")
      workload = argv[++i];
    else if (i + 1 < argc && a == "--records")
      records = std::atoll(argv[++i]);
    else if (i + 1 < argc && a == "--keys")
      keys = std::atoll(argv[++i]);
    else if (i + 1 < argc && a == "--commit-every")
      commit_every = std::atoll(argv[++i]);
    else if (i + 1 < argc && a == "--changelog-buffer-bytes")
      changelog_buffer_bytes = argv[++i];
    else {
      workload.clear();
      break;
    }
  }
  // The throttle's default keys keep bench/run's density (1,000,000 records over 10,000 keys,
  // so the same share is throttled); the count's are bench/run's 10,000.
  if (keys == 0) keys = workload == "throttle" ? std::max(1LL, records / 100) : 10'000;
  if ((workload != "count" && workload != "throttle" && workload != "overflow") || records < 1 || keys < 1 ||
      commit_every < 1) {
    std::fprintf(
        stderr,
        "usage: %s --workload count|throttle|overflow [--records N (100000)] [--keys K (count, overflow: 10000; "
        "throttle: N/100)] "
        "[--commit-every C (10000)] [--changelog-buffer-bytes B (statestore.changelog.buffer.bytes)]\n",
        argv[0]);
    return 2;
  }
  try {
    auto inputs = make_inputs(workload, records, keys);
    sluice::testing::driver_options d;
    d.partitions = 4;
    d.rocksdb_stores = true;
    d.start_wall_clock_ms = now_ms;
    d.commit_every_records = static_cast<std::size_t>(commit_every);
    sluice::config cfg;
    cfg.set("application.id", "bench-hotpath");
    if (!changelog_buffer_bytes.empty()) cfg.set("statestore.changelog.buffer.bytes", changelog_buffer_bytes);
    sluice::testing::topology_test_driver driver(workload == "count"      ? count_topology()
                                                 : workload == "throttle" ? throttle_topology()
                                                                          : overflow_topology(),
                                                 cfg, d);
    output_counter outputs;
    outputs.with_headers = workload == "overflow";
    const double cpu0 = process_cpu_s();
    process_records(driver, inputs, outputs);
    const double cpu = process_cpu_s() - cpu0;
    std::printf(
        "{\"workload\":\"%s\",\"records\":%lld,\"out\":%zu,\"%s\":%zu,\"out_digest\":\"%016llx\","
        "\"cpu_s\":%.3f,\"cpu_us_per_record\":%.2f}\n",
        workload.c_str(), records, outputs.out, workload == "overflow" ? "expired" : "throttled", outputs.other,
        static_cast<unsigned long long>(outputs.out_digest), cpu, cpu * 1e6 / static_cast<double>(records));
    // Every record counted (count), decided (throttle) or emitted or expired (overflow) exactly once.
    return outputs.out + outputs.other == static_cast<std::size_t>(records) ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice-bench-hotpath: %s\n", e.what());
    return 1;
  }
}
