// MemifBurst and QuiesceMemifBursts (ina/net/dpdk.h): a sequence per thread that enters memif
// bursts, odd while inside one, and a grace period over them, as RCU's quiescent states.
#include <sched.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>

#include "ina/net/dpdk.h"

namespace ina::net {
namespace {

constexpr int kSlots = 256;  // threads that ever enter a memif burst; more share kShared

struct alignas(64) Slot {
  std::atomic<uint64_t> seq{0};  // odd: inside a burst
};
constinit std::array<Slot, kSlots> g_slots{};
constinit std::atomic<int> g_used{0};
// Threads past kSlots: how many of them are inside a burst (a quiesce waits for none).
constinit std::atomic<int> g_shared_inside{0};

constexpr int kShared = -2;
constexpr int kUnassigned = -1;
thread_local int t_slot = kUnassigned;
thread_local bool t_inside = false;  // this thread is inside a burst

int MySlot() {
  if (t_slot == kUnassigned) {
    const int i = g_used.fetch_add(1, std::memory_order_relaxed);
    t_slot = i < kSlots ? i : kShared;
  }
  return t_slot;
}

void Pause(int& spins) {
  if (++spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else {
    sched_yield();  // the thread inside may be descheduled (more threads than cores)
  }
}

}  // namespace

MemifBurst::MemifBurst() {
  const int s = MySlot();
  t_inside = true;
  // seq_cst: the PMD's "connected" read that follows cannot move before this (the quiesce's fence
  // pairs with it: either it sees this thread inside, or this burst sees "not connected").
  if (s == kShared) {
    g_shared_inside.fetch_add(1, std::memory_order_seq_cst);
  } else {
    g_slots[static_cast<size_t>(s)].seq.fetch_add(1, std::memory_order_seq_cst);
  }
}

MemifBurst::~MemifBurst() {
  t_inside = false;
  if (t_slot == kShared) {
    g_shared_inside.fetch_sub(1, std::memory_order_release);
  } else {
    g_slots[static_cast<size_t>(t_slot)].seq.fetch_add(1, std::memory_order_release);
  }
}

void QuiesceMemifBursts() {
  // Orders the caller's earlier stores (the PMD's "not connected") before the loads below.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const int n = std::min(g_used.load(std::memory_order_acquire), kSlots);
  for (int i = 0; i < n; ++i) {
    if (i == t_slot) continue;  // this thread is not inside a burst while it unmaps
    const std::atomic<uint64_t>& seq = g_slots[static_cast<size_t>(i)].seq;
    const uint64_t s = seq.load(std::memory_order_acquire);
    if ((s & 1) == 0) continue;
    int spins = 0;
    while (seq.load(std::memory_order_acquire) == s) Pause(spins);
  }
  const int self = t_slot == kShared && t_inside ? 1 : 0;  // never wait for oneself
  int spins = 0;
  while (g_shared_inside.load(std::memory_order_acquire) > self) Pause(spins);
}

}  // namespace ina::net
