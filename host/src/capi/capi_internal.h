// The C API's conversions between ina.h's structs and the C++ ones, private to libina (the C API
// implementation and its tests use them; they are not exported from libina.so).
//
// Layouts: a C struct arrives with the struct_size its caller's ina.h gave it. kConfigLayouts /
// kStatsLayouts list every layout a release has had; a size not in the list is InvalidArgument.
#pragma once

#include <cstddef>
#include <span>

#include "ina/base/status.h"
#include "ina/host/communicator.h"
#include "ina/host/config.h"
#include "ina/ina.h"

namespace ina::host::capi {

// One released layout of a versioned C struct: `size` is sizeof() as that release declared it,
// `used` the bytes its fields occupy (size without tail padding, which a later release may fill).
struct Layout {
  size_t size;
  size_t used;
};

// The caller's *in (of in.struct_size bytes) as a CommConfig; fields the caller's layout lacks get
// CommConfig's defaults. InvalidArgument for an unknown struct_size or a string without its NUL.
Result<CommConfig> ConfigFromC(const ina_config& in);

// Writes every field of c into the first `struct_size` bytes of *out and sets out->struct_size.
// InvalidArgument for an unknown struct_size or a string longer than its array (then *out is
// partly written).
Status ConfigToC(const CommConfig& c, ina_config* out, size_t struct_size);

// The same against an explicit table of layouts (tests pretend to be an older caller with them).
Result<CommConfig> ConfigFromC(const ina_config& in, std::span<const Layout> layouts);
Status ConfigToC(const CommConfig& c, ina_config* out, size_t struct_size,
                 std::span<const Layout> layouts);

// The same for CommStats -> ina_stats.
Status StatsToC(const CommStats& s, ina_stats* out, size_t struct_size);

// The communicator behind a handle. REQUIRES: comm from ina_comm_create, not destroyed.
Communicator& CommunicatorOf(ina_comm* comm);

}  // namespace ina::host::capi
