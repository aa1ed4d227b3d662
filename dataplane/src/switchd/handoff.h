// Packets handed between the cores of a DPDK switch (ina-switchd --cores N with DPDK ports,
// docs/switchd.md "Several cores"). A port belongs to one core, a job to another (job % N): the
// core that receives a packet of a job it does not own pushes it to the owner, and the owner
// pushes what it sends through a port it does not own to that port's core.
//
// PacketRing: one producer thread, one consumer thread, fixed capacity, no locks: the producer
// writes an entry and then publishes the tail (release), the consumer reads the tail (acquire),
// uses entries in place and then publishes the head (release). Full: Push returns false (the
// caller counts a drop; ina's loss recovery resends). Memory: allocated at construction.
// Handoff: the rings of N cores, one per ordered pair (from, to) of distinct cores and direction,
// sized to about 64 MiB in all; an entry holds the largest ina packet (8 KiB at K=2048), so 1024
// entries each at 2 cores, 64 (two bursts) from 8 cores up.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "ina/net/port.h"
#include "ina/proto/wire.h"

namespace ina::dp::switchd {

class PacketRing {
 public:
  struct Entry {
    net::Endpoint peer;  // received: the sender (with its MAC and global port); sent: the receiver
    uint32_t len = 0;
    uint32_t flags = 0;  // sent: net::TxPacket::flags
    uint8_t data[proto::kMaxPacketBytes];
  };

  // capacity: a power of two.
  explicit PacketRing(size_t capacity) : mask_(capacity - 1), entries_(capacity) {}

  // Producer: copies one packet in; false (nothing written) when the ring is full or the packet
  // is longer than an ina packet can be.
  bool Push(std::span<const uint8_t> data, const net::Endpoint& peer, uint32_t flags) {
    const size_t tail = tail_.load(std::memory_order_relaxed);
    if (tail - head_.load(std::memory_order_acquire) > mask_) return false;
    if (data.size() > sizeof(Entry::data)) return false;
    Entry& e = entries_[tail & mask_];
    e.peer = peer;
    e.len = static_cast<uint32_t>(data.size());
    e.flags = flags;
    std::memcpy(e.data, data.data(), data.size());
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }

  // Consumer: the number of entries ready, Peek(i) the i-th of them (i < Ready()), then Pop(n)
  // once they are no longer read.
  size_t Ready() const {
    return tail_.load(std::memory_order_acquire) - head_.load(std::memory_order_relaxed);
  }
  const Entry& Peek(size_t i) const {
    return entries_[(head_.load(std::memory_order_relaxed) + i) & mask_];
  }
  void Pop(size_t n) {
    head_.store(head_.load(std::memory_order_relaxed) + n, std::memory_order_release);
  }

 private:
  static constexpr size_t kCacheLine = 64;  // head and tail on lines of their own
  const size_t mask_;
  std::vector<Entry> entries_;
  alignas(kCacheLine) std::atomic<size_t> head_{0};
  alignas(kCacheLine) std::atomic<size_t> tail_{0};
};

class Handoff {
 public:
  // Rings of kMinEntries .. kMaxEntries (a power of two) within about kBudgetBytes for them all.
  static constexpr size_t kMinEntries = 64, kMaxEntries = 4096;
  static constexpr size_t kBudgetBytes = size_t{64} << 20;

  explicit Handoff(unsigned cores) : cores_(cores), rings_(2 * size_t{cores} * cores) {
    const size_t n_rings = 2 * size_t{cores} * (cores - 1);
    size_t entries = kMaxEntries;
    while (entries > kMinEntries && entries * sizeof(PacketRing::Entry) * n_rings > kBudgetBytes) {
      entries /= 2;
    }
    for (unsigned from = 0; from < cores; ++from) {
      for (unsigned to = 0; to < cores; ++to) {
        if (from == to) continue;  // a core keeps its own packets
        rings_[Rx(from, to)] = std::make_unique<PacketRing>(entries);
        rings_[Tx(from, to)] = std::make_unique<PacketRing>(entries);
      }
    }
    entries_ = entries;
  }
  unsigned cores() const { return cores_; }
  size_t entries() const { return entries_; }
  // Received packets from core `from` for the jobs of core `to` (from != to).
  PacketRing& rx(unsigned from, unsigned to) { return *rings_[Rx(from, to)]; }
  // Packets core `from` sends through a port of core `to` (from != to).
  PacketRing& tx(unsigned from, unsigned to) { return *rings_[Tx(from, to)]; }
  // True when any ring into core `to` has entries.
  bool Pending(unsigned to) const {
    for (unsigned from = 0; from < cores_; ++from) {
      if (from == to) continue;
      if (rings_[Rx(from, to)]->Ready() != 0 || rings_[Tx(from, to)]->Ready() != 0) return true;
    }
    return false;
  }

 private:
  size_t Rx(unsigned from, unsigned to) const { return size_t{from} * cores_ + to; }
  size_t Tx(unsigned from, unsigned to) const { return (size_t{cores_} + from) * cores_ + to; }

  unsigned cores_;
  size_t entries_ = 0;
  std::vector<std::unique_ptr<PacketRing>> rings_;  // null where from == to
};

}  // namespace ina::dp::switchd
