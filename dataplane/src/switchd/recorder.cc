// ina-switchd --record (see recorder.h).
#include "recorder.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ina::dp::switchd {

Result<std::unique_ptr<Recorder>> Recorder::Open(const std::string& path, const std::string& local,
                                                 size_t max_len) {
  std::unique_ptr<Recorder> r(new Recorder());
  INA_ASSIGN_OR_RETURN(r->writer_, net::PcapWriter::Create(path));
  r->path_ = path;
  r->max_len_ = max_len;
  const size_t colon = local.rfind(':');
  in_addr a{};
  if (colon != std::string::npos && inet_pton(AF_INET, local.substr(0, colon).c_str(), &a) == 1) {
    r->addrs_.dst_ip = a.s_addr;
    r->addrs_.dst_port = htons(static_cast<uint16_t>(std::atoi(local.c_str() + colon + 1)));
  }
  r->buf_.resize(net::kFrameHeaderBytes + max_len);
  return r;
}

void Recorder::Record(const net::Packet& pk, const net::Endpoint& from) {
  if (from.addr.ss_family != AF_INET || pk.len > max_len_) {
    ++skipped_;
    return;
  }
  const auto& sin = reinterpret_cast<const sockaddr_in&>(from.addr);
  net::FrameAddrs a = addrs_;
  a.src_ip = sin.sin_addr.s_addr;
  a.src_port = sin.sin_port;
  std::span<const uint8_t> payload(pk.data, pk.len);
  net::BuildUdpHeaders(a, payload, buf_.data());
  std::memcpy(buf_.data() + net::kFrameHeaderBytes, pk.data, pk.len);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  const Status st =
      writer_->Write({buf_.data(), net::kFrameHeaderBytes + pk.len}, static_cast<uint64_t>(ns));
  if (!st.ok() && errors_++ == 0) {
    std::fprintf(stderr, "ina-switchd: --record: %s\n", st.ToString().c_str());
  }
}

void Recorder::Close() {
  if (writer_ == nullptr) return;
  (void)writer_->Flush();
  std::fprintf(stderr, "ina-switchd: --record %s: %llu frames, %llu skipped\n", path_.c_str(),
               static_cast<unsigned long long>(writer_->records()),
               static_cast<unsigned long long>(skipped_));
  writer_.reset();
}

}  // namespace ina::dp::switchd
