// Storage faults under a running job, against a real broker: sluice-word-count (exactly-once,
// a RocksDB count store per task) as a separate process.
//   - its state.dir on a small loop-mounted ext4 volume that fills up: the job stops with
//     exit code 1 and a message naming the directory and the fix (not SIGABRT); after space
//     is freed a restart finishes the input and every word's counts are exactly 1..N;
//   - its stores' files damaged while it is stopped (a truncated SST, a truncated MANIFEST, a
//     garbled CURRENT, garbled bytes inside an SST's data block): each is detected (at open,
//     or for the data block at the first read, which stops that run with a clear error and
//     marks the store), wiped and restored from its changelog, and the counts go on exactly.
// The output is read with read_committed to the committed end offsets.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "broker_env.hpp"
#include "job_process.hpp"
#include "loop_volume.hpp"
#include "test_seed.hpp"
#include "word_lines.hpp"
#include "text.hpp"
#include "sluice/sluice.hpp"

using namespace std::chrono_literals;

namespace {

using sluice::test::file_text;

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using sluice::test::describe_exit;
using sluice::test::job_process;

class job_storage_fault : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sluice::test::broker_bootstrap().empty()) return;
    work_ = fs::temp_directory_path() / sluice::test::unique_name("sluice-storage");
    fs::create_directories(work_);
    cfg_.set("bootstrap.servers", sluice::test::broker_bootstrap());
    app_id_ = sluice::test::unique_name("storage-wc");
    input_ = sluice::test::unique_name("storage-lines");
    output_ = sluice::test::unique_name("storage-counts");
    sluice::topic_admin admin(cfg_);
    admin.create_topic(input_, 4);
    admin.create_topic(output_, 4);
    writer_ = std::make_unique<sluice::topic_writer>(cfg_);
    sluice::test::seed_test_rng(rng_, work_);
  }

  void TearDown() override {
    jobs_.clear();  // kills what is left
    if (work_.empty()) return;
    if (HasFailure() || std::getenv("SLUICE_KEEP_LOGS")) {
      for (const auto& log : logs_)
        std::cout << "---- last lines of " << log << " ----\n" << sluice::test::last_lines(log, 25) << "\n";
    }
    volume_.reset();
    if (HasFailure() || std::getenv("SLUICE_KEEP_LOGS")) {
      std::cout << "logs and state kept in " << work_ << "\n";
    } else {
      std::error_code ec;
      fs::remove_all(work_, ec);
    }
  }

  /// `count` words: "w<i>-" and `length` random letters (long words fill a disk sooner).
  void make_vocabulary(int count, std::size_t length) {
    std::uniform_int_distribution<int> letter('a', 'z');
    for (int i = 0; i < count; ++i) {
      std::string w = "w" + std::to_string(i) + "x";
      while (w.size() < length) w.push_back(static_cast<char>(letter(rng_)));
      words_.vocabulary.push_back(std::move(w));
    }
  }

  job_process& start_job(const fs::path& state_dir) {
    auto log = work_ / ("run" + std::to_string(logs_.size()) + ".log");
    logs_.push_back(log);
    std::vector<std::string> args = {SLUICE_WORD_COUNT_BIN};
    auto set = [&](const std::string& key, const std::string& value) {
      args.push_back("--set");
      args.push_back(key + "=" + value);
    };
    set("bootstrap.servers", sluice::test::broker_bootstrap());
    set("application.id", app_id_);
    set("input.topic", input_);
    set("output.topic", output_);
    set("state.dir", state_dir.string());
    set("processing.guarantee", "exactly_once");
    set("commit.interval.ms", "100");
    set("consumer.session.timeout.ms", "6000");
    set("instance.id", "a");
    // The smallest budget: small memtables, so state reaches the disk early.
    set("state.memory.budget.bytes", "8388608");
    jobs_.push_back(std::make_unique<job_process>(args, log));
    return *jobs_.back();
  }

  /// Writes `lines` lines of three words (no key: spread over the partitions) and counts them.
  void feed(int lines) { words_.feed(*writer_, input_, lines, rng_); }

  /// Whether every word reached its reference count in the output read so far.
  bool all_counted() const {
    for (const auto& [word, n] : words_.reference) {
      auto it = highest_.find(word);
      if (it == highest_.end() || it->second < n) return false;
    }
    return true;
  }

  /// Reads what the output has (read_committed) into the highest counts per word.
  void poll_progress(std::chrono::milliseconds wait = 200ms) {
    for (const auto& m : progress().poll(wait))
      if (m.key && m.value) {
        auto& h = highest_[*m.key];
        h = std::max(h, sluice::int64_serde::deserialize(*m.value));
      }
  }

  /// Polls the output until every word reached its reference count; false (and a failure)
  /// when the job exits first or `timeout` passes.
  bool wait_until_counted(job_process& job, std::chrono::seconds timeout) {
    auto deadline = clock_type::now() + timeout;
    for (;;) {
      if (all_counted()) return true;
      if (!job.running()) {
        ADD_FAILURE() << job.log() << ": the job " << describe_exit(job.wait_exit(0ms)) << " before finishing";
        return false;
      }
      if (clock_type::now() >= deadline) {
        ADD_FAILURE() << "the counts did not reach the reference within " << timeout.count() << " s";
        return false;
      }
      poll_progress();
    }
  }

  sluice::topic_reader& progress() {
    if (!progress_)
      progress_ = std::make_unique<sluice::topic_reader>(cfg_, std::vector<std::string>{output_},
                                                         sluice::isolation::read_committed);
    return *progress_;
  }

  void stop_cleanly(job_process& job) {
    job.signal(SIGTERM);
    auto st = job.wait_exit(90s);
    ASSERT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << job.log() << ": " << describe_exit(st);
  }

  /// Reads the whole output (read_committed, to the end offsets) and expects, for every
  /// word, the counts 1, 2, ..., N in order with N its reference count, and nothing else.
  void expect_exact_counts() {
    sluice::topic_reader reader(cfg_, {output_}, sluice::isolation::read_committed);
    std::map<std::string, std::vector<std::int64_t>> values;
    for (const auto& m : reader.read_to_end(120s))
      if (m.key && m.value) values[*m.key].push_back(sluice::int64_serde::deserialize(*m.value));
    int wrong = 0;
    for (const auto& [word, n] : words_.reference) {
      const auto it = values.find(word);
      std::vector<std::int64_t> expected(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) expected[static_cast<std::size_t>(i)] = i + 1;
      const auto got = it == values.end() ? std::vector<std::int64_t>{} : it->second;
      if (got != expected && ++wrong <= 10) {
        std::string shown;
        for (std::size_t i = 0; i < got.size() && i < 12; ++i) shown += std::to_string(got[i]) + " ";
        ADD_FAILURE() << "word '" << word << "': reference " << n << ", emitted " << got.size() << " counts: " << shown;
      }
    }
    EXPECT_EQ(wrong, 0) << "words whose counts are not exactly 1..N";
    EXPECT_EQ(values.size(), words_.reference.size()) << "counts for words never fed";
  }

  sluice::config cfg_;
  fs::path work_;
  std::string app_id_, input_, output_;
  std::unique_ptr<sluice::topic_writer> writer_;
  std::unique_ptr<sluice::topic_reader> progress_;
  sluice::test::word_lines words_;
  std::map<std::string, std::int64_t> highest_;
  std::mt19937 rng_;
  std::unique_ptr<sluice::test::loop_volume> volume_;
  std::vector<std::unique_ptr<job_process>> jobs_;
  std::vector<fs::path> logs_;
};

}  // namespace

namespace {

/// Every store directory of the word count ("word-counts") under state_dir, by task.
std::vector<fs::path> store_dirs(const fs::path& state_dir) {
  std::vector<fs::path> out;
  for (const auto& app : fs::directory_iterator(state_dir))
    for (const auto& task : fs::directory_iterator(app.path()))
      if (fs::is_directory(task.path() / "word-counts")) out.push_back(task.path() / "word-counts");
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<fs::path> files_ending(const fs::path& dir, const std::string& suffix) {
  std::vector<fs::path> out;
  for (const auto& f : fs::directory_iterator(dir)) {
    const auto name = f.path().filename().string();
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(f.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<fs::path> files_starting(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  for (const auto& f : fs::directory_iterator(dir))
    if (f.path().filename().string().rfind(prefix, 0) == 0) out.push_back(f.path());
  std::sort(out.begin(), out.end());
  return out;
}

void overwrite(const fs::path& file, std::uintmax_t at, const std::string& bytes) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(at));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

TEST_F(job_storage_fault,
       full_state_volume_stops_the_job_with_a_clear_error_and_a_restart_after_freeing_space_counts_exactly) {
  SLUICE_REQUIRE_BROKER();
  if (auto why = sluice::test::loop_volume::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  volume_ = std::make_unique<sluice::test::loop_volume>(work_ / "volume", 32);
  volume_->fill_leaving(std::uint64_t{3} << 20);
  const auto state_dir = volume_->path() / "state";
  make_vocabulary(60000, 100);

  // Input arrives until the job stops: a few MiB of distinct 100-byte words fill the volume.
  auto& job = start_job(state_dir);
  int rounds = 0;
  for (; rounds < 40 && job.running(); ++rounds) {
    feed(5000);
    poll_progress(500ms);
  }
  auto st = job.wait_exit(180s);
  ASSERT_TRUE(st.has_value()) << "the job still runs after " << rounds << " rounds of 5000 lines; "
                              << volume_->free_bytes() << " bytes free on the volume";
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 1) << job.log() << ": " << describe_exit(st);
  const auto log = file_text(job.log());
  EXPECT_NE(log.find("No space left on device"), std::string::npos) << sluice::test::last_lines(job.log(), 10);
  EXPECT_NE(log.find("is full: free space on it"), std::string::npos) << sluice::test::last_lines(job.log(), 10);
  EXPECT_NE(log.find(state_dir.string()), std::string::npos) << sluice::test::last_lines(job.log(), 10);
  EXPECT_EQ(log.find("Assertion"), std::string::npos) << sluice::test::last_lines(job.log(), 10);
  std::cout << "the job stopped after " << rounds << " rounds (" << describe_exit(st) << ")\n";

  // Restarted while the volume is still full, it stops again with the same advice, and
  // wipes no store: their files are sound, a wipe would only cost a full restore later.
  volume_->fill_leaving(0);
  const auto stores = store_dirs(state_dir);
  ASSERT_FALSE(stores.empty()) << "no store directory under " << state_dir;
  for (const auto& dir : stores) ASSERT_FALSE(files_ending(dir, ".sst").empty()) << dir << ": no table to keep";
  auto& full = start_job(state_dir);
  auto full_st = full.wait_exit(180s);
  ASSERT_TRUE(full_st.has_value()) << "the job runs on a full volume: " << sluice::test::last_lines(full.log(), 10);
  EXPECT_TRUE(WIFEXITED(*full_st) && WEXITSTATUS(*full_st) == 1) << describe_exit(full_st);
  const auto full_log = file_text(full.log());
  EXPECT_NE(full_log.find("is full: free space on it"), std::string::npos) << sluice::test::last_lines(full.log(), 10);
  EXPECT_EQ(full_log.find("wiping it"), std::string::npos) << sluice::test::last_lines(full.log(), 10);
  // A compaction may have merged tables meanwhile; a wipe leaves none.
  for (const auto& dir : stores)
    EXPECT_FALSE(files_ending(dir, ".sst").empty()) << dir << ": the store's tables are gone";

  // Space is freed; the restarted job replays its changelogs and finishes the input.
  volume_->free_ballast();
  feed(2000);
  auto& again = start_job(state_dir);
  ASSERT_TRUE(wait_until_counted(again, 300s));
  stop_cleanly(again);
  expect_exact_counts();
}

TEST_F(job_storage_fault, damaged_store_files_are_detected_wiped_and_restored_from_the_changelog_exactly) {
  SLUICE_REQUIRE_BROKER();
  const auto state_dir = work_ / "state";
  make_vocabulary(3000, 12);
  feed(20000);
  {
    auto& job = start_job(state_dir);
    ASSERT_TRUE(wait_until_counted(job, 300s));
    stop_cleanly(job);  // a clean stop flushes every store: SST files on disk
  }

  auto stores = store_dirs(state_dir);
  ASSERT_EQ(stores.size(), 4u) << "one count store per input partition";
  for (const auto& s : stores) ASSERT_FALSE(files_ending(s, ".sst").empty()) << s << " has no SST file";
  // Task 0: its largest SST cut in half. Task 1: its MANIFEST cut in half. Task 2: CURRENT
  // names a MANIFEST that does not exist. Task 3: bytes inside its data tables garbled.
  {
    auto ssts = files_ending(stores[0], ".sst");
    auto largest = *std::max_element(ssts.begin(), ssts.end(), [](const fs::path& a, const fs::path& b) {
      return fs::file_size(a) < fs::file_size(b);
    });
    fs::resize_file(largest, fs::file_size(largest) / 2);
  }
  {
    auto manifests = files_starting(stores[1], "MANIFEST-");
    ASSERT_FALSE(manifests.empty());
    fs::resize_file(manifests.back(), fs::file_size(manifests.back()) / 2);
  }
  std::ofstream(stores[2] / "CURRENT", std::ios::trunc) << "MANIFEST-999999\n";
  {
    // Every data table, not only the largest: a key is read from the newest table holding
    // it, and when a checkpoint and the clean stop each flushed nearly every key, the largest
    // table may be an older one no read reaches (only a compaction finds it). The store's
    // smallest keys are in the first block of every table that holds them, so a read of
    // any of them meets garbled bytes. The offsets family's tables (about a kilobyte, read
    // at open) are left whole: this fault is the one found by a read.
    std::size_t garbled = 0;
    for (const auto& sst : files_ending(stores[3], ".sst"))
      if (fs::file_size(sst) >= 4096) {
        overwrite(sst, 64, std::string(256, '\x5a'));
        ++garbled;
      }
    ASSERT_GT(garbled, 0u) << stores[3] << " has no data table to garble";
  }

  // Opening detects the SST cut and the missing MANIFEST. The garbled block is found by the
  // first read of a key in it: that run stops with a clear error and marks the store, and
  // the next start wipes it. The cut MANIFEST is either refused (a wipe) or read by RocksDB
  // as one whose last edits were never written, as after a crash during a write: an earlier
  // version whose data and changelog offset were flushed together, so the store replays its
  // changelog from there. Either way at most two runs, and the counts go on exactly.
  feed(5000);
  std::size_t wipes = 0;
  std::string logs;
  for (int run = 0; run < 2; ++run) {
    auto& job = start_job(state_dir);
    bool counted = false;
    auto deadline = clock_type::now() + 300s;
    while (job.running() && !(counted = all_counted()) && clock_type::now() < deadline) poll_progress();
    if (counted || clock_type::now() >= deadline) {
      ASSERT_TRUE(counted) << "the counts did not reach the reference within 300 s";
      stop_cleanly(job);
    }
    const auto log = file_text(job.log());
    for (auto pos = log.find("wiping it and restoring"); pos != std::string::npos;
         pos = log.find("wiping it and restoring", pos + 1))
      ++wipes;
    logs += log;
    if (counted) break;
    auto st = job.wait_exit(0ms);
    ASSERT_TRUE(run == 0 && st && WIFEXITED(*st) && WEXITSTATUS(*st) == 1)
        << "run " << run << " " << describe_exit(st) << ":\n"
        << sluice::test::last_lines(job.log(), 10);
    EXPECT_NE(log.find("Corruption: block checksum mismatch"), std::string::npos)
        << sluice::test::last_lines(job.log(), 10);
    EXPECT_NE(log.find("The store is marked corrupt: the next start wipes it"), std::string::npos)
        << sluice::test::last_lines(job.log(), 10);
    std::cout << "run 0 stopped on the garbled block, as expected; restarting\n";
  }
  expect_exact_counts();
  for (std::size_t task : {0u, 2u, 3u})
    EXPECT_NE(logs.find("wiped store 'word-counts' in '" + stores[task].parent_path().string() + "'"),
              std::string::npos)
        << "task " << task << "'s damaged store was not wiped";
  EXPECT_GE(wipes, 3u);
  EXPECT_LE(wipes, 4u) << "each damaged store is wiped at most once";
  EXPECT_EQ(logs.find("Assertion"), std::string::npos);
}
