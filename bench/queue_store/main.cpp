// sluice-bench-queue-store: the head read of a queue store after N consumed entries, against
// a fresh store and against a per-entry-delete queue in the same RocksDB (seed 001's
// pathology: every consumed entry leaves a tombstone that the next head read steps over).
//
//   sluice-bench-queue-store [--consumed N] [--reads R] [--settle-s S] [--dir PATH]
//
// The used store is read twice: at once after its last pop, and after S seconds (default 10)
// in which the background compaction it asked for (queue_store_options::
// compact_after_consumed) can finish. Prints one line per variant (ns per head read) and the
// ratios. No broker needed.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "sluice/state/queue_store.hpp"
#include "sluice/state/rocksdb_store.hpp"

namespace {

using namespace sluice::state;
using clock_type = std::chrono::steady_clock;

double ns_per(std::int64_t reads, const std::function<void()>& read) {
  const auto start = clock_type::now();
  for (std::int64_t i = 0; i < reads; ++i) read();
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - start).count();
  return static_cast<double>(ns) / static_cast<double>(reads);
}

std::string be64(std::uint64_t v) {
  std::string out;
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xFF));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t consumed = 10'000'000;
  std::int64_t reads = 100'000;
  std::int64_t settle_s = 10;
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "sluice-bench-queue-store";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--consumed")
      consumed = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--reads")
      reads = std::strtoll(argv[i + 1], nullptr, 10);
    else if (a == "--dir")
      dir = argv[i + 1];
    else if (a == "--settle-s")
      settle_s = std::strtoll(argv[i + 1], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: sluice-bench-queue-store [--consumed N] [--reads R] [--settle-s S] [--dir PATH]\n");
      return 2;
    }
  }
  std::filesystem::remove_all(dir);
  rocksdb_environment env({.memory_budget_bytes = std::size_t{256} << 20});
  const std::uint64_t round = 100'000;
  const std::string value(64, 'v');
  auto open = [&](const char* name) {
    return open_rocksdb_store({.name = name, .directory = dir, .read_cache_bytes = 0}, env);
  };

  // Fresh: two entries, nothing consumed.
  queue_store fresh(open("fresh"), nullptr);
  fresh.append("c", {0, 0}, value, 0);
  fresh.append("c", {0, 1}, value, 0);
  fresh.commit(changelog_offset(1));
  fresh.flush();

  // Used: `consumed` entries through the queue (range deletes behind the head cursor).
  queue_store used(open("used"), nullptr);
  std::int64_t offset = 0;
  std::uint64_t next = 0;
  while (next < consumed) {
    const std::uint64_t n = std::min(round, consumed - next);
    for (std::uint64_t i = 0; i < n; ++i) used.append("c", {0, next++}, value, 0);
    used.commit(changelog_offset(++offset));
    used.pop("c", n, 0);
    used.commit(changelog_offset(++offset));
  }
  used.append("c", {0, next}, value, 0);
  used.append("c", {0, next + 1}, value, 0);
  used.commit(changelog_offset(++offset));
  used.flush();

  // Per-entry deletes: the same entries in a plain kv_store, each consumed entry deleted on
  // its own, the head found by scanning from the queue's first key (no cursor).
  auto naive = open("per-entry-delete");
  offset = 0;
  next = 0;
  while (next < consumed) {
    const std::uint64_t n = std::min(round, consumed - next);
    for (std::uint64_t i = 0; i < n; ++i) naive->put("c" + be64(next + i), value);
    naive->commit(changelog_offset(++offset));
    for (std::uint64_t i = 0; i < n; ++i) naive->remove("c" + be64(next + i));
    naive->commit(changelog_offset(++offset));
    next += n;
  }
  naive->put("c" + be64(next), value);
  naive->put("c" + be64(next + 1), value);
  naive->commit(changelog_offset(++offset));
  naive->flush();

  std::size_t sink = 0;
  const double t_fresh = ns_per(reads, [&] { sink += fresh.front("c")->value.size(); });
  const double t_used = ns_per(reads, [&] { sink += used.front("c")->value.size(); });
  // The queue store asked for a background compaction of its entries every 1,000,000
  // consumed entries (queue_store_options::compact_after_consumed); give it time to run.
  std::this_thread::sleep_for(std::chrono::seconds(settle_s));
  const double t_settled = ns_per(reads, [&] { sink += used.front("c")->value.size(); });
  const std::int64_t naive_reads = std::max<std::int64_t>(1, reads / 1000);
  const double t_naive = ns_per(naive_reads, [&] {
    auto it = naive->prefix("c");
    sink += it.valid() ? it.value().size() : 0;
  });
  std::printf("consumed entries          %llu\n", static_cast<unsigned long long>(consumed));
  std::printf("fresh queue store         %10.0f ns per head read (%lld reads)\n", t_fresh,
              static_cast<long long>(reads));
  std::printf("used queue store          %10.0f ns per head read (%lld reads)\n", t_used,
              static_cast<long long>(reads));
  std::printf("used, after %3llds settle  %10.0f ns per head read (%lld reads)\n", static_cast<long long>(settle_s),
              t_settled, static_cast<long long>(reads));
  std::printf("per-entry-delete queue    %10.0f ns per head read (%lld reads)\n", t_naive,
              static_cast<long long>(naive_reads));
  std::printf("used at once / fresh      %10.2fx\n", t_used / t_fresh);
  std::printf("used settled / fresh      %10.2fx (target <= 1.5x)\n", t_settled / t_fresh);
  std::printf("per-entry-delete / used   %10.0fx\n", t_naive / t_used);
  fresh.close();
  used.close();
  naive->close();
  std::filesystem::remove_all(dir);
  return sink == 0 ? 1 : 0;
}
