#include "secure/certificate.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace syncd::secure {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

// A PEM file holding one P-256 key and one certificate is about 1 KB; anything far larger is not
// ours and is refused before it is parsed.
constexpr size_t kMaxPemBytes = 64 * 1024;

IdentityResult fail(IdentityError error, std::string message) {
  IdentityResult result;
  result.error = error;
  result.message = std::move(message);
  return result;
}

std::string errno_text(int err) {
  return std::string(std::strerror(err));
}

// Reads the whole file behind `fd` after checking what it is: a regular file of ours, 0600.
IdentityResult read_checked(int fd, const std::string& path, std::vector<char>& out) {
  struct stat st {};
  if (fstat(fd, &st) != 0)
    return fail(IdentityError::kReadFailed, path + ": fstat: " + errno_text(errno));
  if (!S_ISREG(st.st_mode))
    return fail(IdentityError::kNotRegularFile, path + ": not a regular file; refusing it");
  if (st.st_uid != geteuid())
    return fail(IdentityError::kWrongOwner, path + ": owned by uid " + std::to_string(st.st_uid) +
                                                ", not by us (uid " + std::to_string(geteuid()) +
                                                "); refusing it");
  if ((st.st_mode & 07777) != 0600) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return fail(IdentityError::kWrongMode,
                path + ": mode " + mode + ", must be 0600 (it holds a private key); refusing it");
  }
  if (st.st_size <= 0 || static_cast<size_t>(st.st_size) > kMaxPemBytes)
    return fail(IdentityError::kReadFailed,
                path + ": size " + std::to_string(st.st_size) + " is not that of a key file");
  out.resize(static_cast<size_t>(st.st_size));
  size_t have = 0;
  while (have < out.size()) {
    ssize_t n = read(fd, out.data() + have, out.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(IdentityError::kReadFailed, path + ": read: " + errno_text(errno));
    have += static_cast<size_t>(n);
  }
  return {};
}

IdentityResult parse_pem(const std::vector<char>& pem, const std::string& path, Identity& out) {
  BioPtr key_bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  BioPtr cert_bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!key_bio || !cert_bio) return fail(IdentityError::kReadFailed, path + ": out of memory");
  EvpPkeyPtr key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  X509Ptr cert(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
  if (!key) return fail(IdentityError::kReadFailed, path + ": no private key in the PEM file");
  if (!cert) return fail(IdentityError::kReadFailed, path + ": no certificate in the PEM file");
  if (X509_check_private_key(cert.get(), key.get()) != 1)
    return fail(IdentityError::kReadFailed,
                path + ": the certificate does not belong to the private key");
  out.fingerprint = fingerprint_of(cert.get());
  out.key = std::move(key);
  out.certificate = std::move(cert);
  return {};
}

IdentityResult write_new(const std::string& path, const Identity& identity, int fd) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), identity.key.get(), nullptr, nullptr, 0, nullptr,
                               nullptr) != 1 ||
      PEM_write_bio_X509(bio.get(), identity.certificate.get()) != 1)
    return fail(IdentityError::kGenerateFailed, path + ": cannot encode the key as PEM");
  char* data = nullptr;
  long size = BIO_get_mem_data(bio.get(), &data);
  size_t done = 0;
  while (done < static_cast<size_t>(size)) {
    ssize_t n = write(fd, data + done, static_cast<size_t>(size) - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(IdentityError::kWriteFailed, path + ": write: " + errno_text(errno));
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0)
    return fail(IdentityError::kWriteFailed, path + ": fsync: " + errno_text(errno));
  return {};
}

}  // namespace

Fingerprint fingerprint_of(X509* certificate) {
  Fingerprint fp;
  unsigned int length = 0;
  // X509_digest hashes the DER encoding (i2d_X509), which is what RFC 8122 section 5 asks for.
  X509_digest(certificate, EVP_sha256(), fp.sha256.data(), &length);
  return fp;
}

IdentityResult generate_identity(Identity& out, int validity_days) {
  EvpPkeyPtr key(EVP_EC_gen("P-256"));
  X509Ptr cert(X509_new());
  if (!key || !cert) return fail(IdentityError::kGenerateFailed, "cannot make a P-256 key");
  // A random positive 64-bit serial: no two certificates of ours share issuer and serial.
  uint8_t serial_bytes[8];
  if (RAND_bytes(serial_bytes, sizeof serial_bytes) != 1)
    return fail(IdentityError::kGenerateFailed, "no randomness for the serial");
  serial_bytes[0] &= 0x7f;
  BIGNUM* serial_bn = BN_bin2bn(serial_bytes, sizeof serial_bytes, nullptr);
  ASN1_INTEGER* serial = serial_bn ? BN_to_ASN1_INTEGER(serial_bn, nullptr) : nullptr;
  BN_free(serial_bn);
  bool ok = serial && X509_set_version(cert.get(), X509_VERSION_3) == 1 &&
            X509_set_serialNumber(cert.get(), serial) == 1;
  ASN1_INTEGER_free(serial);
  // Valid from a day ago, so a peer whose clock is a little behind still accepts it (only the
  // fingerprint is checked by syncd, but other DTLS stacks may look at the dates).
  ok = ok && X509_gmtime_adj(X509_getm_notBefore(cert.get()), -24L * 3600) != nullptr &&
       X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24L * 3600 * validity_days) != nullptr;
  X509_NAME* name = X509_get_subject_name(cert.get());
  ok =
      ok &&
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>("syncd"), -1, -1, 0) == 1 &&
      X509_set_issuer_name(cert.get(), name) == 1 && X509_set_pubkey(cert.get(), key.get()) == 1 &&
      X509_sign(cert.get(), key.get(), EVP_sha256()) > 0;
  if (!ok) return fail(IdentityError::kGenerateFailed, "cannot make the self-signed certificate");
  out.fingerprint = fingerprint_of(cert.get());
  out.key = std::move(key);
  out.certificate = std::move(cert);
  return {};
}

IdentityResult load_identity(const std::string& path, Identity& out) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP)
      return fail(IdentityError::kNotRegularFile, path + ": is a symbolic link; refusing it");
    return fail(IdentityError::kOpenFailed, path + ": open: " + errno_text(err));
  }
  std::vector<char> pem;
  IdentityResult result = read_checked(fd, path, pem);
  close(fd);
  if (!result.ok()) return result;
  result = parse_pem(pem, path, out);
  OPENSSL_cleanse(pem.data(), pem.size());
  return result;
}

IdentityResult load_or_create_identity(const std::string& path, Identity& out) {
  IdentityResult loaded = load_identity(path, out);
  if (loaded.ok() || loaded.error != IdentityError::kOpenFailed) return loaded;
  if (access(path.c_str(), F_OK) == 0 || errno != ENOENT) return loaded;

  Identity fresh;
  IdentityResult generated = generate_identity(fresh);
  if (!generated.ok()) return generated;
  // O_EXCL|O_NOFOLLOW: if anything appeared at `path` since the check above (a file, a symlink
  // planted to make us write elsewhere), creation fails instead of following or truncating it.
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    int err = errno;
    if (err == EEXIST) return load_identity(path, out);  // lost a race: the other one's file
    return fail(IdentityError::kWriteFailed, path + ": create: " + errno_text(err));
  }
  // The umask may have cleared bits of 0600; the file must be exactly 0600 to be loaded again.
  IdentityResult written = fchmod(fd, 0600) == 0 ? write_new(path, fresh, fd)
                                                 : fail(IdentityError::kWriteFailed,
                                                        path + ": fchmod: " + errno_text(errno));
  close(fd);
  if (!written.ok()) {
    unlink(path.c_str());
    return written;
  }
  out = std::move(fresh);
  written.created = true;
  return written;
}

std::string format_fingerprint(const Fingerprint& fingerprint) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string text = "sha-256 ";
  for (size_t i = 0; i < fingerprint.sha256.size(); ++i) {
    if (i) text += ':';
    text += kHex[fingerprint.sha256[i] >> 4];
    text += kHex[fingerprint.sha256[i] & 0xf];
  }
  return text;
}

const char* to_string(FingerprintParseError error) {
  switch (error) {
    case FingerprintParseError::kOk:
      return "ok";
    case FingerprintParseError::kBadPrefix:
      return "not a sha-256 fingerprint";
    case FingerprintParseError::kBadLength:
      return "not 32 colon-separated hex pairs";
    case FingerprintParseError::kBadHexDigit:
      return "a character that is not a hex digit";
    case FingerprintParseError::kBadSeparator:
      return "pairs not separated by ':'";
  }
  return "?";
}

FingerprintParseError parse_fingerprint(std::string_view text, Fingerprint& out) {
  // RFC 8122 section 5: hash-func SP fingerprint; hash function names are case-insensitive
  // (RFC 4572 section 5). The command line writes "sha-256:" since a space is awkward there.
  constexpr std::string_view kName = "sha-256";
  if (text.size() > kName.size() + 1) {
    bool named = true;
    for (size_t i = 0; i < kName.size(); ++i)
      if ((text[i] | 0x20) != kName[i] && text[i] != kName[i]) named = false;
    if (named) {
      char sep = text[kName.size()];
      if (sep != ' ' && sep != ':') return FingerprintParseError::kBadPrefix;
      text.remove_prefix(kName.size() + 1);
    }
  }
  auto hex_value = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  constexpr size_t kTextLength = 32 * 3 - 1;
  if (!text.empty() && hex_value(text[0]) < 0) return FingerprintParseError::kBadPrefix;
  if (text.size() != kTextLength) return FingerprintParseError::kBadLength;
  Fingerprint fp;
  for (size_t i = 0; i < 32; ++i) {
    int high = hex_value(text[3 * i]);
    int low = hex_value(text[3 * i + 1]);
    if (high < 0 || low < 0) return FingerprintParseError::kBadHexDigit;
    if (i + 1 < 32 && text[3 * i + 2] != ':') return FingerprintParseError::kBadSeparator;
    fp.sha256[i] = static_cast<uint8_t>(high << 4 | low);
  }
  out = fp;
  return FingerprintParseError::kOk;
}

}  // namespace syncd::secure
