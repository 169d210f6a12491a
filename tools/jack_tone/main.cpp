// sync-jack-tone: a JACK client that plays the counter test signal (audio/test_signal.h) on N
// output ports, counting frames from 1 so the signal is never all-silent, and connects out_i to
// DEST-PREFIX i (retrying until those ports exist), playing silence until all are connected.
// Runs until SIGINT/SIGTERM or until the server goes away. Prints "ready" on stdout once connected.
#include <jack/jack.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "audio/test_signal.h"

namespace {

std::atomic<bool> g_stop{false};
std::vector<jack_port_t*> g_ports;
uint64_t g_frame = 1;  // real-time thread only
// Silence until every port is connected: a half-connected period would look like a bad frame.
std::atomic<bool> g_play{false};

int process(jack_nframes_t nframes, void*) {
  const uint32_t C = uint32_t(g_ports.size());
  if (!g_play.load(std::memory_order_acquire)) {
    for (uint32_t c = 0; c < C; ++c)
      std::memset(jack_port_get_buffer(g_ports[c], nframes), 0, nframes * sizeof(float));
    return 0;
  }
  for (uint32_t c = 0; c < C; ++c) {
    auto* out = static_cast<float*>(jack_port_get_buffer(g_ports[c], nframes));
    for (jack_nframes_t f = 0; f < nframes; ++f)
      out[f] = syncd::audio::counter_sample(g_frame + f, C, c);
  }
  g_frame += nframes;
  return 0;
}

void on_shutdown(void*) {
  g_stop = true;
}
void on_signal(int) {
  g_stop = true;
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t channels = 32;
  std::string dest = "syncd:in_";
  std::string name = "sync-jack-tone";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--channels" && i + 1 < argc)
      channels = uint32_t(std::atoi(argv[++i]));
    else if (a == "--connect" && i + 1 < argc)
      dest = argv[++i];
    else if (a == "--name" && i + 1 < argc)
      name = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: sync-jack-tone [--channels N] [--connect PORT-PREFIX] [--name N]\n");
      return 1;
    }
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  jack_status_t status{};
  jack_client_t* client = jack_client_open(name.c_str(), JackNoStartServer, &status);
  if (!client) {
    std::fprintf(stderr, "sync-jack-tone: cannot connect to the JACK server\n");
    return 2;
  }
  for (uint32_t c = 0; c < channels; ++c) {
    const std::string port = "out_" + std::to_string(c + 1);
    g_ports.push_back(
        jack_port_register(client, port.c_str(), JACK_DEFAULT_AUDIO_TYPE, JackPortIsOutput, 0));
  }
  jack_set_process_callback(client, process, nullptr);
  jack_on_shutdown(client, on_shutdown, nullptr);
  if (jack_activate(client) != 0) return 2;
  // Connect out_i -> DEST i, waiting up to 20 s for the destination ports to appear.
  for (int attempt = 0; attempt < 200 && !g_stop; ++attempt) {
    uint32_t done = 0;
    for (uint32_t c = 0; c < channels; ++c) {
      const std::string to = dest + std::to_string(c + 1);
      if (!jack_port_by_name(client, to.c_str())) break;
      const int rc = jack_connect(client, jack_port_name(g_ports[c]), to.c_str());
      if (rc == 0 || rc == EEXIST) ++done;
    }
    if (done == channels) {
      g_play.store(true, std::memory_order_release);
      std::printf("ready\n");
      std::fflush(stdout);
      break;
    }
    usleep(100'000);
  }
  while (!g_stop) usleep(50'000);
  jack_client_close(client);
  return 0;
}
