// Built when libibverbs was not found: the verbs transport answers Unimplemented.
#include "verbs/verbs_transport.h"

namespace ina::host::verbs {

const bool kBuilt = false;

Result<std::unique_ptr<VerbsTransport>> OpenVerbsTransport(const TransportConfig&) {
  return Unimplemented(
      "transport verbs: this build has no libibverbs (apt-get install libibverbs-dev, rebuild)");
}

}  // namespace ina::host::verbs
