// The framework's programs allocate with tcmalloc unless built with SLUICE_ALLOCATOR=system
// (top-level CMakeLists.txt): the library is linked although no object names it, so a linker
// that drops unreferenced libraries (--as-needed) would leave glibc's malloc in place.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>

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

}  // namespace
