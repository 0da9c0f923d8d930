// llama.cpp's own quantizer as the oracle of `tessera quantize --imatrix`: calls
// llama_model_quantize in the libllama of node-llama-cpp 3.21.1 (tests/npm), loaded with
// dlopen, with the importance matrix read through ggml's GGUF reader and normalized as
// llama-quantize's load_imatrix does (sums / count per expert, 1 for an unreached expert).
//   llama_quantize_ref BIN_DIR IN OUT FTYPE PURE(0|1) IMATRIX.gguf
// BIN_DIR holds libllama.v0.4.0.so and libggml-base.so; FTYPE is a llama_ftype number.
// Exits 0 when llama.cpp wrote OUT; prints why not otherwise.
#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

// llama.h of the pinned llama.cpp (node-llama-cpp 3.21.1): the fields this tool sets.
struct ImatrixData {
  const char* name;
  const float* data;
  size_t size;
};
struct QuantizeParams {
  int32_t nthread;
  int ftype, output_tensor_type, token_embedding_type;
  bool allow_requantize, quantize_output_tensor, only_copy, pure, keep_split, dry_run;
  const ImatrixData* imatrix;
  const void* kv_overrides;
  const void* tt_overrides;
  const int32_t* prune_layers;
  size_t max_buf_size;
};
// Room for fields a later minor may append: the library writes its struct into this.
struct PaddedParams {
  QuantizeParams p;
  char reserve[256];
};
struct GgufInitParams {
  bool no_alloc;
  void** ctx;
};

template <class Fn>
Fn sym(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (p == nullptr) {
    std::fprintf(stderr, "llama_quantize_ref: %s is missing: %s\n", name, dlerror());
    std::exit(2);
  }
  return reinterpret_cast<Fn>(p);
}

bool strip(std::string& s, const std::string& suffix) {
  if (s.size() <= suffix.size() || s.compare(s.size() - suffix.size(), suffix.size(), suffix) != 0) return false;
  s.resize(s.size() - suffix.size());
  return true;
}

// name -> importances, as llama-quantize computes them from a GGUF imatrix.
std::map<std::string, std::vector<float>> read_imatrix(void* ggml, const char* path) {
  auto init = sym<void* (*)(const char*, GgufInitParams)>(ggml, "gguf_init_from_file");
  auto first = sym<void* (*)(const void*)>(ggml, "ggml_get_first_tensor");
  auto next = sym<void* (*)(const void*, void*)>(ggml, "ggml_get_next_tensor");
  auto name_of = sym<const char* (*)(const void*)>(ggml, "ggml_get_name");
  auto count = sym<int64_t (*)(const void*)>(ggml, "ggml_nelements");
  auto data = sym<float* (*)(const void*)>(ggml, "ggml_get_data_f32");
  void* ctx = nullptr;
  if (init(path, GgufInitParams{false, &ctx}) == nullptr) {
    std::fprintf(stderr, "llama_quantize_ref: ggml cannot read %s\n", path);
    std::exit(2);
  }
  std::map<std::string, std::pair<const void*, const void*>> sums_counts;
  for (void* t = first(ctx); t != nullptr; t = next(ctx, t)) {
    std::string n = name_of(t);
    if (strip(n, ".in_sum2")) sums_counts[n].first = t;
    if (strip(n, ".counts")) sums_counts[n].second = t;
  }
  std::map<std::string, std::vector<float>> out;
  for (const auto& [n, sc] : sums_counts) {
    const int64_t nval = count(sc.first), ncounts = count(sc.second), ne0 = nval / ncounts;
    const float* s = data(sc.first);
    const float* c = data(sc.second);
    std::vector<float>& e = out[n];
    e.resize(size_t(nval));
    for (int64_t j = 0; j < ncounts; ++j) {
      const auto n_tokens = float(std::lround(c[j]));
      for (int64_t i = 0; i < ne0; ++i) e[size_t(j * ne0 + i)] = n_tokens > 0.0f ? s[j * ne0 + i] / n_tokens : 1.0f;
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: llama_quantize_ref BIN_DIR IN OUT FTYPE PURE IMATRIX.gguf\n");
    return 2;
  }
  const std::string dir = argv[1];
  void* ggml = dlopen((dir + "/libggml-base.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
  void* llama = dlopen((dir + "/libllama.v0.4.0.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (ggml == nullptr || llama == nullptr) {
    std::fprintf(stderr, "llama_quantize_ref: %s\n", dlerror());
    return 2;
  }
  const std::map<std::string, std::vector<float>> imatrix = read_imatrix(ggml, argv[6]);
  std::vector<ImatrixData> entries;
  for (const auto& [n, v] : imatrix) entries.push_back({n.c_str(), v.data(), v.size()});
  entries.push_back({nullptr, nullptr, 0});
  PaddedParams params{};
  params = sym<PaddedParams (*)()>(llama, "llama_model_quantize_default_params")();
  params.p.nthread = 1;
  params.p.ftype = std::atoi(argv[4]);
  params.p.pure = std::atoi(argv[5]) != 0;
  params.p.imatrix = entries.data();
  sym<void (*)()>(llama, "llama_backend_init")();
  const uint32_t rc = sym<uint32_t (*)(const char*, const char*, const QuantizeParams*)>(llama, "llama_model_quantize")(
      argv[2], argv[3], &params.p);
  if (rc != 0) std::fprintf(stderr, "llama_quantize_ref: llama_model_quantize returned %u\n", rc);
  return rc == 0 ? 0 : 1;
}
