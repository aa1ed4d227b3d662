// Private to ina::sec (sec.h): AES-128-GCM of ina's own for the long-lived sealers and openers,
// beside libcrypto's. OpenSSL 3.0 spends most of a tagged packet's time in its per-call dispatch
// (docs/benchmarks.md, "Authenticated jobs"); a packet here is one AES block for the tag mask, the
// GHASH of its bytes four blocks per reduction, and in mac_encrypt four counter blocks per AES
// round. The same message layout as sec.cc's libcrypto path: associated data the header (retx
// cleared) and, in mac, the payload; in mac_encrypt the payload is the ciphertext.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "ina/base/variants.h"
#include "ina/proto/sec.h"

namespace ina::proto::internal {

// An expanded AES-128 key and the GHASH key's powers (byte-reversed, gcm_x86.h): H^1 .. H^16, and
// the same from H^16 down to H^1 followed by 16 zero blocks, so that the powers of any last k <= 16
// blocks (H^k .. H^1) are one contiguous run of it, at 16 - k.
struct alignas(64) GcmKey {
  uint8_t round_keys[11 * 16];
  uint8_t h_powers[16 * 16];
  uint8_t h_descending[32 * 16];
};

struct GcmVariant {
  const char* name;
  void (*init)(GcmKey* out, const TrafficKey& key);
  // MessageSealer::Seal's and MessageOpener::Open's contracts (sec.h).
  void (*seal)(const GcmKey& key, SecMode mode, uint8_t* msg, size_t len, const Nonce& nonce);
  bool (*open)(const GcmKey& key, SecMode mode, std::span<const uint8_t> msg, const Nonce& nonce,
               uint8_t* plain);
};

// This build's and this CPU's variants, best first (x86-64: VAES and VPCLMULQDQ on AVX-512, then
// AES-NI and PCLMULQDQ); empty where none runs. libcrypto, the twin every test compares them
// with, is not in the list.
using GcmVariantList = base::VariantList<GcmVariant>;
GcmVariantList GcmVariants();

}  // namespace ina::proto::internal
