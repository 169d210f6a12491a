// Opening and closing a heap-allocated uv_async_t: libuv finishes a close on the loop's next turn,
// after the owner may be gone, so the handle lives on its own and its close callback frees it. The
// owners (WorkerHandoff, LoopChannel) allocate it when they start, on the control plane.
//
// Thread: the handle's loop thread.
#pragma once

#include <uv.h>

namespace syncd::core {

// Allocates and initialises `out` on `loop`, its data pointing at `owner`; 0 or a libuv error
// (then `out` stays nullptr).
inline int open_async_handle(uv_loop_t* loop, uv_async_cb callback, void* owner, uv_async_t*& out) {
  auto* handle = new uv_async_t{};
  const int rc = uv_async_init(loop, handle, callback);
  if (rc != 0) {
    delete handle;
    return rc;
  }
  handle->data = owner;
  out = handle;
  return 0;
}

inline void close_async_handle(uv_async_t* handle) {
  if (handle == nullptr) return;
  uv_close(reinterpret_cast<uv_handle_t*>(handle),
           [](uv_handle_t* h) { delete reinterpret_cast<uv_async_t*>(h); });
}

}  // namespace syncd::core
