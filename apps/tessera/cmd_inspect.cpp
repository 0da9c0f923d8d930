// `tessera inspect MODEL`: what a GGUF file holds, without loading any weights.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "apps/tessera/commands.h"
#include "base/error.h"
#include "core/kv/kv_cache.h"
#include "core/model/gguf.h"
#include "core/model/llama_model.h"

namespace tsr::app {

namespace {

// "uint32", "array[string]", "array[array[int32]]" (nested element types from the first element).
std::string type_label(const GgufValue& v) {
  if (v.type != GgufType::ARRAY) return gguf_type_name(v.type);
  const std::string element = v.array_type == GgufType::ARRAY && !v.array.empty()
                                  ? type_label(v.array.front())
                                  : gguf_type_name(v.array_type);
  return "array[" + element + "]";
}

void print_header(const GgufFile& f) {
  fmt::print("file:      {}\n", f.path());
  fmt::print("version:   {}\n", f.version());
  fmt::print("alignment: {}\n", f.alignment());
  fmt::print("size:      {} bytes\n", f.file_size());
}

void print_metadata(const GgufFile& f, bool full_arrays) {
  const size_t max_items = full_arrays ? std::numeric_limits<size_t>::max() : 8;
  size_t key_width = 3;
  size_t type_width = 4;
  for (const GgufKv& kv : f.metadata()) {
    key_width = std::max(key_width, kv.key.size());
    type_width = std::max(type_width, type_label(kv.value).size());
  }
  fmt::print("\nmetadata ({} keys):\n", f.metadata().size());
  fmt::print("  {:<{}}  {:<{}}  {}\n", "key", key_width, "type", type_width, "value");
  for (const GgufKv& kv : f.metadata()) {
    fmt::print("  {:<{}}  {:<{}}  {}\n", kv.key, key_width, type_label(kv.value), type_width,
               gguf_value_to_string(kv.value, max_items));
  }
}

std::string shape(const GgufTensorInfo& t) {
  return fmt::format("[{}]", fmt::join(t.ne, ", "));
}

void print_tensors(const GgufFile& f) {
  size_t name_width = 4;
  size_t shape_width = 5;
  for (const GgufTensorInfo& t : f.tensors()) {
    name_width = std::max(name_width, t.name.size());
    shape_width = std::max(shape_width, shape(t).size());
  }
  fmt::print("\ntensors ({}):\n", f.tensors().size());
  fmt::print("  {:<{}}  {:<5}  {:<{}}  {:>12}  {:>12}\n", "name", name_width, "type", "shape",
             shape_width, "bytes", "offset");
  uint64_t parameters = 0;
  uint64_t bytes = 0;
  for (const GgufTensorInfo& t : f.tensors()) {
    // The reader refuses unknown types, so every tensor's type has traits.
    const char* type = ggml_type_traits(static_cast<uint32_t>(t.type))->name;
    fmt::print("  {:<{}}  {:<5}  {:<{}}  {:>12}  {:>12}\n", t.name, name_width, type, shape(t),
               shape_width, t.nbytes, t.offset);
    parameters += static_cast<uint64_t>(t.nelements);
    bytes += t.nbytes;
  }
  fmt::print("\ntotal: {} tensors, {} parameters, {} bytes of tensor data\n", f.tensors().size(),
             parameters, bytes);
}

// The KV cache a token costs in each dtype ([cache] dtype, -ctk / -ctv), for files whose
// architecture Tessera runs (others print none).
void print_kv_bytes(const GgufFile& f) {
  LlamaHParams hp;
  try {
    hp = llama_hparams_from_gguf(f);
  } catch (const Error&) {
    return;
  }
  fmt::print("\nKV cache per token ({} layers x {} kv heads x {} dims, K and V):\n", hp.n_layer, hp.n_head_kv,
             hp.head_dim);
  for (const std::string_view name : kKvDtypeNames) {
    std::optional<KvFormat> format;
    try {
      format = kv_format_resolve(name, name, "none", hp.head_dim);
    } catch (const Error&) {
      fmt::print("  {:<8}  (heads of {} elements are not whole blocks of 32)\n", name, hp.head_dim);
      continue;
    }
    KvCacheShape shape{hp.n_layer, hp.n_head_kv, hp.head_dim, 16, 0, *format};
    shape.v_in_k = hp.mla();
    const uint64_t per_token = shape.bytes_per_token();
    fmt::print("  {:<8}  {:>9} bytes  ({:.1f} MiB for the trained context of {})\n", name, per_token,
               double(per_token) * hp.n_ctx_train / (1 << 20), hp.n_ctx_train);
  }
}

}  // namespace

int cmd_inspect(const std::string& model_path, bool full_arrays) {
  try {
    const std::unique_ptr<GgufFile> f = GgufFile::open(model_path);
    print_header(*f);
    print_metadata(*f, full_arrays);
    print_tensors(*f);
    print_kv_bytes(*f);
    return 0;
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

}  // namespace tsr::app
