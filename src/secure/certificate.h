// The daemon's DTLS identity: an ECDSA P-256 key and a self-signed certificate kept in one PEM
// file, and the certificate's SHA-256 fingerprint in SDP's a=fingerprint form (RFC 8122 section
// 5), which peers exchange out of band.
//
// Control plane: called once at start-up (load_or_create_identity) or when a flag is parsed
// (parse_fingerprint). Any thread; no shared state. Errors are returned, never thrown.
#pragma once

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "secure/fingerprint.h"

namespace syncd::secure {

struct EvpPkeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
using EvpPkeyPtr = std::unique_ptr<EVP_PKEY, EvpPkeyFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;

// The key pair and its certificate. Move-only; shared read-only by the DTLS endpoints built on it.
struct Identity {
  EvpPkeyPtr key;
  X509Ptr certificate;
  Fingerprint fingerprint;
};

enum class IdentityError : uint8_t {
  kOk,
  kNotRegularFile,  // a symlink, directory, fifo, device...
  kWrongOwner,      // not owned by our effective uid
  kWrongMode,       // permissions other than exactly 0600
  kOpenFailed,      // open(2) failed (errno in the message)
  kReadFailed,      // read or PEM parse failed, or key and certificate missing/mismatched
  kWriteFailed,     // creating, writing or syncing the new file failed
  kGenerateFailed,  // OpenSSL could not make the key or certificate
};

struct IdentityResult {
  IdentityError error = IdentityError::kOk;
  bool created = false;  // true when this call made a new key and certificate
  std::string message;   // a sentence for the operator, naming the path; empty on success
  bool ok() const { return error == IdentityError::kOk; }
};

// Makes a fresh ECDSA P-256 key and a self-signed certificate (CN=syncd, serial random, valid
// from one day ago for `validity_days`), in memory only.
IdentityResult generate_identity(Identity& out, int validity_days = 3650);

// Loads the PEM file at `path` (private key and certificate); when there is none, generates an
// identity and writes it there with open(O_CREAT|O_EXCL|O_NOFOLLOW, 0600), so a file planted in a
// race or a symlink is never followed or overwritten. An existing file is accepted only if it is
// a regular file (not a symlink) owned by our effective uid with mode exactly 0600; anything else
// is refused with the reason. This is what `--relay-cert PATH` and `--print-fingerprint` call.
IdentityResult load_or_create_identity(const std::string& path, Identity& out);

// Loads only; refuses a missing file (kOpenFailed) like any other bad one.
IdentityResult load_identity(const std::string& path, Identity& out);

// The SHA-256 of `certificate`'s DER encoding.
Fingerprint fingerprint_of(X509* certificate);

// "sha-256 AB:CD:..." (95 upper-case hex pairs and colons after the prefix), as SDP writes it
// and as `--print-fingerprint` prints it.
std::string format_fingerprint(const Fingerprint& fingerprint);

enum class FingerprintParseError : uint8_t {
  kOk,
  kBadPrefix,     // a hash name other than sha-256, or junk before the hex
  kBadLength,     // not 32 colon-separated pairs
  kBadHexDigit,   // a character other than 0-9, a-f, A-F where a digit belongs
  kBadSeparator,  // a character other than ':' between pairs
};
const char* to_string(FingerprintParseError error);

// Accepts "sha-256 AB:CD:...", "sha-256:AB:CD:..." (the command-line form), "SHA-256 ..." and
// the bare "AB:CD:..." form, hex digits in either case; nothing else (no surrounding spaces, no
// other hash). On success writes `out`.
FingerprintParseError parse_fingerprint(std::string_view text, Fingerprint& out);

}  // namespace syncd::secure
