// Classic libpcap capture files (what tcpdump -w writes), read and written here: a 24-byte file
// header (magic, version 2.4, snaplen, link type) and per record a 16-byte header (seconds,
// micro- or nanoseconds, captured length, original length) and the captured bytes.
//
// Read: either byte order, microsecond (0xa1b2c3d4) or nanosecond (0xa1b23c4d) timestamps, link
// type Ethernet (1) only. Write: host byte order, nanosecond timestamps, Ethernet, snaplen 65535.
// pcapng (tcpdump's default on some systems: write with `tcpdump -w FILE -F pcap`) is refused
// with an error that says so.
// Errors name the file and what is wrong: a short file header, an unknown magic, another link
// type, a record longer than the snaplen or kMaxRecordBytes, a record cut short (with its number
// and byte offset).
//
// Threading: one thread per reader / writer. Memory: a reader reuses its record buffer.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ina/base/status.h"

namespace ina::net {

inline constexpr uint32_t kPcapLinkEthernet = 1;
inline constexpr uint32_t kMaxRecordBytes = 256 * 1024;

struct PcapRecord {
  uint64_t ts_ns = 0;          // capture time, ns since the epoch
  uint32_t orig_len = 0;       // the frame's length on the wire (>= frame.size())
  std::vector<uint8_t> frame;  // the captured bytes (from the Ethernet header)
};

class PcapReader {
 public:
  // Opens path and checks its file header.
  static Result<std::unique_ptr<PcapReader>> Open(const std::string& path);
  ~PcapReader();
  PcapReader(const PcapReader&) = delete;
  PcapReader& operator=(const PcapReader&) = delete;

  // The next record into *out: true, or false at the end of the file. InvalidArgument for a
  // record that is cut short or longer than allowed.
  Result<bool> Next(PcapRecord* out);
  uint64_t records() const { return records_; }  // records read so far

 private:
  PcapReader() = default;
  std::string path_;
  std::FILE* f_ = nullptr;
  bool swap_ = false;
  bool nanos_ = false;
  uint32_t snaplen_ = 0;
  uint64_t records_ = 0;
  uint64_t offset_ = 0;
};

class PcapWriter {
 public:
  // Creates (truncates) path and writes the file header.
  static Result<std::unique_ptr<PcapWriter>> Create(const std::string& path);
  ~PcapWriter();  // flushes and closes
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;

  // Appends one frame (REQUIRES: frame.size() <= 65535). Errors: the OS's.
  Status Write(std::span<const uint8_t> frame, uint64_t ts_ns);
  Status Flush();
  uint64_t records() const { return records_; }

 private:
  PcapWriter() = default;
  std::string path_;
  std::FILE* f_ = nullptr;
  uint64_t records_ = 0;
};

}  // namespace ina::net
