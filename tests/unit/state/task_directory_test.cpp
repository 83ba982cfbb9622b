// task_directory: layout, the exclusive lock (same process and another process), wipe.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "sluice/state/task_directory.hpp"
#include "state_test_util.hpp"

namespace sluice::state {
namespace {

using test::temp_dir;
namespace fs = std::filesystem;

constexpr const char* locked_message_tail = "is locked by another sluice instance (pid ";

TEST(task_directory, creates_application_and_task_folders_and_records_the_pid) {
  temp_dir dir;
  task_directory task(dir.path(), "orders-app", "1_3");
  EXPECT_EQ(task.path(), dir.path() / "orders-app" / "1_3");
  EXPECT_TRUE(fs::is_directory(task.path()));
  EXPECT_EQ(task.store_path("counts"), task.path() / "counts");
  std::ifstream lock(task.path() / ".lock");
  std::string pid;
  lock >> pid;
  EXPECT_EQ(pid, std::to_string(::getpid()));
}

TEST(task_directory, second_holder_in_the_same_process_is_rejected) {
  temp_dir dir;
  task_directory first(dir.path(), "app", "0_0");
  auto e = test::thrown_error([&] { task_directory second(dir.path(), "app", "0_0"); });
  EXPECT_EQ(e.code(), errc::state);
  const std::string expected = "state directory '" + first.path().string() + "' " + locked_message_tail +
                               std::to_string(::getpid()) + "); give each instance its own state.dir";
  EXPECT_EQ(std::string(e.what()), expected);
  task_directory other_task(dir.path(), "app", "0_1");  // other tasks are independent
}

TEST(task_directory, second_holder_in_another_process_is_rejected) {
  if (const char* child_dir = test::child_argument()) {
    try {
      task_directory second(child_dir, "app", "0_0");
    } catch (const sluice::error& e) {
      const bool expected =
          e.code() == errc::state && std::string(e.what()).find(locked_message_tail) != std::string::npos;
      std::_Exit(expected ? 3 : 4);
    }
    std::_Exit(5);  // took a lock it should not have
  }
  temp_dir dir;
  {
    task_directory first(dir.path(), "app", "0_0");
    EXPECT_EQ(test::run_child(dir.path().string()), 3);
  }
  // Released with its holder: another process can take it now.
  EXPECT_EQ(test::run_child(dir.path().string()), 5);
}

TEST(task_directory, lock_is_released_on_destruction_and_move_keeps_it) {
  temp_dir dir;
  {
    task_directory first(dir.path(), "app", "0_0");
    task_directory moved(std::move(first));
    auto e = test::thrown_error([&] { task_directory again(dir.path(), "app", "0_0"); });
    EXPECT_EQ(e.code(), errc::state);
  }
  task_directory again(dir.path(), "app", "0_0");
}

TEST(task_directory, wipe_removes_stores_and_keeps_the_lock) {
  temp_dir dir;
  task_directory task(dir.path(), "app", "0_0");
  fs::create_directories(task.store_path("a") / "nested");
  std::ofstream(task.store_path("b")) << "x";
  task.wipe();
  EXPECT_FALSE(fs::exists(task.store_path("a")));
  EXPECT_FALSE(fs::exists(task.store_path("b")));
  EXPECT_TRUE(fs::exists(task.path() / ".lock"));
  auto e = test::thrown_error([&] { task_directory second(dir.path(), "app", "0_0"); });
  EXPECT_EQ(e.code(), errc::state);
}

TEST(task_directory, path_like_ids_are_rejected) {
  temp_dir dir;
  auto e = test::thrown_error([&] { task_directory t(dir.path(), "../escape", "0_0"); });
  EXPECT_EQ(e.code(), errc::invalid_config);
}

TEST(application_directory, second_instance_on_the_same_state_dir_is_rejected_naming_the_directory) {
  temp_dir dir;
  application_directory first(dir.path(), "app");
  EXPECT_EQ(first.path(), dir.path() / "app");
  auto e = test::thrown_error([&] { application_directory second(dir.path(), "app"); });
  EXPECT_EQ(e.code(), errc::state);
  EXPECT_EQ(std::string(e.what()),
            "state directory '" + first.path().string() + "' " + locked_message_tail + std::to_string(::getpid()) +
                "); it is already running with this state.dir; stop it first, or give this instance "
                "its own state.dir (and instance.id)");
  application_directory other_app(dir.path(), "other-app");  // another job is independent
  task_directory task(dir.path(), "app", "0_0");             // the instance's own tasks still lock
}

TEST(application_directory, lock_is_released_on_destruction) {
  temp_dir dir;
  { application_directory first(dir.path(), "app"); }
  application_directory again(dir.path(), "app");
}

}  // namespace
}  // namespace sluice::state
