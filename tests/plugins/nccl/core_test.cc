// The plugin's C++ classes on their own: the handles, the TCP comms on loopback, and CollComm
// against the in-process TestFabric (ranks as threads).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "coll_net.h"
#include "ina/host/memory_domain.h"
#include "tcp_net.h"
#include "test_fabric.h"

namespace ina::nccl {
namespace {

using namespace std::chrono_literals;

TEST(CollHandle, RoundTripsAndRejectsForeignBytes) {
  CollHandle h;
  h.job_id = 40000;
  h.switch_port = 47001;
  h.k = 64;
  h.window = 128;
  h.switch_host = "switch-7.example";
  uint8_t b[kHandleBytes];
  h.Encode(b);
  auto d = CollHandle::Decode(b);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->job_id, 40000);
  EXPECT_EQ(d->switch_port, 47001);
  EXPECT_EQ(d->k, 64);
  EXPECT_EQ(d->window, 128);
  EXPECT_EQ(d->switch_host, "switch-7.example");
  uint8_t bad[kHandleBytes];
  std::memcpy(bad, b, sizeof(b));
  bad[0] = 'X';
  EXPECT_EQ(CollHandle::Decode(bad).status().code(), StatusCode::kInvalidArgument);
  std::memcpy(bad, b, sizeof(b));
  bad[4] = 99;  // version
  EXPECT_EQ(CollHandle::Decode(bad).status().code(), StatusCode::kInvalidArgument);
  std::memcpy(bad, b, sizeof(b));
  bad[5] = 0;  // host length
  EXPECT_EQ(CollHandle::Decode(bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(d->secret.empty());

  // A keyed job's secret rides along, with the longest host name.
  std::vector<uint8_t> secret(CollHandle::kMaxSecretLen);
  for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(0xA0 + i);
  h.secret = host::JobSecret(secret);
  h.switch_host = std::string(CollHandle::kMaxHostLen, 'h');
  h.Encode(b);
  auto k = CollHandle::Decode(b);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_EQ(k->switch_host, h.switch_host);
  EXPECT_TRUE(std::equal(secret.begin(), secret.end(), k->secret.bytes().begin()));
  EXPECT_EQ(k->secret.size(), secret.size());
  std::memcpy(bad, b, sizeof(b));
  bad[14] = 8;  // shorter than any job secret
  EXPECT_EQ(CollHandle::Decode(bad).status().code(), StatusCode::kInvalidArgument);
  bad[14] = CollHandle::kMaxSecretLen + 1;
  EXPECT_EQ(CollHandle::Decode(bad).status().code(), StatusCode::kInvalidArgument);
}

TEST(CollListener, KeyedWithoutAdminKeyFailsAtConnectNamingIt) {
  host::CommConfig c;
  c.switch_host = "127.0.0.1";
  c.sec = "mac";  // no job secret: the listener would make one, and needs INA_ADMIN_KEY
  unsetenv("INA_ADMIN_KEY");
  auto l = CollListener::Create(c);
  EXPECT_EQ(l->status().code(), StatusCode::kFailedPrecondition) << l->status().ToString();
  EXPECT_NE(l->status().message().find("INA_ADMIN_KEY"), std::string::npos);
  EXPECT_EQ(l->handle().job_id, 0);
}

TEST(CollListener, AnOverlongHostNameFailsAtConnect) {
  host::CommConfig c;
  c.switch_host = std::string(CollHandle::kMaxHostLen + 1, 'h');
  auto l = CollListener::Create(c);
  EXPECT_EQ(l->status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(l->handle().job_id, 0);
  uint8_t b[kHandleBytes];
  l->handle().Encode(b);
  auto d = CollHandle::Decode(b);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  std::vector<CollHandle> hs = {*d, *d};
  EXPECT_EQ(CollComm::Connect(c, hs, 1).status().code(), StatusCode::kUnavailable);
}

// The job id comes from the fabric: none there, a bounded-time error kept for connect (the ABI
// test allocates from a real ina-switchd).
TEST(CollListener, NoFabricIsADeadlineErrorAtConnect) {
  uint16_t dead_port;
  {
    auto f = testing::TestFabric::Start({});
    ASSERT_TRUE(f.ok());
    dead_port = (*f)->port();
  }
  host::CommConfig c;
  c.switch_port = dead_port;
  c.join_timeout_ms = 300;
  auto l = CollListener::Create(c);
  EXPECT_EQ(l->status().code(), StatusCode::kDeadlineExceeded) << l->status().ToString();
  EXPECT_EQ(l->handle().job_id, 0);
  std::vector<CollHandle> hs = {l->handle(), l->handle()};
  auto cc = CollComm::Connect(c, hs, 1);
  EXPECT_EQ(cc.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(cc.status().message().find("127.0.0.1:" + std::to_string(dead_port)), std::string::npos)
      << cc.status().ToString();
}

// A config aimed at the in-process fabric, with time for several nodes to join.
host::CommConfig FabricBase(const testing::TestFabric& f) {
  host::CommConfig base;
  base.switch_port = f.port();
  base.join_timeout_ms = 10000;
  return base;
}

// Node 0's handle for `job`, built by hand: the test fabric does not allocate job ids.
CollHandle NodeZeroHandle(const host::CommConfig& base, uint16_t job) {
  CollHandle h;
  h.job_id = job;
  h.switch_host = base.switch_host;
  h.switch_port = base.switch_port;
  h.k = base.k;
  h.window = base.window;
  return h;
}

// Three ranks as threads: int32 sums exact, many requests in flight, a full pool gives nullptr.
TEST(CollComm, InFlightRequestsAndFullPool) {
  auto f = testing::TestFabric::Start({});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  constexpr int kNodes = 3;
  const host::CommConfig base = FabricBase(**f);
  const CollHandle h0 = NodeZeroHandle(base, 4711);
  std::vector<CollHandle> handles(kNodes, h0);  // only node 0's is used
  constexpr size_t kOps = CollComm::kMaxRequests + 6;
  std::vector<std::string> errors(kNodes);
  std::vector<int> nulls(kNodes, 0);
  std::vector<std::thread> ts;
  for (int r = 0; r < kNodes; ++r) {
    ts.emplace_back([&, r] {
      auto c = CollComm::Connect(base, handles, r);
      if (!c.ok()) {
        errors[r] = c.status().ToString();
        return;
      }
      std::vector<std::vector<int32_t>> send(kOps), recv(kOps);
      std::vector<CollRequest*> reqs(kOps, nullptr);
      for (size_t i = 0; i < kOps; ++i) {
        send[i].resize(1 + i * 37);
        for (size_t j = 0; j < send[i].size(); ++j) {
          send[i][j] = static_cast<int32_t>(j * (r + 1) + i);
        }
        recv[i].assign(send[i].size(), -1);
      }
      size_t posted = 0, tested = 0;
      auto deadline = std::chrono::steady_clock::now() + 60s;
      while (tested < kOps && std::chrono::steady_clock::now() < deadline) {
        while (posted < kOps) {
          auto q = (*c)->IAllReduce(send[posted].data(), recv[posted].data(), send[posted].size(),
                                    ElemType::kInt32);
          if (!q.ok()) {
            errors[r] = q.status().ToString();
            return;
          }
          if (*q == nullptr) {
            ++nulls[r];
            break;
          }
          reqs[posted++] = *q;
        }
        bool done = false;
        size_t bytes = 0;
        Status st = (*c)->Test(reqs[tested], &done, &bytes);
        if (!st.ok()) {
          errors[r] = st.ToString();
          return;
        }
        if (done) {
          if (bytes != send[tested].size() * 4) errors[r] = "size " + std::to_string(bytes);
          ++tested;
        }
      }
      if (tested < kOps) errors[r] = "not done in 60 s";
      for (size_t i = 0; i < kOps && errors[r].empty(); ++i) {
        for (size_t j = 0; j < recv[i].size(); ++j) {
          // sum over r of j*(r+1)+i = j*6 + 3i
          if (recv[i][j] != static_cast<int32_t>(j * 6 + 3 * i)) {
            errors[r] = "op " + std::to_string(i) + " element " + std::to_string(j);
            break;
          }
        }
      }
      if ((*c)->in_flight() != 0) errors[r] = "requests left in flight";
    });
  }
  for (auto& t : ts) t.join();
  for (int r = 0; r < kNodes; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_GT(nulls[r], 0) << "rank " << r << " never saw a full pool";
  }
}

// DeviceMemory over libina's HostDomain (a real asynchronous copy thread): CollComm's
// device-memory dispatch, as the plugin's CUDA peer uses it, without a GPU.
class HostDeviceMemory final : public DeviceMemory {
 public:
  explicit HostDeviceMemory(std::unique_ptr<host::MemoryDomain> d) : domain_(std::move(d)) {}
  Result<host::Request> StartAllReduce(host::Communicator& comm, const void* send, void* recv,
                                       size_t count, ElemType type) override {
    ++calls;
    if (send != recv) std::memcpy(recv, send, count * ElemBytes(type));
    return type == ElemType::kFloat32
               ? comm.AllReduceAsync(std::span<float>(static_cast<float*>(recv), count), *domain_)
               : comm.AllReduceAsync(std::span<int32_t>(static_cast<int32_t*>(recv), count),
                                     *domain_);
  }
  Status ReserveStaging(host::Communicator& comm, size_t bytes) override {
    ++reserves;
    return comm.ReserveStaging(*domain_, bytes);
  }
  int calls = 0;
  int reserves = 0;

 private:
  std::unique_ptr<host::MemoryDomain> domain_;
};

// The device-memory path gives the host path's result bit for bit (float32 and exact int32),
// leaves the send buffer untouched, and ranks may mix the two (node 0 device, node 1 host).
TEST(CollComm, DeviceMemoryPathMatchesTheHostPath) {
  auto f = testing::TestFabric::Start({});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  constexpr int kNodes = 2;
  const host::CommConfig base = FabricBase(**f);
  const CollHandle h0 = NodeZeroHandle(base, 4712);
  std::vector<CollHandle> handles(kNodes, h0);
  std::vector<std::string> errors(kNodes);
  std::vector<int> device_calls(kNodes, 0);
  std::vector<std::vector<float>> dev_results(kNodes), host_results(kNodes);
  std::vector<std::thread> ts;
  for (int r = 0; r < kNodes; ++r) {
    ts.emplace_back([&, r] {
      auto c = CollComm::Connect(base, handles, r);
      if (!c.ok()) {
        errors[r] = c.status().ToString();
        return;
      }
      host::HostDomainOptions o;
      o.chunk_bytes = 4096;  // several chunks per op
      auto d = host::MakeHostDomain(o);
      if (!d.ok()) {
        errors[r] = d.status().ToString();
        return;
      }
      HostDeviceMemory mem(std::move(*d));
      auto run = [&](const void* send, void* recv, size_t n, ElemType t, bool device) -> Status {
        auto q = (*c)->IAllReduce(send, recv, n, t, device ? &mem : nullptr);
        if (!q.ok()) return q.status();
        if (*q == nullptr) return Internal("pool full");
        bool done = false;
        size_t bytes = 0;
        const auto deadline = std::chrono::steady_clock::now() + 30s;
        while (!done && std::chrono::steady_clock::now() < deadline) {
          if (Status st = (*c)->Test(*q, &done, &bytes); !st.ok()) return st;
        }
        return done ? Status::Ok() : DeadlineExceeded("not done in 30 s");
      };
      constexpr size_t kN = 10007;
      std::vector<float> send(kN);
      for (size_t j = 0; j < kN; ++j) send[j] = std::sin(0.37f * j + r) * (1.0f + j % 97);
      const std::vector<float> copy = send;
      dev_results[r].assign(kN, -1.0f);
      host_results[r].assign(kN, -2.0f);
      // Staging for the largest call, allocated before any (as the plugin's regMr of a CUDA
      // buffer does).
      if (Status rs = (*c)->ReserveStaging(kN * 4, mem); !rs.ok() || mem.reserves != 1) {
        errors[r] = "ReserveStaging: " + rs.ToString();
        return;
      }
      // Node 0 takes the device path for the first op, node 1 the host path: the wire is the same.
      Status st = run(send.data(), dev_results[r].data(), kN, ElemType::kFloat32, r == 0);
      if (st.ok()) st = run(send.data(), host_results[r].data(), kN, ElemType::kFloat32, false);
      std::vector<int32_t> isend(kN), irecv(kN, -1);
      for (size_t j = 0; j < kN; ++j) isend[j] = static_cast<int32_t>(j * (r + 1)) - 5000;
      if (st.ok()) st = run(isend.data(), irecv.data(), kN, ElemType::kInt32, true);
      if (st.ok()) st = run(irecv.data(), irecv.data(), kN, ElemType::kInt32, true);  // in place
      if (!st.ok()) {
        errors[r] = st.ToString();
        return;
      }
      if (send != copy) errors[r] = "send buffer changed";
      for (size_t j = 0; j < kN && errors[r].empty(); ++j) {
        // first op: sum over r of j*(r+1) - 5000 = 3j - 10000; the second doubles it
        if (irecv[j] != 2 * (static_cast<int32_t>(3 * j) - 10000)) {
          errors[r] = "int32 element " + std::to_string(j);
        }
      }
      device_calls[r] = mem.calls;
    });
  }
  for (auto& t : ts) t.join();
  for (int r = 0; r < kNodes; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(device_calls[r], r == 0 ? 3 : 2) << "rank " << r;
    EXPECT_EQ(0, std::memcmp(dev_results[r].data(), host_results[r].data(),
                             host_results[r].size() * sizeof(float)))
        << "rank " << r << ": device path differs from the host path";
    EXPECT_EQ(0, std::memcmp(dev_results[r].data(), dev_results[0].data(),
                             dev_results[0].size() * sizeof(float)))
        << "rank " << r << " differs from rank 0";
  }
}

TEST(CollComm, RefusesBadRankAndTooLargeCounts) {
  host::CommConfig base;
  CollHandle h;
  h.switch_host = "127.0.0.1";
  std::vector<CollHandle> hs(2, h);
  EXPECT_EQ(CollComm::Connect(base, hs, 2).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CollComm::Connect(base, {}, 0).status().code(), StatusCode::kInvalidArgument);
}

// ---- TCP ----

struct Pair {
  std::unique_ptr<TcpComm> send, recv;
};

Pair Connect(TcpListener& l) {
  Pair p;
  auto c = TcpConnector::Start(l.handle());
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return p;
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while ((!p.send || !p.recv) && std::chrono::steady_clock::now() < deadline) {
    if (!p.send) {
      auto s = (*c)->TryFinish();
      EXPECT_TRUE(s.ok()) << s.status().ToString();
      if (!s.ok()) return p;
      p.send = std::move(*s);
    }
    if (!p.recv) {
      auto r = l.TryAccept();
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (!r.ok()) return p;
      p.recv = std::move(*r);
    }
  }
  return p;
}

bool Wait(TcpComm& c, TcpRequest* r, size_t* bytes, Status* err) {
  auto deadline = std::chrono::steady_clock::now() + 10s;
  bool done = false;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    Status st = c.Test(r, &done, bytes);
    if (!st.ok()) {
      *err = st;
      return false;
    }
  }
  return done;
}

TEST(TcpNet, HandleRoundTripsWithLocalState) {
  NetHandle h;
  h.ipv4 = 0x7f000001;
  h.port = 5555;
  uint8_t b[kHandleBytes];
  h.Encode(b);
  EXPECT_EQ(NetHandle::GetState(b), nullptr);
  int x;
  NetHandle::SetState(b, &x);
  EXPECT_EQ(NetHandle::GetState(b), &x);
  auto d = NetHandle::Decode(b);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->ipv4, 0x7f000001u);
  EXPECT_EQ(d->port, 5555);
  b[1] = 0;
  EXPECT_FALSE(NetHandle::Decode(b).ok());
}

// Interleaved posts and tests, sizes 0 .. 3 MiB (larger than the socket buffers), in order.
TEST(TcpNet, MessagesArriveInOrderWithSizes) {
  auto l = TcpListener::Listen(0x7f000001);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  Pair p = Connect(**l);
  ASSERT_TRUE(p.send && p.recv);
  const std::vector<size_t> sizes = {0, 1, 12, 4096, (size_t{3} << 20) + 5, 77, 65536};
  std::vector<std::vector<uint8_t>> out(sizes.size()), in(sizes.size());
  std::vector<TcpRequest*> sr(sizes.size()), rr(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    out[i].resize(sizes[i]);
    for (size_t j = 0; j < sizes[i]; ++j) out[i][j] = static_cast<uint8_t>(i * 17 + j * 3);
    in[i].assign(sizes[i] + 10, 0xEE);
    auto s = p.send->Post(out[i].data(), sizes[i], static_cast<int>(i), TcpComm::Dir::kSend);
    auto r = p.recv->Post(in[i].data(), in[i].size(), static_cast<int>(i), TcpComm::Dir::kRecv);
    ASSERT_TRUE(s.ok() && r.ok());
    ASSERT_NE(*s, nullptr);
    ASSERT_NE(*r, nullptr);
    sr[i] = *s;
    rr[i] = *r;
  }
  // Progress both sides from one thread: the big message needs the receiver to drain.
  std::vector<bool> sdone(sizes.size()), rdone(sizes.size());
  auto deadline = std::chrono::steady_clock::now() + 20s;
  size_t left = 2 * sizes.size();
  while (left > 0 && std::chrono::steady_clock::now() < deadline) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      size_t b = 0;
      bool d = false;
      if (!sdone[i]) {
        ASSERT_TRUE(p.send->Test(sr[i], &d, &b).ok());
        if (d) {
          EXPECT_EQ(b, sizes[i]);
          sdone[i] = true;
          --left;
        }
      }
      if (!rdone[i]) {
        ASSERT_TRUE(p.recv->Test(rr[i], &d, &b).ok());
        if (d) {
          EXPECT_EQ(b, sizes[i]);
          // (an empty message's data() may be null, which memcmp must not get)
          EXPECT_TRUE(sizes[i] == 0 || std::memcmp(in[i].data(), out[i].data(), sizes[i]) == 0)
              << "message " << i;
          rdone[i] = true;
          --left;
        }
      }
    }
  }
  EXPECT_EQ(left, 0u);
  // The comm refuses the wrong direction and says when it is full.
  EXPECT_EQ(p.send->Post(nullptr, 0, 0, TcpComm::Dir::kRecv).status().code(),
            StatusCode::kFailedPrecondition);
  std::vector<uint8_t> small(8);
  int nulls = 0;
  for (int i = 0; i < TcpComm::kMaxRequests + 1; ++i) {
    auto r = p.recv->Post(small.data(), small.size(), 0, TcpComm::Dir::kRecv);
    ASSERT_TRUE(r.ok());
    nulls += *r == nullptr;
  }
  EXPECT_EQ(nulls, 1);
}

TEST(TcpNet, TooLargeMessageAndClosedPeerAreErrors) {
  auto l = TcpListener::Listen(0x7f000001);
  ASSERT_TRUE(l.ok());
  Pair p = Connect(**l);
  ASSERT_TRUE(p.send && p.recv);
  std::vector<uint8_t> big(100), small(10);
  auto s = p.send->Post(big.data(), big.size(), 0, TcpComm::Dir::kSend);
  ASSERT_TRUE(s.ok());
  size_t b;
  Status err;
  // The header may already be there when the receive is posted: the error comes from Post or
  // from Test.
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (err.ok() && std::chrono::steady_clock::now() < deadline) {
    auto r = p.recv->Post(small.data(), small.size(), 0, TcpComm::Dir::kRecv);
    if (!r.ok()) {
      err = r.status();
    } else {
      ASSERT_NE(*r, nullptr);
      EXPECT_FALSE(Wait(*p.recv, *r, &b, &err));
    }
  }
  EXPECT_EQ(err.code(), StatusCode::kDataLoss) << err.ToString();
  // Sticky: the next call says the same.
  EXPECT_EQ(p.recv->Post(small.data(), 1, 0, TcpComm::Dir::kRecv).status().code(),
            StatusCode::kDataLoss);

  Pair q = Connect(**l);
  ASSERT_TRUE(q.send && q.recv);
  auto r2 = q.recv->Post(small.data(), small.size(), 0, TcpComm::Dir::kRecv);
  ASSERT_TRUE(r2.ok());
  q.send.reset();  // the peer goes away
  EXPECT_FALSE(Wait(*q.recv, *r2, &b, &err));
  EXPECT_EQ(err.code(), StatusCode::kUnavailable) << err.ToString();
}

TEST(TcpNet, ConnectToAClosedPortFails) {
  uint16_t port;
  {
    auto l = TcpListener::Listen(0x7f000001);
    ASSERT_TRUE(l.ok());
    port = (*l)->handle().port;
  }
  NetHandle h;
  h.ipv4 = 0x7f000001;
  h.port = port;
  auto c = TcpConnector::Start(h);
  Status st;
  if (!c.ok()) {
    st = c.status();
  } else {
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (st.ok() && std::chrono::steady_clock::now() < deadline) {
      auto s = (*c)->TryFinish();
      if (!s.ok())
        st = s.status();
      else
        ASSERT_EQ(*s, nullptr) << "connected to a closed port";
    }
  }
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << st.ToString();
}

}  // namespace
}  // namespace ina::nccl
