// MemifBurst and QuiesceMemifBursts (ina/net/dpdk.h), and the munmap of
// ina::net_memif_unmap_guard: a quiesce waits for the bursts in flight when it starts, not for
// those that start after it, nor for the caller's own; the guard's munmap is the one a shared
// library finds (what net_memif calls) and waits the same way. No EAL needed.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "ina/net/dpdk.h"

namespace ina::net {
namespace {

using namespace std::chrono_literals;

// A thread inside a burst until released; then, with reenter, inside a second one until stopped.
class BurstThread {
 public:
  explicit BurstThread(bool reenter) {
    t_ = std::thread([this, reenter] {
      {
        const MemifBurst in;
        inside_.store(true);
        while (!release_.load()) std::this_thread::yield();
      }
      if (reenter) {
        const MemifBurst again;
        second_.store(true);
        while (!stop_.load()) std::this_thread::yield();
      }
    });
    while (!inside_.load()) std::this_thread::yield();
  }
  ~BurstThread() {
    release_.store(true);
    stop_.store(true);
    t_.join();
  }
  void Release() { release_.store(true); }
  bool InSecond() const { return second_.load(); }

 private:
  std::atomic<bool> inside_{false}, release_{false}, second_{false}, stop_{false};
  std::thread t_;
};

// Runs f on a thread; done() says whether it returned.
class Call {
 public:
  template <typename F>
  explicit Call(F f)
      : t_([this, f] {
          f();
          done_.store(true);
        }) {}
  ~Call() { t_.join(); }
  bool done() const { return done_.load(); }
  bool WaitDone(std::chrono::milliseconds limit) const {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!done() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
    return done();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread t_;
};

TEST(MemifBurst, QuiesceWithNoBurstInFlightReturns) {
  Call q([] { QuiesceMemifBursts(); });
  EXPECT_TRUE(q.WaitDone(10s));
}

TEST(MemifBurst, QuiesceWaitsForTheBurstInFlightAndNotForOnesThatStartLater) {
  BurstThread b(/*reenter=*/true);
  Call q([] { QuiesceMemifBursts(); });
  std::this_thread::sleep_for(200ms);
  EXPECT_FALSE(q.done()) << "returned while a burst was in flight";
  b.Release();  // leaves, then enters a second burst and stays in it
  while (!b.InSecond()) std::this_thread::yield();
  EXPECT_TRUE(q.WaitDone(10s)) << "waited for a burst that started after it";
}

TEST(MemifBurst, QuiesceFromInsideABurstDoesNotWaitForItself) {
  Call q([] {
    const MemifBurst in;
    QuiesceMemifBursts();
  });
  EXPECT_TRUE(q.WaitDone(10s));
}

TEST(MemifUnmapGuard, TheMunmapLibrariesFindWaitsForABurstInFlight) {
  // What a shared library's call resolves to: the executable's munmap when the guard is linked.
  using MunmapFn = int (*)(void*, size_t);
  const auto found = reinterpret_cast<MunmapFn>(dlsym(RTLD_DEFAULT, "munmap"));
  ASSERT_NE(found, nullptr);
  const size_t len = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* page = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  int rc = -1;
  {
    BurstThread b(/*reenter=*/false);
    Call u([&] { rc = found(page, len); });
    std::this_thread::sleep_for(200ms);
    EXPECT_FALSE(u.done()) << "munmap did not wait for the burst in flight (guard not linked?)";
    b.Release();
    EXPECT_TRUE(u.WaitDone(10s));
  }
  EXPECT_EQ(rc, 0);
  // The page is gone: mapping it again at that address with MAP_FIXED_NOREPLACE succeeds.
  void* again =
      mmap(page, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  EXPECT_EQ(again, page);
  if (again != MAP_FAILED) munmap(again, len);
}

}  // namespace
}  // namespace ina::net
