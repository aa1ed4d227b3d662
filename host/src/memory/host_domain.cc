// HostDomain (ina/host/memory_domain.h): host memory behind one copy thread, FIFO.
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "ina/host/memory_domain.h"

namespace ina::host {
namespace {

class HeapStaging final : public StagingBuffer {
 public:
  explicit HeapStaging(size_t bytes) : buf_(bytes) {}
  uint8_t* data() const override { return const_cast<uint8_t*>(buf_.data()); }
  size_t size() const override { return buf_.size(); }

 private:
  std::vector<uint8_t> buf_;
};

class HostDomain final : public MemoryDomain {
 public:
  explicit HostDomain(const HostDomainOptions& o) : opts_(o), thread_([this] { Run(); }) {}

  ~HostDomain() override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  MemoryKind kind() const override { return MemoryKind::kHost; }
  std::string name() const override { return "host-async"; }
  size_t chunk_bytes() const override { return opts_.chunk_bytes; }

  Status CheckPointer(const void* p, size_t bytes) const override {
    if (p == nullptr && bytes > 0) return InvalidArgument("host-async: null tensor");
    return Status::Ok();
  }

  Result<std::unique_ptr<StagingBuffer>> AllocStaging(size_t bytes) override {
    return std::unique_ptr<StagingBuffer>(new HeapStaging(bytes));
  }

  Status OrderAfter(void* stream) override {
    if (stream != nullptr) return InvalidArgument("host-async: there are no streams (pass null)");
    return Status::Ok();
  }

  Result<Fence> CopyIn(uint8_t* staging, const void* src, size_t bytes) override {
    return Enqueue(staging, src, bytes);
  }
  Result<Fence> CopyOut(void* dst, const uint8_t* staging, size_t bytes) override {
    return Enqueue(dst, staging, bytes);
  }

  Result<bool> Wait(Fence f, std::chrono::microseconds timeout) override {
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait_for(lk, timeout, [&] { return completed_ >= f; });
    return completed_ >= f;
  }

 private:
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };

  Result<Fence> Enqueue(void* dst, const void* src, size_t bytes) {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back({dst, src, bytes});
    cv_.notify_one();
    return ++enqueued_;
  }

  void Run() {
    std::unique_lock<std::mutex> lk(mu_);
    while (true) {
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_, and every queued copy done
      const Copy c = queue_.front();
      queue_.pop_front();
      lk.unlock();
      if (c.bytes > 0) std::memcpy(c.dst, c.src, c.bytes);
      lk.lock();
      ++completed_;
      done_cv_.notify_all();
    }
  }

  const HostDomainOptions opts_;
  std::mutex mu_;
  std::condition_variable cv_;       // copy thread: work or stop
  std::condition_variable done_cv_;  // waiters: completed_ moved
  std::deque<Copy> queue_;           // guarded by mu_
  Fence enqueued_ = 0;               // guarded by mu_
  Fence completed_ = 0;              // guarded by mu_
  bool stop_ = false;                // guarded by mu_
  std::thread thread_;               // last: started after the state above
};

}  // namespace

Result<std::unique_ptr<MemoryDomain>> MakeHostDomain(const HostDomainOptions& options) {
  if (options.chunk_bytes < 4) {
    return InvalidArgument("host-async: chunk_bytes " + std::to_string(options.chunk_bytes) +
                           " < 4");
  }
  return std::unique_ptr<MemoryDomain>(new HostDomain(options));
}

}  // namespace ina::host
