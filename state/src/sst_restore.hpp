// sst_restore: restores a RocksDB store from empty by building SST files and ingesting
// them, without a memtable. See README.md ("Restore from empty").
//
// Changelog records are appended to an in-memory chunk (key and stored value bytes, one
// index entry each). When the chunk reaches its bound, it is sealed with the changelog
// offset of the last restore batch it holds and handed to a thread of its own, which sorts
// it with a plain byte comparison (the store's keys are ordered bytewise), keeps the last
// write per key (a tombstone stays a delete, for keys of earlier chunks), writes one SST
// file for the data and one holding the offset, and ingests both in one
// IngestExternalFiles call: RocksDB records them in the MANIFEST together or not at all,
// so data and offset stay together across a crash as with a write batch. Each chunk is
// ingested over the earlier ones (RocksDB gives an overlapping file a newer sequence
// number), so the last write per key in changelog order wins.
//
// Memory: the chunks are charged to the shared WriteBufferManager as memtables are (a
// sealed chunk as memory being freed, like a flushing memtable), and a chunk is sealed at
// the store's write_buffer_size or earlier when the manager asks memtables to flush.
//
// Early sealing: a chunk holding at least the minimum chunk size is also sealed whenever
// the chunk thread is idle, so the sort, write and ingestion overlap the reading of the
// changelog and what is left after its last record is one small chunk, not most of a
// write buffer. The minimum bounds the number of overlapping files the restore leaves for
// RocksDB to compact (bench/README.md, "Restore").
//
// Lifecycle: created by the store at the first large restore() from empty -> add() per
// record and end_batch() per restore() -> begin_finish() until true (optional) -> finish()
// once (the store serves from then on).
// The destructor waits for a chunk in flight and drops what was not sealed.
//
// Threading: add/end_batch/begin_finish/finish on the store's thread; at most one sealed chunk is in
// flight on its own thread, joined before the next is sealed. The store touches its
// database only after finish().
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/status.h>
#include <rocksdb/write_buffer_manager.h>

#include "sluice/state/changelog_offset.hpp"

namespace sluice::state::detail {

class sst_restore {
 public:
  /// Where the files go and what they are ingested into. The handles and options must
  /// outlive this object.
  struct target {
    rocksdb::DB* db = nullptr;
    rocksdb::ColumnFamilyHandle* data = nullptr;
    rocksdb::ColumnFamilyHandle* meta = nullptr;
    const rocksdb::Options* data_options = nullptr;
    const rocksdb::Options* meta_options = nullptr;
    std::string meta_key;  ///< the meta family's key of the changelog offset
    /// Other meta family entries written into every meta file with the offset (the store's
    /// value format); keys other than meta_key.
    std::vector<std::pair<std::string, std::string>> meta_constants;
    std::filesystem::path directory;  ///< the store's directory (same filesystem as the DB)
    std::shared_ptr<rocksdb::WriteBufferManager> write_buffer_manager;  ///< may be null
  };

  /// `chunk_bytes`: a chunk is sealed once it holds this many bytes (keys, values and index).
  /// `min_chunk_bytes` (at most chunk_bytes): a chunk holding this many is sealed as soon
  /// as no other chunk is in flight.
  sst_restore(target t, std::size_t chunk_bytes, std::size_t min_chunk_bytes);
  ~sst_restore();
  sst_restore(const sst_restore&) = delete;
  sst_restore& operator=(const sst_restore&) = delete;

  /// A changelog record: `stored` is the store's encoded value, nullopt a delete.
  void add(std::string_view key, std::optional<std::string_view> stored);
  /// Ends a restore batch whose records were all added: the chunk now reflects the changelog
  /// up to `next_offset`. Seals the chunk when it is full, or when it holds the minimum and
  /// the chunk thread is idle. Returns a failure of an earlier
  /// chunk's ingestion (the store reports it; nothing more is ingested after one).
  rocksdb::Status end_batch(changelog_offset next_offset);
  /// Ingests what is buffered and waits for it: the store holds everything added, with the
  /// last offset, durably. Returns the first failure.
  rocksdb::Status finish();
  /// What finish() does, without waiting: seals what is buffered once the chunk in flight is
  /// ingested. Returns true when finish() would not wait (everything is ingested, or a chunk
  /// failed: finish() returns the failure). Call until true, then finish().
  bool begin_finish();

  /// Chunks handed to the chunk thread so far (each one data file at most and one offset
  /// file, ingested in this order).
  std::uint64_t chunks_sealed() const noexcept { return files_; }
  /// A sealed chunk's thread is still sorting, writing or ingesting it: the next seal would
  /// wait for it, so end_batch() seals early only when this is false.
  bool chunk_in_flight() const noexcept;

  /// Removes files a crash left behind in `directory` (written, never ingested).
  static void remove_leftovers(const std::filesystem::path& directory);

 private:
  struct entry {
    std::uint64_t prefix;  ///< the key's first 8 bytes, big-endian, zero-padded: most comparisons end here
    std::uint32_t offset;  ///< of the key in the chunk's bytes; the value follows it; grows in changelog order
    std::uint32_t key_size;
    std::uint32_t value_size;  ///< tombstone: deleted
  };
  static constexpr std::uint32_t deleted = 0xFFFFFFFF;

  struct chunk {
    std::string bytes;
    std::vector<entry> entries;
    std::optional<changelog_offset> next_offset;
    std::size_t charged = 0;  ///< bytes reserved with the write buffer manager
    std::size_t size() const noexcept { return bytes.size() + entries.size() * sizeof(entry); }
  };

  /// Hands the filling chunk to a thread of its own (after the one in flight ended).
  void seal();
  /// Waits for the chunk in flight, if any.
  void join();
  /// Sorts, writes and ingests `c` (on the chunk's thread); `number` names its files.
  rocksdb::Status ingest(chunk& c, std::uint64_t number);
  /// Sorts `c`'s entries by key, then by changelog order.
  static void sort(chunk& c);
  void charge(chunk& c);
  void release(chunk& c);

  target target_;
  std::size_t chunk_bytes_;
  std::size_t min_chunk_bytes_;
  chunk filling_;
  chunk in_flight_;
  std::thread thread_;
  rocksdb::Status failure_;               ///< the first failure, as seen on the store's thread
  rocksdb::Status thread_status_;         ///< written by the chunk's thread, read by join()
  std::atomic<bool> thread_done_{false};  ///< the chunk's thread ended: join() would not wait
  std::uint64_t files_ = 0;
};

}  // namespace sluice::state::detail
