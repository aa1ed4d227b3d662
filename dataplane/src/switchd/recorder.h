// ina-switchd --record (private to ina::switchd_loop): every datagram a core receives, before
// classification, as an Ethernet/IPv4/UDP frame in a pcap file (net/pcap.h) that ina-rtlsim
// --replay and the Wireshark dissector read. The frames' destination is the switch's own address.
//
// Threading: one core's thread (Record), then Close once the core has stopped. Errors: the first
// write error is printed to stderr, later ones are not (the switch goes on).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ina/base/status.h"
#include "ina/net/frame.h"
#include "ina/net/pcap.h"
#include "ina/net/port.h"

namespace ina::dp::switchd {

class Recorder {
 public:
  // Creates (truncates) `path`. local: the switch's address as its first port describes it
  // ("IP:PORT"; the frames' destination when it is IPv4). max_len: the longest datagram recorded.
  static Result<std::unique_ptr<Recorder>> Open(const std::string& path, const std::string& local,
                                                size_t max_len);

  // One received datagram into the capture (IPv4 peers; others, and datagrams longer than
  // max_len, are counted as skipped and reported by Close).
  void Record(const net::Packet& pk, const net::Endpoint& from);
  // Flushes and closes the capture, saying on stderr what it holds.
  void Close();

 private:
  Recorder() = default;
  std::string path_;
  size_t max_len_ = 0;
  std::unique_ptr<net::PcapWriter> writer_;
  net::FrameAddrs addrs_;
  std::vector<uint8_t> buf_;
  uint64_t skipped_ = 0, errors_ = 0;
};

}  // namespace ina::dp::switchd
