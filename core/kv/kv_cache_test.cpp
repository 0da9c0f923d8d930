#include "core/kv/kv_cache.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "base/error.h"
#include "core/plugin_host/backend.h"
#include "core/plugin_host/plugin_loader.h"

namespace tsr {
namespace {

std::unique_ptr<Backend> cpu_backend() {
  return Backend::create(Plugin::find(TSR_PLUGIN_BACKEND, "cpu", {TESSERA_PLUGIN_DIR}), 0, 1);
}

KvCacheShape shape(bool v_in_k) {
  KvCacheShape s{2, 1, 40, 4, 3, KvFormat{}};
  s.v_in_k = v_in_k;
  return s;
}

// Latent attention's cache (deepseek2) stores one row per token and layer: V is K, and a
// block's bytes (what the host and disk tiers move) are K's alone.
TEST(KvCache, LatentRowsAreStoredOnce) {
  EXPECT_EQ(shape(false).bytes_per_token(), 2u * 2 * 40 * 4);
  EXPECT_EQ(shape(true).bytes_per_token(), 2u * 40 * 4);
  auto backend = cpu_backend();
  KvCache cache(*backend, shape(true));
  for (int l = 0; l < 2; ++l) EXPECT_EQ(cache.v(l).data, cache.k(l).data);
  EXPECT_EQ(cache.all_tensors().size(), 2u);  // copy_blocks copies each stored row once
  std::vector<uint8_t> bytes(shape(true).bytes_per_block());
  std::iota(bytes.begin(), bytes.end(), uint8_t{1});
  cache.write_block(*backend, 2, bytes);
  std::vector<uint8_t> back(bytes.size());
  cache.read_block(*backend, 2, back);
  backend->synchronize();
  EXPECT_EQ(back, bytes);
}

TEST(KvCache, LatentRowsTakeOneDtypeAndNoRotation) {
  auto backend = cpu_backend();
  KvCacheShape mixed = shape(true);
  mixed.format.v = TSR_DTYPE_F16;
  EXPECT_THROW(KvCache(*backend, mixed), Error);
}

}  // namespace
}  // namespace tsr
