// The RoCE port (see ina/net/roce.h): RoCEv2 UD SENDs in over a raw socket, out over a UDP
// socket on port 4791, the codec checks in RoceRx / RoceTx.
#include <arpa/inet.h>
#include <linux/filter.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "ina/net/roce.h"
#include "ina/proto/wire.h"

namespace ina::net {

namespace r = ::ina::proto::roce;

namespace {

constexpr uint32_t kEmptyQp = 0xFFFFFFFFu;
constexpr size_t kRoceMaxMessage = 4096;  // RoCEv2's largest path MTU: one UD SEND's payload
constexpr size_t kRxBufBytes = 9216;      // a jumbo frame's datagram (active MTU 4096 and more)
constexpr size_t kRxCap = 2 * kBurst;
// IPv4 + UDP headers (built for the ICRC, not sent), BTH .. ICRC around the largest message, pad.
constexpr size_t kTxBufBytes =
    r::kIpv4Bytes + r::kUdpBytes + r::kUdOverheadBytes + proto::kMaxPacketBytes + 3;
constexpr size_t kTxCap = 4 * kBurst;

uint16_t Load16Be(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }

uint64_t Mix(uint32_t ip, uint32_t qpn) {
  uint64_t x = (uint64_t{ip} << 32) | qpn;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}

}  // namespace

Endpoint RoceEndpoint(uint32_t ip_be, uint32_t qpn) {
  Endpoint e;
  auto* s6 = reinterpret_cast<sockaddr_in6*>(&e.addr);
  s6->sin6_family = AF_INET6;
  s6->sin6_port = htons(r::kUdpPort);
  s6->sin6_addr.s6_addr[10] = 0xFF;
  s6->sin6_addr.s6_addr[11] = 0xFF;
  std::memcpy(&s6->sin6_addr.s6_addr[12], &ip_be, 4);
  s6->sin6_scope_id = qpn;
  e.len = sizeof(sockaddr_in6);
  return e;
}

bool ParseRoceEndpoint(const Endpoint& e, uint32_t* ip_be, uint32_t* qpn) {
  if (e.len != sizeof(sockaddr_in6) || e.addr.ss_family != AF_INET6) return false;
  const auto* s6 = reinterpret_cast<const sockaddr_in6*>(&e.addr);
  if (!IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr) || ntohs(s6->sin6_port) != r::kUdpPort) return false;
  std::memcpy(ip_be, &s6->sin6_addr.s6_addr[12], 4);
  *qpn = s6->sin6_scope_id;
  return true;
}

RocePsnTable::RocePsnTable(size_t capacity) : slots_(capacity, Entry{0, kEmptyQp, 0, true}) {}

RocePsnTable::Entry* RocePsnTable::Find(uint32_t ip_be, uint32_t qpn) {
  const size_t mask = slots_.size() - 1;
  size_t i = Mix(ip_be, qpn) & mask;
  for (size_t probe = 0; probe < slots_.size(); ++probe, i = (i + 1) & mask) {
    Entry& e = slots_[i];
    if (e.qpn == qpn && e.ip_be == ip_be) return &e;
    if (e.qpn == kEmptyQp) {
      if (used_ * 4 >= slots_.size() * 3) return nullptr;  // keep probes short: 3/4 full is full
      e = Entry{ip_be, qpn, 0, true};
      ++used_;
      return &e;
    }
  }
  return nullptr;
}

RoceDrop RoceRx(std::span<const uint8_t> dg, const RoceIdentity& me, RocePsnTable* psns,
                std::span<const uint8_t>* message, uint32_t* src_ip_be, uint32_t* src_qpn,
                uint32_t* psn_gap) {
  constexpr size_t kL3L4 = r::kIpv4Bytes + r::kUdpBytes;
  if (dg.size() < kL3L4) return RoceDrop::kShort;
  const uint8_t* ip = dg.data();
  if ((ip[0] >> 4) != 4 || ip[9] != 17) return RoceDrop::kNotOurs;
  uint32_t dst = 0;
  std::memcpy(&dst, ip + 16, 4);
  if (dst != me.ip_be || Load16Be(ip + r::kIpv4Bytes + 2) != r::kUdpPort) return RoceDrop::kNotOurs;
  if ((ip[0] & 0x0F) != 5) return RoceDrop::kShort;  // options: the ICRC layout assumes none
  const size_t tot = Load16Be(ip + 2);
  const size_t udp_len = Load16Be(ip + r::kIpv4Bytes + 4);
  if (tot > dg.size() || tot != r::kIpv4Bytes + udp_len ||
      udp_len < r::kUdpBytes + r::kUdOverheadBytes) {
    return RoceDrop::kShort;
  }
  const std::span<const uint8_t> pkt = dg.first(tot);
  if (!r::IcrcOk(pkt)) return RoceDrop::kBadIcrc;
  r::UdSend s;
  switch (r::ParseUdSend(pkt.subspan(kL3L4), &s)) {
    case r::ParseError::kOk:
      break;
    case r::ParseError::kShort:
    case r::ParseError::kPad:
      return RoceDrop::kShort;
    case r::ParseError::kOpcode:
    case r::ParseError::kTver:
      return RoceDrop::kBadOpcode;
  }
  if (s.dest_qp != me.qpn) return RoceDrop::kWrongQpn;
  if (s.qkey != me.qkey || (s.pkey & 0x7FFF) != 0x7FFF) return RoceDrop::kBadKey;
  std::memcpy(src_ip_be, ip + 12, 4);
  *src_qpn = s.src_qp;
  *psn_gap = 0;
  if (RocePsnTable::Entry* e = psns->Find(*src_ip_be, s.src_qp); e != nullptr) {
    // 24-bit serial arithmetic: ahead by less than 2^23 is new, else behind (or a repeat).
    const uint32_t ahead = (s.psn - e->psn) & 0xFFFFFF;
    if (!e->fresh && ahead >= (1u << 23)) return RoceDrop::kBadPsn;
    if (!e->fresh) *psn_gap = ahead;
    e->fresh = false;
    e->psn = (s.psn + 1) & 0xFFFFFF;
  }
  *message = s.message;
  return RoceDrop::kOk;
}

size_t RoceTx(std::span<const uint8_t> message, const RoceIdentity& me, uint32_t dst_ip_be,
              uint32_t dst_qpn, uint32_t psn, std::span<uint8_t> out) {
  r::UdSend s;
  s.dest_qp = dst_qpn;
  s.psn = psn;
  s.qkey = me.qkey;
  s.src_qp = me.qpn;
  s.message = message;
  constexpr size_t kL3L4 = r::kIpv4Bytes + r::kUdpBytes;
  // Built behind room for the IPv4/UDP headers the ICRC covers; the caller sends from +kL3L4.
  if (out.size() < kL3L4) return 0;
  const size_t len = r::BuildUdSend(s, out.subspan(kL3L4));
  if (len == 0) return 0;
  r::BuildIpv4Udp(me.ip_be, dst_ip_be, r::kUdpPort, r::kUdpPort, /*ip_id=*/0, len, out.data());
  const std::span<uint8_t> dg = out.first(kL3L4 + len);
  r::StoreIcrc(dg.data() + dg.size() - r::kIcrcBytes, r::ComputeIcrc(dg));
  return len;
}

namespace {

// The RoCE codec around a port that moves whole IPv4 datagrams (WrapRoce).
class RoceCodecPort final : public Port {
 public:
  RoceCodecPort(std::unique_ptr<Port> datagrams, RoceIdentity me)
      : inner_(std::move(datagrams)), me_(me) {
    tx_bufs_.resize(kTxCap * kTxBufBytes);
  }

  Result<size_t> RxBurst(std::span<Packet> pkts) override {
    const size_t want = std::min(pkts.size(), kRxCap);
    for (size_t i = 0; i < want; ++i) {
      rx_[i] = {pkts[i].data, pkts[i].cap, 0, 0, &rx_from_[i]};
    }
    INA_ASSIGN_OR_RETURN(size_t n, inner_->RxBurst({rx_.data(), want}));
    size_t out = 0;
    for (size_t i = 0; i < n; ++i) {
      std::span<const uint8_t> m;
      uint32_t ip = 0, qpn = 0, gap = 0;
      const RoceDrop d = rx_[i].flags & kPacketTruncated ? RoceDrop::kShort
                                                         : RoceRx({rx_[i].data, rx_[i].len}, me_,
                                                                  &rx_psns_, &m, &ip, &qpn, &gap);
      if (d != RoceDrop::kOk) {
        Count(d);
        continue;
      }
      roce_.rx_roce_psn_gaps += gap;
      Packet& p = pkts[out++];
      p.data = const_cast<uint8_t*>(m.data());
      p.len = static_cast<uint32_t>(m.size());
      p.flags = 0;
      if (p.from != nullptr) {
        // The L2 extras of the datagram's sender (an L2 port's MAC) travel with the RoCE peer.
        uint8_t mac[6];
        GetMac(rx_from_[i], mac);
        *p.from = RoceEndpoint(ip, qpn);
        SetMac(p.from, mac);
      }
    }
    rx_packets_ += out;
    return out;
  }

  Result<size_t> TxBurst(std::span<const TxPacket> pkts) override {
    if (pkts.empty()) return inner_->TxBurst({});
    size_t done = 0;
    while (done < pkts.size()) {
      const size_t n = std::min(pkts.size() - done, kTxCap);
      size_t k = 0;
      for (size_t i = 0; i < n; ++i) {
        const TxPacket& p = pkts[done + i];
        uint32_t ip = 0, qpn = 0;
        if (p.to == nullptr || !ParseRoceEndpoint(*p.to, &ip, &qpn)) {
          if (done + i == 0) {
            return InvalidArgument("roce: destination " +
                                   (p.to ? EndpointToString(*p.to) : std::string("none")) +
                                   " is not a RoCE peer (RoceEndpoint)");
          }
          break;
        }
        RocePsnTable::Entry* e = tx_psns_.Find(ip, qpn);
        const uint32_t psn = e != nullptr ? e->psn : 0;
        uint8_t* buf = tx_bufs_.data() + k * kTxBufBytes;
        const size_t len = RoceTx({p.data, p.len}, me_, ip, qpn, psn, {buf, kTxBufBytes});
        if (len == 0) {
          if (done + i == 0) {
            return InvalidArgument("roce: message of " + std::to_string(p.len) + " bytes too long");
          }
          break;
        }
        if (e != nullptr) e->psn = (psn + 1) & 0xFFFFFF;
        entry_[k] = e;
        Endpoint& to = tx_to_[k];
        to = Endpoint{};
        auto& sa = reinterpret_cast<sockaddr_in&>(to.addr);
        sa.sin_family = AF_INET;
        sa.sin_port = htons(r::kUdpPort);
        sa.sin_addr.s_addr = ip;
        to.len = sizeof(sockaddr_in);
        uint8_t mac[6];
        GetMac(*p.to, mac);
        SetMac(&to, mac);
        tx_[k] = {buf, static_cast<uint32_t>(r::kIpv4Bytes + r::kUdpBytes + len), &to, 0};
        ++k;
      }
      if (k == 0) break;
      const Result<size_t> sent = inner_->TxBurst({tx_.data(), k});
      const size_t ok = sent.ok() ? *sent : 0;
      // The packets not sent give their PSNs back (last first), so a retry sends the same ones.
      for (size_t j = k; j-- > ok;) {
        if (entry_[j] != nullptr) entry_[j]->psn = (entry_[j]->psn - 1) & 0xFFFFFF;
      }
      if (!sent.ok()) {
        if (done == 0) return sent.status();
        break;
      }
      done += ok;
      if (ok < k || k < n) break;
    }
    return done;
  }

  Result<bool> WaitRx(std::chrono::microseconds timeout) override {
    return inner_->WaitRx(timeout);
  }
  Result<bool> WaitTx(std::chrono::microseconds timeout) override {
    return inner_->WaitTx(timeout);
  }
  bool holding() const override { return inner_->holding(); }
  PortStats stats() const override {
    PortStats s = inner_->stats();
    s.rx_packets = rx_packets_;
    s.rx_other += roce_.rx_other;
    s.rx_roce_short = roce_.rx_roce_short;
    s.rx_roce_bad_icrc = roce_.rx_roce_bad_icrc;
    s.rx_roce_bad_opcode = roce_.rx_roce_bad_opcode;
    s.rx_roce_wrong_qpn = roce_.rx_roce_wrong_qpn;
    s.rx_roce_bad_key = roce_.rx_roce_bad_key;
    s.rx_roce_bad_psn = roce_.rx_roce_bad_psn;
    s.rx_roce_psn_gaps = roce_.rx_roce_psn_gaps;
    return s;
  }
  std::string Describe() const override {
    char d[64];
    std::snprintf(d, sizeof(d), " (roce: QPN 0x%x, Q_Key 0x%x)", me_.qpn, me_.qkey);
    return inner_->Describe() + d;
  }
  std::string_view kind() const override {
    return inner_->kind() == "dpdk" ? std::string_view("roce(dpdk)") : std::string_view("roce");
  }
  std::string name() const override {
    return inner_->kind() == "dpdk" ? inner_->name() : std::string(kind());
  }
  // A UD SEND is one packet of at most the path MTU, 4096 bytes at most in RoCEv2.
  size_t max_datagram_bytes() const override {
    return std::min<size_t>(kRoceMaxMessage, inner_->max_datagram_bytes());
  }

 private:
  void Count(RoceDrop d) {
    switch (d) {
      case RoceDrop::kOk:
      case RoceDrop::kNotOurs:
        ++roce_.rx_other;
        return;
      case RoceDrop::kShort:
        ++roce_.rx_roce_short;
        return;
      case RoceDrop::kBadIcrc:
        ++roce_.rx_roce_bad_icrc;
        return;
      case RoceDrop::kBadOpcode:
        ++roce_.rx_roce_bad_opcode;
        return;
      case RoceDrop::kWrongQpn:
        ++roce_.rx_roce_wrong_qpn;
        return;
      case RoceDrop::kBadKey:
        ++roce_.rx_roce_bad_key;
        return;
      case RoceDrop::kBadPsn:
        ++roce_.rx_roce_bad_psn;
        return;
    }
  }

  std::unique_ptr<Port> inner_;
  RoceIdentity me_;
  RocePsnTable rx_psns_;
  RocePsnTable tx_psns_;
  std::array<Packet, kRxCap> rx_{};
  std::array<Endpoint, kRxCap> rx_from_{};
  std::vector<uint8_t> tx_bufs_;
  std::array<TxPacket, kTxCap> tx_{};
  std::array<Endpoint, kTxCap> tx_to_{};
  std::array<RocePsnTable::Entry*, kTxCap> entry_{};
  uint64_t rx_packets_ = 0;
  PortStats roce_;  // the drop reasons and gaps (rx_other: datagrams not ours)
};

// IPv4 datagrams over kernel sockets: received whole on a raw socket (the IP header is covered
// by the ICRC and a UDP socket does not show it), sent as the UDP payload of a datagram on a UDP
// socket bound to address:4791, whose headers the kernel writes (and the ICRC assumed: DF, IP ID
// 0, TTL 64).
class RawDatagramPort final : public Port {
 public:
  RawDatagramPort(int raw, int udp, std::string describe)
      : raw_(raw), udp_(udp), describe_(std::move(describe)) {
    rx_bufs_.resize(kRxCap * kRxBufBytes);
  }
  ~RawDatagramPort() override {
    close(raw_);
    close(udp_);
  }

  Result<size_t> RxBurst(std::span<Packet> pkts) override {
    const size_t want = std::min(pkts.size(), kRxCap);
    if (want == 0) return size_t{0};
    std::array<mmsghdr, kRxCap> msgs{};
    std::array<iovec, kRxCap> iov{};
    for (size_t i = 0; i < want; ++i) {
      iov[i] = {rx_bufs_.data() + i * kRxBufBytes, kRxBufBytes};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    const int n = recvmmsg(raw_, msgs.data(), static_cast<unsigned>(want), MSG_DONTWAIT, nullptr);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return size_t{0};
      return ErrnoStatus("roce: recvmmsg", errno);
    }
    for (int i = 0; i < n; ++i) {
      Packet& p = pkts[size_t(i)];
      p.data = rx_bufs_.data() + size_t(i) * kRxBufBytes;
      p.len = msgs[size_t(i)].msg_len;
      p.flags = 0;
      if (p.from != nullptr) {
        *p.from = Endpoint{};
        if (p.len >= r::kIpv4Bytes + r::kUdpBytes) {
          auto& sa = reinterpret_cast<sockaddr_in&>(p.from->addr);
          sa.sin_family = AF_INET;
          std::memcpy(&sa.sin_addr.s_addr, p.data + 12, 4);
          std::memcpy(&sa.sin_port, p.data + ((p.data[0] & 0x0F) * 4u), 2);
          p.from->len = sizeof(sockaddr_in);
        }
      }
    }
    stats_.rx_frames += static_cast<uint64_t>(n);
    stats_.rx_packets += static_cast<uint64_t>(n);
    return static_cast<size_t>(n);
  }

  Result<size_t> TxBurst(std::span<const TxPacket> pkts) override {
    constexpr size_t kL3L4 = r::kIpv4Bytes + r::kUdpBytes;
    size_t done = 0;
    while (done < pkts.size()) {
      const size_t n = std::min(pkts.size() - done, kTxCap);
      std::array<mmsghdr, kTxCap> msgs{};
      std::array<iovec, kTxCap> iov{};
      size_t k = 0;
      for (size_t i = 0; i < n; ++i) {
        const TxPacket& p = pkts[done + i];
        if (p.to == nullptr || p.to->addr.ss_family != AF_INET || p.len < kL3L4) {
          if (done + i == 0) return InvalidArgument("roce: not an IPv4 datagram to an IPv4 peer");
          break;
        }
        iov[k] = {const_cast<uint8_t*>(p.data) + kL3L4, p.len - kL3L4};
        msgs[k].msg_hdr.msg_name = const_cast<sockaddr_storage*>(&p.to->addr);
        msgs[k].msg_hdr.msg_namelen = sizeof(sockaddr_in);
        msgs[k].msg_hdr.msg_iov = &iov[k];
        msgs[k].msg_hdr.msg_iovlen = 1;
        ++k;
      }
      if (k == 0) break;
      size_t sent = 0;
      while (sent < k) {
        const int rc =
            sendmmsg(udp_, msgs.data() + sent, static_cast<unsigned>(k - sent), MSG_DONTWAIT);
        if (rc < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) break;
          if (done + sent == 0) return ErrnoStatus("roce: sendmmsg", errno);
          break;
        }
        sent += static_cast<size_t>(rc);
      }
      stats_.tx_packets += sent;
      done += sent;
      if (sent < k || k < n) break;
    }
    return done;
  }

  Result<bool> WaitRx(std::chrono::microseconds timeout) override {
    pollfd p{raw_, POLLIN, 0};
    const int ms = static_cast<int>((timeout.count() + 999) / 1000);
    const int rc = poll(&p, 1, ms);
    if (rc < 0) {
      if (errno == EINTR) return false;
      return ErrnoStatus("roce: poll", errno);
    }
    return rc > 0;
  }
  Result<bool> WaitTx(std::chrono::microseconds timeout) override {
    pollfd p{udp_, POLLOUT, 0};
    const int rc = poll(&p, 1, static_cast<int>((timeout.count() + 999) / 1000));
    if (rc < 0 && errno != EINTR) return ErrnoStatus("roce: poll", errno);
    return rc > 0;
  }
  PortStats stats() const override { return stats_; }
  std::string Describe() const override { return describe_; }
  std::string_view kind() const override { return "raw"; }

 private:
  int raw_;
  int udp_;
  std::string describe_;
  std::vector<uint8_t> rx_bufs_;
  PortStats stats_;
};

void SetBuffer(int fd, int force_opt, int opt, int bytes) {
  if (bytes <= 0) return;
  if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof(bytes)) == 0) return;
  (void)setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));  // best effort
}

Status AttachFilter(int fd, std::span<sock_filter> code, const char* what) {
  sock_fprog prog{static_cast<unsigned short>(code.size()), code.data()};
  if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) != 0) {
    return ErrnoStatus(std::string("roce: SO_ATTACH_FILTER (") + what + ")", errno);
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Port>> OpenRocePort(const RocePortConfig& c) {
  in_addr a{};
  if (inet_pton(AF_INET, c.bind_ip.c_str(), &a) != 1 || a.s_addr == 0) {
    return InvalidArgument("roce: bind address '" + c.bind_ip +
                           "' is not a concrete IPv4 address (it is in every ICRC)");
  }
  if (c.qpn < 2 || c.qpn > 0xFFFFFF) {
    return InvalidArgument("roce: QP number " + std::to_string(c.qpn) + " not in [2, 2^24)");
  }
  const int raw = socket(AF_INET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
  if (raw < 0) {
    const int err = errno;
    return ErrnoStatus("roce: socket(AF_INET, SOCK_RAW, IPPROTO_UDP) (needs CAP_NET_RAW)", err);
  }
  // Only UDP to our address and 4791 (IPv4 without options: others fail the checks anyway).
  const uint32_t ip_host = ntohl(a.s_addr);
  sock_filter raw_code[] = {
      {BPF_LD | BPF_W | BPF_ABS, 0, 0, 16},  // destination address
      {BPF_JMP | BPF_JEQ | BPF_K, 0, 3, ip_host},
      {BPF_LD | BPF_H | BPF_ABS, 0, 0, 22},  // UDP destination port (IHL 5)
      {BPF_JMP | BPF_JEQ | BPF_K, 0, 1, r::kUdpPort},
      {BPF_RET | BPF_K, 0, 0, 0xFFFF},
      {BPF_RET | BPF_K, 0, 0, 0},
  };
  if (Status st = AttachFilter(raw, raw_code, "raw"); !st.ok()) {
    close(raw);
    return st;
  }
  SetBuffer(raw, SO_RCVBUFFORCE, SO_RCVBUF, c.socket_buffer_bytes);
  const int udp = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (udp < 0) {
    const int err = errno;
    close(raw);
    return ErrnoStatus("roce: socket(AF_INET, SOCK_DGRAM)", err);
  }
  // Its receive queue stays empty (the raw socket reads); DF so the kernel writes IP ID 0.
  sock_filter none[] = {{BPF_RET | BPF_K, 0, 0, 0}};
  Status st = AttachFilter(udp, none, "udp");
  const int df = IP_PMTUDISC_DO;
  if (st.ok() && setsockopt(udp, IPPROTO_IP, IP_MTU_DISCOVER, &df, sizeof(df)) != 0) {
    st = ErrnoStatus("roce: IP_MTU_DISCOVER", errno);
  }
  SetBuffer(udp, SO_SNDBUFFORCE, SO_SNDBUF, c.socket_buffer_bytes);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(r::kUdpPort);
  sa.sin_addr = a;
  if (st.ok() && bind(udp, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    st = ErrnoStatus("roce: bind " + c.bind_ip + ":4791", errno);
  }
  if (!st.ok()) {
    close(raw);
    close(udp);
    return st;
  }
  RoceIdentity me;
  me.ip_be = a.s_addr;
  me.qpn = c.qpn;
  me.qkey = c.qkey;
  return WrapRoce(std::make_unique<RawDatagramPort>(raw, udp, c.bind_ip + ":4791"), me);
}

std::unique_ptr<Port> WrapRoce(std::unique_ptr<Port> datagrams, const RoceIdentity& me) {
  return std::make_unique<RoceCodecPort>(std::move(datagrams), me);
}

}  // namespace ina::net
