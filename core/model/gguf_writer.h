// GGUF writer (version 3): metadata of every type and tensors in any ggml type.
// Used by `tessera synth`/`quantize` and by tests that need small model files.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/model/gguf.h"

namespace tsr {

class GgufWriter {
 public:
  GgufWriter();
  ~GgufWriter();

  void set_alignment(uint32_t alignment);  // also written as general.alignment if != 32
  void add(std::string key, GgufValue value);  // any type, including nested arrays
  void add_string(std::string key, std::string v);
  void add_u32(std::string key, uint32_t v);
  void add_i32(std::string key, int32_t v);
  void add_f32(std::string key, float v);
  void add_bool(std::string key, bool v);
  void add_string_array(std::string key, const std::vector<std::string>& v);
  void add_f32_array(std::string key, const std::vector<float>& v);
  void add_i32_array(std::string key, const std::vector<int32_t>& v);

  // `ne` in GGUF order (ne[0] innermost); `data` must hold exactly the tensor's bytes.
  void add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne,
                  std::span<const uint8_t> data);

  std::vector<uint8_t> to_bytes() const;
  void write(const std::string& path) const;  // throws tsr::Error on I/O failure

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tsr
