// The process's allocator as the runtime sees it: how much it hands out, how much it keeps
// mapped but free, and giving the free part back to the operating system.
//
// Why: a job's memory comes and goes in bursts (a consumer's prefetch queue fills with up to
// queued.min.messages records and drains, a producer's queue likewise), and tcmalloc, the
// allocator sluice links by default, keeps freed pages mapped for reuse and returns them only
// slowly. In a long run of the count job the resident set grew to 2.5x the memory in use
// (bench/README.md, "Long-run memory"). Every program sees the allocator it was linked with:
// tcmalloc when its extension functions are present in the process (looked up at run time, so
// no build flag is needed and a program that brings its own tcmalloc is seen too), else glibc.
//
// Threading: every function is safe from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

namespace sluice::runtime::allocator {

struct usage {
  std::size_t in_use = 0;      ///< bytes handed out and not yet freed
  std::size_t free_bytes = 0;  ///< bytes the allocator keeps mapped but free (resident, unused)
};

/// "tcmalloc" or "glibc".
std::string name();

/// What the allocator reports now; nullopt when it reports nothing.
std::optional<usage> read();

/// Returns the allocator's free memory to the operating system (tcmalloc: its free page
/// spans; glibc: malloc_trim). Costs about a system call per free span; a no-op otherwise.
void release_free_memory();

/// release_free_memory() at most once per `interval` in the whole process, whichever thread
/// asks first after the interval passed; the others return at once (one atomic load).
void release_free_memory_every(std::chrono::milliseconds interval);

}  // namespace sluice::runtime::allocator
