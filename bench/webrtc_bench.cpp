// ICE-lite STUN cost per connectivity check: parse + FINGERPRINT + MESSAGE-INTEGRITY of a
// browser-like Binding request (USERNAME, PRIORITY, ICE-CONTROLLING, USE-CANDIDATE), and writing
// the success response, against the baseline of a plain HMAC-SHA1 (OpenSSL EVP_MAC, the MAC
// fetched once, a context per call as the core does) of the same bytes the integrity covers.
//
// Prints each figure's CPU time as a ratio to the baseline's after the table (1.00 = the HMAC
// alone). Run e.g.: webrtc_bench --benchmark_repetitions=5
#include <benchmark/benchmark.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "mean_times_reporter.h"
#include "webrtc/stun.h"

namespace {

using namespace syncd::webrtc;

constexpr std::string_view kPassword = "0123456789abcdefghijklmn";  // 24 ice-chars, as browsers

std::vector<uint8_t> browser_request() {
  StunBindingRequest request;
  for (size_t i = 0; i < request.transaction_id.size(); ++i)
    request.transaction_id[i] = static_cast<uint8_t>(i * 11 + 5);
  request.username = "sYnC:Yq9s";
  request.priority = 1853759231;
  request.ice_controlling = true;
  request.tie_breaker = 0x0123456789abcdefull;
  request.use_candidate = true;
  std::array<uint8_t, kMaxStunRequest> out{};
  size_t n = write_stun_binding_request(request, kPassword, out);
  return {out.begin(), out.begin() + static_cast<long>(n)};
}

void BM_HmacSha1Baseline(benchmark::State& state) {
  const std::vector<uint8_t> message = browser_request();
  // MESSAGE-INTEGRITY covers everything before its own 24 bytes and the 8 of FINGERPRINT.
  const size_t covered = message.size() - 32;
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  char digest[] = "SHA1";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                         OSSL_PARAM_construct_end()};
  uint8_t out[20];
  for (auto _ : state) {
    EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac);
    size_t written = 0;
    EVP_MAC_init(ctx, reinterpret_cast<const unsigned char*>(kPassword.data()), kPassword.size(),
                 params);
    EVP_MAC_update(ctx, message.data(), covered);
    EVP_MAC_final(ctx, out, &written, sizeof out);
    EVP_MAC_CTX_free(ctx);
    benchmark::DoNotOptimize(out);
  }
  EVP_MAC_free(mac);
}

void BM_ParseAndCheckIntegrity(benchmark::State& state) {
  const std::vector<uint8_t> message = browser_request();
  for (auto _ : state) {
    StunBindingRequest request;
    bool ok = parse_stun_binding_request(message, request) == StunError::kNone &&
              stun_integrity_ok(message, kPassword);
    if (!ok) {
      state.SkipWithError("the request did not verify");
      break;
    }
    benchmark::DoNotOptimize(request);
  }
}

void BM_WriteSuccessResponse(benchmark::State& state) {
  std::array<uint8_t, 12> id{};
  StunAddress mapped;
  mapped.ip = {192, 0, 2, 1};
  mapped.port = 50000;
  std::array<uint8_t, kMaxStunResponse> out{};
  for (auto _ : state) {
    ++id[0];
    size_t n = write_stun_binding_success(id, mapped, kPassword, out);
    benchmark::DoNotOptimize(n);
    benchmark::DoNotOptimize(out.data());
  }
}

BENCHMARK(BM_HmacSha1Baseline);
BENCHMARK(BM_ParseAndCheckIntegrity);
BENCHMARK(BM_WriteSuccessResponse);

class RatioReporter : public syncd::bench::MeanTimesReporter {
 public:
  void Finalize() override {
    MeanTimesReporter::Finalize();
    const Times base = at("BM_HmacSha1Baseline");
    if (!base.runs) return;
    std::printf("\nratio to a plain HMAC-SHA1 of the same bytes (mean CPU time / baseline's):\n");
    for (const char* name : {"BM_ParseAndCheckIntegrity", "BM_WriteSuccessResponse"}) {
      const Times t = at(name);
      if (!t.runs) continue;
      std::printf("  %-28s %5.2fx  (CPU %6.0f ns vs %6.0f ns)\n", name,
                  t.mean_cpu() / base.mean_cpu(), t.mean_cpu(), base.mean_cpu());
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  RatioReporter reporter;
  return syncd::bench::run_benchmarks(argc, argv, reporter);
}
