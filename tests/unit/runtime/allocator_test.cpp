// The framework's programs allocate with tcmalloc unless built with SLUICE_ALLOCATOR=system
// (top-level CMakeLists.txt): the library is linked although no object names it, so a linker
// that drops unreferenced libraries (--as-needed) would leave glibc's malloc in place.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "runtime/allocator.hpp"

namespace {

TEST(allocator, malloc_is_tcmalloc_s_when_the_build_chose_tcmalloc) {
#if defined(SLUICE_ALLOCATOR_TCMALLOC)
  void* tc = ::dlsym(RTLD_DEFAULT, "tc_malloc");
  ASSERT_NE(tc, nullptr) << "libtcmalloc_minimal is not loaded into this program";
  // gperftools defines malloc as an alias of tc_malloc: the first definition in load order
  // is the one every allocation in the process goes through.
  EXPECT_EQ(::dlsym(RTLD_DEFAULT, "malloc"), tc);
  void* p = std::malloc(100);
  EXPECT_NE(p, nullptr);
  std::free(p);
#else
  GTEST_SKIP() << "built with SLUICE_ALLOCATOR=system";
#endif
}

// What the allocator reports follows what the program holds, and a release gives freed pages
// back: 64 MiB in 1 MiB blocks is in use while held; once freed it is free but mapped until
// released (tcmalloc keeps freed pages for reuse), then no longer counted as free.
TEST(allocator, reports_memory_in_use_and_freed_and_gives_freed_memory_back) {
  namespace a = sluice::runtime::allocator;
#if defined(SLUICE_ALLOCATOR_TCMALLOC)
  EXPECT_EQ(a::name(), "tcmalloc");
#else
  EXPECT_EQ(a::name(), "glibc");
#endif
  const std::size_t block = std::size_t{1} << 20, blocks = 64;
  a::release_free_memory();
  const auto before = a::read();
  ASSERT_TRUE(before);
  std::vector<std::unique_ptr<char[]>> held;
  for (std::size_t i = 0; i < blocks; ++i) {
    held.emplace_back(new char[block]);
    held.back()[0] = static_cast<char>(i);  // touched, so resident
  }
  const auto holding = a::read();
  ASSERT_TRUE(holding);
  EXPECT_GE(holding->in_use, before->in_use + blocks * block);
  held.clear();
  const auto freed = a::read();
  ASSERT_TRUE(freed);
  EXPECT_LE(freed->in_use + blocks * block, holding->in_use + block);
#if defined(SLUICE_ALLOCATOR_TCMALLOC)
  EXPECT_GE(freed->free_bytes, blocks * block);
  a::release_free_memory();
  const auto released = a::read();
  ASSERT_TRUE(released);
  EXPECT_LT(released->free_bytes + blocks * block / 2, freed->free_bytes);
#endif
}

}  // namespace
