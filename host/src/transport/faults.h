// TransportFaults -> ina::net::FaultConfig (private to the transports).
#pragma once

#include "ina/host/transport.h"
#include "ina/net/fault.h"

namespace ina::host {

inline net::FaultConfig ToFaultConfig(const TransportFaults& f) {
  net::FaultConfig c;
  c.drop = f.drop;
  c.dup = f.dup;
  c.reorder = f.reorder;
  c.corrupt = f.corrupt;
  c.seed = f.seed;
  return c;
}

}  // namespace ina::host
