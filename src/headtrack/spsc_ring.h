// The head tracker's reader thread hands samples to the loop through core's SPSC ring.
#pragma once

#include "core/spsc_ring.h"

namespace syncd::headtrack {
using core::SpscRing;
}  // namespace syncd::headtrack
