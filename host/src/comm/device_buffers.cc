// DeviceBuffers: see device_buffers.h.
#include "device_buffers.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "ina/base/log_line.h"
#include "ina/proto/wire.h"
#include "staged_op.h"

namespace ina::host::internal {

DeviceBuffers::DeviceBuffers(const CommConfig& config, std::vector<Transport*> transports)
    : cfg_(config), transports_(std::move(transports)) {}

Result<uint8_t*> DeviceBuffers::Staging(MemoryDomain& domain, size_t bytes) {
  std::lock_guard<std::mutex> lk(staging_mu_);
  auto it = std::find_if(staging_.begin(), staging_.end(),
                         [&](const DomainStaging& s) { return s.domain == &domain; });
  if (it != staging_.end() && it->buffer->size() >= bytes) return it->buffer->data();
  const size_t floor =
      StagedOp::StagingBytes(cfg_.staging_bytes / proto::kElemBytes, proto::kElemBytes, cfg_.k,
                             domain.quantizes(), /*nic_wire=*/true);
  const size_t want = std::max(bytes, cfg_.staging_bytes == 0 ? 0 : floor);
  auto st = domain.AllocStaging(want);
  if (!st.ok()) {
    return st.status().WithContext(domain.name() + ": staging of " + std::to_string(want) +
                                   " bytes");
  }
  if (it == staging_.end()) {
    staging_.push_back(DomainStaging{&domain, std::move(st).value()});
    return staging_.back().buffer->data();
  }
  outgrown_staging_.push_back(std::move(it->buffer));
  it->buffer = std::move(st).value();
  return it->buffer->data();
}

uint8_t* DeviceBuffers::NicWire(MemoryDomain& domain, size_t bytes) {
  Transport& lane0 = *transports_[0];
  if (nic_off_ || !lane0.sends_body()) return nullptr;
  if (nic_ != nullptr && nic_domain_ == &domain && nic_->size() >= bytes) return nic_->data();
  Status s = UnregisterNicWire();
  std::unique_ptr<NicBuffer> b;
  if (s.ok()) {
    std::lock_guard<std::mutex> lk(nic_mu_);
    if (reserved_nic_ != nullptr && reserved_nic_domain_ == &domain &&
        reserved_nic_->size() >= bytes) {
      b = std::move(reserved_nic_);
    }
  }
  if (s.ok() && b == nullptr) {
    auto a = domain.AllocNicBuffer(std::max(bytes, NicFloor()));
    if (a.ok()) {
      b = std::move(a).value();
    } else {
      s = a.status();
    }
  }
  if (s.ok()) {
    nic_ = std::move(b);
    nic_domain_ = &domain;
    for (size_t l = 0; l < transports_.size() && s.ok(); ++l) {
      s = transports_[l]->RegisterTxBody(nic_->data(), nic_->size(), nic_->dmabuf_fd(),
                                         nic_->dmabuf_offset());
      if (s.ok()) ++nic_registered_;
    }
  }
  if (s.ok()) {
    NoteSendPath("gpudirect");
    return nic_->data();
  }
  (void)UnregisterNicWire();
  {
    std::lock_guard<std::mutex> lk(nic_mu_);
    nic_off_ = true;
  }
  NoteSendPath("host staging: " + s.ToString());
  LogLinef(
      "ina: rank %d job %d: GPUDirect RDMA off for %s over %s (%s); staging through "
      "host memory\n",
      cfg_.rank, cfg_.job_id, domain.name().c_str(), std::string(lane0.name()).c_str(),
      s.ToString().c_str());
  return nullptr;
}

void DeviceBuffers::ReserveNic(MemoryDomain& domain, size_t bytes) {
  if (!domain.quantizes() || !transports_[0]->sends_body()) return;
  std::lock_guard<std::mutex> lk(nic_mu_);
  if (nic_off_) return;
  if (reserved_nic_ != nullptr && reserved_nic_domain_ == &domain &&
      reserved_nic_->size() >= bytes) {
    return;
  }
  auto a = domain.AllocNicBuffer(std::max(bytes, NicFloor()));
  if (!a.ok()) return;
  if (reserved_nic_ != nullptr) outgrown_nic_.push_back(std::move(reserved_nic_));
  reserved_nic_ = std::move(a).value();
  reserved_nic_domain_ = &domain;
}

Status DeviceBuffers::UnregisterNicWire() {
  if (nic_ == nullptr) return Status::Ok();
  Status first;
  for (size_t l = 0; l < nic_registered_; ++l) {
    Status s = transports_[l]->UnregisterTxBody(nic_->data());
    if (!s.ok() && first.ok()) first = s;
  }
  nic_registered_ = 0;
  nic_domain_ = nullptr;
  std::lock_guard<std::mutex> lk(nic_mu_);
  outgrown_nic_.push_back(std::move(nic_));
  return first;
}

void DeviceBuffers::NoteSendPath(std::string path) {
  std::lock_guard<std::mutex> lk(path_mu_);
  send_path_ = std::move(path);
}

std::string DeviceBuffers::send_path() const {
  std::lock_guard<std::mutex> lk(path_mu_);
  return send_path_;
}

}  // namespace ina::host::internal
