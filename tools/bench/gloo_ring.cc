#include "gloo_ring.h"

#include <exception>
#include <string>
#include <utility>

#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/common/error.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/transport/tcp/device.h"

namespace ina::bench {
namespace {

// Gloo's IoException covers timeouts and broken connections alike; its message tells which.
Status FromGlooException(std::string_view what, const std::exception& e) {
  const std::string msg = e.what();
  const bool timed_out =
      msg.find("imeout") != std::string::npos || msg.find("imed out") != std::string::npos;
  return Status(timed_out ? StatusCode::kDeadlineExceeded : StatusCode::kUnavailable,
                "gloo: " + std::string(what) + ": " + msg);
}

// gloo::rendezvous::Store over a RendezvousStore: errors become the IoException Gloo expects.
class StoreAdapter : public gloo::rendezvous::Store {
 public:
  StoreAdapter(RendezvousStore& store, std::chrono::milliseconds timeout)
      : store_(store), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    Check(store_.Set(key, data, timeout_));
  }
  std::vector<char> get(const std::string& key) override {
    auto v = store_.Get(key, timeout_);
    Check(v.status());
    return std::move(*v);
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    Check(store_.Wait(keys, timeout));
  }

 private:
  static void Check(const Status& s) {
    if (!s.ok()) throw gloo::IoException(s.ToString());
  }
  RendezvousStore& store_;
  std::chrono::milliseconds timeout_;
};

Status CheckArgs(int rank, int world, std::chrono::milliseconds timeout, const std::string& host) {
  if (world < 1 || rank < 0 || rank >= world) {
    return InvalidArgument("gloo: rank " + std::to_string(rank) + " out of range for world " +
                           std::to_string(world));
  }
  if (timeout.count() <= 0) return InvalidArgument("gloo: timeout must be positive");
  if (host.empty()) return InvalidArgument("gloo: empty host address");
  return Status::Ok();
}

}  // namespace

GlooRing::GlooRing(int rank, int world, std::chrono::milliseconds timeout,
                   std::shared_ptr<gloo::Context> context)
    : rank_(rank), world_(world), timeout_(timeout), context_(std::move(context)) {}

GlooRing::~GlooRing() = default;

Result<std::unique_ptr<GlooRing>> GlooRing::Create(int rank, int world,
                                                   const std::string& store_dir,
                                                   std::chrono::milliseconds timeout,
                                                   const std::string& host) {
  INA_RETURN_IF_ERROR(CheckArgs(rank, world, timeout, host));
  if (store_dir.empty()) return InvalidArgument("gloo: empty store directory");
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = host;
    attr.ai_family = AF_INET;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(store_dir);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, world);
    context->setTimeout(timeout);  // bounds the rendezvous and every later operation
    context->connectFullMesh(store, device);
    return std::unique_ptr<GlooRing>(new GlooRing(rank, world, timeout, std::move(context)));
  } catch (const std::exception& e) {
    return FromGlooException("rendezvous in " + store_dir + " (rank " + std::to_string(rank) +
                                 " of " + std::to_string(world) + ")",
                             e);
  }
}

Result<std::unique_ptr<GlooRing>> GlooRing::Create(int rank, int world, RendezvousStore& store,
                                                   std::chrono::milliseconds timeout,
                                                   const std::string& host) {
  INA_RETURN_IF_ERROR(CheckArgs(rank, world, timeout, host));
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = host;
    attr.ai_family = AF_INET;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    StoreAdapter adapter(store, timeout);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, world);
    context->setTimeout(timeout);
    context->connectFullMesh(adapter, device);
    return std::unique_ptr<GlooRing>(new GlooRing(rank, world, timeout, std::move(context)));
  } catch (const std::exception& e) {
    return FromGlooException("rendezvous through the coordinator (rank " + std::to_string(rank) +
                                 " of " + std::to_string(world) + ")",
                             e);
  }
}

Status GlooRing::AllReduce(std::span<float> data) {
  if (data.empty()) return Status::Ok();
  try {
    gloo::AllreduceOptions opts(context_);
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    opts.setOutput(data.data(), data.size());  // in place: no input means output is the input
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setTimeout(timeout_);
    gloo::allreduce(opts);
  } catch (const std::exception& e) {
    return FromGlooException("allreduce of " + std::to_string(data.size()) + " floats", e);
  }
  return Status::Ok();
}

Status GlooRing::Barrier() {
  try {
    gloo::BarrierOptions opts(context_);
    opts.setTimeout(timeout_);
    gloo::barrier(opts);
  } catch (const std::exception& e) {
    return FromGlooException("barrier", e);
  }
  return Status::Ok();
}

}  // namespace ina::bench
