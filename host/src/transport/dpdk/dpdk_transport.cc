// The DPDK transport (see dpdk_transport.h). DPDK's C API is wrapped here once: its return codes
// become Status at this file's boundary.
#include "dpdk/dpdk_transport.h"

#include <arpa/inet.h>
#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

namespace ina::host::dpdk {

const bool kBuilt = true;

namespace {

constexpr size_t kBurst = 32;
constexpr uint16_t kRingSize = 1024;
constexpr unsigned kPoolMbufs = 4095;  // per pool; a power of two minus one suits the ring
constexpr unsigned kPoolCache = 128;
constexpr size_t kHdrBytes =
    sizeof(rte_ether_hdr) + sizeof(rte_ipv4_hdr) + sizeof(rte_udp_hdr);  // 42
constexpr size_t kMaxPayload = RTE_ETHER_MTU - sizeof(rte_ipv4_hdr) - sizeof(rte_udp_hdr);
constexpr int kSpinPolls = 64;  // idle polls with rte_pause before the first sleep

std::mutex g_mu;
bool g_eal_up = false;
std::set<uint16_t> g_ports_in_use;  // guarded by g_mu
std::atomic<unsigned> g_pool_seq{0};

// Initialises the EAL once per process. argv storage must outlive the EAL: kept in a static.
Status EnsureEal(const std::string& args) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_eal_up) return Status::Ok();
  static std::vector<std::string> words;
  static std::vector<char*> argv;
  words = {"ina-dpdk"};
  std::istringstream in(args);
  for (std::string w; in >> w;) words.push_back(w);
  argv.clear();
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const int rc = rte_eal_init(static_cast<int>(words.size()), argv.data());
  if (rc < 0 && rte_errno != EALREADY) {
    return Unavailable("dpdk: rte_eal_init('" + args + "'): " + rte_strerror(rte_errno));
  }
  g_eal_up = true;
  return Status::Ok();
}

Result<rte_ether_addr> ParseMac(const std::string& s, std::string_view what) {
  rte_ether_addr a{};
  if (rte_ether_unformat_addr(s.c_str(), &a) != 0) {
    return InvalidArgument("dpdk: " + std::string(what) + " '" + s + "' is not a MAC address");
  }
  return a;
}

Result<uint32_t> ParseIp(const std::string& s, std::string_view what) {  // network order
  in_addr a{};
  if (inet_pton(AF_INET, s.c_str(), &a) != 1) {
    return InvalidArgument("dpdk: " + std::string(what) + " '" + s + "' is not an IPv4 address");
  }
  return a.s_addr;
}

class DpdkTransport final : public Transport {
 public:
  ~DpdkTransport() override {
    if (started_) {
      (void)rte_eth_dev_stop(port_);
      (void)rte_eth_dev_close(port_);
    }
    if (hdr_pool_ != nullptr) rte_mempool_free(hdr_pool_);
    if (ext_pool_ != nullptr) rte_mempool_free(ext_pool_);
    if (rx_pool_ != nullptr) rte_mempool_free(rx_pool_);
    std::lock_guard<std::mutex> lock(g_mu);
    g_ports_in_use.erase(port_);
  }

  static Result<std::unique_ptr<Transport>> Open(const TransportConfig& tc) {
    const DpdkConfig& c = tc.dpdk;
    if (c.local_ip.empty() || c.local_port == 0) {
      return InvalidArgument("dpdk: local_ip and local_port (INA_DPDK_LOCAL=ip:port) are required");
    }
    if (c.backoff_max_us < 0) return InvalidArgument("dpdk: backoff_max_us < 0");
    std::unique_ptr<DpdkTransport> t(new DpdkTransport());
    INA_ASSIGN_OR_RETURN(t->local_ip_, ParseIp(c.local_ip, "local_ip"));
    INA_ASSIGN_OR_RETURN(t->fabric_ip_, ParseIp(tc.fabric_host, "fabric host"));
    t->local_port_ = htons(c.local_port);
    t->fabric_port_ = htons(tc.fabric_port);
    t->backoff_max_us_ = c.backoff_max_us;
    if (!c.fabric_mac.empty()) {
      INA_ASSIGN_OR_RETURN(t->dst_mac_, ParseMac(c.fabric_mac, "fabric_mac"));
      t->dst_fixed_ = true;
    } else {
      std::memset(t->dst_mac_.addr_bytes, 0xff, RTE_ETHER_ADDR_LEN);
    }
    INA_RETURN_IF_ERROR(EnsureEal(c.eal_args));
    INA_RETURN_IF_ERROR(t->SetUpPort(c));
    return std::unique_ptr<Transport>(std::move(t));
  }

  Result<size_t> SendBurst(std::span<const TxPacket> packets) override {
    RegisterThread();
    size_t sent = 0;
    std::array<rte_mbuf*, kBurst> hdr{};
    std::array<rte_mbuf*, kBurst> ext{};
    while (sent < packets.size()) {
      size_t n = std::min(kBurst, packets.size() - sent);
      for (size_t i = 0; i < n; ++i) {
        if (packets[sent + i].len > kMaxPayload) {
          if (sent + i == 0) {
            return InvalidArgument("dpdk: packet of " + std::to_string(packets[0].len) +
                                   " bytes exceeds one frame");
          }
          n = i;  // send up to it; the next call reports it
          break;
        }
      }
      if (n == 0) return sent;
      if (rte_pktmbuf_alloc_bulk(hdr_pool_, hdr.data(), n) != 0) return sent;  // retry later
      if (zero_copy_ && rte_pktmbuf_alloc_bulk(ext_pool_, ext.data(), n) != 0) {
        rte_pktmbuf_free_bulk(hdr.data(), n);
        return sent;
      }
      for (size_t i = 0; i < n; ++i)
        Build(hdr[i], zero_copy_ ? ext[i] : nullptr, packets[sent + i]);
      const uint16_t ok = rte_eth_tx_burst(port_, 0, hdr.data(), static_cast<uint16_t>(n));
      sent += ok;
      if (ok < n) {  // the ring is full: the caller retries the rest later
        rte_pktmbuf_free_bulk(hdr.data() + ok, n - ok);
        return sent;
      }
    }
    return sent;
  }

  Result<size_t> RecvBurst(std::span<RxPacket> packets,
                           std::chrono::microseconds timeout) override {
    if (packets.empty()) return size_t{0};
    RegisterThread();
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int idle = 0;
    int sleep_us = 1;
    while (true) {
      const size_t got = RecvNow(packets);
      if (got > 0 || timeout.count() <= 0) return got;
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return size_t{0};
      if (idle++ < kSpinPolls) {
        rte_pause();
        continue;
      }
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now);
      std::this_thread::sleep_for(std::min(std::chrono::microseconds(sleep_us), left));
      sleep_us = std::min(sleep_us * 2, std::max(backoff_max_us_, 1));
    }
  }

  std::string_view name() const override { return "dpdk"; }

 private:
  DpdkTransport() { std::memset(&shinfo_, 0, sizeof(shinfo_)); }

  static void NoFree(void*, void*) {}  // the caller owns external buffers

  // The communicator's progress thread is not an EAL thread: give it an lcore id the first time
  // it touches the port (per-lcore state such as mempool caches then works as on an EAL core).
  // Best effort: without a free lcore the thread stays unregistered, as before.
  static void RegisterThread() {
    thread_local bool done = false;
    if (done) return;
    done = true;
    if (rte_lcore_id() == LCORE_ID_ANY) (void)rte_thread_register();
  }

  Status SetUpPort(const DpdkConfig& c) {
    if (rte_eth_dev_count_avail() == 0) {
      return FailedPrecondition("dpdk: no ethdev port (add one with --vdev in the EAL args)");
    }
    uint16_t port = RTE_MAX_ETHPORTS;
    if (c.port.empty()) {
      uint16_t p = 0;
      RTE_ETH_FOREACH_DEV(p) {
        port = p;
        break;
      }
    } else if (rte_eth_dev_get_port_by_name(c.port.c_str(), &port) != 0) {
      return InvalidArgument("dpdk: no port named '" + c.port + "'");
    }
    {
      std::lock_guard<std::mutex> lock(g_mu);
      if (!g_ports_in_use.insert(port).second) {
        return FailedPrecondition("dpdk: port " + std::to_string(port) + " already in use");
      }
    }
    port_ = port;
    rte_eth_dev_info info{};
    if (int rc = rte_eth_dev_info_get(port_, &info); rc != 0) return Fail("dev_info_get", rc);
    rte_eth_conf conf{};
    const bool multi_seg = (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0;
    zero_copy_ = c.zero_copy && multi_seg && rte_eal_iova_mode() == RTE_IOVA_VA;
    if (zero_copy_) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
    if (int rc = rte_eth_dev_configure(port_, 1, 1, &conf); rc != 0) return Fail("configure", rc);
    uint16_t nrx = kRingSize, ntx = kRingSize;
    if (int rc = rte_eth_dev_adjust_nb_rx_tx_desc(port_, &nrx, &ntx); rc != 0) {
      return Fail("adjust_nb_rx_tx_desc", rc);
    }
    const int socket = rte_eth_dev_socket_id(port_);
    const unsigned seq = g_pool_seq++;
    auto pool = [&](const char* kind, uint16_t room) {
      const std::string name =
          std::string("ina_") + kind + std::to_string(port_) + "_" + std::to_string(seq);
      return rte_pktmbuf_pool_create(name.c_str(), kPoolMbufs, kPoolCache, 0, room,
                                     socket < 0 ? SOCKET_ID_ANY : socket);
    };
    rx_pool_ = pool("rx", RTE_MBUF_DEFAULT_BUF_SIZE);
    hdr_pool_ = pool("tx", RTE_MBUF_DEFAULT_BUF_SIZE);  // headers, or whole packets when copying
    ext_pool_ = pool("ext", 0);                         // data-less mbufs for external buffers
    if (rx_pool_ == nullptr || hdr_pool_ == nullptr || ext_pool_ == nullptr) {
      return Internal(std::string("dpdk: mbuf pool: ") + rte_strerror(rte_errno));
    }
    if (int rc = rte_eth_rx_queue_setup(port_, 0, nrx, socket, nullptr, rx_pool_); rc != 0) {
      return Fail("rx_queue_setup", rc);
    }
    rte_eth_txconf txc = info.default_txconf;
    txc.offloads = conf.txmode.offloads;
    if (int rc = rte_eth_tx_queue_setup(port_, 0, ntx, socket, &txc); rc != 0) {
      return Fail("tx_queue_setup", rc);
    }
    if (c.local_mac.empty()) {
      if (int rc = rte_eth_macaddr_get(port_, &src_mac_); rc != 0) return Fail("macaddr_get", rc);
    } else {
      INA_ASSIGN_OR_RETURN(src_mac_, ParseMac(c.local_mac, "local_mac"));
    }
    if (int rc = rte_eth_dev_start(port_); rc != 0) return Fail("start", rc);
    started_ = true;
    (void)rte_eth_promiscuous_enable(port_);  // best effort: we filter on IPv4/UDP anyway
    shinfo_.free_cb = &NoFree;
    shinfo_.fcb_opaque = nullptr;
    rte_mbuf_ext_refcnt_set(&shinfo_, 1);  // the transport's own reference: never reaches 0
    return Status::Ok();
  }

  Status Fail(const char* what, int rc) const {
    return Internal("dpdk: port " + std::to_string(port_) + " " + what + ": " + rte_strerror(-rc));
  }

  // Fills m with the headers, then the payload: attached through ext when given, else copied.
  // REQUIRES: p.len <= kMaxPayload.
  void Build(rte_mbuf* m, rte_mbuf* ext, const TxPacket& p) {
    auto* h = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, kHdrBytes));
    auto* eth = reinterpret_cast<rte_ether_hdr*>(h);
    rte_ether_addr_copy(&dst_mac_, &eth->dst_addr);
    rte_ether_addr_copy(&src_mac_, &eth->src_addr);
    eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(eth + 1);
    ip->version_ihl = RTE_IPV4_VHL_DEF;
    ip->type_of_service = 0;
    ip->total_length =
        rte_cpu_to_be_16(static_cast<uint16_t>(sizeof(rte_ipv4_hdr) + sizeof(rte_udp_hdr) + p.len));
    ip->packet_id = 0;
    ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
    ip->time_to_live = 64;
    ip->next_proto_id = IPPROTO_UDP;
    ip->hdr_checksum = 0;
    ip->src_addr = local_ip_;
    ip->dst_addr = fabric_ip_;
    ip->hdr_checksum = rte_ipv4_cksum(ip);
    auto* udp = reinterpret_cast<rte_udp_hdr*>(ip + 1);
    udp->src_port = local_port_;
    udp->dst_port = fabric_port_;
    udp->dgram_len = rte_cpu_to_be_16(static_cast<uint16_t>(sizeof(rte_udp_hdr) + p.len));
    udp->dgram_cksum = 0;  // no UDP checksum (IPv4)
    if (ext == nullptr) {
      std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(p.len)), p.data, p.len);
      return;
    }
    void* buf = const_cast<uint8_t*>(p.data);
    rte_mbuf_ext_refcnt_update(&shinfo_, 1);
    rte_pktmbuf_attach_extbuf(ext, buf, static_cast<rte_iova_t>(reinterpret_cast<uintptr_t>(buf)),
                              static_cast<uint16_t>(p.len), &shinfo_);
    ext->data_len = static_cast<uint16_t>(p.len);
    ext->pkt_len = p.len;
    (void)rte_pktmbuf_chain(m, ext);  // two segments: cannot exceed the chain limit
  }

  size_t RecvNow(std::span<RxPacket> packets) {
    std::array<rte_mbuf*, kBurst> mb{};
    const uint16_t want = static_cast<uint16_t>(std::min(kBurst, packets.size()));
    const uint16_t n = rte_eth_rx_burst(port_, 0, mb.data(), want);
    size_t got = 0;
    for (uint16_t i = 0; i < n; ++i) {
      rte_mbuf* m = mb[i];
      if (Accept(m, packets[got])) ++got;
      rte_pktmbuf_free(m);
    }
    return got;
  }

  // Parses one frame; copies the UDP payload into out when it is from the fabric to us.
  bool Accept(rte_mbuf* m, RxPacket& out) {
    std::array<uint8_t, kHdrBytes> tmp;
    const auto* h = static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, kHdrBytes, tmp.data()));
    if (h == nullptr) return Drop();
    const auto* eth = reinterpret_cast<const rte_ether_hdr*>(h);
    if (eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4)) return Drop();
    const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(eth + 1);
    if (ip->version_ihl != RTE_IPV4_VHL_DEF || ip->next_proto_id != IPPROTO_UDP) return Drop();
    if (ip->src_addr != fabric_ip_ || ip->dst_addr != local_ip_) return Drop();
    const auto* udp = reinterpret_cast<const rte_udp_hdr*>(ip + 1);
    if (udp->src_port != fabric_port_ || udp->dst_port != local_port_) return Drop();
    const size_t ulen = rte_be_to_cpu_16(udp->dgram_len);
    if (ulen < sizeof(rte_udp_hdr) || kHdrBytes + ulen - sizeof(rte_udp_hdr) > m->pkt_len) {
      return Drop();
    }
    if (!dst_fixed_ && !dst_learnt_) {
      rte_ether_addr_copy(&eth->src_addr, &dst_mac_);
      dst_learnt_ = true;
    }
    const size_t len = ulen - sizeof(rte_udp_hdr);
    if (len > out.cap) {
      out.len = 0;  // like a truncated datagram: the caller drops it
      return true;
    }
    const void* d = rte_pktmbuf_read(m, kHdrBytes, static_cast<uint32_t>(len), out.data);
    if (d != out.data) std::memcpy(out.data, d, len);
    out.len = len;
    return true;
  }

  bool Drop() {
    ++rx_foreign_;
    return false;
  }

  uint16_t port_ = RTE_MAX_ETHPORTS;
  bool started_ = false;
  bool zero_copy_ = false;
  rte_mempool* rx_pool_ = nullptr;
  rte_mempool* hdr_pool_ = nullptr;
  rte_mempool* ext_pool_ = nullptr;
  rte_mbuf_ext_shared_info shinfo_;
  rte_ether_addr src_mac_{};
  rte_ether_addr dst_mac_{};
  bool dst_fixed_ = false;
  bool dst_learnt_ = false;
  uint32_t local_ip_ = 0, fabric_ip_ = 0;      // network order
  uint16_t local_port_ = 0, fabric_port_ = 0;  // network order
  int backoff_max_us_ = 1000;
  uint64_t rx_foreign_ = 0;
};

}  // namespace

Result<std::unique_ptr<Transport>> OpenDpdkTransport(const TransportConfig& config) {
  return DpdkTransport::Open(config);
}

}  // namespace ina::host::dpdk
