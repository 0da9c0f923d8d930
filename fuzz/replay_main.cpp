// Runs a fuzz target's LLVMFuzzerTestOneInput on every file named on the command line (or
// in a directory named there): the corpus replay that CI runs under ASan+UBSan with GCC,
// where libFuzzer's own driver (clang -fsanitize=fuzzer, scripts/fuzz.sh) is absent.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void run_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  size_t n = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    if (!std::filesystem::is_directory(arg)) {
      run_file(arg);
      ++n;
      continue;
    }
    for (const auto& entry : std::filesystem::recursive_directory_iterator(arg)) {
      if (entry.is_regular_file()) {
        run_file(entry.path());
        ++n;
      }
    }
  }
  std::printf("replayed %zu inputs\n", n);
  return n > 0 ? 0 : 1;  // an empty corpus is a packaging mistake, not a pass
}
