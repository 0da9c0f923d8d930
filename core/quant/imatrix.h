// llama.cpp's importance matrix files: what llama-imatrix writes and llama-quantize --imatrix
// reads. Per weight, the sum over calibration tokens of x² for each input column and the
// number of tokens, per expert for a MoE weight. Two formats:
//  - GGUF (general.type "imatrix"): tensors NAME.in_sum2 F32 [ne0, n_expert] and NAME.counts
//    F32 [1, n_expert]; keys imatrix.datasets, imatrix.chunk_count, imatrix.chunk_size;
//  - legacy ".dat": int32 entry count, then per entry int32 name length, name, int32 ncall,
//    int32 nval, nval floats (already divided by the tokens per call and multiplied by
//    ncall), then optionally int32 chunk count, int32 length and the dataset name.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/quant/calibration.h"

namespace tsr::quant {

struct ImatrixEntry {
  std::vector<float> sums;     // [n_expert * ne0]
  std::vector<int64_t> counts;  // [n_expert]: tokens (legacy: one entry, ncall)
};

struct Imatrix {
  std::map<std::string, ImatrixEntry> entries;  // by weight name ("blk.0.attn_q.weight")
  std::vector<std::string> datasets;
  int32_t chunk_count = 0;
  int32_t chunk_size = 0;
  bool legacy = false;
};

// Reads either format (GGUF by its magic). Throws tsr::Error naming the file and the problem
// for a truncated or malformed file, a GGUF without imatrix metadata (as llama-quantize), a
// sum without counts, sizes that do not divide, or a negative or non-finite value.
Imatrix imatrix_read(const std::string& path);

// Writes the GGUF format, tensors in name order, as llama-imatrix does.
void imatrix_write(const Imatrix& m, const std::string& path);

// The importance of each column as llama-quantize computes it: sums / count per expert (1
// for an expert no token reached); legacy: sums / ncall.
std::map<std::string, std::vector<float>> imatrix_importances(const Imatrix& m);

// An importance matrix from calibration statistics (each weight's input: Σ x² per column and
// the token count), of the "blk." weights as llama-imatrix records them (the output head is
// left out, as without its --process-output).
Imatrix imatrix_from_calibration(const CalibrationStats& stats, std::vector<std::string> datasets,
                                 int32_t chunk_count, int32_t chunk_size);

}  // namespace tsr::quant
