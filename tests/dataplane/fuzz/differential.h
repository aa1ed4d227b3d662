// The differential fuzz check: one input -> two small jobs installed in the reference engine and
// in the fast engine on every kernel set, then a stream of packets fed to all of them; after each
// packet the emitted results, counters and jobs ended (PollFailures) must agree.
//
// Input format: byte 0/1: world size of job 0/1 (1 + b % 8); byte 2: bit 0/1 = job 0/1 uses
// K=256 (else 64); byte 3: windows (1 + (b & 3), 1 + ((b >> 4) & 3)); job ids 0 and 1, slot bases
// 0 and 4 of an 8-slot pool. Then packets, each a 2-byte big-endian word and (word & 0x7FFF) %
// 1100 bytes (the last one truncated at the end of the input); with bit 15 of the word set the
// harness appends the bytes' CRC32C trailer (otherwise nearly every input would stop at
// drop_bad_crc). Byte 2 bits 2-3 / 4-5: job 0 / 1's sec mode ((b >> 2 & 3) % 3, (b >> 4 & 3) % 3:
// crc, mac, mac_encrypt; docs/security.md), with fixed test keys; for a packet of at least a
// header naming a keyed job, bit 15 appends the AES-GCM tag under that job's up key instead
// (nonce: the header's rank and slot, use = its gen), so the keyed rules past the tag run too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ina::dp::fuzz {

// Returns "" if every engine agreed on every packet, else a description of the first difference.
std::string DifferentialCheck(const uint8_t* data, size_t size);

}  // namespace ina::dp::fuzz
