// The DPDK port (see ina/net/dpdk.h). DPDK's C API is wrapped here once: its return codes
// become Status at this file's boundary.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_pause.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

#include "ina/net/backoff.h"
#include "ina/net/dpdk.h"
#include "ina/net/frame.h"

namespace ina::net {

const bool kDpdkBuilt = true;

namespace {

constexpr uint16_t kRingSize = 1024;
constexpr unsigned kPoolCache = 128;
constexpr unsigned kMaxMtu = 9000;
constexpr unsigned kMaxQueues = 64;
constexpr auto kTxPauseMax = std::chrono::microseconds(400);
constexpr uint16_t kExtPriv =
    RTE_ALIGN(sizeof(rte_mbuf_ext_shared_info), RTE_MBUF_PRIV_ALIGN);  // ext mbufs' private area

class Ethdev;

std::mutex g_mu;
bool g_eal_up = false;                             // guarded by g_mu
std::map<uint16_t, std::weak_ptr<Ethdev>> g_devs;  // ethdevs in use; guarded by g_mu
std::atomic<unsigned> g_pool_seq{0};

Result<rte_ether_addr> ParseMac(const std::string& s, std::string_view what) {
  rte_ether_addr a{};
  if (rte_ether_unformat_addr(s.c_str(), &a) != 0) {
    return InvalidArgument("dpdk: " + std::string(what) + " '" + s + "' is not a MAC address");
  }
  return a;
}

Result<uint32_t> ParseIp(const std::string& s, std::string_view what) {  // network order
  in_addr a{};
  if (inet_pton(AF_INET, s.c_str(), &a) != 1 || a.s_addr == 0) {
    return InvalidArgument("dpdk: " + std::string(what) + " '" + s + "' is not an IPv4 address");
  }
  return a.s_addr;
}

// The caller's thread gets an lcore id the first time it touches a port (per-lcore state such
// as mempool caches then works as on an EAL core). Best effort: without a free lcore it stays
// unregistered.
void RegisterThread() {
  thread_local bool done = false;
  if (done) return;
  done = true;
  if (rte_lcore_id() == LCORE_ID_ANY) (void)rte_thread_register();
}

void NoFree(void*, void*) {}  // the caller owns external buffers

Status Fail(const std::string& name, const char* what, int rc) {
  return Internal("dpdk: port " + name + " " + what + ": " + rte_strerror(-rc));
}

// An mbuf's room for a frame of `mtu`: jumbo mbufs get 1 KiB or more of slack (10 KiB of data
// at mtu 9000): net_af_packet wants room for a whole ring frame of its framesz (10240 holds a
// 9014-byte frame with its TPACKET header).
uint16_t MbufRoom(unsigned mtu) {
  const size_t frame = kEthBytes + mtu;
  const size_t data_room = mtu > RTE_ETHER_MTU ? RTE_ALIGN_CEIL(frame + 1024, 2048) : frame;
  return static_cast<uint16_t>(
      std::max<size_t>(RTE_MBUF_DEFAULT_BUF_SIZE, RTE_PKTMBUF_HEADROOM + data_room));
}
rte_mempool* MakePool(uint16_t id, const char* kind, unsigned n, uint16_t priv, uint16_t room) {
  const int socket = rte_eth_dev_socket_id(id);
  const std::string pname =
      std::string("ina_") + kind + std::to_string(id) + "_" + std::to_string(g_pool_seq++);
  return rte_pktmbuf_pool_create(pname.c_str(), n, kPoolCache, priv, room,
                                 socket < 0 ? SOCKET_ID_ANY : socket);
}

// One ethdev, configured with `queues` RX/TX queue pairs and started once, shared by the Ports of
// its queues (DpdkPortConfig::queue); closed when the last of them is. Each queue has its own RX
// pool (net_af_xdp builds a UMEM on each queue's pool). Control path only, under g_mu.
class Ethdev {
 public:
  // REQUIRES: g_mu held (the last reference is dropped under it).
  ~Ethdev() {
    if (started_) (void)rte_eth_dev_stop(id_);
    if (configured_) (void)rte_eth_dev_close(id_);
    for (auto* v : {&rx_pools_, &tx_pools_, &ext_pools_}) {
      for (rte_mempool* p : *v) rte_mempool_free(p);
    }
    auto it = g_devs.find(id_);
    if (it != g_devs.end() && it->second.expired()) g_devs.erase(it);
  }

  // The ethdev of port `id` for queue c.queue: the one in use, or a new one set up for c.
  // REQUIRES: g_mu held.
  static Result<std::shared_ptr<Ethdev>> Get(uint16_t id, const DpdkPortConfig& c) {
    auto it = g_devs.find(id);
    if (it != g_devs.end()) {
      std::shared_ptr<Ethdev> d = it->second.lock();
      if (d != nullptr) {
        if (d->queues_ == 1 || c.queues != d->queues_ || c.mtu != d->mtu_ ||
            c.ipv4_datagrams != d->datagrams_) {
          return FailedPrecondition("dpdk: port " + std::to_string(id) + " already in use");
        }
        if (d->taken_[c.queue]) {
          return FailedPrecondition("dpdk: port " + d->name_ + " queue " + std::to_string(c.queue) +
                                    " already in use");
        }
        d->taken_[c.queue] = true;
        return d;
      }
    }
    std::shared_ptr<Ethdev> d(new Ethdev(id, c));
    g_devs[id] = d;  // before SetUp: a failed one is released by its destructor
    INA_RETURN_IF_ERROR(d->SetUp(c));
    d->taken_[c.queue] = true;
    return d;
  }

  // A Port gives its queue back (the ethdev runs on until its last Port is gone).
  // REQUIRES: g_mu held.
  void Release(unsigned queue) { taken_[queue] = false; }

  unsigned queues() const { return queues_; }
  bool taken(unsigned queue) const { return taken_[queue]; }  // REQUIRES: g_mu held
  const std::string& name() const { return name_; }
  const rte_ether_addr& mac() const { return mac_; }
  bool multi_seg() const { return multi_seg_; }
  rte_mempool* tx_pool(unsigned q) const { return tx_pools_[q]; }
  rte_mempool* ext_pool(unsigned q) const { return multi_seg_ ? ext_pools_[q] : nullptr; }

 private:
  Ethdev(uint16_t id, const DpdkPortConfig& c)
      : id_(id), queues_(c.queues), mtu_(c.mtu), datagrams_(c.ipv4_datagrams), taken_(c.queues) {
    char name[RTE_ETH_NAME_MAX_LEN] = {};
    (void)rte_eth_dev_get_name_by_port(id_, name);
    name_ = name;
  }

  size_t FrameBytes() const { return kEthBytes + mtu_; }

  Status SetUp(const DpdkPortConfig& c) {
    rte_eth_dev_info info{};
    if (int rc = rte_eth_dev_info_get(id_, &info); rc != 0) return Fail(name_, "dev_info_get", rc);
    rte_eth_conf conf{};
    // net_memif and net_af_packet report 1518 whatever they carry: memif any frame, af_packet
    // what its framesz devarg holds (it drops a longer frame and counts it). Every other PMD is
    // taken at its word.
    const std::string_view driver(info.driver_name);
    const bool reports_less = driver == "net_memif" || driver == "net_af_packet";
    if (FrameBytes() > info.max_rx_pktlen && !reports_less) {
      return FailedPrecondition("dpdk: port " + name_ + " (" + info.driver_name +
                                ") takes frames of at most " + std::to_string(info.max_rx_pktlen) +
                                " bytes, not mtu " + std::to_string(mtu_) + " + 14");
    }
    if (queues_ > info.max_rx_queues || queues_ > info.max_tx_queues) {
      return FailedPrecondition("dpdk: port " + name_ + " (" + info.driver_name + ") has " +
                                std::to_string(info.max_rx_queues) + " RX and " +
                                std::to_string(info.max_tx_queues) + " TX queues, not " +
                                std::to_string(queues_));
    }
    // The ethdev's own MTU where it has one that large (a PMD that reports less, or none, is left
    // at its default: the virtual PMDs do not filter by it).
    if (mtu_ > RTE_ETHER_MTU && info.max_mtu >= mtu_ &&
        FrameBytes() + RTE_ETHER_CRC_LEN <= info.max_rx_pktlen) {
      conf.rxmode.mtu = mtu_;
    }
    // Multi-segment TX (zero-copy) as the first opener asks; the other queues follow it.
    multi_seg_ = c.zero_copy && !datagrams_ &&
                 (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0 &&
                 rte_eal_iova_mode() == RTE_IOVA_VA;
    if (multi_seg_) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
    const auto nq = static_cast<uint16_t>(queues_);
    if (int rc = rte_eth_dev_configure(id_, nq, nq, &conf); rc != 0) {
      return Fail(name_, "configure", rc);
    }
    configured_ = true;
    uint16_t nrx = kRingSize, ntx = kRingSize;
    if (int rc = rte_eth_dev_adjust_nb_rx_tx_desc(id_, &nrx, &ntx); rc != 0) {
      return Fail(name_, "adjust_nb_rx_tx_desc", rc);
    }
    const int socket = rte_eth_dev_socket_id(id_);
    // One mbuf holds a whole frame (jumbo too), so RX hands out frames in place (MbufRoom).
    // Jumbo mbufs are 4.5 times the size: as many as the rings need, so that a switch of several
    // ports fits the memory a --no-huge EAL has (about 32 MiB a port at mtu 9000); with several
    // queues the pool is shared out among them, down to what a ring needs.
    const bool jumbo = mtu_ > RTE_ETHER_MTU;
    const unsigned per_queue = jumbo ? 2u * nrx + 1 : std::max(c.rx_mbufs / queues_, 2u * nrx + 1);
    rte_eth_txconf txc = info.default_txconf;
    txc.offloads = conf.txmode.offloads;
    const uint16_t room = MbufRoom(mtu_);
    for (uint16_t q = 0; q < nq; ++q) {
      rx_pools_.push_back(MakePool(id_, "rx", per_queue, 0, room));
      tx_pools_.push_back(
          MakePool(id_, "tx", jumbo ? std::min(c.tx_mbufs, 1023u) : c.tx_mbufs, 0, room));
      // Data-less mbufs for external buffers, each with its own shared info in its private area:
      // one shared info for every buffer would make each free an atomic on one cache line (it
      // was a fifth of a memif worker's time); a private one with refcount 1 is freed without.
      if (multi_seg_) ext_pools_.push_back(MakePool(id_, "ext", c.tx_mbufs, kExtPriv, 0));
      if (rx_pools_.back() == nullptr || tx_pools_.back() == nullptr ||
          (multi_seg_ && ext_pools_.back() == nullptr)) {
        return Internal("dpdk: port " + name_ + " mbuf pool: " + rte_strerror(rte_errno));
      }
      if (int rc = rte_eth_rx_queue_setup(id_, q, nrx, socket, nullptr, rx_pools_.back());
          rc != 0) {
        return Fail(name_, "rx_queue_setup", rc);
      }
      if (int rc = rte_eth_tx_queue_setup(id_, q, ntx, socket, &txc); rc != 0) {
        return Fail(name_, "tx_queue_setup", rc);
      }
    }
    if (c.mac.empty()) {
      if (int rc = rte_eth_macaddr_get(id_, &mac_); rc != 0) return Fail(name_, "macaddr_get", rc);
    } else {
      INA_ASSIGN_OR_RETURN(mac_, ParseMac(c.mac, "mac"));
    }
    if (int rc = rte_eth_dev_start(id_); rc != 0) return Fail(name_, "start", rc);
    started_ = true;
    (void)rte_eth_promiscuous_enable(id_);  // best effort: frames are filtered on IPv4/UDP
    return Status::Ok();
  }

 private:
  uint16_t id_;
  std::string name_;
  unsigned queues_;
  unsigned mtu_;
  bool datagrams_;
  std::vector<bool> taken_;  // queues with a Port; guarded by g_mu
  bool configured_ = false, started_ = false;
  bool multi_seg_ = false;
  rte_ether_addr mac_{};
  std::vector<rte_mempool*> rx_pools_, tx_pools_, ext_pools_;  // per queue
};

// One queue pair of an ethdev (DpdkPortConfig::queue): RX and TX on queue q only, so the Ports of
// one ethdev's queues run on different threads without sharing anything on the data path.
class DpdkPort final : public Port {
 public:
  ~DpdkPort() override {
    FreeLoaned();
    for (size_t i = stash_head_; i < stash_n_; ++i) rte_pktmbuf_free(stash_[i]);
    std::lock_guard<std::mutex> lock(g_mu);
    if (dev_ != nullptr) dev_->Release(q_);
    dev_.reset();  // the last queue's Port stops and closes the ethdev, then frees its pools
  }

  Status Init(const DpdkPortConfig& c) {
    if (c.udp_port == 0) return InvalidArgument("dpdk: udp_port is required");
    if (c.mtu < 576 || c.mtu > kMaxMtu) {
      return InvalidArgument("dpdk: mtu " + std::to_string(c.mtu) + " not in 576 .. " +
                             std::to_string(kMaxMtu));
    }
    if (c.queues < 1 || c.queues > kMaxQueues || c.queue >= c.queues) {
      return InvalidArgument("dpdk: queue " + std::to_string(c.queue) + " of " +
                             std::to_string(c.queues) + " (queues 1 .. " +
                             std::to_string(kMaxQueues) + ", queue < queues)");
    }
    if (c.queues > 1 && c.ipv4_datagrams) {
      return InvalidArgument("dpdk: ipv4_datagrams takes one queue");
    }
    q_ = static_cast<uint16_t>(c.queue);
    mtu_ = c.mtu;
    scratch_.resize(kBurst * FrameBytes());
    if (c.backoff_max_us < 0) return InvalidArgument("dpdk: backoff_max_us < 0");
    INA_ASSIGN_OR_RETURN(ip_, ParseIp(c.ip, "local ip"));
    udp_port_ = htons(c.udp_port);
    datagrams_ = c.ipv4_datagrams;
    connected_ = !c.peer_ip.empty();
    if (connected_) {
      INA_ASSIGN_OR_RETURN(peer_ip_, ParseIp(c.peer_ip, "peer ip"));
      if (c.peer_port == 0) return InvalidArgument("dpdk: peer_port is required");
      peer_port_ = htons(c.peer_port);
      if (!c.peer_mac.empty()) {
        INA_ASSIGN_OR_RETURN(peer_mac_, ParseMac(c.peer_mac, "peer mac"));
        peer_mac_known_ = true;
      } else {
        std::memset(peer_mac_.addr_bytes, 0xff, RTE_ETHER_ADDR_LEN);
      }
    }
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_eal_up) return Unavailable("dpdk: the EAL is not started (StartEal)");
    backoff_ = IdleBackoff(c.backoff_max_us);
    if (rte_eth_dev_count_avail() == 0) {
      return FailedPrecondition("dpdk: no ethdev port (add one with --vdev in the EAL args)");
    }
    uint16_t id = RTE_MAX_ETHPORTS;
    if (c.name.empty() && c.queue > 0) {
      // A later queue of a port opened unnamed: the port in use with this many queues and this
      // one free (the lanes of one worker open queue 0 first).
      for (const auto& [p, weak] : g_devs) {
        const std::shared_ptr<Ethdev> d = weak.lock();
        if (d != nullptr && d->queues() == c.queues && !d->taken(c.queue)) {
          id = p;
          break;
        }
      }
      if (id == RTE_MAX_ETHPORTS) {
        return FailedPrecondition("dpdk: no port in use with " + std::to_string(c.queues) +
                                  " queues and queue " + std::to_string(c.queue) +
                                  " free (open queue 0 first, or name the port)");
      }
    } else if (c.name.empty()) {
      uint16_t p = 0;
      RTE_ETH_FOREACH_DEV(p) {
        if (g_devs.count(p) == 0) {
          id = p;
          break;
        }
      }
      if (id == RTE_MAX_ETHPORTS) return FailedPrecondition("dpdk: every port is in use");
    } else if (rte_eth_dev_get_port_by_name(c.name.c_str(), &id) != 0) {
      return InvalidArgument("dpdk: no port named '" + c.name + "'");
    }
    INA_ASSIGN_OR_RETURN(dev_, Ethdev::Get(id, c));
    id_ = id;
    name_ = dev_->name();
    mac_ = dev_->mac();
    zero_copy_ = c.zero_copy && dev_->multi_seg();
    rte_eth_dev_info info{};
    memif_ =
        rte_eth_dev_info_get(id, &info) == 0 && std::string_view(info.driver_name) == "net_memif";
    tx_pool_ = dev_->tx_pool(q_);
    ext_pool_ = dev_->ext_pool(q_);
    return Status::Ok();
  }

  Result<size_t> RxBurst(std::span<Packet> pkts) override {
    RegisterThread();
    FreeLoaned();
    if (stash_head_ == stash_n_) Poll();
    size_t got = 0;
    while (got < pkts.size() && stash_head_ < stash_n_) {
      rte_mbuf* m = stash_[stash_head_++];
      if (Accept(m, pkts[got], got)) {
        loaned_[loaned_n_++] = m;
        ++got;
      } else {
        rte_pktmbuf_free(m);
      }
    }
    st_.rx_packets += got;
    return got;
  }

  Result<size_t> TxBurst(std::span<const TxPacket> pkts) override {
    RegisterThread();
    size_t sent = 0;
    std::array<rte_mbuf*, kBurst> hdr{};
    std::array<rte_mbuf*, kBurst> ext{};
    while (sent < pkts.size()) {
      size_t n = std::min(kBurst, pkts.size() - sent);
      for (size_t i = 0; i < n; ++i) {
        const TxPacket& p = pkts[sent + i];
        const bool routable = p.to != nullptr ? p.to->addr.ss_family == AF_INET : connected_;
        const bool fits = datagrams_ ? p.len >= kIpv4Bytes && p.len <= mtu_
                                     : p.len <= mtu_ - kIpv4Bytes - kUdpBytes;
        if (!fits || !routable) {
          if (sent + i == 0) {
            return InvalidArgument(
                routable ? "dpdk: " + std::string(datagrams_ ? "datagram" : "packet") + " of " +
                               std::to_string(p.len) + " bytes does not fit one frame"
                         : std::string("dpdk: no IPv4 destination"));
          }
          n = i;  // send up to it; the next call reports it
          break;
        }
      }
      if (n == 0) break;
      if (rte_pktmbuf_alloc_bulk(tx_pool_, hdr.data(), n) != 0) {
        ++st_.tx_dropped;  // counted once per refused burst: the caller retries
        break;
      }
      if (zero_copy_ && rte_pktmbuf_alloc_bulk(ext_pool_, ext.data(), n) != 0) {
        rte_pktmbuf_free_bulk(hdr.data(), n);
        break;
      }
      for (size_t i = 0; i < n; ++i) Build(hdr[i], zero_copy_ ? ext[i] : nullptr, pkts[sent + i]);
      const uint16_t ok = TxBurstFrames(hdr.data(), static_cast<uint16_t>(n));
      sent += ok;
      if (ok < n) {  // the ring is full: the caller retries the rest later
        rte_pktmbuf_free_bulk(hdr.data() + ok, n - ok);
        break;
      }
    }
    st_.tx_packets += sent;
    return sent;
  }

  Result<bool> WaitRx(std::chrono::microseconds timeout) override {
    RegisterThread();
    if (stash_head_ < stash_n_) return true;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {  // the back-off restarts when traffic arrives (Poll), not per call
      if (Poll() > 0) return true;
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return false;
      backoff_.Idle(std::chrono::duration_cast<std::chrono::microseconds>(deadline - now));
    }
  }

  Result<bool> WaitTx(std::chrono::microseconds timeout) override {
    const auto until = std::chrono::steady_clock::now() + std::min(timeout, kTxPauseMax);
    while (std::chrono::steady_clock::now() < until) rte_pause();
    return true;
  }

  PortStats stats() const override { return st_; }
  std::string Describe() const override {
    char mac[RTE_ETHER_ADDR_FMT_SIZE];
    rte_ether_format_addr(mac, sizeof(mac), &mac_);
    char ip[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &ip_, ip, sizeof(ip));
    return "port " + std::to_string(id_) + " " + name_ +
           (q_ > 0 ? " queue " + std::to_string(q_) : "") + " " + mac + " " + ip + ":" +
           std::to_string(ntohs(udp_port_));
  }
  std::string_view kind() const override { return "dpdk"; }
  size_t max_datagram_bytes() const override { return mtu_ - kIpv4Bytes - kUdpBytes; }
  std::string name() const override { return name_; }

 private:
  size_t FrameBytes() const { return kEthBytes + mtu_; }  // the longest frame, without FCS

  void FreeLoaned() {
    if (loaned_n_ > 0) rte_pktmbuf_free_bulk(loaned_.data(), loaned_n_);
    loaned_n_ = 0;
  }

  // rte_eth_rx_burst / rte_eth_tx_burst, inside a MemifBurst on net_memif (dpdk.h).
  uint16_t RxBurstFrames(rte_mbuf** m, uint16_t n) {
    if (!memif_) return rte_eth_rx_burst(id_, q_, m, n);
    const MemifBurst in;
    return rte_eth_rx_burst(id_, q_, m, n);
  }
  uint16_t TxBurstFrames(rte_mbuf** m, uint16_t n) {
    if (!memif_) return rte_eth_tx_burst(id_, q_, m, n);
    const MemifBurst in;
    return rte_eth_tx_burst(id_, q_, m, n);
  }

  // One rx_burst into the stash when it is empty. Returns the frames received.
  size_t Poll() {
    if (stash_head_ < stash_n_) return stash_n_ - stash_head_;
    stash_head_ = 0;
    stash_n_ = RxBurstFrames(stash_.data(), kBurst);
    st_.rx_frames += stash_n_;
    if (stash_n_ > 0) backoff_.Reset();
    return stash_n_;
  }

  // Parses one frame into out (slot i of this burst); false when it is not for us.
  bool Accept(rte_mbuf* m, Packet& out, size_t i) {
    const uint8_t* f;
    size_t flen = m->pkt_len;
    if (m->nb_segs == 1) {
      f = rte_pktmbuf_mtod(m, const uint8_t*);
    } else {
      flen = std::min<size_t>(flen, FrameBytes());
      f = static_cast<const uint8_t*>(
          rte_pktmbuf_read(m, 0, static_cast<uint32_t>(flen), scratch_.data() + i * FrameBytes()));
      if (f == nullptr) return Other();
    }
    const bool nic_checked =
        (m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_GOOD;
    ParsedFrame pf;
    const FrameError e = ParseUdpFrame({f, flen}, &pf, !nic_checked);
    if (e == FrameError::kBadIpChecksum || e == FrameError::kBadUdpChecksum) {
      ++st_.rx_bad_csum;
      return false;
    }
    if (e != FrameError::kOk) return Other();
    if (pf.addrs.dst_ip != ip_ || pf.addrs.dst_port != udp_port_) return Other();
    if (connected_) {
      if (pf.addrs.src_ip != peer_ip_ || pf.addrs.src_port != peer_port_) return Other();
      if (!peer_mac_known_) {
        std::memcpy(peer_mac_.addr_bytes, pf.addrs.src_mac, RTE_ETHER_ADDR_LEN);
        peer_mac_known_ = true;
      }
    }
    // A datagram port hands out the IPv4 datagram, a payload port the UDP payload.
    const size_t skip = datagrams_ ? kEthBytes : pf.payload_offset;
    const size_t len = pf.payload_offset + pf.payload_len - skip;
    out.data = const_cast<uint8_t*>(f) + skip;
    out.len = static_cast<uint32_t>(std::min<size_t>(len, out.cap));
    out.flags = len > out.cap ? kPacketTruncated : 0;
    if (out.flags != 0) ++st_.rx_truncated;
    if (out.from != nullptr) {
      Endpoint& e = *out.from;
      e = Endpoint{};
      auto& sa = reinterpret_cast<sockaddr_in&>(e.addr);
      sa.sin_family = AF_INET;
      sa.sin_port = pf.addrs.src_port;
      sa.sin_addr.s_addr = pf.addrs.src_ip;
      SetMac(&e, pf.addrs.src_mac);
      e.len = sizeof(sockaddr_in);
    }
    return true;
  }

  bool Other() {
    ++st_.rx_other;
    return false;
  }

  // Fills m with the headers, then the payload: attached through ext when given, else copied.
  // REQUIRES: p.len fits (TxBurst checks), a routable destination.
  void Build(rte_mbuf* m, rte_mbuf* ext, const TxPacket& p) {
    FrameAddrs a;
    std::memcpy(a.src_mac, mac_.addr_bytes, 6);
    a.src_ip = ip_;
    a.src_port = udp_port_;
    if (p.to != nullptr) {
      const auto& sa = reinterpret_cast<const sockaddr_in&>(p.to->addr);
      GetMac(*p.to, a.dst_mac);
      a.dst_ip = sa.sin_addr.s_addr;
      a.dst_port = sa.sin_port;
    } else {
      std::memcpy(a.dst_mac, peer_mac_.addr_bytes, 6);
      a.dst_ip = peer_ip_;
      a.dst_port = peer_port_;
    }
    const std::span<const uint8_t> payload(p.data, p.len);
    if (datagrams_) {
      auto* h = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, kEthBytes + p.len));
      BuildIpv4Frame(a.dst_mac, a.src_mac, payload, h);
      return;
    }
    if (ext == nullptr) {
      auto* h = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, kFrameHeaderBytes + p.len));
      std::memcpy(h + kFrameHeaderBytes, p.data, p.len);
      BuildUdpHeaders(a, {h + kFrameHeaderBytes, p.len}, h, (p.flags & kTxPayloadChecked) == 0);
      return;
    }
    auto* h = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, kFrameHeaderBytes));
    BuildUdpHeaders(a, payload, h, (p.flags & kTxPayloadChecked) == 0);
    void* buf = const_cast<uint8_t*>(p.data);
    auto* shinfo = static_cast<rte_mbuf_ext_shared_info*>(rte_mbuf_to_priv(ext));
    shinfo->free_cb = &NoFree;
    shinfo->fcb_opaque = nullptr;
    rte_mbuf_ext_refcnt_set(shinfo, 1);  // this mbuf's only: freed without an atomic
    rte_pktmbuf_attach_extbuf(ext, buf, static_cast<rte_iova_t>(reinterpret_cast<uintptr_t>(buf)),
                              static_cast<uint16_t>(p.len), shinfo);
    ext->data_len = static_cast<uint16_t>(p.len);
    ext->pkt_len = p.len;
    (void)rte_pktmbuf_chain(m, ext);  // two segments: cannot exceed the chain limit
  }

  std::shared_ptr<Ethdev> dev_;
  uint16_t id_ = RTE_MAX_ETHPORTS;
  uint16_t q_ = 0;  // this Port's RX and TX queue
  std::string name_;
  bool zero_copy_ = false;
  bool memif_ = false;      // net_memif: bursts inside a MemifBurst (dpdk.h)
  bool datagrams_ = false;  // ipv4_datagrams
  unsigned mtu_ = RTE_ETHER_MTU;
  bool connected_ = false;
  rte_mempool* tx_pool_ = nullptr;   // dev_'s, this queue's
  rte_mempool* ext_pool_ = nullptr;  // dev_'s, this queue's (zero_copy_)
  rte_ether_addr mac_{};
  rte_ether_addr peer_mac_{};
  bool peer_mac_known_ = false;
  uint32_t ip_ = 0, peer_ip_ = 0;          // network order
  uint16_t udp_port_ = 0, peer_port_ = 0;  // network order
  IdleBackoff backoff_{1000};
  PortStats st_;
  std::array<rte_mbuf*, kBurst> stash_{};
  size_t stash_head_ = 0, stash_n_ = 0;
  std::array<rte_mbuf*, kBurst> loaned_{};  // handed out by the last RxBurst
  size_t loaned_n_ = 0;
  std::vector<uint8_t> scratch_;  // kBurst x FrameBytes(): multi-segment frames copied to parse
};

}  // namespace

Status StartEal(const std::string& args) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_eal_up) return Status::Ok();
  // argv storage must outlive the EAL: kept in statics.
  static std::vector<std::string> words;
  static std::vector<char*> argv;
  words = {"ina"};
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

void StopEal() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_eal_up || !g_devs.empty()) return;
  (void)rte_eal_cleanup();
  g_eal_up = false;
}

std::vector<std::string> DpdkPortNames() {
  std::vector<std::string> v;
  uint16_t p = 0;
  RTE_ETH_FOREACH_DEV(p) {
    char name[RTE_ETH_NAME_MAX_LEN] = {};
    if (rte_eth_dev_get_name_by_port(p, name) == 0) v.emplace_back(name);
  }
  return v;
}

Result<std::unique_ptr<Port>> OpenDpdkPort(const DpdkPortConfig& config) {
  auto p = std::make_unique<DpdkPort>();
  INA_RETURN_IF_ERROR(p->Init(config));
  return std::unique_ptr<Port>(std::move(p));
}

}  // namespace ina::net
