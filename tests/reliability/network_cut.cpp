// network_cut: an LD_PRELOAD library that cuts one job process off from the brokers while
// a file exists, for the fault suite. The CI image has neither iptables nor nft, and the
// brokers listen on loopback, which a network namespace cannot reach without them; so the
// cut is made at the socket layer of the process itself:
// - connect() to a TCP port in [SLUICE_CUT_PORT_LOW, SLUICE_CUT_PORT_HIGH] fails with
// ETIMEDOUT (nothing answers);
// - poll() never reports a connected socket to such a port as readable or writable, so
// requests in flight get no answer and time out, as across a dead link.
// The cut is on while the file named by SLUICE_CUT_FILE exists (checked at most every 50 ms).
// Everything else (pipes, eventfds, other ports) passes through untouched.
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

namespace {

int port_low = -1, port_high = -1;
const char* cut_file;

void load_settings(void) {
  if (port_low >= 0) return;
  const char* lo = getenv("SLUICE_CUT_PORT_LOW");
  const char* hi = getenv("SLUICE_CUT_PORT_HIGH");
  cut_file = getenv("SLUICE_CUT_FILE");
  port_low = lo ? atoi(lo) : 0;
  port_high = hi ? atoi(hi) : 0;
}

int cut_now(void) {
  thread_local long long checked_ms = -1000;
  thread_local int cut = 0;
  load_settings();
  if (!cut_file) return 0;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  long long now = static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
  if (now - checked_ms >= 50) {
    struct stat st;
    cut = stat(cut_file, &st) == 0;
    checked_ms = now;
  }
  return cut;
}

int broker_port(const struct sockaddr* addr) {
  int port = -1;
  if (addr->sa_family == AF_INET) port = ntohs((reinterpret_cast<const sockaddr_in*>(addr))->sin_port);
  if (addr->sa_family == AF_INET6) port = ntohs((reinterpret_cast<const sockaddr_in6*>(addr))->sin6_port);
  return port >= port_low && port <= port_high;
}

int peer_is_broker(int fd) {
  struct sockaddr_storage peer;
  socklen_t len = sizeof peer;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return 0;
  return broker_port(reinterpret_cast<const sockaddr*>(&peer));
}

}  // namespace

extern "C" int connect(int fd, const struct sockaddr* addr, socklen_t len) {
  static int (*real)(int, const struct sockaddr*, socklen_t);
  if (!real) real = reinterpret_cast<int (*)(int, const struct sockaddr*, socklen_t)>(dlsym(RTLD_NEXT, "connect"));
  if (cut_now() && broker_port(addr)) {
    errno = ETIMEDOUT;
    return -1;
  }
  return real(fd, addr, len);
}

extern "C" int poll(struct pollfd* fds, nfds_t n, int timeout) {
  static int (*real)(struct pollfd*, nfds_t, int);
  if (!real) real = reinterpret_cast<int (*)(struct pollfd*, nfds_t, int)>(dlsym(RTLD_NEXT, "poll"));
  if (!cut_now()) return real(fds, n, timeout);
  // Hide broker sockets: poll only the others, report nothing for them.
  unsigned char hidden[64] = {0};
  for (nfds_t i = 0; i < n && i < 64; ++i) {
    if (fds[i].fd >= 0 && peer_is_broker(fds[i].fd)) {
      fds[i].fd = -fds[i].fd - 1;  // poll ignores negative fds
      hidden[i] = 1;
    }
  }
  int rc = real(fds, n, timeout);
  for (nfds_t i = 0; i < n && i < 64; ++i) {
    if (hidden[i]) {
      fds[i].fd = -fds[i].fd - 1;
      fds[i].revents = 0;
    }
  }
  return rc;
}
