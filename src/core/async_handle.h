// Closing a heap-allocated uv_async_t: libuv finishes a close on the loop's next turn, after the
// owner may be gone, so the handle lives on its own and its close callback frees it. The owners
// (WorkerHandoff, LoopChannel) allocate it when they start, on the control plane.
//
// Thread: the handle's loop thread.
#pragma once

#include <uv.h>

namespace syncd::core {

inline void close_async_handle(uv_async_t* handle) {
  if (handle == nullptr) return;
  uv_close(reinterpret_cast<uv_handle_t*>(handle),
           [](uv_handle_t* h) { delete reinterpret_cast<uv_async_t*>(h); });
}

}  // namespace syncd::core
