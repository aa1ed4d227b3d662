#include "ina/proto/wire.h"

namespace ina::host {
// The protocol version libina speaks (also a symbol so the library is never empty).
int ProtocolVersion() { return ina::proto::kVersion; }
}  // namespace ina::host
