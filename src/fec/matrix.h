// The code's generator rows (internal to src/fec). Any thread; pure.
#pragma once

#include <cstdint>

namespace syncd::fec {

// Writes the `rows` Cauchy repair rows of the systematic (k + rows) x k generator, row r at
// out[r * k]: element (r, j) is 1 / ((k + r) XOR j) in GF(2^8), as ISA-L's gf_gen_cauchy1_matrix
// builds them. Row r does not depend on how many rows follow it, so a block's repair index alone
// names its row. With k + rows <= 256 every k x k submatrix of [I; C] is invertible (a Cauchy
// matrix's minors are non-zero), so any k of the k + m symbols recover the block.
void cauchy_repair_rows(uint8_t k, uint8_t rows, uint8_t* out);

}  // namespace syncd::fec
