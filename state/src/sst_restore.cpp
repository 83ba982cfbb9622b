// Restore from empty through ingested SST files (see sst_restore.hpp).
#include "sst_restore.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <exception>
#include <system_error>

#include <pthread.h>
#include <rocksdb/env.h>
#include <rocksdb/sst_file_writer.h>

#include "store_common.hpp"

namespace sluice::state::detail {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view file_prefix = "sluice-restore-";
/// Charges to the write buffer manager move in steps of this many bytes.
constexpr std::size_t charge_step = std::size_t{1} << 20;

std::uint64_t key_prefix(std::string_view key) noexcept {
  if constexpr (std::endian::native == std::endian::little) {
    if (key.size() >= 8) {
      std::uint64_t p;
      std::memcpy(&p, key.data(), 8);
      return __builtin_bswap64(p);
    }
  }
  std::uint64_t p = 0;
  const auto n = std::min<std::size_t>(key.size(), 8);
  for (std::size_t i = 0; i < 8; ++i) {
    p = (p << 8) | (i < n ? static_cast<unsigned char>(key[i]) : 0U);
  }
  return p;
}

}  // namespace

sst_restore::sst_restore(target t, std::size_t chunk_bytes, std::size_t min_chunk_bytes)
    : target_(std::move(t)), chunk_bytes_(chunk_bytes), min_chunk_bytes_(std::min(min_chunk_bytes, chunk_bytes)) {}

sst_restore::~sst_restore() {
  join();
  release(filling_);
}

void sst_restore::remove_leftovers(const fs::path& directory) {
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(directory, ec)) {
    if (f.path().filename().string().rfind(file_prefix, 0) == 0) fs::remove(f.path(), ec);
  }
}

void sst_restore::add(std::string_view key, std::optional<std::string_view> stored) {
  const auto offset = static_cast<std::uint32_t>(filling_.bytes.size());
  filling_.bytes.append(key);
  std::uint32_t value_size = deleted;
  if (stored) {
    filling_.bytes.append(*stored);
    value_size = static_cast<std::uint32_t>(stored->size());
  }
  filling_.entries.push_back({key_prefix(key), offset, static_cast<std::uint32_t>(key.size()), value_size});
  if (filling_.size() >= filling_.charged + charge_step) charge(filling_);
}

rocksdb::Status sst_restore::end_batch(changelog_offset next_offset) {
  filling_.next_offset = next_offset;
  const auto size = filling_.size();
  const auto* wbm = target_.write_buffer_manager.get();
  // Sealed at the memtable size, or at a quarter of it once the memtables of every store
  // together pass their share of the budget (as a memtable is flushed early then), or at
  // the minimum when the chunk thread has nothing to do (the work overlaps the reading).
  if (size >= chunk_bytes_ || (size >= min_chunk_bytes_ && !chunk_in_flight()) ||
      (wbm != nullptr && wbm->enabled() && wbm->ShouldFlush() && size >= chunk_bytes_ / 4)) {
    seal();
  }
  return failure_;
}

rocksdb::Status sst_restore::finish() {
  if (filling_.next_offset) seal();
  join();
  // The buffers of both chunks go back to the allocator: the store serves from now on.
  filling_ = chunk();
  in_flight_ = chunk();
  return failure_;
}

bool sst_restore::begin_finish() {
  if (chunk_in_flight()) return false;
  join();
  if (!failure_.ok() || !filling_.next_offset) return true;
  seal();
  return false;
}

void sst_restore::charge(chunk& c) {
  const auto size = c.size();
  if (target_.write_buffer_manager && size > c.charged) {
    target_.write_buffer_manager->ReserveMem(size - c.charged);
    c.charged = size;
  }
}

void sst_restore::release(chunk& c) {
  if (target_.write_buffer_manager && c.charged > 0) target_.write_buffer_manager->FreeMem(c.charged);
  c.charged = 0;
}

bool sst_restore::chunk_in_flight() const noexcept {
  return thread_.joinable() && !thread_done_.load(std::memory_order_acquire);
}

void sst_restore::join() {
  if (!thread_.joinable()) return;
  thread_.join();
  if (failure_.ok()) failure_ = thread_status_;
}

void sst_restore::seal() {
  join();
  if (!failure_.ok()) return;
  charge(filling_);
  std::swap(filling_, in_flight_);
  // The chunk ingested last leaves its buffers' capacity to the next one.
  filling_.bytes.clear();
  filling_.entries.clear();
  filling_.next_offset.reset();
  filling_.charged = 0;
  // Like a memtable being flushed: no longer counted against the flush trigger, still
  // against the budget until it is freed.
  if (target_.write_buffer_manager) target_.write_buffer_manager->ScheduleFreeMem(in_flight_.charged);
  const auto number = ++files_;
  thread_done_.store(false, std::memory_order_relaxed);
  thread_ = std::thread([this, number] {
    ::pthread_setname_np(::pthread_self(), "sluice-sst");  // for per-thread CPU figures (top -H, /proc)
    try {
      thread_status_ = ingest(in_flight_, number);
    } catch (const std::exception& e) {
      thread_status_ = rocksdb::Status::Aborted("restoring through an SST file", e.what());
    }
    release(in_flight_);
    thread_done_.store(true, std::memory_order_release);
  });
}

void sst_restore::sort(chunk& c) {
  const char* bytes = c.bytes.data();
  std::sort(c.entries.begin(), c.entries.end(), [bytes](const entry& a, const entry& b) {
    if (a.prefix != b.prefix) return a.prefix < b.prefix;
    const auto order =
        std::string_view(bytes + a.offset, a.key_size).compare(std::string_view(bytes + b.offset, b.key_size));
    if (order != 0) return order < 0;
    return a.offset < b.offset;  // the same key: changelog order
  });
}

rocksdb::Status sst_restore::ingest(chunk& c, std::uint64_t number) {
  sort(c);
  const auto base = target_.directory / (std::string(file_prefix) + std::to_string(number));
  const auto data_path = base.string() + "-data.sst";
  const auto meta_path = base.string() + "-meta.sst";
  auto cleanup = [&] {
    std::error_code ec;
    fs::remove(data_path, ec);
    fs::remove(meta_path, ec);
  };
  rocksdb::IngestExternalFileOptions ingest_options;
  ingest_options.move_files = true;           // the files are linked into the store, not copied
  ingest_options.write_global_seqno = false;  // no rewrite of the file; RocksDB 6.x+ reads it from the MANIFEST
  std::vector<rocksdb::IngestExternalFileArg> args;
  auto add_file = [&](rocksdb::ColumnFamilyHandle* cf, const std::string& path) {
    rocksdb::IngestExternalFileArg arg;
    arg.column_family = cf;
    arg.external_files = {path};
    arg.options = ingest_options;
    args.push_back(std::move(arg));
  };

  if (!c.entries.empty()) {
    rocksdb::SstFileWriter writer(rocksdb::EnvOptions(), *target_.data_options, target_.data, false);
    auto s = writer.Open(data_path);
    const char* bytes = c.bytes.data();
    for (std::size_t i = 0; s.ok() && i < c.entries.size(); ++i) {
      const auto& e = c.entries[i];
      const rocksdb::Slice key(bytes + e.offset, e.key_size);
      // Only the last write of a key counts; the sort put it last among its equals.
      if (i + 1 < c.entries.size()) {
        const auto& n = c.entries[i + 1];
        if (n.prefix == e.prefix && n.key_size == e.key_size &&
            std::memcmp(bytes + n.offset, bytes + e.offset, e.key_size) == 0) {
          continue;
        }
      }
      s = e.value_size == deleted ? writer.Delete(key)
                                  : writer.Put(key, rocksdb::Slice(bytes + e.offset + e.key_size, e.value_size));
    }
    if (s.ok()) s = writer.Finish();
    if (!s.ok()) {
      cleanup();
      return s;
    }
    add_file(target_.data, data_path);
  }
  {
    rocksdb::SstFileWriter writer(rocksdb::EnvOptions(), *target_.meta_options, target_.meta, false);
    auto s = writer.Open(meta_path);
    // An SST file takes its keys in order.
    std::vector<std::pair<std::string_view, std::string>> meta{{target_.meta_key, encode_offset(*c.next_offset)}};
    for (const auto& [key, value] : target_.meta_constants) meta.emplace_back(key, value);
    std::sort(meta.begin(), meta.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t i = 0; s.ok() && i < meta.size(); ++i) s = writer.Put(meta[i].first, meta[i].second);
    if (s.ok()) s = writer.Finish();
    if (!s.ok()) {
      cleanup();
      return s;
    }
    add_file(target_.meta, meta_path);
  }
  // One MANIFEST record for both families: after a crash, both files or neither.
  auto s = target_.db->IngestExternalFiles(args);
  cleanup();  // moved files are gone already; a failed ingestion leaves its files
  return s;
}

}  // namespace sluice::state::detail
