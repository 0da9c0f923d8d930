#include "core/kv/disk_tier.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "base/error.h"

namespace tsr {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'T', 'S', 'R', 'K', 'V', 'B', 'L', 'K'};
constexpr uint32_t kVersion = 1;
// Writes queued beyond this are dropped: a slow disk must not grow the queue without bound.
constexpr uint64_t kMaxQueuedWriteBytes = 256ull << 20;

// The file header, little-endian as every machine the engine runs on.
struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint64_t hash_lo, hash_hi;
  uint64_t payload_bytes;
  uint64_t checksum;  // XXH3-64 of the payload
  uint64_t identity;  // XXH3-64 of the tier's identity string
  uint64_t reserved;
};
static_assert(sizeof(FileHeader) == 64);

std::string file_name(const BlockHash& h) { return fmt::format("{:016x}{:016x}.kvb", h.hi, h.lo); }

std::optional<BlockHash> parse_file_name(const std::string& name) {
  if (name.size() != 36 || !name.ends_with(".kvb")) return std::nullopt;
  if (name.find_first_not_of("0123456789abcdef") != 32) return std::nullopt;
  return BlockHash{std::stoull(name.substr(16, 16), nullptr, 16), std::stoull(name.substr(0, 16), nullptr, 16)};
}

bool header_valid(const FileHeader& h, const BlockHash& hash, uint64_t block_bytes, uint64_t identity) {
  return std::memcmp(h.magic, kMagic, sizeof(kMagic)) == 0 && h.version == kVersion &&
         h.header_bytes == sizeof(FileHeader) && h.hash_lo == hash.lo && h.hash_hi == hash.hi &&
         h.payload_bytes == block_bytes && h.identity == identity;
}

// Reads exactly `n` bytes at `offset`; false on a short read or an error.
bool read_exact(int fd, void* dst, size_t n, off_t offset) {
  auto* p = static_cast<uint8_t*>(dst);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, offset);
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
    offset += got;
  }
  return true;
}

bool write_all(int fd, const void* src, size_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  while (n > 0) {
    const ssize_t put = ::write(fd, p, n);
    if (put <= 0) return false;
    p += put;
    n -= static_cast<size_t>(put);
  }
  return true;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

uint64_t kv_disk_file_bytes(uint64_t block_bytes) { return sizeof(FileHeader) + block_bytes; }

struct KvDiskTier::Impl {
  struct Job {
    BlockHash hash;
    KvBlockBytes bytes;  // NULL: a read
  };

  fs::path dir;
  std::shared_ptr<KvBlockArena> arena;  // where read blocks go
  uint64_t block_bytes = 0, capacity = 0, identity = 0;

  mutable std::mutex mu;
  std::condition_variable work_cv, done_cv;
  std::list<BlockHash> lru;  // front: most recently written or read
  std::unordered_map<BlockHash, std::list<BlockHash>::iterator, BlockHashHasher> index;
  std::deque<Job> jobs;  // reads at the front, writes at the back
  std::unordered_set<BlockHash, BlockHashHasher> queued_writes, queued_reads;
  uint64_t queued_write_bytes = 0;
  int32_t busy = 0;
  std::vector<std::pair<BlockHash, KvBlockBytes>> loaded;
  KvDiskTierStats stats;
  bool stop = false;
  std::thread worker;

  fs::path path_of(const BlockHash& h) const { return dir / file_name(h); }

  // Indexes valid files found at start, newest first, deleting partial, malformed and
  // surplus ones.
  void scan() {
    struct Found {
      fs::file_time_type mtime;
      BlockHash hash;
    };
    std::vector<Found> found;
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.ends_with(".tmp")) {
        fs::remove(e.path(), ec);  // a write the last process did not finish
        continue;
      }
      const std::optional<BlockHash> hash = parse_file_name(name);
      if (!hash || !e.is_regular_file(ec)) continue;
      if (!file_header_valid(e.path(), *hash)) {
        fs::remove(e.path(), ec);
        ++stats.rejected;
        continue;
      }
      found.push_back({e.last_write_time(ec), *hash});
    }
    std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.mtime > b.mtime; });
    for (size_t i = 0; i < found.size(); ++i) {
      if (i >= capacity) {
        fs::remove(path_of(found[i].hash), ec);
        continue;
      }
      lru.push_back(found[i].hash);
      index.emplace(found[i].hash, std::prev(lru.end()));
    }
  }

  bool file_header_valid(const fs::path& path, const BlockHash& hash) const {
    std::error_code ec;
    if (fs::file_size(path, ec) != kv_disk_file_bytes(block_bytes) || ec) return false;
    const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    FileHeader h{};
    return fd.get() >= 0 && read_exact(fd.get(), &h, sizeof(h), 0) && header_valid(h, hash, block_bytes, identity);
  }

  // Whole file or nothing: written under a temporary name, then renamed.
  bool write_file(const BlockHash& hash, const KvHostBlock& bytes) const {
    FileHeader h{};
    std::memcpy(h.magic, kMagic, sizeof(kMagic));
    h.version = kVersion;
    h.header_bytes = sizeof(FileHeader);
    h.hash_lo = hash.lo;
    h.hash_hi = hash.hi;
    h.payload_bytes = bytes.size();
    h.checksum = XXH3_64bits(bytes.data(), bytes.size());
    h.identity = identity;
    const fs::path tmp = dir / ("." + file_name(hash) + ".tmp");
    bool ok = false;
    {
      const Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      ok = fd.get() >= 0 && write_all(fd.get(), &h, sizeof(h)) && write_all(fd.get(), bytes.data(), bytes.size());
    }
    std::error_code ec;
    if (ok) fs::rename(tmp, path_of(hash), ec);
    if (!ok || ec) {
      fs::remove(tmp, ec);
      return false;
    }
    return true;
  }

  // The block's bytes, verified against the header and the checksum; NULL otherwise.
  KvBlockBytes read_file(const BlockHash& hash) const {
    const fs::path path = path_of(hash);
    const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    FileHeader h{};
    if (fd.get() < 0 || !read_exact(fd.get(), &h, sizeof(h), 0) || !header_valid(h, hash, block_bytes, identity)) {
      return nullptr;
    }
    std::shared_ptr<KvHostBlock> bytes = arena->allocate();
    if (!read_exact(fd.get(), bytes->data(), bytes->size(), sizeof(h))) return nullptr;
    uint8_t extra = 0;
    if (read_exact(fd.get(), &extra, 1, off_t(sizeof(h) + block_bytes))) return nullptr;  // longer than written
    if (XXH3_64bits(bytes->data(), bytes->size()) != h.checksum) return nullptr;
    return bytes;
  }

  void touch(const BlockHash& h) {
    auto it = index.find(h);
    if (it != index.end()) lru.splice(lru.begin(), lru, it->second);
  }

  // Under `mu`: indexes a written block; returns the files to delete to stay in bounds.
  std::vector<BlockHash> add_locked(const BlockHash& h) {
    std::vector<BlockHash> victims;
    if (index.contains(h)) return victims;
    lru.push_front(h);
    index.emplace(h, lru.begin());
    while (index.size() > capacity) {
      victims.push_back(lru.back());
      index.erase(lru.back());
      lru.pop_back();
    }
    return victims;
  }

  void run_write(const Job& job) {
    const bool ok = write_file(job.hash, *job.bytes);
    std::vector<BlockHash> victims;
    {
      std::lock_guard lock(mu);
      queued_writes.erase(job.hash);
      queued_write_bytes -= job.bytes->size();
      if (ok) {
        ++stats.written;
        victims = add_locked(job.hash);
      }
    }
    if (!ok) spdlog::warn("KV disk tier: could not write a block under {}", dir.string());
    std::error_code ec;
    for (const BlockHash& v : victims) fs::remove(path_of(v), ec);
  }

  void run_read(const Job& job) {
    KvBlockBytes bytes = read_file(job.hash);
    std::error_code ec;
    if (bytes == nullptr) fs::remove(path_of(job.hash), ec);
    std::lock_guard lock(mu);
    queued_reads.erase(job.hash);
    if (bytes == nullptr) {
      ++stats.rejected;
      if (auto it = index.find(job.hash); it != index.end()) {
        lru.erase(it->second);
        index.erase(it);
      }
    } else {
      ++stats.loaded;
      touch(job.hash);
    }
    loaded.emplace_back(job.hash, std::move(bytes));
  }

  void loop() {
    std::unique_lock lock(mu);
    for (;;) {
      work_cv.wait(lock, [&] { return stop || !jobs.empty(); });
      if (jobs.empty()) return;  // stopping, every queued write done
      Job job = std::move(jobs.front());
      jobs.pop_front();
      ++busy;
      lock.unlock();
      if (job.bytes != nullptr) run_write(job);
      else run_read(job);
      lock.lock();
      --busy;
      done_cv.notify_all();
    }
  }
};

KvDiskTier::KvDiskTier(const std::string& dir, uint64_t capacity_bytes, std::shared_ptr<KvBlockArena> arena,
                       const std::string& identity)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  const uint64_t block_bytes = arena->block_bytes();
  m.arena = std::move(arena);
  m.identity = XXH3_64bits(identity.data(), identity.size());
  m.dir = fs::path(dir) / fmt::format("{:016x}", m.identity);
  m.block_bytes = block_bytes;
  m.capacity = capacity_bytes / kv_disk_file_bytes(block_bytes);
  if (block_bytes == 0 || m.capacity == 0) {
    throw Error(fmt::format("[cache] disk_memory = {} bytes holds no block file of {} bytes", capacity_bytes,
                            kv_disk_file_bytes(block_bytes)));
  }
  std::error_code ec;
  fs::create_directories(m.dir, ec);
  if (ec || !fs::is_directory(m.dir, ec)) {
    throw Error("[cache] disk_path: cannot create '" + m.dir.string() + "': " + ec.message(), TSR_STATUS_NOT_FOUND);
  }
  m.scan();
  spdlog::info("KV disk tier: {} of {} blocks found in {}{}", m.index.size(), m.capacity, m.dir.string(),
               m.stats.rejected > 0 ? fmt::format(" ({} malformed files deleted)", m.stats.rejected) : "");
  m.worker = std::thread([&m] { m.loop(); });
}

KvDiskTier::~KvDiskTier() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->work_cv.notify_all();
  impl_->worker.join();
}

std::string KvDiskTier::directory() const { return impl_->dir.string(); }

uint64_t KvDiskTier::capacity_blocks() const { return impl_->capacity; }

uint64_t KvDiskTier::num_blocks() const {
  std::lock_guard lock(impl_->mu);
  return impl_->index.size();
}

KvDiskTierStats KvDiskTier::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->stats;
}

bool KvDiskTier::contains(const BlockHash& h) const {
  std::lock_guard lock(impl_->mu);
  return impl_->index.contains(h);
}

void KvDiskTier::store(const BlockHash& h, KvBlockBytes bytes) {
  if (bytes == nullptr || bytes->size() != impl_->block_bytes) {
    throw Error("KV disk tier: a block of the wrong size", TSR_STATUS_INTERNAL);
  }
  {
    std::lock_guard lock(impl_->mu);
    Impl& m = *impl_;
    if (m.index.contains(h) || m.queued_writes.contains(h)) return;
    if (m.queued_write_bytes + bytes->size() > std::max(kMaxQueuedWriteBytes, bytes->size())) {
      ++m.stats.dropped_writes;
      return;
    }
    m.queued_write_bytes += bytes->size();
    m.queued_writes.insert(h);
    m.jobs.push_back({h, std::move(bytes)});
  }
  impl_->work_cv.notify_one();
}

bool KvDiskTier::load(const BlockHash& h) {
  {
    std::lock_guard lock(impl_->mu);
    Impl& m = *impl_;
    if (m.queued_reads.contains(h)) return true;
    if (!m.index.contains(h)) return false;
    m.queued_reads.insert(h);
    m.jobs.push_front({h, nullptr});
  }
  impl_->work_cv.notify_one();
  return true;
}

bool KvDiskTier::loading() const {
  std::lock_guard lock(impl_->mu);
  return !impl_->queued_reads.empty();
}

std::vector<std::pair<BlockHash, KvBlockBytes>> KvDiskTier::take_loaded() {
  std::lock_guard lock(impl_->mu);
  return std::exchange(impl_->loaded, {});
}

void KvDiskTier::wait_loaded(std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mu);
  impl_->done_cv.wait_for(lock, timeout, [&] { return !impl_->loaded.empty() || impl_->queued_reads.empty(); });
}

void KvDiskTier::flush() {
  std::unique_lock lock(impl_->mu);
  impl_->done_cv.wait(lock, [&] { return impl_->jobs.empty() && impl_->busy == 0; });
}

}  // namespace tsr
