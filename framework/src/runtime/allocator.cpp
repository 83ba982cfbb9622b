#include "runtime/allocator.hpp"

#include <dlfcn.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace sluice::runtime::allocator {
namespace {

// gperftools' C interface (malloc_extension_c.h), present in the process when tcmalloc is.
using get_property_fn = int (*)(const char*, std::size_t*);
using release_fn = void (*)();

struct tcmalloc_functions {
  get_property_fn get_property = nullptr;
  release_fn release = nullptr;
};

const tcmalloc_functions& tcmalloc() {
  static const tcmalloc_functions f = [] {
    tcmalloc_functions out;
    out.get_property = reinterpret_cast<get_property_fn>(::dlsym(RTLD_DEFAULT, "MallocExtension_GetNumericProperty"));
    out.release = reinterpret_cast<release_fn>(::dlsym(RTLD_DEFAULT, "MallocExtension_ReleaseFreeMemory"));
    if (!out.get_property || !out.release) out = {};
    return out;
  }();
  return f;
}

std::optional<std::size_t> property(const char* name) {
  std::size_t v = 0;
  if (tcmalloc().get_property(name, &v) == 0) return std::nullopt;
  return v;
}

}  // namespace

std::string name() { return tcmalloc().get_property ? "tcmalloc" : "glibc"; }

std::optional<usage> read() {
  if (tcmalloc().get_property) {
    auto in_use = property("generic.current_allocated_bytes");
    auto heap = property("generic.heap_size");
    auto unmapped = property("tcmalloc.pageheap_unmapped_bytes");
    if (!in_use || !heap || !unmapped) return std::nullopt;
    // The heap holds what is in use, the free page spans (mapped or returned) and the
    // central, transfer and thread caches' free objects.
    const std::size_t mapped = *heap - std::min(*heap, *unmapped);
    return usage{*in_use, mapped - std::min(mapped, *in_use)};
  }
  const struct mallinfo2 m = ::mallinfo2();
  return usage{m.uordblks + m.hblkhd, m.fordblks};
}

void release_free_memory() {
  if (tcmalloc().release) {
    tcmalloc().release();
  } else {
    ::malloc_trim(0);
  }
}

void release_free_memory_every(std::chrono::milliseconds interval) {
  static std::atomic<std::int64_t> last_ms{0};
  const std::int64_t now =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
  std::int64_t last = last_ms.load(std::memory_order_relaxed);
  if (now - last < interval.count()) return;
  if (!last_ms.compare_exchange_strong(last, now, std::memory_order_relaxed)) return;  // another thread does it
  release_free_memory();
}

}  // namespace sluice::runtime::allocator
