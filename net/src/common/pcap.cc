#include "ina/net/pcap.h"

#include <cerrno>
#include <cstring>

namespace ina::net {

namespace {

constexpr uint32_t kMagicMicros = 0xa1b2c3d4;
constexpr uint32_t kMagicNanos = 0xa1b23c4d;
constexpr uint32_t kMagicPcapng = 0x0a0d0d0a;
constexpr uint32_t kWriteSnaplen = 65535;

uint32_t Swap32(uint32_t v) { return __builtin_bswap32(v); }

uint32_t Get32(const uint8_t* p, bool swap) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return swap ? Swap32(v) : v;
}

uint16_t Get16(const uint8_t* p, bool swap) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return swap ? __builtin_bswap16(v) : v;
}

void Put32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
void Put16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

}  // namespace

Result<std::unique_ptr<PcapReader>> PcapReader::Open(const std::string& path) {
  std::unique_ptr<PcapReader> r(new PcapReader());
  r->path_ = path;
  r->f_ = std::fopen(path.c_str(), "rb");
  if (r->f_ == nullptr) return NotFound(path + ": " + std::strerror(errno));
  uint8_t h[24];
  const size_t got = std::fread(h, 1, sizeof(h), r->f_);
  if (got < 4)
    return InvalidArgument(path + ": not a pcap file (" + std::to_string(got) + " bytes)");
  const uint32_t magic = Get32(h, false);
  if (magic == kMagicPcapng) {
    return InvalidArgument(path + ": a pcapng file; only classic pcap is read (tcpdump -F pcap)");
  }
  if (magic == kMagicMicros || magic == kMagicNanos) {
    r->swap_ = false;
  } else if (Swap32(magic) == kMagicMicros || Swap32(magic) == kMagicNanos) {
    r->swap_ = true;
  } else {
    char m[16];
    std::snprintf(m, sizeof(m), "0x%08x", magic);
    return InvalidArgument(path + ": not a pcap file (magic " + m + ")");
  }
  r->nanos_ = Get32(h, r->swap_) == kMagicNanos;
  if (got < sizeof(h)) return InvalidArgument(path + ": pcap file header cut short");
  const uint16_t major = Get16(h + 4, r->swap_);
  if (major != 2) {
    return InvalidArgument(path + ": pcap version " + std::to_string(major) + " (want 2)");
  }
  r->snaplen_ = Get32(h + 16, r->swap_);
  const uint32_t link = Get32(h + 20, r->swap_) & 0x0FFFFFFF;  // upper bits: FCS info
  if (link != kPcapLinkEthernet) {
    return InvalidArgument(path + ": link type " + std::to_string(link) +
                           "; only Ethernet (1) is read");
  }
  r->offset_ = sizeof(h);
  return r;
}

PcapReader::~PcapReader() {
  if (f_ != nullptr) std::fclose(f_);
}

Result<bool> PcapReader::Next(PcapRecord* out) {
  uint8_t h[16];
  const size_t got = std::fread(h, 1, sizeof(h), f_);
  if (got == 0 && std::feof(f_)) return false;
  const std::string where =
      path_ + ": record " + std::to_string(records_ + 1) + " at byte " + std::to_string(offset_);
  if (got < sizeof(h)) return InvalidArgument(where + ": record header cut short");
  const uint32_t sec = Get32(h, swap_), frac = Get32(h + 4, swap_);
  const uint32_t incl = Get32(h + 8, swap_), orig = Get32(h + 12, swap_);
  if (incl > kMaxRecordBytes || (snaplen_ != 0 && incl > snaplen_)) {
    return InvalidArgument(where + ": captured length " + std::to_string(incl) +
                           " exceeds the snaplen " + std::to_string(snaplen_) + " or " +
                           std::to_string(kMaxRecordBytes));
  }
  out->frame.resize(incl);
  if (incl != 0 && std::fread(out->frame.data(), 1, incl, f_) != incl) {
    return InvalidArgument(where + ": " + std::to_string(incl) + " captured bytes cut short");
  }
  out->ts_ns = uint64_t{sec} * 1'000'000'000 + (nanos_ ? frac : uint64_t{frac} * 1000);
  out->orig_len = orig;
  offset_ += sizeof(h) + incl;
  ++records_;
  return true;
}

Result<std::unique_ptr<PcapWriter>> PcapWriter::Create(const std::string& path) {
  std::unique_ptr<PcapWriter> w(new PcapWriter());
  w->path_ = path;
  w->f_ = std::fopen(path.c_str(), "wb");
  if (w->f_ == nullptr) return Unavailable(path + ": " + std::strerror(errno));
  uint8_t h[24] = {};
  Put32(h, kMagicNanos);
  Put16(h + 4, 2);
  Put16(h + 6, 4);
  Put32(h + 16, kWriteSnaplen);
  Put32(h + 20, kPcapLinkEthernet);
  if (std::fwrite(h, 1, sizeof(h), w->f_) != sizeof(h)) {
    return Unavailable(path + ": " + std::strerror(errno));
  }
  return w;
}

PcapWriter::~PcapWriter() {
  if (f_ != nullptr) std::fclose(f_);
}

Status PcapWriter::Write(std::span<const uint8_t> frame, uint64_t ts_ns) {
  uint8_t h[16];
  Put32(h, static_cast<uint32_t>(ts_ns / 1'000'000'000));
  Put32(h + 4, static_cast<uint32_t>(ts_ns % 1'000'000'000));
  Put32(h + 8, static_cast<uint32_t>(frame.size()));
  Put32(h + 12, static_cast<uint32_t>(frame.size()));
  if (std::fwrite(h, 1, sizeof(h), f_) != sizeof(h) ||
      (!frame.empty() && std::fwrite(frame.data(), 1, frame.size(), f_) != frame.size())) {
    return Unavailable(path_ + ": " + std::strerror(errno));
  }
  ++records_;
  return Status::Ok();
}

Status PcapWriter::Flush() {
  if (std::fflush(f_) != 0) return Unavailable(path_ + ": " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace ina::net
