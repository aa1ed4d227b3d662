// Register access to an ina hardware fabric: the one interface the control plane uses to program
// the job table and read counters (map: proto/ina.toml [[register]], ina::proto::reg).
//
// Backends (peers behind this interface, chosen by factory):
//   - PCIe BAR: mmap of a sysfs resource file (MakePcieBarAccess below).
//   - Verilator simulation of rtl/top/ina_core.sv: ina/sim/core_sim.h.
//
// Addresses are byte addresses, 32-bit aligned. Threading: one caller at a time; calls block only
// as long as one bus access (simulation: a few clock cycles).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ina/base/status.h"

namespace ina::drv {

class RegisterAccess {
 public:
  virtual ~RegisterAccess() = default;
  // Errors: InvalidArgument (unaligned or outside the window), Unavailable (device gone).
  virtual Result<uint32_t> Read32(uint32_t addr) = 0;
  virtual Status Write32(uint32_t addr, uint32_t v) = 0;
};

// Maps `size` bytes of a PCIe BAR through its sysfs resource file, e.g.
// /sys/bus/pci/devices/0000:03:00.0/resource0. Errors: NotFound / FailedPrecondition (open or mmap
// failed, with errno text), InvalidArgument (size 0 or larger than the file).
Result<std::unique_ptr<RegisterAccess>> MakePcieBarAccess(const std::string& resource_path,
                                                          size_t size);

}  // namespace ina::drv
