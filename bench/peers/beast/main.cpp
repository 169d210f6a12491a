// sync-peer-beast: Boost.Beast WebSocket sink for the peer benchmark (bench/peers/run.py).
//
// Accepts one connection, answers hello / stream.open as syncd would (peer_common.h) so the
// unmodified sync-producer works, and reads every binary message into one flat_buffer that is
// reserved once: Beast reads the payload straight into it and unmasks it in place. Each frame is
// then verified (XXH3-64 over every pixel byte, sequence gaps). Synchronous, one thread: the
// simplest, fastest way to use Beast for a single stream. Prints a JSON summary at the Close.
// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility> (C++20).
#include <CLI/CLI.hpp>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <cstdio>
#include <string>
#include <utility>

#include "peer_common.h"

namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  size_t reserve_mb = 9;
  CLI::App app{"Boost.Beast WebSocket sink for the peer benchmark. Exit: 0 ok, 1 usage, 3 I/O."};
  app.add_option("--host", host)->capture_default_str();
  app.add_option("--port", port, "0 picks a free one, printed first")->capture_default_str();
  app.add_option("--reserve-mb", reserve_mb, "initial read buffer")->capture_default_str();
  uint64_t warmup_frames = 0;
  app.add_option("--warmup-frames", warmup_frames, "frames before steady CPU counting starts")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  syncd::peers::PeerSession session("beast/" + std::to_string(BOOST_BEAST_VERSION));
  session.set_warmup_frames(warmup_frames);
  try {
    net::io_context ioc{1};
    const tcp::endpoint endpoint{net::ip::make_address(host), port};
    tcp::acceptor acceptor{ioc};
    acceptor.open(endpoint.protocol());
    acceptor.set_option(net::socket_base::reuse_address(true));
    // On the listener, before accept(): the accepted socket inherits it (as sync-tcp-sink does).
    acceptor.set_option(net::socket_base::receive_buffer_size(syncd::peers::kReceiveBufferBytes));
    acceptor.bind(endpoint);
    acceptor.listen(1);
    std::printf("listening on %s:%u\n", host.c_str(), acceptor.local_endpoint().port());
    std::fflush(stdout);

    tcp::socket socket{ioc};
    acceptor.accept(socket);
    session.start_cpu();
    socket.set_option(tcp::no_delay(true));
    websocket::stream<tcp::socket> ws{std::move(socket)};
    ws.read_message_max(64u << 20);
    ws.auto_fragment(false);
    ws.accept();

    beast::flat_buffer buffer;
    buffer.reserve(reserve_mb << 20);
    std::string text;
    for (;;) {
      beast::error_code ec;
      ws.read(buffer, ec);
      if (ec == websocket::error::closed) break;
      if (ec) {
        std::fprintf(stderr, "sync-peer-beast: read: %s\n", ec.message().c_str());
        session.print_summary("error", ec.message());
        return 3;
      }
      const auto data = buffer.data();
      if (ws.got_text()) {
        text.assign(static_cast<const char*>(data.data()), data.size());
        buffer.consume(buffer.size());
        const std::string reply = session.on_text(text);
        if (!reply.empty()) {
          ws.text(true);
          ws.write(net::buffer(reply));
        }
      } else {
        session.on_frame(static_cast<const uint8_t*>(data.data()), data.size());
        buffer.consume(buffer.size());
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sync-peer-beast: %s\n", e.what());
    session.print_summary("error", e.what());
    return 3;
  }
  session.print_summary();
  return 0;
}
