// sync-peer-lws: libwebsockets (Debian 4.1.6) WebSocket sink for the peer benchmark
// (bench/peers/run.py).
//
// The usual lws server: one protocol whose callback gets the payload in chunks of at most the
// protocol's rx_buffer_size (lws unmasks each chunk into its own buffer, 4 bytes at a time in
// Debian's build); the sink appends the chunks into one preallocated message buffer (the copy any
// lws user needs to see a whole 8.3 MB frame) and verifies each complete frame (XXH3-64 over every
// pixel byte, sequence gaps). Answers hello / stream.open as syncd would (peer_common.h). Exits
// with a JSON summary when the producer closes. --rx-buffer-kb 0 keeps lws's defaults.
#include <libwebsockets.h>
#include <sys/socket.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "peer_common.h"

namespace {

struct State {
  syncd::peers::PeerSession session{std::string("libwebsockets/") + LWS_LIBRARY_VERSION};
  std::vector<uint8_t> message;  // one whole message, reused
  size_t message_bytes = 0;
  bool binary = false;
  std::deque<std::string> replies;
  std::vector<uint8_t> out;  // LWS_PRE + reply
  bool established = false;
  bool done = false;
};

State g_state;

int callback(lws* wsi, lws_callback_reasons reason, void*, void* in, size_t len) {
  State& st = g_state;
  switch (reason) {
    case LWS_CALLBACK_ESTABLISHED: {
      st.established = true;
      st.session.start_cpu();
      // As syncd and sync-tcp-sink ask for (clamped by net.core.rmem_max).
      const int size = syncd::peers::kReceiveBufferBytes;
      setsockopt(lws_get_socket_fd(wsi), SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
      break;
    }
    case LWS_CALLBACK_RECEIVE: {
      if (lws_is_first_fragment(wsi)) {
        st.message_bytes = 0;
        st.binary = lws_frame_is_binary(wsi);
        st.session.note_first_byte();
      }
      if (st.message_bytes + len > st.message.size()) {
        st.message.resize(std::max(st.message_bytes + len, st.message.size() * 2));
      }
      std::memcpy(st.message.data() + st.message_bytes, in, len);
      st.message_bytes += len;
      if (lws_is_final_fragment(wsi) && lws_remaining_packet_payload(wsi) == 0) {
        if (st.binary) {
          st.session.on_frame(st.message.data(), st.message_bytes);
        } else {
          std::string reply = st.session.on_text(
              std::string(reinterpret_cast<const char*>(st.message.data()), st.message_bytes));
          if (!reply.empty()) {
            st.replies.push_back(std::move(reply));
            lws_callback_on_writable(wsi);
          }
        }
        st.message_bytes = 0;
      }
      break;
    }
    case LWS_CALLBACK_SERVER_WRITEABLE: {
      if (st.replies.empty()) break;
      const std::string& reply = st.replies.front();
      st.out.resize(LWS_PRE + reply.size());
      std::memcpy(st.out.data() + LWS_PRE, reply.data(), reply.size());
      if (lws_write(wsi, st.out.data() + LWS_PRE, reply.size(), LWS_WRITE_TEXT) <
          static_cast<int>(reply.size())) {
        return -1;
      }
      st.replies.pop_front();
      if (!st.replies.empty()) lws_callback_on_writable(wsi);
      break;
    }
    case LWS_CALLBACK_CLOSED:
      st.done = true;
      break;
    default:
      break;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  int port = 0;
  size_t rx_buffer_kb = 1024;
  CLI::App app{"libwebsockets WebSocket sink for the peer benchmark. Exit: 0 ok, 1 usage, 3 I/O."};
  app.add_option("--host", host)->capture_default_str();
  app.add_option("--port", port, "0 picks a free one, printed first")->capture_default_str();
  app.add_option("--rx-buffer-kb", rx_buffer_kb,
                 "protocol rx buffer and per-thread service buffer; 0 = lws defaults (4 KiB)")
      ->capture_default_str();
  uint64_t warmup_frames = 0;
  app.add_option("--warmup-frames", warmup_frames, "frames before steady CPU counting starts")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  g_state.session.set_warmup_frames(warmup_frames);

  lws_set_log_level(LLL_ERR, nullptr);
  g_state.message.resize(9u << 20);
  const lws_protocols protocols[] = {
      {"sync", callback, 0, rx_buffer_kb * 1024, 0, nullptr, 0},
      {nullptr, nullptr, 0, 0, 0, nullptr, 0},
  };
  lws_context_creation_info info;
  std::memset(&info, 0, sizeof info);
  info.port = port;
  info.iface = host.c_str();
  info.protocols = protocols;
  info.options = LWS_SERVER_OPTION_DISABLE_IPV6;
  if (rx_buffer_kb > 0) info.pt_serv_buf_size = static_cast<unsigned int>(rx_buffer_kb * 1024);
  info.count_threads = 1;
  lws_context* context = lws_create_context(&info);
  if (!context) {
    std::fprintf(stderr, "sync-peer-lws: lws_create_context failed\n");
    return 3;
  }
  lws_vhost* vhost = lws_get_vhost_by_name(context, "default");
  const int bound = vhost ? lws_get_vhost_listen_port(vhost) : port;
  std::printf("listening on %s:%d\n", host.c_str(), bound);
  std::fflush(stdout);
  while (!g_state.done) {
    if (lws_service(context, 0) < 0) break;
  }
  g_state.session.print_summary("rx_buffer_kb", std::to_string(rx_buffer_kb));
  lws_context_destroy(context);
  return 0;
}
