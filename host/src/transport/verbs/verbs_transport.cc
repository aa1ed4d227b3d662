// The verbs transport over libibverbs (see verbs_transport.h). Every verbs call that can fail is
// checked here and turned into a Status naming the call and the device.
#include "verbs/verbs_transport.h"

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <poll.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace ina::host::verbs {

const bool kBuilt = true;

namespace {

constexpr size_t kGrhBytes = 40;  // UD receive buffers start with the GRH

Status VerbsError(std::string_view call, const std::string& dev, int err) {
  const std::string m = "verbs: " + std::string(call) + " on " + dev + ": " + std::strerror(err) +
                        " (errno " + std::to_string(err) + ")";
  switch (err) {
    case ENOMEM:
    case ENOSPC:
      return ResourceExhausted(m);
    case EINVAL:
      return InvalidArgument(m);
    case EPERM:
    case EACCES:
      return FailedPrecondition(m);
    case ENODEV:
    case ENOENT:
    case ENOSYS:
      return NotFound(m);
    default:
      return Unavailable(m);
  }
}

int MtuBytes(ibv_mtu m) {
  switch (m) {
    case IBV_MTU_256:
      return 256;
    case IBV_MTU_512:
      return 512;
    case IBV_MTU_1024:
      return 1024;
    case IBV_MTU_2048:
      return 2048;
    case IBV_MTU_4096:
      return 4096;
  }
  return 0;
}

// An owned memory registration: ibv_reg_mr / ibv_reg_dmabuf_mr wrapped once.
class MemoryRegion {
 public:
  static Result<MemoryRegion> Register(ibv_pd* pd, const std::string& dev, void* addr, size_t len,
                                       int access) {
    ibv_mr* mr = ibv_reg_mr(pd, addr, len, access);
    if (mr == nullptr)
      return VerbsError("ibv_reg_mr(" + std::to_string(len) + " bytes)", dev, errno);
    return MemoryRegion(mr, reinterpret_cast<uintptr_t>(addr), len);
  }
  static Result<MemoryRegion> RegisterDmabuf(ibv_pd* pd, const std::string& dev, int fd,
                                             uint64_t offset, size_t len, uint64_t iova,
                                             int access) {
#ifdef INA_HAVE_IBV_REG_DMABUF_MR
    ibv_mr* mr = ibv_reg_dmabuf_mr(pd, offset, len, iova, fd, access);
    if (mr == nullptr)
      return VerbsError("ibv_reg_dmabuf_mr(fd " + std::to_string(fd) + ")", dev, errno);
    return MemoryRegion(mr, iova, len);
#else
    (void)pd, (void)fd, (void)offset, (void)len, (void)iova, (void)access;
    return Unimplemented("verbs: ibv_reg_dmabuf_mr on " + dev + ": not in this rdma-core");
#endif
  }
  MemoryRegion(MemoryRegion&& o) noexcept : mr_(o.mr_), base_(o.base_), len_(o.len_) {
    o.mr_ = nullptr;
  }
  MemoryRegion& operator=(MemoryRegion&& o) noexcept {
    std::swap(mr_, o.mr_);
    std::swap(base_, o.base_);
    std::swap(len_, o.len_);
    return *this;
  }
  ~MemoryRegion() {
    if (mr_ != nullptr) ibv_dereg_mr(mr_);
  }
  bool Contains(uintptr_t p, size_t n) const { return p >= base_ && p + n <= base_ + len_; }
  uintptr_t base() const { return base_; }
  uint32_t lkey() const { return mr_->lkey; }

 private:
  MemoryRegion(ibv_mr* mr, uintptr_t base, size_t len) : mr_(mr), base_(base), len_(len) {}
  ibv_mr* mr_;
  uintptr_t base_;
  size_t len_;
};

class VerbsTransportImpl final : public VerbsTransport {
 public:
  ~VerbsTransportImpl() override {
    // The QP first (its posted receives reference the pools), then what it used.
    if (ah_ != nullptr) ibv_destroy_ah(ah_);
    if (qp_ != nullptr) ibv_destroy_qp(qp_);
    tx_regions_.clear();
    body_regions_.clear();
    rx_mr_.reset();
    tx_mr_.reset();
    if (send_cq_ != nullptr) ibv_destroy_cq(send_cq_);
    if (recv_cq_ != nullptr) ibv_destroy_cq(recv_cq_);
    if (channel_ != nullptr) ibv_destroy_comp_channel(channel_);
    if (pd_ != nullptr) ibv_dealloc_pd(pd_);
    if (ctx_ != nullptr) ibv_close_device(ctx_);
  }

  Status Open(const TransportConfig& config);

  Result<size_t> SendBurst(std::span<const TxMessage> packets) override;
  Result<size_t> RecvBurst(std::span<RxMessage> packets,
                           std::chrono::microseconds timeout) override;
  std::string_view name() const override { return "verbs"; }

  Status RegisterTxMemory(const void* data, size_t len) override {
    INA_ASSIGN_OR_RETURN(MemoryRegion mr, MemoryRegion::Register(pd_, dev_, const_cast<void*>(data),
                                                                 len, IBV_ACCESS_LOCAL_WRITE));
    tx_regions_.push_back(std::move(mr));
    return Status::Ok();
  }
  Status UnregisterTxMemory(const void* data) override {
    const auto p = reinterpret_cast<uintptr_t>(data);
    for (auto it = tx_regions_.begin(); it != tx_regions_.end(); ++it) {
      if (it->base() == p) {
        tx_regions_.erase(it);
        return Status::Ok();
      }
    }
    return NotFound("verbs: no TX region registered at this address on " + dev_);
  }
  bool sends_body() const override { return true; }
  Status RegisterTxBody(const void* data, size_t len, int dmabuf_fd,
                        uint64_t dmabuf_offset) override {
    INA_ASSIGN_OR_RETURN(MemoryRegion mr,
                         dmabuf_fd >= 0
                             ? MemoryRegion::RegisterDmabuf(pd_, dev_, dmabuf_fd, dmabuf_offset,
                                                            len, reinterpret_cast<uintptr_t>(data),
                                                            IBV_ACCESS_LOCAL_WRITE)
                             : MemoryRegion::Register(pd_, dev_, const_cast<void*>(data), len,
                                                      IBV_ACCESS_LOCAL_WRITE));
    body_regions_.push_back(std::move(mr));
    return Status::Ok();
  }
  Status UnregisterTxBody(const void* data) override {
    const auto p = reinterpret_cast<uintptr_t>(data);
    auto it = std::find_if(body_regions_.begin(), body_regions_.end(),
                           [&](const MemoryRegion& r) { return r.base() == p; });
    if (it == body_regions_.end()) {
      return NotFound("verbs: no body region registered at this address on " + dev_);
    }
    // No posted send may still read the region: wait for every completion (bounded).
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (outstanding_ > 0) {
      Status s = ReapSends();
      if (!s.ok()) break;  // the failed sends completed (in error): nothing reads the region
      if (std::chrono::steady_clock::now() >= until) {
        return DeadlineExceeded("verbs: " + std::to_string(outstanding_) +
                                " sends still posted on " + dev_ +
                                " after 5 s; the body region stays registered");
      }
    }
    body_regions_.erase(it);
    return Status::Ok();
  }
  uint32_t qp_num() const override { return qp_->qp_num; }
  int active_mtu() const override { return mtu_; }
  VerbsCounters counters() const override { return counters_; }

 private:
  static constexpr size_t kPostBatch = 32;  // work requests chained into one post
  Status PostRecv(std::span<const uint32_t> slots);
  Status ReapSends();

  std::string dev_ = "(no device)";
  VerbsConfig cfg_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* send_cq_ = nullptr;
  ibv_cq* recv_cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_ah* ah_ = nullptr;
  ibv_gid fabric_gid_{};
  int mtu_ = 0;
  size_t slot_bytes_ = 0;  // RX: GRH + MTU; TX bounce: MTU
  std::vector<uint8_t> rx_pool_, tx_pool_;
  std::optional<MemoryRegion> rx_mr_, tx_mr_;
  std::vector<MemoryRegion> tx_regions_;
  std::vector<MemoryRegion> body_regions_;  // RegisterTxBody
  std::vector<uint32_t> free_tx_;           // free bounce slots
  size_t outstanding_ = 0;                  // posted sends not yet completed
  bool cq_armed_ = false;
  VerbsCounters counters_;
};

// wr_id of a send: bounce slot + 1, or 0 for a zero-copy send.
// Posts the receive buffers of `slots` as one chain of work requests: one ibv_post_recv (one
// doorbell, or one system call for a software provider such as rxe) per batch, not per packet.
Status VerbsTransportImpl::PostRecv(std::span<const uint32_t> slots) {
  std::array<ibv_sge, kPostBatch> sge{};
  std::array<ibv_recv_wr, kPostBatch> wr{};
  for (size_t at = 0; at < slots.size(); at += kPostBatch) {
    const size_t n = std::min(kPostBatch, slots.size() - at);
    for (size_t i = 0; i < n; ++i) {
      const size_t slot = slots[at + i];
      sge[i].addr = reinterpret_cast<uintptr_t>(rx_pool_.data() + slot * slot_bytes_);
      sge[i].length = static_cast<uint32_t>(slot_bytes_);
      sge[i].lkey = rx_mr_->lkey();
      wr[i] = {};
      wr[i].wr_id = slot;
      wr[i].sg_list = &sge[i];
      wr[i].num_sge = 1;
      wr[i].next = i + 1 < n ? &wr[i + 1] : nullptr;
    }
    ibv_recv_wr* bad = nullptr;
    const int rc = ibv_post_recv(qp_, wr.data(), &bad);
    if (rc != 0) return VerbsError("ibv_post_recv", dev_, rc);
  }
  return Status::Ok();
}

Status VerbsTransportImpl::Open(const TransportConfig& config) {
  cfg_ = config.verbs;
  INA_RETURN_IF_ERROR(ValidateVerbsConfig(cfg_));
  in_addr fabric{};
  if (inet_pton(AF_INET, config.fabric_host.c_str(), &fabric) != 1) {
    return InvalidArgument("verbs: fabric_host '" + config.fabric_host +
                           "' is not an IPv4 address (RoCEv2 GID ::ffff:a.b.c.d)");
  }
  fabric_gid_.raw[10] = fabric_gid_.raw[11] = 0xFF;
  std::memcpy(fabric_gid_.raw + 12, &fabric, 4);

  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  const std::string want = cfg_.device.empty() ? "(the first RDMA device)" : cfg_.device;
  if (list == nullptr) {
    return NotFound("verbs: ibv_get_device_list: " + std::string(std::strerror(errno)) +
                    ": no RDMA device, so none named " + want + " (kernel without RDMA?)");
  }
  std::string names;
  ibv_device* found = nullptr;
  for (int i = 0; i < n; ++i) {
    const char* nm = ibv_get_device_name(list[i]);
    names += (names.empty() ? "" : ", ") + std::string(nm);
    if (found == nullptr && (cfg_.device.empty() || cfg_.device == nm)) found = list[i];
  }
  if (found == nullptr) {
    ibv_free_device_list(list);
    return NotFound("verbs: no RDMA device " + want +
                    " (devices: " + (names.empty() ? "none" : names) + ")");
  }
  dev_ = std::string(ibv_get_device_name(found)) + " port " + std::to_string(cfg_.port);
  ctx_ = ibv_open_device(found);
  ibv_free_device_list(list);
  if (ctx_ == nullptr) return VerbsError("ibv_open_device", dev_, errno);

  ibv_port_attr pa{};
  if (int rc = ibv_query_port(ctx_, static_cast<uint8_t>(cfg_.port), &pa); rc != 0) {
    return VerbsError("ibv_query_port", dev_, rc);
  }
  if (pa.state != IBV_PORT_ACTIVE) {
    return FailedPrecondition("verbs: " + dev_ + " is not active (state " +
                              ibv_port_state_str(pa.state) + ")");
  }
  const int active = MtuBytes(pa.active_mtu);
  mtu_ = cfg_.mtu == 0 ? active : cfg_.mtu;
  if (mtu_ > active) {
    return FailedPrecondition("verbs: mtu " + std::to_string(mtu_) + " above " + dev_ +
                              "'s active MTU " + std::to_string(active));
  }
  int gid_index = cfg_.gid_index;
  if (gid_index < 0) {
    for (int i = 0; i < pa.gid_tbl_len && gid_index < 0; ++i) {
      ibv_gid_entry e{};
      if (ibv_query_gid_ex(ctx_, cfg_.port, i, &e, 0) != 0) continue;
      const uint8_t* g = e.gid.raw;
      const bool v4 = std::all_of(g, g + 10, [](uint8_t b) { return b == 0; }) && g[10] == 0xFF &&
                      g[11] == 0xFF;
      if (e.gid_type == IBV_GID_TYPE_ROCE_V2 && v4) gid_index = i;
    }
    if (gid_index < 0) {
      return NotFound("verbs: " + dev_ +
                      " has no RoCE v2 IPv4 GID (is its netdev up with an "
                      "IPv4 address?)");
    }
  }

  pd_ = ibv_alloc_pd(ctx_);
  if (pd_ == nullptr) return VerbsError("ibv_alloc_pd", dev_, errno);
  channel_ = ibv_create_comp_channel(ctx_);
  if (channel_ == nullptr) return VerbsError("ibv_create_comp_channel", dev_, errno);
  send_cq_ = ibv_create_cq(ctx_, cfg_.send_depth, nullptr, nullptr, 0);
  if (send_cq_ == nullptr) return VerbsError("ibv_create_cq(send)", dev_, errno);
  recv_cq_ = ibv_create_cq(ctx_, cfg_.recv_depth, nullptr, channel_, 0);
  if (recv_cq_ == nullptr) return VerbsError("ibv_create_cq(recv)", dev_, errno);

  ibv_qp_init_attr qa{};
  qa.send_cq = send_cq_;
  qa.recv_cq = recv_cq_;
  qa.qp_type = IBV_QPT_UD;
  qa.cap.max_send_wr = static_cast<uint32_t>(cfg_.send_depth);
  qa.cap.max_recv_wr = static_cast<uint32_t>(cfg_.recv_depth);
  qa.cap.max_send_sge = 3;  // a packet with a body: header, body, trailer
  qa.cap.max_recv_sge = 1;
  qp_ = ibv_create_qp(pd_, &qa);
  if (qp_ == nullptr) return VerbsError("ibv_create_qp(UD)", dev_, errno);

  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_INIT;
  at.pkey_index = 0;
  at.port_num = static_cast<uint8_t>(cfg_.port);
  at.qkey = cfg_.qkey;
  if (int rc =
          ibv_modify_qp(qp_, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
      rc != 0) {
    return VerbsError("ibv_modify_qp(INIT)", dev_, rc);
  }
  at = {};
  at.qp_state = IBV_QPS_RTR;
  if (int rc = ibv_modify_qp(qp_, &at, IBV_QP_STATE); rc != 0) {
    return VerbsError("ibv_modify_qp(RTR)", dev_, rc);
  }
  at = {};
  at.qp_state = IBV_QPS_RTS;
  at.sq_psn = 0;
  if (int rc = ibv_modify_qp(qp_, &at, IBV_QP_STATE | IBV_QP_SQ_PSN); rc != 0) {
    return VerbsError("ibv_modify_qp(RTS)", dev_, rc);
  }

  ibv_ah_attr ah{};
  ah.is_global = 1;
  ah.grh.dgid = fabric_gid_;
  ah.grh.sgid_index = static_cast<uint8_t>(gid_index);
  ah.grh.hop_limit = 64;
  ah.port_num = static_cast<uint8_t>(cfg_.port);
  ah_ = ibv_create_ah(pd_, &ah);
  if (ah_ == nullptr) {
    return VerbsError(
        "ibv_create_ah(" + config.fabric_host + ", gid index " + std::to_string(gid_index) + ")",
        dev_, errno);
  }

  slot_bytes_ = kGrhBytes + static_cast<size_t>(mtu_);
  rx_pool_.assign(slot_bytes_ * static_cast<size_t>(cfg_.recv_depth), 0);
  tx_pool_.assign(static_cast<size_t>(mtu_) * static_cast<size_t>(cfg_.send_depth), 0);
  INA_ASSIGN_OR_RETURN(
      MemoryRegion rx,
      MemoryRegion::Register(pd_, dev_, rx_pool_.data(), rx_pool_.size(), IBV_ACCESS_LOCAL_WRITE));
  rx_mr_.emplace(std::move(rx));
  INA_ASSIGN_OR_RETURN(
      MemoryRegion tx,
      MemoryRegion::Register(pd_, dev_, tx_pool_.data(), tx_pool_.size(), IBV_ACCESS_LOCAL_WRITE));
  tx_mr_.emplace(std::move(tx));
  for (int i = cfg_.send_depth - 1; i >= 0; --i) free_tx_.push_back(static_cast<uint32_t>(i));
  std::vector<uint32_t> all(static_cast<size_t>(cfg_.recv_depth));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint32_t>(i);
  INA_RETURN_IF_ERROR(PostRecv(all));
  return Status::Ok();
}

Status VerbsTransportImpl::ReapSends() {
  ibv_wc wc[32];
  Status err = Status::Ok();
  for (;;) {
    const int n = ibv_poll_cq(send_cq_, 32, wc);
    if (n < 0) return VerbsError("ibv_poll_cq(send)", dev_, EIO);
    for (int i = 0; i < n; ++i) {
      --outstanding_;
      if (wc[i].wr_id != 0) free_tx_.push_back(static_cast<uint32_t>(wc[i].wr_id - 1));
      if (wc[i].status != IBV_WC_SUCCESS) {
        ++counters_.wc_errors;
        err = Unavailable("verbs: send completion on " + dev_ + ": " +
                          ibv_wc_status_str(wc[i].status));
      }
    }
    if (n < 32) return err;
  }
}

Result<size_t> VerbsTransportImpl::SendBurst(std::span<const TxMessage> packets) {
  INA_RETURN_IF_ERROR(ReapSends());
  size_t sent = 0;
  // Up to kPostBatch packets are chained into one ibv_post_send (one doorbell, or one system call
  // for a software provider such as rxe); a packet that cannot go now ends the chain.
  std::array<ibv_send_wr, kPostBatch> wr{};
  std::array<std::array<ibv_sge, 3>, kPostBatch> sge{};
  std::array<uint8_t, kPostBatch> kind{};  // 1 zero-copy, 2 bounced; | 4 with a body
  while (sent < packets.size()) {
    size_t n = 0;
    Status stop = Status::Ok();  // why the chain ended early, when it is an error
    for (size_t at = sent; at < packets.size() && n < kPostBatch; ++at) {
      const TxMessage& p = packets[at];
      if (p.bytes() > static_cast<size_t>(mtu_)) {
        stop = InvalidArgument("verbs: packet of " + std::to_string(p.bytes()) +
                               " bytes above the " + std::to_string(mtu_) + "-byte MTU of " + dev_);
        break;
      }
      const MemoryRegion* body_mr = nullptr;
      if (p.body != nullptr) {
        const auto b = reinterpret_cast<uintptr_t>(p.body);
        for (const auto& r : body_regions_) {
          if (r.Contains(b, p.body_len)) body_mr = &r;
        }
        if (body_mr == nullptr || p.split > p.len) {
          stop = InvalidArgument(
              "verbs: a packet's body is not in a region registered with RegisterTxBody on " +
              dev_);
          break;
        }
      }
      if (outstanding_ + n >= static_cast<size_t>(cfg_.send_depth)) break;
      uint64_t wr_id = 0;
      const auto addr = reinterpret_cast<uintptr_t>(p.data);
      const MemoryRegion* mr = nullptr;
      for (const auto& r : tx_regions_) {
        if (r.Contains(addr, p.len)) mr = &r;
      }
      uintptr_t host = addr;  // the host part: where the caller has it, or a bounce slot
      uint32_t host_lkey = 0;
      if (mr != nullptr) {
        host_lkey = mr->lkey();
      } else {
        if (free_tx_.empty()) break;
        const uint32_t slot = free_tx_.back();
        free_tx_.pop_back();
        uint8_t* dst = tx_pool_.data() + static_cast<size_t>(slot) * static_cast<size_t>(mtu_);
        std::memcpy(dst, p.data, p.len);
        host = reinterpret_cast<uintptr_t>(dst);
        host_lkey = tx_mr_->lkey();
        wr_id = slot + 1;
      }
      // One SGE, or header / body / trailer (a zero-length part is left out).
      int nsge = 0;
      auto add = [&](uintptr_t a, size_t len, uint32_t lkey) {
        if (len == 0) return;
        sge[n][nsge] = {a, static_cast<uint32_t>(len), lkey};
        ++nsge;
      };
      if (p.body == nullptr) {
        add(host, p.len, host_lkey);
      } else {
        add(host, p.split, host_lkey);
        add(reinterpret_cast<uintptr_t>(p.body), p.body_len, body_mr->lkey());
        add(host + p.split, p.len - p.split, host_lkey);
      }
      wr[n] = {};
      wr[n].wr_id = wr_id;
      wr[n].sg_list = sge[n].data();
      wr[n].num_sge = nsge;
      wr[n].opcode = IBV_WR_SEND;
      wr[n].send_flags = IBV_SEND_SIGNALED;
      wr[n].wr.ud.ah = ah_;
      wr[n].wr.ud.remote_qpn = cfg_.remote_qpn;
      wr[n].wr.ud.remote_qkey = cfg_.qkey;
      kind[n] = static_cast<uint8_t>((mr != nullptr ? 1 : 2) | (p.body != nullptr ? 4 : 0));
      ++n;
    }
    if (n == 0) {
      if (sent == 0 && !stop.ok()) return stop;
      break;  // queue or bounce slots full (the caller retries later), or the next call's error
    }
    for (size_t i = 0; i < n; ++i) wr[i].next = i + 1 < n ? &wr[i + 1] : nullptr;
    ibv_send_wr* bad = nullptr;
    const int rc = ibv_post_send(qp_, wr.data(), &bad);
    // Everything before `bad` was posted; the rest gives its bounce slots back.
    const size_t posted = rc == 0 ? n : static_cast<size_t>(bad - wr.data());
    for (size_t i = 0; i < posted; ++i) {
      ++outstanding_;
      ++((kind[i] & 1) ? counters_.tx_zero_copy : counters_.tx_bounced);
      if (kind[i] & 4) ++counters_.tx_gather;
    }
    for (size_t i = posted; i < n; ++i) {
      if (wr[i].wr_id != 0) free_tx_.push_back(static_cast<uint32_t>(wr[i].wr_id - 1));
    }
    sent += posted;
    if (rc != 0) {
      if (rc == ENOMEM && sent > 0) break;  // queue full: the caller retries the rest
      if (sent > 0) break;                  // the error comes again on the next call
      return VerbsError("ibv_post_send", dev_, rc);
    }
    if (n < kPostBatch || !stop.ok()) break;
  }
  return sent;
}

Result<size_t> VerbsTransportImpl::RecvBurst(std::span<RxMessage> packets,
                                             std::chrono::microseconds timeout) {
  INA_RETURN_IF_ERROR(ReapSends());
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  size_t got = 0;
  ibv_wc wc[32];
  for (;;) {
    const int want = static_cast<int>(std::min<size_t>(32, packets.size() - got));
    const int n = want == 0 ? 0 : ibv_poll_cq(recv_cq_, want, wc);
    if (n < 0) return VerbsError("ibv_poll_cq(recv)", dev_, EIO);
    std::array<uint32_t, 32> repost;  // every buffer of this batch goes back in one post
    for (int i = 0; i < n; ++i) repost[static_cast<size_t>(i)] = static_cast<uint32_t>(wc[i].wr_id);
    for (int i = 0; i < n; ++i) {
      const size_t slot = wc[i].wr_id;
      if (wc[i].status != IBV_WC_SUCCESS) {
        ++counters_.wc_errors;
        if (wc[i].status == IBV_WC_WR_FLUSH_ERR) {
          return Unavailable("verbs: receive queue of " + dev_ + " flushed (QP in error)");
        }
        continue;
      }
      const uint8_t* buf = rx_pool_.data() + slot * slot_bytes_;
      const size_t len = wc[i].byte_len >= kGrhBytes ? wc[i].byte_len - kGrhBytes : 0;
      // GRH (RoCEv2 over IPv4: the IPv4 header in its last 20 bytes); the source is at byte 20+12.
      const bool from_fabric = wc[i].src_qp == cfg_.remote_qpn && (wc[i].wc_flags & IBV_WC_GRH) &&
                               std::memcmp(buf + kGrhBytes - 20 + 12, fabric_gid_.raw + 12, 4) == 0;
      if (!from_fabric) {
        ++counters_.rx_foreign;
      } else if (len > packets[got].cap) {
        ++counters_.rx_too_big;
      } else {
        std::memcpy(packets[got].data, buf + kGrhBytes, len);
        packets[got].len = len;
        ++got;
        ++counters_.rx_delivered;
      }
    }
    INA_RETURN_IF_ERROR(PostRecv({repost.data(), static_cast<size_t>(n)}));
    if (got == packets.size() || (got > 0 && n < want)) return got;
    if (n > 0) continue;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return got;
    // Wait for a completion event (bounded by the deadline), then poll again.
    if (!cq_armed_) {
      if (int rc = ibv_req_notify_cq(recv_cq_, 0); rc != 0) {
        return VerbsError("ibv_req_notify_cq", dev_, rc);
      }
      cq_armed_ = true;
      continue;  // a completion may have arrived before arming
    }
    pollfd pfd{channel_->fd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    const int pr = poll(&pfd, 1, static_cast<int>(std::max<int64_t>(1, left.count())));
    if (pr < 0 && errno != EINTR) return VerbsError("poll(completion channel)", dev_, errno);
    if (pr > 0) {
      ibv_cq* cq = nullptr;
      void* ctx = nullptr;
      if (ibv_get_cq_event(channel_, &cq, &ctx) != 0) {
        return VerbsError("ibv_get_cq_event", dev_, errno);
      }
      ibv_ack_cq_events(cq, 1);
      cq_armed_ = false;
    }
  }
}

}  // namespace

Result<std::unique_ptr<VerbsTransport>> OpenVerbsTransport(const TransportConfig& config) {
  auto t = std::make_unique<VerbsTransportImpl>();
  INA_RETURN_IF_ERROR(t->Open(config));
  return std::unique_ptr<VerbsTransport>(std::move(t));
}

}  // namespace ina::host::verbs
