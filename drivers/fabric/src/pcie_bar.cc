// PCIe BAR register access: mmap of a sysfs resourceN file; 32-bit volatile loads and stores.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "ina/drv/regs.h"

namespace ina::drv {
namespace {

class PcieBarAccess final : public RegisterAccess {
 public:
  PcieBarAccess(void* base, size_t size)
      : base_(static_cast<volatile uint8_t*>(base)), size_(size) {}
  ~PcieBarAccess() override { munmap(const_cast<uint8_t*>(base_), size_); }
  PcieBarAccess(const PcieBarAccess&) = delete;
  PcieBarAccess& operator=(const PcieBarAccess&) = delete;

  Result<uint32_t> Read32(uint32_t addr) override {
    INA_RETURN_IF_ERROR(Check(addr));
    return *reinterpret_cast<volatile uint32_t*>(base_ + addr);
  }
  Status Write32(uint32_t addr, uint32_t v) override {
    INA_RETURN_IF_ERROR(Check(addr));
    *reinterpret_cast<volatile uint32_t*>(base_ + addr) = v;
    return Status::Ok();
  }

 private:
  Status Check(uint32_t addr) const {
    if (addr % 4 != 0 || size_t{addr} + 4 > size_) {
      return InvalidArgument("pcie bar: address 0x" + std::to_string(addr) + " outside window");
    }
    return Status::Ok();
  }

  volatile uint8_t* base_;
  size_t size_;
};

}  // namespace

Result<std::unique_ptr<RegisterAccess>> MakePcieBarAccess(const std::string& resource_path,
                                                          size_t size) {
  if (size == 0) return InvalidArgument("pcie bar: size 0");
  int fd = open(resource_path.c_str(), O_RDWR | O_SYNC | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("pcie bar: open " + resource_path, errno);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return ErrnoStatus("pcie bar: fstat " + resource_path, err);
  }
  if (S_ISREG(st.st_mode) && static_cast<size_t>(st.st_size) < size) {
    close(fd);
    return InvalidArgument("pcie bar: " + resource_path + " is smaller than " +
                           std::to_string(size) + " bytes");
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (p == MAP_FAILED) return ErrnoStatus("pcie bar: mmap " + resource_path, err);
  return std::unique_ptr<RegisterAccess>(new PcieBarAccess(p, size));
}

}  // namespace ina::drv
