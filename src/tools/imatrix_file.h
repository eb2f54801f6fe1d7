// Importance matrices: for each weight matrix, how strongly each of its
// input channels was driven over a calibration text (the mean squared
// activation), which the low-bit quantizers use to weigh their errors.
//
// Two file formats, both llama.cpp's so that files can be exchanged:
//  - GGUF (general.type = "imatrix"): per matrix NAME, a tensor
//    NAME.in_sum2 of n_per_row x n_mat floats (sums of squared activations,
//    one row per expert of a merged expert tensor, else one) and NAME.counts
//    of n_mat floats (how many activation rows each sum took); metadata
//    imatrix.datasets, imatrix.chunk_count, imatrix.chunk_size.
//  - the older .dat: int32 entry count; per entry an int32 name length, the
//    name, int32 ncall, int32 value count, the values (sums scaled so that
//    value / ncall is the mean); then optionally int32 chunk count, int32
//    length and the dataset name.
// read_imatrix tells them apart by the GGUF magic. Plain values; no sharing.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "revis/status.h"

namespace revis {

struct ImatrixEntry {
  int64_t n_per_row = 0;      // a .dat entry of experts reads as one row of them all
  int64_t n_mat = 1;
  std::vector<float> sum2;    // n_mat rows of n_per_row
  std::vector<float> counts;  // n_mat
};

struct Imatrix {
  std::map<std::string, ImatrixEntry> entries;  // by weight tensor name
  std::vector<std::string> datasets;
  int64_t chunk_count = 0;
  int64_t chunk_size = 0;

  // The mean squared activation of each of the n_per_row input channels of
  // matrix `mat` (the expert; 0 for a plain matrix) of tensor `name`. Empty
  // where the file has no entry for it or the matrix saw no rows (the
  // quantizer then weighs its errors without importance); an error where
  // the entry's shape does not fit.
  Result<std::vector<float>> importance(const std::string& name, int64_t n_per_row, int64_t mat) const;
};

Result<Imatrix> read_imatrix(const std::string& path);
// The same from the bytes of a file; `name` is what errors call it.
Result<Imatrix> parse_imatrix(const uint8_t* bytes, size_t size, const std::string& name);
Status write_imatrix_gguf(const Imatrix& imatrix, const std::string& path);
// The .dat format keeps one count per entry: experts that saw different
// numbers of rows are written as means times the largest count.
Status write_imatrix_dat(const Imatrix& imatrix, const std::string& path);

}  // namespace revis
