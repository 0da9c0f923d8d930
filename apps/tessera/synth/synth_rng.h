// The random numbers of `tessera synth`: splitmix64 seeding a xoshiro256** stream, fast and
// the same numbers on every platform (std::normal_distribution is implementation-defined).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <numbers>

namespace tsr::app {

class SynthRng {
 public:
  explicit SynthRng(uint64_t seed) {
    for (uint64_t& w : s_) w = splitmix(seed);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }  // [0, 1)
  // Box-Muller, both outputs used.
  float normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2.0 * std::log(1.0 - uniform()));
    const double phi = 2.0 * std::numbers::pi * uniform();
    spare_ = static_cast<float>(r * std::sin(phi));
    has_spare_ = true;
    return static_cast<float>(r * std::cos(phi));
  }

 private:
  static uint64_t splitmix(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t next() {
    const uint64_t result = std::rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0], s_[3] ^= s_[1], s_[1] ^= s_[2], s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = std::rotl(s_[3], 45);
    return result;
  }
  uint64_t s_[4];
  float spare_ = 0;
  bool has_spare_ = false;
};

}  // namespace tsr::app
