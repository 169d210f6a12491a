#include <fcntl.h>
#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "secure/certificate.h"

namespace syncd::secure {
namespace {

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/secure_cert_XXXXXX";
    path_ = mkdtemp(pattern);
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  std::string file(const char* name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

TEST(SecureCertificate, CreatesOnFirstStartWithMode0600AndLoadsTheSameLater) {
  TempDir dir;
  std::string path = dir.file("relay.pem");
  Identity first;
  IdentityResult created = load_or_create_identity(path, first);
  ASSERT_TRUE(created.ok()) << created.message;
  EXPECT_TRUE(created.created);
  struct stat st {};
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, geteuid());
  // The key is ECDSA P-256 and the certificate self-signed by it.
  ASSERT_EQ(EVP_PKEY_get_base_id(first.key.get()), EVP_PKEY_EC);
  char group[32] = {};
  size_t group_len = 0;
  ASSERT_EQ(EVP_PKEY_get_group_name(first.key.get(), group, sizeof group, &group_len), 1);
  EXPECT_STREQ(group, "prime256v1");
  EXPECT_EQ(X509_verify(first.certificate.get(), first.key.get()), 1);

  Identity second;
  IdentityResult loaded = load_or_create_identity(path, second);
  ASSERT_TRUE(loaded.ok()) << loaded.message;
  EXPECT_FALSE(loaded.created);
  EXPECT_EQ(second.fingerprint, first.fingerprint);
  EXPECT_EQ(EVP_PKEY_eq(first.key.get(), second.key.get()), 1);
}

TEST(SecureCertificate, CreatesExactly0600EvenUnderAPermissiveOrStrictUmask) {
  TempDir dir;
  for (mode_t mask : {0000, 0022, 0277}) {
    mode_t old = umask(mask);
    std::string path = dir.file(("u" + std::to_string(mask) + ".pem").c_str());
    Identity identity;
    IdentityResult result = load_or_create_identity(path, identity);
    umask(old);
    ASSERT_TRUE(result.ok()) << result.message;
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u) << "umask " << mask;
  }
}

TEST(SecureCertificate, RefusesAFileWithAnyOtherMode) {
  TempDir dir;
  std::string path = dir.file("relay.pem");
  Identity identity;
  ASSERT_TRUE(load_or_create_identity(path, identity).ok());
  for (mode_t mode : {0644, 0640, 0604, 0400, 0700, 0660, 04600}) {
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
    Identity again;
    IdentityResult result = load_or_create_identity(path, again);
    EXPECT_EQ(result.error, IdentityError::kWrongMode) << std::oct << mode;
    EXPECT_NE(result.message.find("0600"), std::string::npos) << result.message;
    EXPECT_FALSE(again.key);
  }
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  Identity again;
  EXPECT_TRUE(load_or_create_identity(path, again).ok());
}

TEST(SecureCertificate, RefusesASymlinkEvenToAGoodFileAndDoesNotCreateThroughIt) {
  TempDir dir;
  std::string real = dir.file("real.pem");
  Identity identity;
  ASSERT_TRUE(load_or_create_identity(real, identity).ok());
  std::string link = dir.file("link.pem");
  ASSERT_EQ(symlink(real.c_str(), link.c_str()), 0);
  Identity through;
  IdentityResult result = load_or_create_identity(link, through);
  EXPECT_EQ(result.error, IdentityError::kNotRegularFile);
  EXPECT_NE(result.message.find("symbolic link"), std::string::npos) << result.message;

  // A dangling symlink must not make us create the file it points to.
  std::string target = dir.file("planted.pem");
  std::string dangling = dir.file("dangling.pem");
  ASSERT_EQ(symlink(target.c_str(), dangling.c_str()), 0);
  result = load_or_create_identity(dangling, through);
  EXPECT_FALSE(result.ok());
  EXPECT_NE(access(target.c_str(), F_OK), 0) << "created through a dangling symlink";
}

TEST(SecureCertificate, RefusesADirectoryAndAFifo) {
  TempDir dir;
  std::string sub = dir.file("sub");
  ASSERT_EQ(mkdir(sub.c_str(), 0700), 0);
  Identity identity;
  EXPECT_EQ(load_or_create_identity(sub, identity).error, IdentityError::kNotRegularFile);
  std::string fifo = dir.file("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(load_or_create_identity(fifo, identity).error, IdentityError::kNotRegularFile);
}

TEST(SecureCertificate, RefusesAFileOfAnotherOwner) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to chown";
  TempDir dir;
  std::string path = dir.file("relay.pem");
  Identity identity;
  ASSERT_TRUE(load_or_create_identity(path, identity).ok());
  ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
  Identity again;
  IdentityResult result = load_or_create_identity(path, again);
  EXPECT_EQ(result.error, IdentityError::kWrongOwner);
  EXPECT_NE(result.message.find("65534"), std::string::npos) << result.message;
}

TEST(SecureCertificate, RefusesGarbageAndAMismatchedKeyAndCertificate) {
  TempDir dir;
  std::string path = dir.file("garbage.pem");
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "not a pem\n", 10), 10);
  close(fd);
  Identity identity;
  EXPECT_EQ(load_or_create_identity(path, identity).error, IdentityError::kReadFailed);

  // Key of one identity, certificate of another.
  Identity a, b;
  ASSERT_TRUE(generate_identity(a).ok());
  ASSERT_TRUE(generate_identity(b).ok());
  std::string mixed = dir.file("mixed.pem");
  FILE* f = fopen(mixed.c_str(), "w");
  ASSERT_TRUE(f);
  PEM_write_PrivateKey(f, a.key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  PEM_write_X509(f, b.certificate.get());
  fclose(f);
  ASSERT_EQ(chmod(mixed.c_str(), 0600), 0);
  IdentityResult result = load_identity(mixed, identity);
  EXPECT_EQ(result.error, IdentityError::kReadFailed);
  EXPECT_NE(result.message.find("does not belong"), std::string::npos) << result.message;

  EXPECT_EQ(load_identity(dir.file("missing.pem"), identity).error, IdentityError::kOpenFailed);
}

TEST(SecureFingerprint, IsTheSha256OfTheDerCertificate) {
  Identity identity;
  ASSERT_TRUE(generate_identity(identity).ok());
  unsigned char* der = nullptr;
  int der_len = i2d_X509(identity.certificate.get(), &der);
  ASSERT_GT(der_len, 0);
  uint8_t digest[32];
  unsigned int digest_len = 0;
  ASSERT_EQ(EVP_Digest(der, der_len, digest, &digest_len, EVP_sha256(), nullptr), 1);
  OPENSSL_free(der);
  EXPECT_EQ(0, std::memcmp(digest, identity.fingerprint.sha256.data(), 32));
  // Two identities differ.
  Identity other;
  ASSERT_TRUE(generate_identity(other).ok());
  EXPECT_NE(identity.fingerprint, other.fingerprint);
}

TEST(SecureFingerprint, FormatsLikeSdp) {
  Fingerprint fp;
  for (size_t i = 0; i < 32; ++i) fp.sha256[i] = static_cast<uint8_t>(i * 8 + 0x0a);
  std::string text = format_fingerprint(fp);
  EXPECT_EQ(text,
            "sha-256 0A:12:1A:22:2A:32:3A:42:4A:52:5A:62:6A:72:7A:82:8A:92:9A:A2:AA:B2:BA:C2:CA:"
            "D2:DA:E2:EA:F2:FA:02");
  EXPECT_EQ(text.size(), 8u + 95u);
}

TEST(SecureFingerprint, ParsesEveryAcceptedFormAndRoundTrips) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 200; ++round) {
    Fingerprint fp;
    for (auto& b : fp.sha256) b = static_cast<uint8_t>(rng());
    std::string upper = format_fingerprint(fp);
    std::string hex = upper.substr(8);
    std::string lower = hex;
    for (auto& c : lower) c = static_cast<char>(std::tolower(c));
    for (const std::string& text :
         {upper, "sha-256:" + hex, "SHA-256 " + lower, "Sha-256 " + hex, hex, lower}) {
      Fingerprint parsed;
      ASSERT_EQ(parse_fingerprint(text, parsed), FingerprintParseError::kOk) << text;
      EXPECT_EQ(parsed, fp) << text;
    }
  }
}

TEST(SecureFingerprint, RefusesEverythingElseWithAReason) {
  const std::string good = format_fingerprint(Fingerprint{}).substr(8);  // 00:00:...
  struct Case {
    std::string text;
    FingerprintParseError error;
  };
  const Case cases[] = {
      {"", FingerprintParseError::kBadLength},
      {"sha-1 " + good, FingerprintParseError::kBadPrefix},
      {"sha-512 " + good, FingerprintParseError::kBadPrefix},
      {"sha-256" + good, FingerprintParseError::kBadPrefix},
      {"sha-256  " + good, FingerprintParseError::kBadPrefix},
      {" " + good, FingerprintParseError::kBadPrefix},
      {good + " ", FingerprintParseError::kBadLength},
      {good.substr(0, good.size() - 3), FingerprintParseError::kBadLength},
      {good + ":00", FingerprintParseError::kBadLength},
      {"0G" + good.substr(2), FingerprintParseError::kBadHexDigit},
      {good.substr(0, 2) + "-" + good.substr(3), FingerprintParseError::kBadSeparator},
      {std::string(95, '0'), FingerprintParseError::kBadSeparator},
      {"sha-256 " + std::string(95, 'x'), FingerprintParseError::kBadPrefix},
  };
  for (const Case& c : cases) {
    Fingerprint out;
    out.sha256.fill(0x5a);
    EXPECT_EQ(parse_fingerprint(c.text, out), c.error) << "'" << c.text << "'";
    EXPECT_EQ(out.sha256[0], 0x5a) << "written on failure: " << c.text;
    EXPECT_STRNE(to_string(c.error), "?");
  }
}

}  // namespace
}  // namespace syncd::secure
