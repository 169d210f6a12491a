// SRTP protect/unprotect (AEAD_AES_128_GCM, 4-byte MKI) of 1200-byte RTP packets, ours (RFC 7714
// framing on EVP) and libsrtp2's, against OpenSSL's EVP AES-128-GCM on the same bytes (one reused
// EVP_CIPHER_CTX, only the IV changing: what an SRTP implementation on EVP would do at best); and
// the server's cost per ClientHello while listening (stateless HelloVerifyRequest) against a full
// DTLS handshake.
//
// Prints the ratios (OpenSSL time / ours, so 1.0 = as fast as OpenSSL) after the table.
// Run e.g.: secure_bench --benchmark_min_time=2 --benchmark_repetitions=3
#include <benchmark/benchmark.h>
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "secure/certificate.h"
#include "secure/dtls_endpoint.h"
#include "secure/srtp_libsrtp.h"
#include "secure/srtp_session.h"

namespace {

using namespace syncd::secure;

constexpr size_t kPacketBytes = 1200;  // RTP header (12) + payload (1188), before the trailer
constexpr size_t kHeaderBytes = 12;
constexpr size_t kBatch = 1024;

SrtpMasterKey bench_key() {
  SrtpMasterKey key;
  for (size_t i = 0; i < key.key.size(); ++i) key.key[i] = static_cast<uint8_t>(i * 13 + 1);
  for (size_t i = 0; i < key.salt.size(); ++i) key.salt[i] = static_cast<uint8_t>(i * 7 + 3);
  return key;
}

void write_header(uint8_t* p, uint16_t seq) {
  p[0] = 0x80;
  p[1] = 96;
  p[2] = static_cast<uint8_t>(seq >> 8);
  p[3] = static_cast<uint8_t>(seq);
  std::memset(p + 4, 0, 4);
  p[8] = 0x12;
  p[9] = 0x34;
  p[10] = 0x56;
  p[11] = 0x78;
}

template <class Tx>
void BM_Protect(benchmark::State& state) {
  Tx tx;
  tx.install(1, bench_key());
  tx.use_epoch(1);
  std::vector<uint8_t> packet(kPacketBytes + kRtpTrailerBytes, 0xa5);
  uint16_t seq = 0;
  for (auto _ : state) {
    write_header(packet.data(), seq++);
    size_t size = kPacketBytes;
    if (tx.protect_rtp(packet.data(), size, packet.size()) != SrtpStatus::kOk) {
      state.SkipWithError("protect failed");
      break;
    }
    benchmark::DoNotOptimize(packet.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kPacketBytes));
}

template <class Tx, class Rx>
void BM_Unprotect(benchmark::State& state) {
  Tx tx;
  tx.install(1, bench_key());
  tx.use_epoch(1);
  Rx rx;
  rx.install(1, bench_key());
  std::vector<std::array<uint8_t, kPacketBytes + kRtpTrailerBytes>> pool(kBatch);
  size_t protected_size = 0;
  uint16_t seq = 0;
  size_t next = kBatch;
  for (auto _ : state) {
    if (next == kBatch) {
      // Fresh packets (the replay window refuses repeats), made outside the timing.
      state.PauseTiming();
      for (auto& p : pool) {
        std::memset(p.data(), 0xa5, p.size());
        write_header(p.data(), seq++);
        protected_size = kPacketBytes;
        tx.protect_rtp(p.data(), protected_size, p.size());
      }
      next = 0;
      state.ResumeTiming();
    }
    size_t size = protected_size;
    if (rx.unprotect_rtp(pool[next++].data(), size) != SrtpStatus::kOk) {
      state.SkipWithError("unprotect failed");
      break;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kPacketBytes));
}

// The baseline: AES-128-GCM of the same 1200 bytes, header as AAD, reused context, new IV.
struct Gcm {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  std::array<uint8_t, 12> iv{};
  explicit Gcm(bool encrypt) {
    SrtpMasterKey key = bench_key();
    if (encrypt)
      EVP_EncryptInit_ex(ctx, EVP_aes_128_gcm(), nullptr, key.key.data(), iv.data());
    else
      EVP_DecryptInit_ex(ctx, EVP_aes_128_gcm(), nullptr, key.key.data(), iv.data());
  }
  ~Gcm() { EVP_CIPHER_CTX_free(ctx); }
  bool encrypt(uint8_t* p, uint32_t counter) {
    std::memcpy(iv.data() + 8, &counter, 4);
    int n = 0;
    return EVP_EncryptInit_ex(ctx, nullptr, nullptr, nullptr, iv.data()) == 1 &&
           EVP_EncryptUpdate(ctx, nullptr, &n, p, kHeaderBytes) == 1 &&
           EVP_EncryptUpdate(ctx, p + kHeaderBytes, &n, p + kHeaderBytes,
                             kPacketBytes - kHeaderBytes) == 1 &&
           EVP_EncryptFinal_ex(ctx, p + kPacketBytes, &n) == 1 &&
           EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, p + kPacketBytes) == 1;
  }
  bool decrypt(uint8_t* p, uint32_t counter) {
    std::memcpy(iv.data() + 8, &counter, 4);
    int n = 0;
    return EVP_DecryptInit_ex(ctx, nullptr, nullptr, nullptr, iv.data()) == 1 &&
           EVP_DecryptUpdate(ctx, nullptr, &n, p, kHeaderBytes) == 1 &&
           EVP_DecryptUpdate(ctx, p + kHeaderBytes, &n, p + kHeaderBytes,
                             kPacketBytes - kHeaderBytes) == 1 &&
           EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, p + kPacketBytes) == 1 &&
           EVP_DecryptFinal_ex(ctx, p + kPacketBytes, &n) == 1;
  }
};

void BM_OpenSslGcmEncrypt(benchmark::State& state) {
  Gcm gcm(true);
  std::vector<uint8_t> packet(kPacketBytes + 16, 0xa5);
  uint32_t counter = 0;
  for (auto _ : state) {
    if (!gcm.encrypt(packet.data(), counter++)) {
      state.SkipWithError("encrypt failed");
      break;
    }
    benchmark::DoNotOptimize(packet.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kPacketBytes));
}

void BM_OpenSslGcmDecrypt(benchmark::State& state) {
  Gcm enc(true), dec(false);
  std::vector<std::array<uint8_t, kPacketBytes + 16>> pool(kBatch);
  uint32_t counter = 0, decrypt_counter = 0;
  size_t next = kBatch;
  for (auto _ : state) {
    if (next == kBatch) {
      state.PauseTiming();
      for (auto& p : pool) {
        std::memset(p.data(), 0xa5, p.size());
        enc.encrypt(p.data(), counter++);
      }
      next = 0;
      state.ResumeTiming();
    }
    if (!dec.decrypt(pool[next++].data(), decrypt_counter++)) {
      state.SkipWithError("decrypt failed");
      break;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kPacketBytes));
}

const Identity& identity(int which) {
  static Identity ids[2];
  static bool made = [] {
    generate_identity(ids[0]);
    generate_identity(ids[1]);
    return true;
  }();
  (void)made;
  return ids[which];
}

// A listening server answering one ClientHello (no cookie) from a new address each time.
void BM_DtlsListenHelloVerify(benchmark::State& state) {
  DtlsContext server_context(identity(1));
  DtlsContext client_context(identity(0));
  std::vector<uint8_t> hello;
  DtlsEndpoint client(client_context, DtlsRole::kClient, identity(1).fingerprint,
                      [&](std::span<const uint8_t> d) { hello.assign(d.begin(), d.end()); });
  client.start(0);
  size_t answered = 0;
  DtlsEndpoint listener(server_context, DtlsRole::kServer, identity(0).fingerprint,
                        [&](std::span<const uint8_t>) { ++answered; });
  uint32_t address = 0;
  for (auto _ : state) {
    ++address;
    if (listener.feed(hello, {reinterpret_cast<const uint8_t*>(&address), 4}, 0) !=
        DtlsEvent::kHelloVerifySent) {
      state.SkipWithError("no HelloVerifyRequest");
      break;
    }
  }
  state.counters["hellos_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// A complete handshake, both sides, in memory (the cost an accepted hello would lead to).
void BM_DtlsFullHandshake(benchmark::State& state) {
  DtlsContext server_context(identity(1));
  DtlsContext client_context(identity(0));
  const uint8_t address[4] = {1, 2, 3, 4};
  for (auto _ : state) {
    std::vector<std::vector<uint8_t>> to_server, to_client;
    DtlsEndpoint client(
        client_context, DtlsRole::kClient, identity(1).fingerprint,
        [&](std::span<const uint8_t> d) { to_server.emplace_back(d.begin(), d.end()); });
    DtlsEndpoint server(
        server_context, DtlsRole::kServer, identity(0).fingerprint,
        [&](std::span<const uint8_t> d) { to_client.emplace_back(d.begin(), d.end()); });
    client.start(0);
    for (int round = 0; round < 10 && (!to_server.empty() || !to_client.empty()); ++round) {
      auto s = std::move(to_server);
      to_server.clear();
      for (auto& d : s) server.feed(d, address, 0);
      auto c = std::move(to_client);
      to_client.clear();
      for (auto& d : c) client.feed(d, address, 0);
    }
    if (client.state() != DtlsState::kConnected || server.state() != DtlsState::kConnected) {
      state.SkipWithError("handshake did not complete");
      break;
    }
  }
}

void BM_SrtpProtect(benchmark::State& state) {
  BM_Protect<SrtpSender>(state);
}
void BM_LibSrtpProtect(benchmark::State& state) {
  BM_Protect<LibSrtpSender>(state);
}
void BM_SrtpUnprotect(benchmark::State& state) {
  BM_Unprotect<SrtpSender, SrtpReceiver>(state);
}
void BM_LibSrtpUnprotect(benchmark::State& state) {
  BM_Unprotect<LibSrtpSender, LibSrtpReceiver>(state);
}

BENCHMARK(BM_OpenSslGcmEncrypt);
BENCHMARK(BM_SrtpProtect);
BENCHMARK(BM_LibSrtpProtect);
BENCHMARK(BM_OpenSslGcmDecrypt);
BENCHMARK(BM_SrtpUnprotect);
BENCHMARK(BM_LibSrtpUnprotect);
BENCHMARK(BM_DtlsListenHelloVerify);
BENCHMARK(BM_DtlsFullHandshake)->Unit(benchmark::kMicrosecond);

uint64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The ratios side by side: each round times 64 packets of the baseline and of each SRTP
// implementation back to back (thread CPU time), so load from other processes hits all alike;
// the figure is the median over the rounds of the per-round ratio.
void paired_ratios(int rounds) {
  constexpr int kPer = 64;
  Gcm enc(true), enc_for_dec(true), dec(false);
  SrtpSender ours_tx, ours_src;
  LibSrtpSender lib_tx, lib_src;
  SrtpReceiver ours_rx;
  LibSrtpReceiver lib_rx;
  for (auto* tx : {&ours_tx, &ours_src}) tx->install(1, bench_key()), tx->use_epoch(1);
  for (auto* tx : {&lib_tx, &lib_src}) tx->install(1, bench_key()), tx->use_epoch(1);
  ours_rx.install(1, bench_key());
  lib_rx.install(1, bench_key());
  std::vector<uint8_t> packet(kPacketBytes + kRtcpTrailerBytes, 0xa5);
  std::vector<std::array<uint8_t, kPacketBytes + kRtpTrailerBytes>> base(kPer), ours(kPer),
      lib(kPer);
  uint16_t seq_ours = 0, seq_lib = 0, seq_src_ours = 0, seq_src_lib = 0;
  uint32_t counter = 0, dec_counter = 0;
  std::vector<double> protect_ours, protect_lib, unprotect_ours, unprotect_lib, base_enc_ns,
      base_dec_ns;
  size_t n = 0;
  for (int r = 0; r < rounds; ++r) {
    uint64_t t0 = thread_cpu_ns();
    for (int i = 0; i < kPer; ++i) enc.encrypt(packet.data(), counter++);
    uint64_t t1 = thread_cpu_ns();
    for (int i = 0; i < kPer; ++i) {
      write_header(packet.data(), seq_ours++);
      n = kPacketBytes;
      ours_tx.protect_rtp(packet.data(), n, packet.size());
    }
    uint64_t t2 = thread_cpu_ns();
    for (int i = 0; i < kPer; ++i) {
      write_header(packet.data(), seq_lib++);
      n = kPacketBytes;
      lib_tx.protect_rtp(packet.data(), n, packet.size());
    }
    uint64_t t3 = thread_cpu_ns();
    // Unprotect: fresh packets for each (untimed), then the three decryptions back to back.
    for (int i = 0; i < kPer; ++i) {
      std::memset(base[i].data(), 0xa5, base[i].size());
      enc_for_dec.encrypt(base[i].data(), static_cast<uint32_t>(r * kPer + i));
      std::memset(ours[i].data(), 0xa5, ours[i].size());
      write_header(ours[i].data(), seq_src_ours++);
      n = kPacketBytes;
      ours_src.protect_rtp(ours[i].data(), n, ours[i].size());
      std::memset(lib[i].data(), 0xa5, lib[i].size());
      write_header(lib[i].data(), seq_src_lib++);
      n = kPacketBytes;
      lib_src.protect_rtp(lib[i].data(), n, lib[i].size());
    }
    uint64_t u0 = thread_cpu_ns();
    for (int i = 0; i < kPer; ++i) dec.decrypt(base[i].data(), dec_counter++);
    uint64_t u1 = thread_cpu_ns();
    for (int i = 0; i < kPer; ++i) {
      n = kPacketBytes + kRtpTrailerBytes;
      if (ours_rx.unprotect_rtp(ours[i].data(), n) != SrtpStatus::kOk) std::abort();
    }
    uint64_t u2 = thread_cpu_ns();
    for (int i = 0; i < kPer; ++i) {
      n = kPacketBytes + kRtpTrailerBytes;
      if (lib_rx.unprotect_rtp(lib[i].data(), n) != SrtpStatus::kOk) std::abort();
    }
    uint64_t u3 = thread_cpu_ns();
    double base_enc = static_cast<double>(t1 - t0), base_dec = static_cast<double>(u1 - u0);
    protect_ours.push_back(base_enc / static_cast<double>(t2 - t1));
    protect_lib.push_back(base_enc / static_cast<double>(t3 - t2));
    unprotect_ours.push_back(base_dec / static_cast<double>(u2 - u1));
    unprotect_lib.push_back(base_dec / static_cast<double>(u3 - u2));
    base_enc_ns.push_back(base_enc / kPer);
    base_dec_ns.push_back(base_dec / kPer);
  }
  double enc_ns = median(base_enc_ns), dec_ns = median(base_dec_ns);
  auto row = [&](const char* what, double base_ns, double ratio) {
    std::printf("%-40s %6.0f ns/packet  %5.2f GB/s   ratio %.2f\n", what, base_ns / ratio,
                kPacketBytes / (base_ns / ratio), ratio);
  };
  std::printf(
      "\nPaired, %d rounds of %d packets (median of per-round ratios; ratio = OpenSSL's "
      "time / the SRTP time):\n",
      rounds, kPer);
  std::printf("%-40s %6.0f ns/packet  %5.2f GB/s\n", "EVP AES-128-GCM encrypt (baseline)", enc_ns,
              kPacketBytes / enc_ns);
  row("protect, syncd (RFC 7714 on EVP)", enc_ns, median(protect_ours));
  row("protect, libsrtp2 2.5 (NSS)", enc_ns, median(protect_lib));
  std::printf("%-40s %6.0f ns/packet  %5.2f GB/s\n", "EVP AES-128-GCM decrypt (baseline)", dec_ns,
              kPacketBytes / dec_ns);
  row("unprotect, syncd (RFC 7714 on EVP)", dec_ns, median(unprotect_ours));
  row("unprotect, libsrtp2 2.5 (NSS)", dec_ns, median(unprotect_lib));
}

// Keeps each run's CPU time per iteration (the mean when repeated) to print the ratios.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred || run.run_type == Run::RT_Aggregate) continue;
      std::string name = run.run_name.function_name;
      auto& [sum, count] = times_[name];
      sum += run.GetAdjustedCPUTime() * 1e-9 *
             (run.time_unit == benchmark::kMicrosecond ? 1e3 : 1.0);  // to seconds
      ++count;
    }
  }
  double mean(const std::string& name) const {
    auto it = times_.find(name);
    return it == times_.end() || it->second.second == 0 ? 0 : it->second.first / it->second.second;
  }

 private:
  std::map<std::string, std::pair<double, int>> times_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  auto line = [&](const char* what, const char* ours, const char* theirs) {
    double a = reporter.mean(ours), b = reporter.mean(theirs);
    if (a <= 0 || b <= 0) return;
    std::printf("%-44s %8.0f ns vs %8.0f ns   %5.2f GB/s vs %5.2f GB/s   ratio %.2f\n", what,
                a * 1e9, b * 1e9, kPacketBytes / a * 1e-9, kPacketBytes / b * 1e-9, b / a);
  };
  std::printf("\n1200-byte RTP, CPU time per packet (ratio = OpenSSL's time / the SRTP time):\n");
  line("protect   (syncd, RFC 7714 on EVP) vs EVP enc", "BM_SrtpProtect", "BM_OpenSslGcmEncrypt");
  line("protect   (libsrtp2 2.5 on NSS)    vs EVP enc", "BM_LibSrtpProtect",
       "BM_OpenSslGcmEncrypt");
  line("unprotect (syncd, RFC 7714 on EVP) vs EVP dec", "BM_SrtpUnprotect", "BM_OpenSslGcmDecrypt");
  line("unprotect (libsrtp2 2.5 on NSS)    vs EVP dec", "BM_LibSrtpUnprotect",
       "BM_OpenSslGcmDecrypt");
  double hello = reporter.mean("BM_DtlsListenHelloVerify");
  double handshake = reporter.mean("BM_DtlsFullHandshake");
  if (hello > 0 && handshake > 0)
    std::printf(
        "ClientHello -> HelloVerifyRequest: %.1f us CPU (%.0f/s per core), %.4f of a full "
        "handshake (%.0f us)\n",
        hello * 1e6, 1 / hello, hello / handshake, handshake * 1e6);
  paired_ratios(2000);
  benchmark::Shutdown();
  return 0;
}
