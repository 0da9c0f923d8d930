#include "core/kv/disk_tier.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "tests/common/kv_blocks.h"
#include "tests/common/scratch_dir.h"

namespace tsr {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr uint64_t kBlockBytes = 256;
constexpr const char* kIdentity = "test model; f16";

BlockHash hash_of(uint64_t i) { return BlockHash{i * 0x9e3779b97f4a7c15ull, ~i}; }

std::shared_ptr<KvBlockArena> arena() { return testing::heap_arena(kBlockBytes); }

KvBlockBytes block_of(uint8_t seed) {
  std::vector<uint8_t> bytes(kBlockBytes);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(seed + i * 7);
  return testing::block_with(*arena(), bytes);
}

// The loads of the tier until each of `n` reads has finished.
std::vector<std::pair<BlockHash, KvBlockBytes>> wait_loads(KvDiskTier& tier, size_t n) {
  std::vector<std::pair<BlockHash, KvBlockBytes>> all;
  for (int i = 0; i < 1000 && all.size() < n; ++i) {
    tier.wait_loaded(10ms);
    for (auto& l : tier.take_loaded()) all.push_back(std::move(l));
  }
  return all;
}

std::vector<fs::path> block_files(const std::string& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  return files;
}

class KvDiskTierTest : public ::testing::Test {
 protected:
  testing::ScratchDir scratch_{"tessera_disk_tier_test"};
  std::string root() const { return scratch_.path().string(); }
};

TEST_F(KvDiskTierTest, BlocksSurviveARestartAndComeBackVerified) {
  {
    KvDiskTier tier(root(), 1 << 20, arena(), kIdentity);
    tier.store(hash_of(1), block_of(1));
    tier.store(hash_of(2), block_of(2));
    tier.flush();
    EXPECT_EQ(tier.num_blocks(), 2u);
    EXPECT_EQ(tier.stats().written, 2u);
  }
  KvDiskTier restarted(root(), 1 << 20, arena(), kIdentity);
  EXPECT_EQ(restarted.num_blocks(), 2u);
  ASSERT_TRUE(restarted.load(hash_of(2)));
  EXPECT_FALSE(restarted.load(hash_of(3)));  // never stored
  const auto loads = wait_loads(restarted, 1);
  ASSERT_EQ(loads.size(), 1u);
  EXPECT_EQ(loads[0].first, hash_of(2));
  ASSERT_NE(loads[0].second, nullptr);
  EXPECT_EQ(testing::contents(loads[0].second), testing::contents(block_of(2)));
  EXPECT_EQ(restarted.stats().loaded, 1u);
}

TEST_F(KvDiskTierTest, ACorruptedFileIsDeletedNotServed) {
  std::string dir;
  {
    KvDiskTier tier(root(), 1 << 20, arena(), kIdentity);
    tier.store(hash_of(1), block_of(1));
    tier.flush();
    dir = tier.directory();
  }
  const fs::path file = block_files(dir).at(0);
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(64 + 100);
    f.put('\x5a');  // one byte of the payload
  }
  KvDiskTier tier(root(), 1 << 20, arena(), kIdentity);
  ASSERT_EQ(tier.num_blocks(), 1u);  // the header is intact: found at start
  ASSERT_TRUE(tier.load(hash_of(1)));
  const auto loads = wait_loads(tier, 1);
  ASSERT_EQ(loads.size(), 1u);
  EXPECT_EQ(loads[0].second, nullptr);  // the checksum failed
  EXPECT_FALSE(tier.contains(hash_of(1)));
  EXPECT_FALSE(fs::exists(file));
  EXPECT_EQ(tier.stats().rejected, 1u);
}

TEST_F(KvDiskTierTest, TruncatedUnfinishedAndForeignFilesAreCleanedAtStart) {
  std::string dir;
  {
    KvDiskTier tier(root(), 1 << 20, arena(), kIdentity);
    tier.store(hash_of(1), block_of(1));
    tier.store(hash_of(2), block_of(2));
    tier.flush();
    dir = tier.directory();
  }
  const auto files = block_files(dir);
  ASSERT_EQ(files.size(), 2u);
  fs::resize_file(files[0], 64 + kBlockBytes / 2);
  std::ofstream(fs::path(dir) / ".0123.kvb.tmp") << "partial";
  // A file renamed to another block's name: its header names the block it holds.
  const BlockHash other = hash_of(9);
  fs::copy_file(files[1], fs::path(dir) / fmt::format("{:016x}{:016x}.kvb", other.hi, other.lo));
  KvDiskTier tier(root(), 1 << 20, arena(), kIdentity);
  EXPECT_EQ(tier.num_blocks(), 1u);
  EXPECT_EQ(tier.stats().rejected, 2u);
  EXPECT_EQ(block_files(dir).size(), 1u);
  EXPECT_FALSE(tier.contains(other));
}

TEST_F(KvDiskTierTest, StaysWithinItsBoundAcrossRestarts) {
  const uint64_t two_files = 2 * kv_disk_file_bytes(kBlockBytes);
  {
    KvDiskTier tier(root(), two_files, arena(), kIdentity);
    ASSERT_EQ(tier.capacity_blocks(), 2u);
    for (uint64_t i = 1; i <= 3; ++i) {
      tier.store(hash_of(i), block_of(uint8_t(i)));
      tier.flush();
    }
    EXPECT_EQ(tier.num_blocks(), 2u);
    EXPECT_FALSE(tier.contains(hash_of(1)));  // the oldest
    EXPECT_EQ(block_files(tier.directory()).size(), 2u);
  }
  KvDiskTier smaller(root(), kv_disk_file_bytes(kBlockBytes), arena(), kIdentity);
  EXPECT_EQ(smaller.num_blocks(), 1u);
  EXPECT_EQ(block_files(smaller.directory()).size(), 1u);
}

TEST_F(KvDiskTierTest, AnotherIdentityNeverSeesTheFiles) {
  {
    KvDiskTier tier(root(), 1 << 20, arena(), kIdentity);
    tier.store(hash_of(1), block_of(1));
    tier.flush();
  }
  KvDiskTier other(root(), 1 << 20, arena(), "another model; f16");
  EXPECT_EQ(other.num_blocks(), 0u);
  EXPECT_FALSE(other.load(hash_of(1)));
}

TEST_F(KvDiskTierTest, BadSettingsAreRefusedNamingThem) {
  try {
    KvDiskTier tier(root(), 10, arena(), kIdentity);
    FAIL() << "a bound smaller than one block file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[cache] disk_memory"), std::string::npos) << e.what();
  }
  const fs::path file = scratch_.path() / "a_file";
  std::ofstream(file) << "x";
  try {
    KvDiskTier tier((file / "kv").string(), 1 << 20, arena(), kIdentity);
    FAIL() << "a directory under a file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a_file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tsr
