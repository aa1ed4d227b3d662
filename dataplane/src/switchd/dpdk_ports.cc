// ina-switchd's DPDK packet I/O (see dpdk_ports.h). DPDK return codes become Status here.
#include "ina/dp/switchd/dpdk_ports.h"

#include <arpa/inet.h>
#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>

namespace ina::dp::switchd {

const bool kDpdkBuilt = true;

namespace {

constexpr size_t kBurst = 32;
constexpr uint16_t kRingSize = 1024;
constexpr size_t kHdrBytes = sizeof(rte_ether_hdr) + sizeof(rte_ipv4_hdr) + sizeof(rte_udp_hdr);
constexpr int kSpinPolls = 64;
constexpr int kTxMaxWaitUs = 2000;
constexpr size_t kMaxPorts = 64;

struct Port {
  uint16_t id = 0;
  // Each port its own RX pool: net_af_xdp builds its UMEM on the queue's pool, so two af_xdp
  // ports on one pool (without shared_umem) stall.
  rte_mempool* rx_pool = nullptr;
  rte_ether_addr mac{};
  DpdkPortStats st;
  std::array<rte_mbuf*, kBurst> txq{};
  size_t txn = 0;
};

class Ports final : public DpdkPorts {
 public:
  ~Ports() override {
    for (auto& p : ports_) {
      (void)rte_eth_dev_stop(p.id);
      (void)rte_eth_dev_close(p.id);
    }
    for (size_t i = stash_head_; i < stash_n_; ++i) rte_pktmbuf_free(stash_[i]);
    for (auto& p : ports_) {
      if (p.rx_pool != nullptr) rte_mempool_free(p.rx_pool);
    }
    if (tx_pool_ != nullptr) rte_mempool_free(tx_pool_);
    if (eal_up_) (void)rte_eal_cleanup();
  }

  Status Init(const DpdkPortsConfig& c) {
    in_addr a{};
    if (inet_pton(AF_INET, c.ip.c_str(), &a) != 1) {
      return InvalidArgument("dpdk: '" + c.ip + "' is not an IPv4 address");
    }
    ip_ = a.s_addr;
    udp_port_ = rte_cpu_to_be_16(c.udp_port);
    backoff_max_us_ = static_cast<int>(c.backoff_max_us);
    words_ = {"ina-switchd"};
    std::istringstream in(c.eal_args);
    for (std::string w; in >> w;) words_.push_back(w);
    for (auto& w : words_) argv_.push_back(w.data());
    argv_.push_back(nullptr);
    if (rte_eal_init(static_cast<int>(words_.size()), argv_.data()) < 0) {
      return Unavailable("dpdk: rte_eal_init('" + c.eal_args + "'): " + rte_strerror(rte_errno));
    }
    eal_up_ = true;
    const uint16_t n = rte_eth_dev_count_avail();
    if (n == 0) return FailedPrecondition("dpdk: no ethdev port (add them with --vdev)");
    if (n > kMaxPorts) return InvalidArgument("dpdk: more than 64 ports");
    tx_pool_ = rte_pktmbuf_pool_create("ina_sw_tx", n * 2048u + 4095u, 256, 0,
                                       RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    if (tx_pool_ == nullptr) {
      return Internal(std::string("dpdk: mbuf pool: ") + rte_strerror(rte_errno));
    }
    ports_.reserve(n);
    uint16_t pid = 0;
    RTE_ETH_FOREACH_DEV(pid) {
      ports_.emplace_back();
      ports_.back().id = pid;
      INA_RETURN_IF_ERROR(SetUp(ports_.back()));  // on error the destructor releases it
      by_id_.resize(std::max<size_t>(by_id_.size(), pid + 1u), -1);
      by_id_[pid] = static_cast<int>(ports_.size() - 1);
    }
    return Status::Ok();
  }

  bool Wait(int timeout_ms) override {
    if (stash_head_ < stash_n_) return true;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    int idle = 0;
    int sleep_us = 1;
    while (true) {
      if (Poll() > 0) return true;
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return false;
      if (idle++ < kSpinPolls) {
        rte_pause();
        continue;
      }
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now);
      std::this_thread::sleep_for(std::min(std::chrono::microseconds(sleep_us), left));
      sleep_us = std::min(sleep_us * 2, std::max(backoff_max_us_, 1));
    }
  }

  size_t Recv(uint8_t* const* bufs, size_t cap, uint32_t* lens, Peer* from, size_t max) override {
    if (stash_head_ == stash_n_) Poll();
    size_t got = 0;
    while (got < max && stash_head_ < stash_n_) {
      rte_mbuf* m = stash_[stash_head_];
      const uint16_t port = stash_port_[stash_head_];
      ++stash_head_;
      if (Parse(m, port, bufs[got], cap, &lens[got], &from[got])) {
        ++got;
      } else {
        ++ports_[by_id_[port]].st.rx_other;
      }
      rte_pktmbuf_free(m);
    }
    return got;
  }

  size_t Send(const OutPacket* pk, size_t n) override {
    size_t sent = 0;
    for (size_t i = 0; i < n; ++i) {
      const Peer& to = *pk[i].to;
      const auto& sa = reinterpret_cast<const sockaddr_in&>(to.addr);
      uint16_t pid;
      std::memcpy(&pid, sa.sin_zero + 6, 2);
      if (to.addr.ss_family != AF_INET || pid >= by_id_.size() || by_id_[pid] < 0 ||
          pk[i].len > RTE_ETHER_MTU - sizeof(rte_ipv4_hdr) - sizeof(rte_udp_hdr)) {
        ++unroutable_;
        continue;
      }
      Port& p = ports_[by_id_[pid]];
      rte_mbuf* m = rte_pktmbuf_alloc(tx_pool_);
      if (m == nullptr) {
        ++p.st.tx_dropped;
        continue;
      }
      auto* eth = reinterpret_cast<rte_ether_hdr*>(rte_pktmbuf_append(m, kHdrBytes + pk[i].len));
      std::memcpy(eth->dst_addr.addr_bytes, sa.sin_zero, RTE_ETHER_ADDR_LEN);
      rte_ether_addr_copy(&p.mac, &eth->src_addr);
      eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
      auto* ip = reinterpret_cast<rte_ipv4_hdr*>(eth + 1);
      std::memset(ip, 0, sizeof(*ip));
      ip->version_ihl = RTE_IPV4_VHL_DEF;
      ip->total_length = rte_cpu_to_be_16(
          static_cast<uint16_t>(sizeof(rte_ipv4_hdr) + sizeof(rte_udp_hdr) + pk[i].len));
      ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
      ip->time_to_live = 64;
      ip->next_proto_id = IPPROTO_UDP;
      ip->src_addr = ip_;
      ip->dst_addr = sa.sin_addr.s_addr;
      ip->hdr_checksum = rte_ipv4_cksum(ip);
      auto* udp = reinterpret_cast<rte_udp_hdr*>(ip + 1);
      udp->src_port = udp_port_;
      udp->dst_port = sa.sin_port;
      udp->dgram_len = rte_cpu_to_be_16(static_cast<uint16_t>(sizeof(rte_udp_hdr) + pk[i].len));
      udp->dgram_cksum = 0;
      std::memcpy(udp + 1, pk[i].data, pk[i].len);
      p.txq[p.txn++] = m;
      if (p.txn == kBurst) sent += Flush(p);
    }
    for (auto& p : ports_) sent += Flush(p);
    return sent;
  }

  std::vector<DpdkPortStats> stats() const override {
    std::vector<DpdkPortStats> v;
    for (const auto& p : ports_) v.push_back(p.st);
    return v;
  }

  std::string Describe() const override {
    std::string s;
    for (const auto& p : ports_) {
      char mac[RTE_ETHER_ADDR_FMT_SIZE];
      rte_ether_format_addr(mac, sizeof(mac), &p.mac);
      if (!s.empty()) s += ", ";
      s += "port " + std::to_string(p.id) + " " + p.st.name + " " + mac;
    }
    return s;
  }

 private:
  Status SetUp(Port& p) {
    char name[RTE_ETH_NAME_MAX_LEN] = {};
    (void)rte_eth_dev_get_name_by_port(p.id, name);
    p.st.name = name;
    auto fail = [&](const char* what, int rc) {
      return Internal("dpdk: port " + p.st.name + " " + what + ": " + rte_strerror(-rc));
    };
    rte_eth_conf conf{};
    if (int rc = rte_eth_dev_configure(p.id, 1, 1, &conf); rc != 0) return fail("configure", rc);
    uint16_t nrx = kRingSize, ntx = kRingSize;
    if (int rc = rte_eth_dev_adjust_nb_rx_tx_desc(p.id, &nrx, &ntx); rc != 0) {
      return fail("adjust_nb_rx_tx_desc", rc);
    }
    const int socket = rte_eth_dev_socket_id(p.id);
    const std::string pool_name = "ina_sw_rx" + std::to_string(p.id);
    p.rx_pool = rte_pktmbuf_pool_create(pool_name.c_str(), 2047u + 2u * nrx, 256, 0,
                                        RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    if (p.rx_pool == nullptr) {
      return Internal("dpdk: port " + p.st.name + " rx pool: " + rte_strerror(rte_errno));
    }
    if (int rc = rte_eth_rx_queue_setup(p.id, 0, nrx, socket, nullptr, p.rx_pool); rc != 0) {
      return fail("rx_queue_setup", rc);
    }
    if (int rc = rte_eth_tx_queue_setup(p.id, 0, ntx, socket, nullptr); rc != 0) {
      return fail("tx_queue_setup", rc);
    }
    if (int rc = rte_eth_macaddr_get(p.id, &p.mac); rc != 0) return fail("macaddr_get", rc);
    if (int rc = rte_eth_dev_start(p.id); rc != 0) return fail("start", rc);
    (void)rte_eth_promiscuous_enable(p.id);  // best effort: frames are filtered on IPv4/UDP
    return Status::Ok();
  }

  // Fills the stash from every port (one burst each). Returns frames received.
  size_t Poll() {
    if (stash_head_ == stash_n_) stash_head_ = stash_n_ = 0;
    size_t total = 0;
    for (auto& p : ports_) {
      if (stash_n_ + kBurst > stash_.size()) break;
      const uint16_t n = rte_eth_rx_burst(p.id, 0, stash_.data() + stash_n_, kBurst);
      for (uint16_t i = 0; i < n; ++i) stash_port_[stash_n_ + i] = p.id;
      stash_n_ += n;
      p.st.rx_frames += n;
      total += n;
    }
    return total;
  }

  bool Parse(rte_mbuf* m, uint16_t port, uint8_t* buf, size_t cap, uint32_t* len, Peer* from) {
    std::array<uint8_t, kHdrBytes> tmp;
    const auto* h = static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, kHdrBytes, tmp.data()));
    if (h == nullptr) return false;
    const auto* eth = reinterpret_cast<const rte_ether_hdr*>(h);
    if (eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4)) return false;
    const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(eth + 1);
    if (ip->version_ihl != RTE_IPV4_VHL_DEF || ip->next_proto_id != IPPROTO_UDP) return false;
    if (ip->dst_addr != ip_) return false;
    const auto* udp = reinterpret_cast<const rte_udp_hdr*>(ip + 1);
    if (udp->dst_port != udp_port_) return false;
    const size_t ulen = rte_be_to_cpu_16(udp->dgram_len);
    if (ulen < sizeof(rte_udp_hdr) || kHdrBytes + ulen - sizeof(rte_udp_hdr) > m->pkt_len) {
      return false;
    }
    const size_t n = ulen - sizeof(rte_udp_hdr);
    *len = static_cast<uint32_t>(n);
    const size_t copy = std::min(n, cap);
    const void* d = rte_pktmbuf_read(m, kHdrBytes, static_cast<uint32_t>(copy), buf);
    if (d != buf) std::memcpy(buf, d, copy);
    *from = Peer{};
    auto& sa = reinterpret_cast<sockaddr_in&>(from->addr);
    sa.sin_family = AF_INET;
    sa.sin_port = udp->src_port;
    sa.sin_addr.s_addr = ip->src_addr;
    std::memcpy(sa.sin_zero, eth->src_addr.addr_bytes, RTE_ETHER_ADDR_LEN);
    std::memcpy(sa.sin_zero + 6, &port, 2);
    from->len = sizeof(sockaddr_in);
    return true;
  }

  size_t Flush(Port& p) {
    size_t done = 0;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::microseconds(kTxMaxWaitUs);
    while (done < p.txn) {
      const uint16_t k =
          rte_eth_tx_burst(p.id, 0, p.txq.data() + done, static_cast<uint16_t>(p.txn - done));
      done += k;
      if (k == 0) {
        if (std::chrono::steady_clock::now() >= give_up) break;
        rte_pause();
      }
    }
    if (done < p.txn) {
      rte_pktmbuf_free_bulk(p.txq.data() + done, p.txn - done);
      p.st.tx_dropped += p.txn - done;
    }
    p.st.tx_frames += done;
    p.txn = 0;
    return done;
  }

  std::vector<std::string> words_;
  std::vector<char*> argv_;
  bool eal_up_ = false;
  uint32_t ip_ = 0;        // network order
  uint16_t udp_port_ = 0;  // network order
  int backoff_max_us_ = 1000;
  rte_mempool* tx_pool_ = nullptr;
  std::vector<Port> ports_;
  std::vector<int> by_id_;  // port id -> index in ports_, -1 if none
  std::array<rte_mbuf*, kBurst * kMaxPorts> stash_{};
  std::array<uint16_t, kBurst * kMaxPorts> stash_port_{};
  size_t stash_head_ = 0, stash_n_ = 0;
  uint64_t unroutable_ = 0;  // peers that are not DPDK peers (cannot happen in practice)
};

}  // namespace

Result<std::unique_ptr<DpdkPorts>> DpdkPorts::Open(const DpdkPortsConfig& config) {
  auto p = std::make_unique<Ports>();
  INA_RETURN_IF_ERROR(p->Init(config));
  return std::unique_ptr<DpdkPorts>(std::move(p));
}

}  // namespace ina::dp::switchd
