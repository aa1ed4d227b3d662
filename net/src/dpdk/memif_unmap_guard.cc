// ina::net_memif_unmap_guard: this process's munmap waits out memif bursts in flight first
// (QuiesceMemifBursts, ina/net/dpdk.h), so net_memif's disconnect on the EAL's interrupt thread
// never unmaps a region under a data thread's burst. Linked into the executables that poll memif
// ports: an executable's munmap takes precedence over libc's for the PMDs DPDK loads. The unmap
// itself is the next munmap in the search order (a sanitizer's interceptor, else libc's), found
// when the program loads; a call before that is the system call.
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>

#include "ina/net/dpdk.h"

namespace {

using MunmapFn = int (*)(void*, size_t);
MunmapFn g_next_munmap = nullptr;

__attribute__((constructor)) void FindNextMunmap() {
  g_next_munmap = reinterpret_cast<MunmapFn>(dlsym(RTLD_NEXT, "munmap"));
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int munmap(void* addr, size_t length) noexcept {
  ina::net::QuiesceMemifBursts();
  if (g_next_munmap != nullptr) return g_next_munmap(addr, length);
  return static_cast<int>(syscall(SYS_munmap, addr, length));
}
