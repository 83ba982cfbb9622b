// The RocksDB kv_store: data in the default column family, the changelog offset in
// "sluice_meta", pending writes (and a bounded read cache) in a store_cache, WAL off, atomic
// flush. See README.md ("Consistency protocol") for why this combination keeps data and
// offset in step across crashes.
#include <algorithm>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <rocksdb/comparator.h>
#include <rocksdb/compaction_filter.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/perf_level.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>

#include "rocksdb_internals.hpp"
#include "rocksdb_shared_state.hpp"
#include "sluice/error.hpp"
#include "sluice/state/rocksdb_store.hpp"
#include "sst_restore.hpp"
#include "store_cache.hpp"
#include "store_common.hpp"

namespace sluice::state {
namespace {

namespace fs = std::filesystem;
using detail::decode_or_throw;
using detail::encode_value;
using detail::is_live;
using detail::key_bounds;

constexpr const char* meta_column_family = "sluice_meta";
/// Left in a store's directory when RocksDB reported corruption; open refuses the store.
constexpr const char* corrupt_marker = "SLUICE_CORRUPT";
constexpr std::string_view offset_key = "changelog_offset";
/// The meta family's record of the store's value_format: one byte, its enumerator's value.
constexpr std::string_view format_key = "value_format";
/// A restore() of at least this many records into a store restored from empty switches it
/// to restoring through SST files (see rocksdb_store::begin_sst_restore); smaller restores
/// go through write batches.
constexpr std::size_t bulk_restore_min_records = 1000;

std::string_view view(const rocksdb::Slice& s) noexcept { return {s.data(), s.size()}; }
rocksdb::Slice slice(std::string_view s) noexcept { return {s.data(), s.size()}; }

/// How format_key holds `f`.
std::string encode_format(value_format f) { return std::string(1, static_cast<char>(f)); }

/// A recorded format's name, for the log.
std::string format_name(std::string_view recorded) {
  if (recorded == encode_format(value_format::plain)) return "plain";
  if (recorded == encode_format(value_format::timestamped)) return "timestamped";
  return "an unknown format (" + std::to_string(recorded.size()) + " bytes" +
         (recorded.empty() ? std::string() : ", first " + std::to_string(static_cast<unsigned char>(recorded[0]))) +
         ")";
}

/// Drops expired entries when compaction rewrites them: TTL without a job of its own.
/// Called concurrently from RocksDB's compaction threads; const and stateless but the clock.
class expiry_compaction_filter final : public rocksdb::CompactionFilter {
 public:
  explicit expiry_compaction_filter(detail::clock_fn now) : now_(std::move(now)) {}

  bool Filter(int /*level*/, const rocksdb::Slice& /*key*/, const rocksdb::Slice& existing, std::string* /*new_value*/,
              bool* /*value_changed*/) const override {
    auto d = detail::decode_value(view(existing));
    // Unknown formats are kept: a background thread cannot report, and reads will.
    return d.ok && d.expiry_ms != 0 && !is_live(d.expiry_ms, now_);
  }

  const char* Name() const override { return "sluice.expiry"; }

 private:
  detail::clock_fn now_;
};

/// A snapshot iterator merging a RocksDB iterator (an implicit snapshot taken at creation)
/// with the pending writes in range, copied at creation. Pending entries shadow committed
/// ones with the same key; tombstones and expired entries are skipped.
class merge_iterator final : public detail::kv_iterator_impl {
 public:
  struct pending_entry {
    std::string key;
    std::optional<std::string> stored;  ///< nullopt: a pending delete
  };

  merge_iterator(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, key_bounds bounds, direction dir,
                 std::vector<pending_entry> pending, std::vector<std::pair<std::string, std::string>> ranges,
                 std::int64_t now, const std::string& store_name)
      : bounds_(std::move(bounds)),
        reverse_(dir == direction::reverse),
        pending_(std::move(pending)),
        ranges_(std::move(ranges)),
        now_(now),
        store_name_(store_name) {
    rocksdb::ReadOptions ro;
    if (bounds_.lo) {
      lo_slice_ = slice(*bounds_.lo);
      ro.iterate_lower_bound = &lo_slice_;
    }
    if (bounds_.hi && !bounds_.hi_inclusive) {
      hi_slice_ = slice(*bounds_.hi);
      ro.iterate_upper_bound = &hi_slice_;
    }
    base_.reset(db->NewIterator(ro, cf));
    if (reverse_) {
      std::reverse(pending_.begin(), pending_.end());
      if (!bounds_.hi) {
        base_->SeekToLast();
      } else {
        base_->SeekForPrev(slice(*bounds_.hi));
        if (!bounds_.hi_inclusive && base_->Valid() && view(base_->key()) == *bounds_.hi) {
          base_->Prev();
        }
      }
    } else if (bounds_.lo) {
      base_->Seek(slice(*bounds_.lo));
    } else {
      base_->SeekToFirst();
    }
    settle();
  }

  bool valid() const noexcept override { return current_ != source::none; }
  std::string_view key() const noexcept override { return key_; }
  std::string_view value() const noexcept override { return value_; }

  void next() override {
    if (current_ == source::base) {
      advance_base();
    } else if (current_ == source::pending) {
      ++pos_;
    }
    settle();
  }

 private:
  enum class source { none, base, pending };

  // Skips committed entries under a pending range delete with one seek past the range.
  bool base_in_bounds() {
    while (base_->Valid() && !ranges_.empty()) {
      const auto r = detail::covering_range(ranges_, view(base_->key()));
      if (r < 0) {
        break;
      }
      const auto& [from, to] = ranges_[static_cast<std::size_t>(r)];
      if (reverse_) {
        base_->SeekForPrev(slice(from));
        if (base_->Valid() && view(base_->key()) == from) {
          base_->Prev();
        }
      } else {
        base_->Seek(slice(to));
      }
    }
    return base_->Valid() && bounds_.contains(view(base_->key()));
  }
  bool pending_in_bounds() const noexcept { return pos_ < pending_.size(); }
  void advance_base() {
    if (reverse_) {
      base_->Prev();
    } else {
      base_->Next();
    }
  }

  // Positions on the next visible entry at or after the cursors.
  void settle() {
    for (;;) {
      const bool b = base_in_bounds();
      const bool p = pending_in_bounds();
      if (!b && !p) {
        current_ = source::none;
        if (!base_->status().ok()) {
          throw sluice::error(errc::state,
                              "iterating state store '" + store_name_ + "' failed: " + base_->status().ToString());
        }
        return;
      }
      bool take_pending = p;
      if (b && p) {
        int c = view(base_->key()).compare(pending_[pos_].key);
        if (reverse_) {
          c = -c;
        }
        if (c == 0) {
          advance_base();  // shadowed by the pending write
        }
        take_pending = c >= 0;
      }
      if (take_pending) {
        const auto& e = pending_[pos_];
        if (e.stored) {
          auto d = decode_or_throw(*e.stored, store_name_);
          if (is_live(d.expiry_ms, now_)) {
            current_ = source::pending;
            key_ = e.key;
            value_ = d.value;
            return;
          }
        }
        ++pos_;
      } else {
        auto d = decode_or_throw(view(base_->value()), store_name_);
        if (is_live(d.expiry_ms, now_)) {
          current_ = source::base;
          key_ = view(base_->key());
          value_ = d.value;
          return;
        }
        advance_base();
      }
    }
  }

  key_bounds bounds_;
  bool reverse_;
  rocksdb::Slice lo_slice_;
  rocksdb::Slice hi_slice_;
  std::unique_ptr<rocksdb::Iterator> base_;
  std::vector<pending_entry> pending_;
  std::vector<std::pair<std::string, std::string>> ranges_;  ///< pending range deletes, sorted
  std::size_t pos_ = 0;
  std::int64_t now_;
  const std::string& store_name_;
  source current_ = source::none;
  std::string_view key_;
  std::string_view value_;
};

class rocksdb_store final : public kv_store {
 public:
  rocksdb_store(const store_options& options, std::shared_ptr<const detail::rocksdb_shared_state> shared)
      : shared_(std::move(shared)),
        name_(options.name),
        path_(options.directory / options.name),
        mode_(options.mode),
        threshold_(options.write_through_threshold_bytes),
        before_write_through_(options.before_write_through),
        ttl_ms_(options.ttl.count()),
        now_(detail::resolve_clock(options)),
        filter_(std::make_unique<expiry_compaction_filter>(now_)),
        configure_rocksdb_(options.configure_rocksdb),
        format_(options.format),
        cache_(options.read_cache_bytes) {
    write_options_.disableWAL = true;  // the changelog is the durability
    open();
    restored_from_empty_ = !offset_.has_value();
  }

  ~rocksdb_store() override { close(); }

  const std::string& name() const noexcept override { return name_; }

  using kv_store::get;

  bool get(std::string_view key, std::string& out) override {
    serve();
    if (const auto* e = cache_.find(key)) {
      if (e->st == detail::store_cache::state::dirty_delete || e->st == detail::store_cache::state::dirty_covered ||
          (e->st == detail::store_cache::state::clean && cache_.covered(key))) {
        return false;
      }
      auto d = decode_or_throw(e->stored, name_);
      if (!is_live(d.expiry_ms, now_)) {
        return false;
      }
      out.assign(d.value);
      return true;
    }
    if (cache_.covered(key)) {
      return false;
    }
    pin_.Reset();
    auto s = db_->Get(read_options_, data_cf_, slice(key), &pin_);
    if (s.IsNotFound()) {
      return false;
    }
    check(s, "read from");
    auto d = decode_or_throw(view(pin_), name_);
    if (!is_live(d.expiry_ms, now_)) {
      return false;
    }
    out.assign(d.value);
    pin_.Reset();
    return true;
  }

  void put(std::string_view key, std::string_view value) override {
    serve();
    encode_value(scratch_, value, detail::expiry_now(now_, ttl_ms_));
    cache_.put(key, scratch_);  // swaps buffers: scratch_ gets the replaced value's
    maybe_write_through();
  }

  bool put_if_absent(std::string_view key, std::string_view value) override {
    if (get(key, scratch_get_)) {
      return false;
    }
    put(key, value);
    return true;
  }

  void remove(std::string_view key) override {
    serve();
    cache_.remove(key);
    maybe_write_through();
  }

  void remove_range(std::string_view from, std::string_view to) override {
    serve();
    cache_.remove_range(from, to);
    maybe_write_through();
  }

  void compact_range(std::string_view from, std::string_view to, compaction_mode mode) override {
    serve();
    if (from >= to) {
      return;
    }
    const rocksdb::Slice begin = slice(from);
    const rocksdb::Slice end = slice(to);
    rocksdb::CompactRangeOptions o;
    o.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForceOptimized;
    o.exclusive_manual_compaction = false;  // RocksDB's own compactions go on meanwhile
    if (mode == compaction_mode::wait) {
      check(db_->CompactRange(o, data_cf_, &begin, &end), "compact_range");
      return;
    }
    // A manual compaction down to the last level (SuggestCompactRange never touches the last
    // level, where the range tombstones end up) on a thread of its own, one at a time: a
    // request while one runs is dropped (the next comes with more consumed entries).
    // close() cancels it (DisableManualCompaction) and joins.
    if (compacting_.exchange(true)) {
      return;
    }
    if (compaction_thread_.joinable()) {
      compaction_thread_.join();
    }
    compaction_thread_ = std::thread([this, o, from = std::string(from), to = std::string(to)] {
      const rocksdb::Slice b(from);
      const rocksdb::Slice e(to);
      auto s = db_->CompactRange(o, data_cf_, &b, &e);
      if (!s.ok() && !s.IsIncomplete()) {  // Incomplete: cancelled by close()
        spdlog::warn("state: background compaction of store '{}' failed: {}", name_, s.ToString());
      }
      compacting_ = false;
    });
  }

  std::optional<std::uint64_t> approximate_bytes() override {
    std::uint64_t sst = 0, memtables = 0;
    db_->GetIntProperty(data_cf_, "rocksdb.live-sst-files-size", &sst);
    db_->GetIntProperty(data_cf_, "rocksdb.cur-size-all-mem-tables", &memtables);
    return sst + memtables;
  }

  std::uint64_t approximate_count() override {
    serve();
    std::uint64_t estimate = 0;
    db_->GetIntProperty(data_cf_, "rocksdb.estimate-num-keys", &estimate);
    std::int64_t n = static_cast<std::int64_t>(estimate);
    for (const auto* s : cache_.dirty()) {
      if (s->second.st == detail::store_cache::state::dirty_put) {
        ++n;
      } else if (s->second.st == detail::store_cache::state::dirty_delete) {
        --n;
      }
    }
    return static_cast<std::uint64_t>(std::max<std::int64_t>(n, 0));
  }

  std::optional<changelog_offset> committed_offset() const noexcept override { return offset_; }

  void commit(changelog_offset next_changelog_offset) override {
    serve();
    // An idle store (nothing written since its last commit, the same changelog offset) has
    // nothing to write: under exactly-once every commit reaches every store of a task, and
    // the offset written again would be a RocksDB write per idle store per commit.
    if (!cache_.has_pending() && offset_ == next_changelog_offset && !format_unrecorded_) return;
    // Data and offset in one WriteBatch: one atomic write, one memtable generation.
    write_pending(next_changelog_offset, "commit");
    offset_ = next_changelog_offset;
  }

  void abort() override { cache_.drop_dirty(); }

  void restore(std::span<const restore_record> batch, changelog_offset next_offset) override {
    if (cache_.has_pending()) {
      throw sluice::error(errc::state,
                          "restore of state store '" + name_ + "' with pending writes; commit or abort them first");
    }
    if (restored_from_empty_ && !sst_restore_ && batch.size() >= bulk_restore_min_records) {
      begin_sst_restore();
    }
    const std::int64_t now = now_();
    if (sst_restore_) {
      // Nothing was served yet, so the read cache holds none of these keys.
      for (const auto& r : batch) {
        std::int64_t expiry = detail::expiry_for(r.timestamp_ms.value_or(now), ttl_ms_);
        if (!r.value || !is_live(expiry, now)) {
          sst_restore_->add(r.key, std::nullopt);
        } else {
          encode_value(scratch_, *r.value, expiry);
          sst_restore_->add(r.key, scratch_);
        }
      }
      check(sst_restore_->end_batch(next_offset), "restore");
      offset_ = next_offset;
      return;
    }
    batch_.Clear();
    for (const auto& r : batch) {
      cache_.forget(r.key);
      std::int64_t expiry = detail::expiry_for(r.timestamp_ms.value_or(now), ttl_ms_);
      if (!r.value || !is_live(expiry, now)) {
        check(batch_.Delete(data_cf_, slice(r.key)), "restore");
      } else {
        encode_value(scratch_, *r.value, expiry);
        check(batch_.Put(data_cf_, slice(r.key), slice(scratch_)), "restore");
      }
    }
    check(batch_.Put(meta_cf_, slice(offset_key), slice(detail::encode_offset(next_offset))), "restore");
    put_format_if_unrecorded("restore");
    check(db_->Write(write_options_, &batch_), "restore");
    batch_.Clear();
    offset_ = next_offset;
    format_unrecorded_ = false;
  }

  void flush() override {
    if (sst_restore_) {
      // The runtime checkpoints a store once its restore ends: what the restore buffered is
      // ingested now, durably with its offset, before the task's first record.
      serve();
      return;
    }
    flush_memtables();
  }

  bool begin_flush() override { return !sst_restore_ || sst_restore_->begin_finish(); }

  std::size_t pending_bytes() const noexcept override { return cache_.dirty_bytes(); }

  // The data column family's memtable entries. RocksDB counts an entry per insert; a value
  // updated in place (inplace_update_support, as the overflow buffer's customer store asks)
  // adds none, so a store rewriting a few keys holds few entries however often it commits.
  std::optional<std::uint64_t> unflushed_entries() const noexcept override {
    if (!db_) return std::nullopt;
    std::uint64_t active = 0, immutable = 0;
    if (!db_->GetIntProperty(data_cf_, "rocksdb.num-entries-active-mem-table", &active) ||
        !db_->GetIntProperty(data_cf_, "rocksdb.num-entries-imm-mem-tables", &immutable))
      return std::nullopt;
    return active + immutable;
  }

  std::optional<std::uint64_t> int_property(std::string_view name) {
    serve();
    std::uint64_t value = 0;
    if (!db_ || !db_->GetIntProperty(data_cf_, rocksdb::Slice(name.data(), name.size()), &value)) {
      return std::nullopt;
    }
    return value;
  }

  // What RocksDB applies now, not the options the store opened with: a restore from empty
  // pauses the compactions for its duration. Does not end that restore (serve()).
  std::optional<bool> auto_compactions() const {
    if (!db_) return std::nullopt;
    return !db_->GetOptions(data_cf_).disable_auto_compactions;
  }

  void compact_now() {
    serve();
    rocksdb::CompactRangeOptions o;
    o.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
    check(db_->CompactRange(o, data_cf_, nullptr, nullptr), "compact");
  }

  void close() override {
    if (!db_) {
      return;
    }
    if (compaction_thread_.joinable()) {
      db_->DisableManualCompaction();
      compaction_thread_.join();
    }
    require_no_open_iterators("close");
    cache_.clear();
    try {
      end_sst_restore();  // a task closed while restoring keeps what it restored
      flush_memtables();
    } catch (const std::exception& e) {
      spdlog::warn(
          "state: store '{}' could not flush on close ({}); the next start replays "
          "more of its changelog",
          name_, e.what());
    }
    close_db();
  }

 protected:
  kv_iterator make_range(std::string_view from, std::string_view to, direction dir) override {
    return scan(key_bounds::range(from, to), dir);
  }
  kv_iterator make_prefix(std::string_view key_prefix, direction dir) override {
    return scan(key_bounds::prefix(key_prefix), dir);
  }
  kv_iterator make_all(direction dir) override { return scan(key_bounds::all(), dir); }

 private:
  void check(const rocksdb::Status& s, const char* what) const {
    if (!s.ok()) {
      throw sluice::error(errc::state, std::string("cannot ") + what + " state store '" + name_ + "' at '" +
                                           path_.string() + "': " + s.ToString() + out_of_space_hint(s) +
                                           corruption_hint(s));
    }
  }

  // A file damaged where opening does not look (a data block of an SST) shows up as a
  // Corruption status on the read that meets it. The store leaves a marker file so the next
  // open refuses it, and the runtime wipes it and restores it from its changelog instead of
  // failing on the same block at every start.
  std::string corruption_hint(const rocksdb::Status& s) const {
    if (!s.IsCorruption()) {
      return {};
    }
    std::ofstream marker(path_ / corrupt_marker, std::ios::trunc);
    marker << s.ToString() << "\n";
    return ". The store is marked corrupt: the next start wipes it and restores it from its "
           "changelog; restart the job";
  }

  // RocksDB reports a full disk as an I/O error with the NoSpace subcode; after one failed
  // background flush, later writes report that error again until space is free.
  std::string out_of_space_hint(const rocksdb::Status& s) const {
    if (!s.IsNoSpace() && s.ToString().find("No space left on device") == std::string::npos) {
      return {};
    }
    return ". The filesystem of '" + path_.parent_path().string() +
           "' is full: free space on it (or move state.dir to a larger volume) and restart; "
           "the store keeps its last durable commit and replays its changelog from there";
  }

  void open() {
    std::error_code ec;
    fs::create_directories(path_, ec);
    if (ec) {
      throw sluice::error(errc::state, "cannot create the directory of state store '" + name_ + "' at '" +
                                           path_.string() + "': " + ec.message());
    }
    if (std::ifstream marker(path_ / corrupt_marker); marker) {
      std::string reason;
      std::getline(marker, reason);
      throw sluice::error(errc::state, "state store '" + name_ + "' at '" + path_.string() +
                                           "' was found corrupt while running (" + reason +
                                           "); wipe the directory and the store is rebuilt from "
                                           "its changelog");
    }
    open_db();
    detail::sst_restore::remove_leftovers(path_);
    read_offset();
    if (const auto why = format_change()) {
      spdlog::info(
          "state: store '{}' at '{}' {}; wiping its data and changelog offset, so that it is restored "
          "from its changelog",
          name_, path_.string(), *why);
      wipe_and_reopen();
    }
    spdlog::info("state: opened store '{}' at '{}' (changelog offset {})", name_, path_.string(),
                 offset_ ? std::to_string(offset_->value()) : std::string("none: new store"));
  }

  void read_offset() {
    rocksdb::PinnableSlice stored;
    auto s = db_->Get(read_options_, meta_cf_, slice(offset_key), &stored);
    if (s.ok()) {
      offset_ = detail::decode_offset(view(stored));
      if (!offset_) {
        close();
        throw sluice::error(errc::state, "state store '" + name_ + "' at '" + path_.string() +
                                             "' has a malformed changelog offset; wipe it");
      }
    } else if (!s.IsNotFound()) {
      auto message = s.ToString();
      close();
      throw sluice::error(errc::state, "cannot read the changelog offset of state store '" + name_ + "' at '" +
                                           path_.string() + "': " + message);
    }
  }

  // Why the store's data cannot be read as format_ (so it must start empty), or nullopt. A
  // store that has not recorded format_ records it with its next write (format_unrecorded_).
  // Stores recorded no format before aggregations kept timestamps: data without a record is
  // plain.
  std::optional<std::string> format_change() {
    rocksdb::PinnableSlice stored;
    auto s = db_->Get(read_options_, meta_cf_, slice(format_key), &stored);
    if (s.ok()) {
      if (view(stored) == encode_format(format_)) return std::nullopt;
      format_unrecorded_ = true;
      return "holds values laid out as " + format_name(view(stored)) + " but is opened as " +
             format_name(encode_format(format_));
    }
    if (!s.IsNotFound()) {
      auto message = s.ToString();
      close();
      throw sluice::error(errc::state, "cannot read the value format of state store '" + name_ + "' at '" +
                                           path_.string() + "': " + message);
    }
    format_unrecorded_ = true;
    if (format_ == value_format::plain || !holds_data()) return std::nullopt;
    return "holds values written before stores recorded their layout (plain) but is opened as " +
           format_name(encode_format(format_));
  }

  bool holds_data() {
    if (offset_) return true;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read_options_, data_cf_));
    it->SeekToFirst();
    check(it->status(), "read from");
    return it->Valid();
  }

  // Removes the store's directory (data, offset, everything) and opens it again, empty.
  void wipe_and_reopen() {
    close_db();
    std::error_code ec;
    fs::remove_all(path_, ec);
    if (!ec) fs::create_directories(path_, ec);
    if (ec) {
      throw sluice::error(errc::state, "cannot wipe state store '" + name_ + "' at '" + path_.string() +
                                           "': " + ec.message() + "; remove the directory and restart");
    }
    offset_.reset();
    open_db();
  }

  // Adds the store's format to batch_ while it is not recorded: with the first write, so the
  // record is durable whenever data is (one write batch, atomic flush).
  void put_format_if_unrecorded(const char* what) {
    if (format_unrecorded_) check(batch_.Put(meta_cf_, slice(format_key), slice(encode_format(format_))), what);
  }

  void open_db() {
    const auto& env = shared_->options;
    rocksdb::Options o;
    o.create_if_missing = true;
    o.create_missing_column_families = true;
    o.atomic_flush = true;
    o.avoid_flush_during_shutdown = false;
    o.write_buffer_manager = shared_->write_buffer_manager;
    o.write_buffer_size = env.write_buffer_bytes_per_store;
    o.max_write_buffer_number = 3;
    o.max_open_files = env.max_open_files_per_store;
    o.max_background_jobs = env.background_jobs;
    // The info log goes to spdlog, not to a LOG file: RocksDB's file logger aborts the
    // process on a full disk (see make_info_logger).
    o.info_log = detail::make_info_logger(path_.string());
    // RocksDB preallocates 4 MiB for each MANIFEST by default, which alone fills a small
    // volume with a few stores; a MANIFEST grows by a few hundred bytes per flush.
    o.manifest_preallocation_size = std::size_t{64} << 10;
    o.level_compaction_dynamic_level_bytes = true;
    o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(shared_->table_options));
    o.compaction_filter = filter_.get();  // always: values written with a TTL may exist
    if (ttl_ms_ > 0) {
      // Files no compaction touches would keep expired entries forever; rewrite them at
      // least this often (no more than daily, so short TTLs do not rewrite the store hourly).
      const auto ttl_s = static_cast<std::uint64_t>(ttl_ms_ / 1000);
      o.periodic_compaction_seconds = std::clamp<std::uint64_t>(ttl_s, 86400, 30 * 86400);
    }
    if (configure_rocksdb_) {
      configure_rocksdb_(o);
    }
    o.atomic_flush = true;  // the consistency protocol depends on it
    o.create_if_missing = true;
    o.create_missing_column_families = true;

    rocksdb::ColumnFamilyOptions meta(o);
    meta.compaction_filter = nullptr;
    meta.write_buffer_size = std::size_t{1} << 20;
    meta.periodic_compaction_seconds = 0;
    data_options_ = o;
    meta_options_ = rocksdb::Options(rocksdb::DBOptions(o), meta);
    std::vector<rocksdb::ColumnFamilyDescriptor> families{
        {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions(o)}, {meta_column_family, meta}};
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* raw = nullptr;
    auto s = rocksdb::DB::Open(rocksdb::DBOptions(o), path_.string(), families, &handles, &raw);
    if (!s.ok()) {
      const auto what = "cannot open state store '" + name_ + "' at '" + path_.string() + "': " + s.ToString();
      if (const auto full = out_of_space_hint(s); !full.empty()) throw out_of_space_error(errc::state, what + full);
      throw sluice::error(errc::state, what +
                                           ". If another process uses it, stop that process; if it is "
                                           "corrupt, wipe the directory and the store is rebuilt from its "
                                           "changelog");
    }
    db_.reset(raw);
    data_cf_ = handles.at(0);
    meta_cf_ = handles.at(1);
  }

  void close_db() noexcept {
    for (auto* h : {data_cf_, meta_cf_}) {
      if (h != nullptr) {
        db_->DestroyColumnFamilyHandle(h);
      }
    }
    data_cf_ = meta_cf_ = nullptr;
    auto s = db_->Close();
    if (!s.ok()) {
      spdlog::warn("state: closing store '{}' at '{}': {}", name_, path_.string(), s.ToString());
    }
    db_.reset();
  }

  void flush_memtables() {
    rocksdb::FlushOptions fo;
    fo.wait = true;
    // atomic_flush: both column families reach one MANIFEST record, or neither does.
    check(db_->Flush(fo, {data_cf_, meta_cf_}), "flush");
  }

  // A store restored from empty serves nothing until its restore ends, so its records need
  // no memtable: they are buffered, sorted by a plain byte comparison and ingested as SST
  // files together with their offset (sst_restore.hpp), where RocksDB's skip list compared
  // every key dozens of times on the restoring thread and a vector memtable sorted them again
  // with RocksDB's comparator at each flush (bench/README.md, "Restore"). The first operation
  // other than restore() (serve()) ingests what is buffered. Entered once per store, never
  // with iterators open, and only where keys are ordered bytewise (the expert hook may set
  // another comparator).
  void begin_sst_restore() {
    restored_from_empty_ = false;
    if (open_iterators() != 0 || compaction_thread_.joinable() ||
        data_options_.comparator != rocksdb::BytewiseComparator()) {
      return;
    }
    detail::sst_restore::target t;
    t.db = db_.get();
    t.data = data_cf_;
    t.meta = meta_cf_;
    t.data_options = &data_options_;
    t.meta_options = &meta_options_;
    t.meta_key = std::string(offset_key);
    t.meta_constants = {{std::string(format_key), encode_format(format_)}};
    t.directory = path_;
    t.write_buffer_manager = data_options_.write_buffer_manager;
    // A chunk is sealed early, while the chunk thread is idle, from a quarter of the write
    // buffer: the size a chunk is sealed at under memory pressure too. Smaller chunks shorten
    // the restore's tail no further on two cores but leave more overlapping files, which
    // RocksDB compacts during the restore (bench/README.md, "Restore": 2 MiB and 1 MiB
    // chunks cost 0.3-0.5 CPU s more per 2,000,000 records).
    const auto chunk_bytes = data_options_.write_buffer_size;
    sst_restore_ = std::make_unique<detail::sst_restore>(std::move(t), chunk_bytes, chunk_bytes / 4);
    // The chunks overlap: compacting them while more arrive rewrites the same keys again at
    // each new file, on the cores the restore reads with (12 % of the restore's CPU samples).
    // Paused until the restore ends, the store compacts them once, as Kafka Streams' bulk
    // loading did. A store opens with its configured options, so after a crash it compacts again.
    if (!data_options_.disable_auto_compactions &&
        db_->SetOptions(data_cf_, {{"disable_auto_compactions", "true"}}).ok()) {
      compactions_paused_ = true;
    }
  }

  // Ingests what the SST restore buffered and ends it; the store is restored through write
  // batches from now on.
  void end_sst_restore() {
    if (!sst_restore_) return;
    auto ending = std::move(sst_restore_);
    const auto finished = ending->finish();
    if (compactions_paused_) {
      compactions_paused_ = false;
      const auto s = db_->SetOptions(data_cf_, {{"disable_auto_compactions", "false"}});
      if (!s.ok()) {
        spdlog::warn("state: store '{}' could not resume its compactions after its restore ({})", name_, s.ToString());
      }
    }
    check(finished, "restore");
  }

  // Every operation but restore() and close() calls this first: the store serves from now on.
  void serve() {
    restored_from_empty_ = false;
    end_sst_restore();
  }

  // Pending entries in bounds are copied so the iterator is a snapshot; the base iterator
  // pins RocksDB's current version itself.
  kv_iterator scan(const key_bounds& b, direction dir) {
    serve();
    std::vector<merge_iterator::pending_entry> pending;
    if (b.empty()) {
      return wrap_iterator(
          std::make_unique<detail::vector_iterator>(std::vector<std::pair<std::string, std::string>>{}));
    }
    cache_.for_each_dirty_in(b, [&](std::string_view key, const detail::store_cache::entry& e) {
      merge_iterator::pending_entry copy{std::string(key), std::nullopt};
      if (e.st == detail::store_cache::state::dirty_put) {
        copy.stored.emplace(e.stored);
      }
      pending.push_back(std::move(copy));
    });
    return wrap_iterator(std::make_unique<merge_iterator>(db_.get(), data_cf_, b, dir, std::move(pending),
                                                          cache_.ranges().intersecting(b), now_(), name_));
  }

  void maybe_write_through() {
    if (mode_ == write_mode::write_through && cache_.dirty_bytes() > threshold_) {
      if (before_write_through_) before_write_through_();
      // Data only: the offset moves at commit, so a crash replays from the older offset.
      write_pending(std::nullopt, "write to");
    }
  }

  // One WriteBatch of the range deletes, then the dirty entries (each key once) and, if
  // given, the offset; then the entries are clean. Ranges go first: every dirty entry inside
  // a range was written after it (earlier ones became dirty_covered and write nothing), so
  // it must survive. On a failed write nothing changes and the error propagates.
  void write_pending(std::optional<changelog_offset> next_changelog_offset, const char* what) {
    batch_.Clear();
    for (const auto& [from, to] : cache_.ranges().ranges()) {
      check(batch_.DeleteRange(data_cf_, slice(from), slice(to)), what);
    }
    for (const auto* s : cache_.dirty()) {
      switch (s->second.st) {
        case detail::store_cache::state::dirty_put:
          check(batch_.Put(data_cf_, slice(s->first), slice(s->second.stored)), what);
          break;
        case detail::store_cache::state::dirty_delete: check(batch_.Delete(data_cf_, slice(s->first)), what); break;
        case detail::store_cache::state::dirty_covered:
        case detail::store_cache::state::clean: break;
      }
    }
    if (next_changelog_offset) {
      check(batch_.Put(meta_cf_, slice(offset_key), slice(detail::encode_offset(*next_changelog_offset))), what);
    }
    put_format_if_unrecorded(what);
    {
      // RocksDB counts every key comparison of the memtable inserts in a thread-local perf
      // context by default (kEnableCount); through the shared library each count is a TLS
      // lookup, about a fifth of a key comparison. sluice reads none of these counters, so a
      // commit's write runs without them (a store rewriting thousands of keys per commit, the
      // overflow buffer's customers, spends a third of its instructions in these inserts;
      // bench/README.md, "Direct path: instruction counts"). The thread's level is restored.
      const auto level = rocksdb::GetPerfLevel();
      rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
      const auto written = db_->Write(write_options_, &batch_);
      rocksdb::SetPerfLevel(level);
      check(written, what);
    }
    batch_.Clear();
    cache_.mark_written();
    format_unrecorded_ = false;
  }

  std::shared_ptr<const detail::rocksdb_shared_state> shared_;
  std::string name_;
  fs::path path_;
  write_mode mode_;
  std::size_t threshold_;
  std::function<void()> before_write_through_;
  std::int64_t ttl_ms_;
  detail::clock_fn now_;
  std::unique_ptr<expiry_compaction_filter> filter_;  // outlives db_ (declared before it)
  rocksdb_config_setter configure_rocksdb_;
  value_format format_;
  bool format_unrecorded_ = false;    ///< the meta family does not hold format_ yet: the next write adds it
  bool restored_from_empty_ = false;  ///< no offset at open, and restore() is all it has seen
  rocksdb::Options data_options_;     ///< as opened (after the expert hook): SST files are written with them
  rocksdb::Options meta_options_;
  std::unique_ptr<rocksdb::DB> db_;
  std::unique_ptr<detail::sst_restore> sst_restore_;  ///< while restoring from empty; before db_ is closed
  bool compactions_paused_ = false;                   ///< auto compactions are off while sst_restore_ fills the store
  std::thread compaction_thread_;                     ///< compact_range(background); joined by close()
  std::atomic<bool> compacting_{false};
  rocksdb::ColumnFamilyHandle* data_cf_ = nullptr;
  rocksdb::ColumnFamilyHandle* meta_cf_ = nullptr;
  detail::store_cache cache_;
  rocksdb::WriteBatch batch_;  // reused by every commit, write-through and restore
  rocksdb::WriteOptions write_options_;
  rocksdb::ReadOptions read_options_;
  rocksdb::PinnableSlice pin_;
  std::optional<changelog_offset> offset_;
  std::string scratch_;
  std::string scratch_get_;
};

}  // namespace

std::optional<std::uint64_t> rocksdb_int_property(kv_store& store, std::string_view name) {
  auto* r = dynamic_cast<rocksdb_store*>(&store);
  return r != nullptr ? r->int_property(name) : std::nullopt;
}

std::optional<bool> rocksdb_auto_compactions(kv_store& store) {
  auto* r = dynamic_cast<rocksdb_store*>(&store);
  return r != nullptr ? r->auto_compactions() : std::nullopt;
}

void rocksdb_compact_now(kv_store& store) {
  if (auto* r = dynamic_cast<rocksdb_store*>(&store)) {
    r->compact_now();
  }
}

std::unique_ptr<kv_store> open_rocksdb_store(const store_options& options, rocksdb_environment& environment) {
  detail::validate_store_name(options.name);
  if (options.directory.empty()) {
    throw sluice::error(errc::invalid_config, "state store '" + options.name +
                                                  "' has no directory; pass the task directory in store_options");
  }
  return std::make_unique<rocksdb_store>(options, environment.shared());
}

}  // namespace sluice::state
