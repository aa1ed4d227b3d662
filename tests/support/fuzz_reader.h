// Shared by the libFuzzer targets that turn their input into a sequence of decisions: FuzzReader
// hands out the input's bytes in order, and zeros once they run out (so a short input is a valid
// program whose remaining choices are all the first option).
#pragma once

#include <cstddef>
#include <cstdint>

class FuzzReader {
 public:
  FuzzReader(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  bool empty() const { return pos_ >= n_; }
  uint8_t Byte() { return pos_ < n_ ? d_[pos_++] : 0; }

 private:
  const uint8_t* d_;
  size_t n_;
  size_t pos_ = 0;
};
