// GlooRing end to end: real processes (fork) on 127.0.0.1 meet through a temporary FileStore
// directory and all-reduce known vectors; also several ranks as threads of one process, meeting
// through a RendezvousStore instead (what ina-bench's coordinator provides), the rendezvous
// timeout with either, and argument checks. Every wait is bounded; children are killed on failure.
#include "gloo_ring.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ina::bench {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ina-gloo-XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Element i of rank r's input: small integers, so every partial sum is exact in float and the
// expected sum is known in closed form whatever order the ring adds in.
float Input(int rank, size_t i) {
  return static_cast<float>(rank + 1) * static_cast<float>(i % 1000) - rank;
}
float Expected(int world, size_t i) {
  float s = 0;
  for (int r = 0; r < world; ++r) s += Input(r, i);
  return s;
}

// One rank's work; returns "" on success or what went wrong.
std::string RunRank(int rank, int world, const std::string& dir, const std::vector<size_t>& sizes) {
  auto ring = GlooRing::Create(rank, world, dir, milliseconds(20000));
  if (!ring.ok()) return "create: " + ring.status().ToString();
  if ((*ring)->rank() != rank || (*ring)->world() != world) return "rank/world accessors";
  for (size_t n : sizes) {
    std::vector<float> data(n);
    for (size_t i = 0; i < n; ++i) data[i] = Input(rank, i);
    if (Status s = (*ring)->AllReduce(data); !s.ok()) return "allreduce: " + s.ToString();
    for (size_t i = 0; i < n; ++i) {
      if (data[i] != Expected(world, i)) {
        return "n=" + std::to_string(n) + " i=" + std::to_string(i) + ": got " +
               std::to_string(data[i]) + " want " + std::to_string(Expected(world, i));
      }
    }
    if (Status s = (*ring)->Barrier(); !s.ok()) return "barrier: " + s.ToString();
  }
  return "";
}

const std::vector<size_t> kSizes = {0, 1, 3, 4, 1000, 4097, 1 << 20};

TEST(GlooRing, ForkedRanksSumKnownVectors) {
  constexpr int kWorld = 4;
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::vector<pid_t> pids;
  for (int r = 0; r < kWorld; ++r) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0) << "fork";
    if (pid == 0) {
      alarm(60);  // a stuck child dies on its own even if the parent is gone
      const std::string err = RunRank(r, kWorld, dir.path(), kSizes);
      if (!err.empty()) std::fprintf(stderr, "rank %d: %s\n", r, err.c_str());
      _exit(err.empty() ? 0 : 1);
    }
    pids.push_back(pid);
  }
  const auto deadline = steady_clock::now() + std::chrono::seconds(60);
  std::vector<int> status(kWorld, -1);
  int left = kWorld;
  while (left > 0 && steady_clock::now() < deadline) {
    for (int r = 0; r < kWorld; ++r) {
      if (status[r] != -1) continue;
      int st = 0;
      if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        status[r] = st;
        --left;
      }
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
  for (int r = 0; r < kWorld; ++r) {
    if (status[r] == -1) {
      kill(pids[r], SIGKILL);
      waitpid(pids[r], nullptr, 0);
      ADD_FAILURE() << "rank " << r << " did not finish within 60 s (killed)";
    } else {
      EXPECT_TRUE(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0)
          << "rank " << r << " failed, status " << status[r] << " (see stderr)";
    }
  }
}

TEST(GlooRing, ThreadRanksInOneProcess) {
  constexpr int kWorld = 3;
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::vector<std::string> errors(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] { errors[r] = RunRank(r, kWorld, dir.path(), {5, 4096, 100003}); });
  }
  for (auto& t : threads) t.join();  // bounded: every Gloo call has a 20 s timeout
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// An in-memory RendezvousStore for ranks that are threads of this process.
class MemoryStore : public RendezvousStore {
 public:
  Status Set(const std::string& key, const std::vector<char>& value,
             std::chrono::milliseconds) override {
    std::lock_guard<std::mutex> lock(mu_);
    kv_[key] = value;
    cv_.notify_all();
    return Status::Ok();
  }
  Result<std::vector<char>> Get(const std::string& key,
                                std::chrono::milliseconds timeout) override {
    INA_RETURN_IF_ERROR(Wait({key}, timeout));
    std::lock_guard<std::mutex> lock(mu_);
    return kv_[key];
  }
  Status Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    const bool all = cv_.wait_for(lock, timeout, [&] {
      for (const auto& k : keys) {
        if (kv_.count(k) == 0) return false;
      }
      return true;
    });
    return all ? Status::Ok() : DeadlineExceeded("store wait timed out");
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<char>> kv_;
};

TEST(GlooRing, ThreadRanksMeetThroughAStore) {
  constexpr int kWorld = 3;
  MemoryStore store;
  std::vector<std::string> errors(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      auto ring = GlooRing::Create(r, kWorld, store, milliseconds(20000), "127.0.0.1");
      if (!ring.ok()) {
        errors[r] = ring.status().ToString();
        return;
      }
      std::vector<float> data(4097);
      for (size_t i = 0; i < data.size(); ++i) data[i] = Input(r, i);
      if (Status s = (*ring)->AllReduce(data); !s.ok()) errors[r] = s.ToString();
      for (size_t i = 0; i < data.size() && errors[r].empty(); ++i) {
        if (data[i] != Expected(kWorld, i)) errors[r] = "wrong sum at " + std::to_string(i);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  // A missing peer: the store's timeout error comes back as DeadlineExceeded, in bounded time.
  MemoryStore lonely;
  const auto start = steady_clock::now();
  auto ring = GlooRing::Create(0, 2, lonely, milliseconds(300), "127.0.0.1");
  ASSERT_FALSE(ring.ok());
  EXPECT_EQ(ring.status().code(), StatusCode::kDeadlineExceeded) << ring.status().ToString();
  EXPECT_LT(steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(GlooRing, WorldOfOneIsIdentity) {
  TempDir dir;
  auto ring = GlooRing::Create(0, 1, dir.path(), milliseconds(5000));
  ASSERT_TRUE(ring.ok()) << ring.status().ToString();
  std::vector<float> data = {1.5f, -2.0f, 3.25f};
  ASSERT_TRUE((*ring)->AllReduce(data).ok());
  EXPECT_EQ(data, (std::vector<float>{1.5f, -2.0f, 3.25f}));
  EXPECT_TRUE((*ring)->Barrier().ok());
}

TEST(GlooRing, RendezvousTimesOutWhenAPeerIsMissing) {
  TempDir dir;
  const auto start = steady_clock::now();
  auto ring = GlooRing::Create(0, 2, dir.path(), milliseconds(500));  // rank 1 never comes
  const auto took = steady_clock::now() - start;
  ASSERT_FALSE(ring.ok());
  EXPECT_EQ(ring.status().code(), StatusCode::kDeadlineExceeded) << ring.status().ToString();
  EXPECT_LT(took, std::chrono::seconds(15)) << "the timeout did not bound the rendezvous";
}

TEST(GlooRing, RejectsBadArguments) {
  TempDir dir;
  EXPECT_EQ(GlooRing::Create(2, 2, dir.path(), milliseconds(100)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(GlooRing::Create(-1, 2, dir.path(), milliseconds(100)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(GlooRing::Create(0, 0, dir.path(), milliseconds(100)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(GlooRing::Create(0, 1, dir.path(), milliseconds(0)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(GlooRing::Create(0, 1, "", milliseconds(100)).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ina::bench
