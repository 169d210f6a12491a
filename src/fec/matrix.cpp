#include "fec/matrix.h"

#include <isa-l/erasure_code.h>

#include "fec/payload.h"

namespace syncd::fec {

void cauchy_repair_rows(uint8_t k, uint8_t rows, uint8_t* out) {
  // gf_gen_cauchy1_matrix fills the identity rows too; build into a full matrix and keep the
  // repair part. (k + kMaxM) x kMaxK bytes at most.
  uint8_t full[(kMaxK + kMaxM) * kMaxK];
  gf_gen_cauchy1_matrix(full, k + rows, k);
  for (int i = 0; i < rows * k; ++i) out[i] = full[k * k + i];
}

}  // namespace syncd::fec
