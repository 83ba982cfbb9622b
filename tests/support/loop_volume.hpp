// loop_volume: a small ext4 filesystem in an image file, loop-mounted for the lifetime of the
// object, so a test can fill a real disk. Needs root (mount); loop_volume::available() says
// whether this process can, and the caller skips with its message otherwise.
// Not thread-safe; one object per mount point. The destructor unmounts and deletes the image.
#pragma once

#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace sluice::test {

class loop_volume {
 public:
  /// Why a loop volume cannot be made here (not root), or empty when it can.
  static std::string unavailable_reason() {
    if (::geteuid() != 0) {
      return "loop-mounting a small ext4 volume needs root (run as root, as CI does)";
    }
    return {};
  }

  /// Creates a `megabytes` MiB ext4 image next to `mount_point` and mounts it there.
  loop_volume(const std::filesystem::path& mount_point, int megabytes)
      : mount_point_(mount_point), image_(mount_point.string() + ".img") {
    std::filesystem::create_directories(mount_point_);
    run("truncate -s " + std::to_string(megabytes) + "M '" + image_.string() + "'");
    run("mkfs.ext4 -q -F '" + image_.string() + "'");
    run("mount -o loop '" + image_.string() + "' '" + mount_point_.string() + "'");
  }
  ~loop_volume() {
    std::string cmd = "umount '" + mount_point_.string() + "' 2>/dev/null";
    (void)std::system(cmd.c_str());
    std::error_code ec;
    std::filesystem::remove(image_, ec);
  }
  loop_volume(const loop_volume&) = delete;
  loop_volume& operator=(const loop_volume&) = delete;

  const std::filesystem::path& path() const { return mount_point_; }

  /// Bytes an unprivileged writer can still allocate.
  std::uint64_t free_bytes() const {
    struct statvfs st {};
    if (::statvfs(mount_point_.c_str(), &st) != 0) throw std::runtime_error("statvfs failed");
    return static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
  }

  /// Writes a ballast file so that about `leave_bytes` stay free (nothing if less is free).
  void fill_leaving(std::uint64_t leave_bytes) {
    const auto ballast = mount_point_ / "ballast";
    std::ofstream out(ballast, std::ios::binary | std::ios::app);
    std::vector<char> block(64 * 1024, 'b');
    while (free_bytes() > leave_bytes + block.size() && out) {
      out.write(block.data(), static_cast<std::streamsize>(block.size()));
      out.flush();
    }
  }
  /// Deletes the ballast: the space it held is free again.
  void free_ballast() { std::filesystem::remove(mount_point_ / "ballast"); }

 private:
  static void run(const std::string& cmd) {
    if (std::system((cmd + " >/dev/null 2>&1").c_str()) != 0) {
      throw std::runtime_error("loop_volume: '" + cmd + "' failed");
    }
  }

  std::filesystem::path mount_point_;
  std::filesystem::path image_;
};

}  // namespace sluice::test
