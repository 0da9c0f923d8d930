#include "core/quant/imatrix.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "base/error.h"
#include "core/model/gguf.h"
#include "core/model/gguf_writer.h"

namespace tsr::quant {

namespace {

constexpr const char* kSumsSuffix = ".in_sum2";
constexpr const char* kCountsSuffix = ".counts";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void check_values(const std::string& path, const std::string& name, const std::vector<float>& v) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i]) || v[i] < 0) {
      throw Error(fmt::format("{}: imatrix entry {} value {} is {}: sums of squares are finite and non-negative", path,
                              name, i, v[i]));
    }
  }
}

std::vector<float> f32_tensor(const GgufFile& f, const GgufTensorInfo& t) {
  if (t.type != GgmlType::F32) throw Error(fmt::format("{}: imatrix tensor {} must be F32", f.path(), t.name));
  std::vector<float> v(static_cast<size_t>(t.nelements));
  std::memcpy(v.data(), f.tensor_data(t), v.size() * sizeof(float));
  return v;
}

Imatrix read_gguf(const std::string& path) {
  const auto f = GgufFile::open(path);
  Imatrix m;
  const auto datasets = f->get_string_array("imatrix.datasets");
  const auto chunk_count = f->get_u32("imatrix.chunk_count");
  const auto chunk_size = f->get_u32("imatrix.chunk_size");
  if (!datasets || !chunk_count || !chunk_size) {
    throw Error(path + ": not an importance matrix (imatrix.datasets, imatrix.chunk_count or imatrix.chunk_size is missing)");
  }
  m.datasets = *datasets;
  m.chunk_count = int32_t(*chunk_count);
  m.chunk_size = int32_t(*chunk_size);
  for (const GgufTensorInfo& t : f->tensors()) {
    if (!ends_with(t.name, kSumsSuffix)) continue;
    const std::string name = t.name.substr(0, t.name.size() - std::strlen(kSumsSuffix));
    const GgufTensorInfo* c = f->find_tensor(name + kCountsSuffix);
    if (c == nullptr) throw Error(fmt::format("{}: imatrix entry {} has sums but no counts", path, name));
    ImatrixEntry e{f32_tensor(*f, t), {}};
    const std::vector<float> counts = f32_tensor(*f, *c);
    check_values(path, name, e.sums);
    check_values(path, name + kCountsSuffix, counts);
    if (counts.empty() || e.sums.empty() || e.sums.size() % counts.size() != 0) {
      throw Error(fmt::format("{}: imatrix entry {}: {} sums do not divide into {} experts", path, name, e.sums.size(),
                              counts.size()));
    }
    for (float n : counts) e.counts.push_back(std::lround(n));
    m.entries.emplace(name, std::move(e));
  }
  for (const GgufTensorInfo& t : f->tensors()) {
    if (ends_with(t.name, kCountsSuffix) &&
        m.entries.count(t.name.substr(0, t.name.size() - std::strlen(kCountsSuffix))) == 0) {
      throw Error(fmt::format("{}: imatrix tensor {} has no matching sums", path, t.name));
    }
  }
  if (m.entries.empty()) throw Error(path + ": the importance matrix has no entries");
  return m;
}

// The legacy format, read with every length checked against what is left of the file
// before anything is allocated.
class LegacyReader {
 public:
  explicit LegacyReader(const std::string& path) : path_(path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot open " + path);
    bytes_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  bool at_end() const { return pos_ == bytes_.size(); }
  int32_t i32(const char* what) {
    int32_t v;
    std::memcpy(&v, take(sizeof v, what), sizeof v);
    return v;
  }
  std::string str(int32_t len, const char* what) {
    if (len < 0) throw Error(fmt::format("{}: negative {} length", path_, what));
    return std::string(take(size_t(len), what), size_t(len));
  }
  std::vector<float> floats(int32_t n, const char* what) {
    if (n < 1) throw Error(fmt::format("{}: {} has {} values", path_, what, n));
    const auto count = static_cast<size_t>(n);
    const char* bytes = take(count * sizeof(float), what);  // checked before the allocation
    std::vector<float> v(count);
    std::memcpy(v.data(), bytes, count * sizeof(float));
    return v;
  }

 private:
  const char* take(size_t n, const char* what) {
    if (n > bytes_.size() - pos_) throw Error(fmt::format("{}: truncated importance matrix (reading {})", path_, what));
    pos_ += n;
    return bytes_.data() + pos_ - n;
  }
  std::string path_;
  std::vector<char> bytes_;
  size_t pos_ = 0;
};

Imatrix read_legacy(const std::string& path) {
  LegacyReader r(path);
  Imatrix m;
  m.legacy = true;
  const int32_t n = r.i32("the entry count");
  if (n < 1) throw Error(fmt::format("{}: an importance matrix with {} entries", path, n));
  for (int32_t i = 0; i < n; ++i) {
    std::string name = r.str(r.i32("a name length"), "a name");
    const int32_t ncall = r.i32("a call count");
    ImatrixEntry e{r.floats(r.i32("a value count"), "an entry"), {ncall}};
    check_values(path, name, e.sums);
    m.entries[std::move(name)] = std::move(e);
  }
  if (!r.at_end()) {
    m.chunk_count = r.i32("the chunk count");
    const int32_t len = r.i32("the dataset name length");
    if (len > 0) m.datasets.push_back(r.str(len, "the dataset name"));
  }
  return m;
}

bool is_gguf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + path);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace

Imatrix imatrix_read(const std::string& path) { return is_gguf(path) ? read_gguf(path) : read_legacy(path); }

void imatrix_write(const Imatrix& m, const std::string& path) {
  GgufWriter w;
  w.add_string("general.type", "imatrix");
  w.add_string_array("imatrix.datasets", m.datasets);
  w.add_u32("imatrix.chunk_count", uint32_t(m.chunk_count));
  w.add_u32("imatrix.chunk_size", uint32_t(m.chunk_size));
  for (const auto& [name, e] : m.entries) {  // std::map: name order
    const auto experts = int64_t(e.counts.size());
    std::vector<float> counts(e.counts.begin(), e.counts.end());
    const auto bytes = [](const std::vector<float>& v) {
      return std::span(reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float));
    };
    w.add_tensor(name + kSumsSuffix, GgmlType::F32, {int64_t(e.sums.size()) / experts, experts}, bytes(e.sums));
    w.add_tensor(name + kCountsSuffix, GgmlType::F32, {1, experts}, bytes(counts));
  }
  w.write(path);
}

std::map<std::string, std::vector<float>> imatrix_importances(const Imatrix& m) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, e] : m.entries) {
    std::vector<float>& v = out[name];
    v.resize(e.sums.size());
    if (m.legacy) {
      const int64_t ncall = e.counts.empty() ? 0 : e.counts[0];
      for (size_t i = 0; i < v.size(); ++i) v[i] = ncall > 0 ? e.sums[i] / float(ncall) : e.sums[i];
      continue;
    }
    const size_t ne0 = e.sums.size() / e.counts.size();
    for (size_t x = 0; x < e.counts.size(); ++x) {
      const auto count = float(e.counts[x]);
      for (size_t i = x * ne0; i < (x + 1) * ne0; ++i) v[i] = count > 0.0f ? e.sums[i] / count : 1.0f;
    }
  }
  return out;
}

Imatrix imatrix_from_calibration(const CalibrationStats& stats, std::vector<std::string> datasets,
                                 int32_t chunk_count, int32_t chunk_size) {
  Imatrix m;
  m.datasets = std::move(datasets);
  m.chunk_count = chunk_count;
  m.chunk_size = chunk_size;
  for (const auto& [name, s] : stats) {
    if (name.rfind("blk.", 0) != 0) continue;
    ImatrixEntry e{std::vector<float>(s->sq_sum.begin(), s->sq_sum.end()), {s->tokens}};
    if (!s->expert_tokens.empty()) e.counts = s->expert_tokens;  // a MoE weight: per expert
    m.entries.emplace(name, std::move(e));
  }
  return m;
}

}  // namespace tsr::quant
