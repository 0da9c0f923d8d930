// `tessera imatrix -m MODEL -f TEXT [-o imatrix.gguf]`: llama-imatrix's importance matrix
// (each "blk." weight's sum of x² per input column over the text, and the token count), in
// llama.cpp's GGUF imatrix format, for `tessera quantize --imatrix` or llama-quantize.
// The model runs on the CPU backend in f32, in chunks of -c tokens each opening with BOS.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "apps/tessera/commands.h"
#include "apps/tessera/quantize_calibrated.h"
#include "base/error.h"
#include "core/quant/imatrix.h"

namespace tsr::app {

namespace {

struct ImatrixFlags {
  std::string model, out = "imatrix.gguf";
  CalibratedFlags calib;
};

int write_imatrix(const ImatrixFlags& f) {
  const auto in = GgufFile::open(f.model);
  int32_t ctx = 0;
  const quant::CalibrationStats stats = calibration_stats(*in, f.calib, /*hessian=*/false, &ctx);
  int64_t tokens = 0;
  for (const auto& [name, s] : stats) tokens = std::max(tokens, s->tokens);
  const quant::Imatrix m = quant::imatrix_from_calibration(stats, {f.calib.calib}, int32_t(tokens / ctx), ctx);
  if (m.entries.empty()) throw Error(f.model + ": no layer weights were calibrated");
  quant::imatrix_write(m, f.out);
  spdlog::info("wrote {}: {} entries from {} chunks of {} tokens", f.out, m.entries.size(), m.chunk_count, ctx);
  return 0;
}

}  // namespace

std::function<int()> register_imatrix(CLI::App& app) {
  auto f = std::make_shared<ImatrixFlags>();
  app.add_option("-m,--model", f->model, "GGUF model")->required();
  app.add_option("-f,--file", f->calib.calib, "calibration text")->required();
  app.add_option("-o,--output-file", f->out, "importance matrix to write (GGUF)")->capture_default_str();
  app.add_option("-c,--ctx-size", f->calib.ctx, "tokens per chunk (each opens with BOS)")->capture_default_str()->check(CLI::Range(2, 1 << 20));
  app.add_option("--chunks", f->calib.chunks, "chunks to run; 0: all the text fills")->capture_default_str()->check(CLI::Range(0, 1 << 20));
  app.add_option("-t,--threads", f->calib.threads, "threads; 0: every core")->capture_default_str()->check(CLI::Range(0, 1024));
  return [f]() -> int {
    try {
      return write_imatrix(*f);
    } catch (const Error& e) {
      spdlog::error("{}", e.what());
      return 1;
    }
  };
}

}  // namespace tsr::app
