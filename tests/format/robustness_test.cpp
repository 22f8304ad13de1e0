// No input, however corrupt, may crash, abort or hang the reader (docs/design.md §3). These tests
// feed it truncations, random bytes and bit flips; run them under the sanitizers too.
#include <random>

#include <gtest/gtest.h>

#include "format/fb_types.h"
#include "format/program_corruption.h"

namespace planrt::format {
namespace {

std::vector<uint8_t> cuda_file() {
  fixtures::ReluAddOptions o;
  o.on_cuda = true;
  auto f = fixtures::two_method_program(o);
  auto bytes = f.serialize();
  EXPECT_TRUE(bytes.ok());
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

// Touches everything a successful load promises is safe to use.
void use_everything(const ProgramFile& file) {
  const fb::Program& p = file.program();
  for (const fb::Method* m : items(p.methods())) {
    for (const fb::Value* v : items(m->values())) {
      EXPECT_TRUE(value_max_nbytes(*v, m->dims()).ok());
    }
  }
  for (uint32_t i = 0; i < count(p.constants()); ++i) {
    auto data = file.constant_data(i);
    volatile uint8_t sink = 0;
    for (uint8_t b : data) sink = sink ^ b;
    (void)sink;
  }
}

TEST(ReaderRobustness, EveryTruncationFailsCleanly) {
  const std::vector<uint8_t> bytes = cuda_file();
  ASSERT_FALSE(bytes.empty());
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    auto r = ProgramFile::from_bytes(std::move(cut));
    ASSERT_FALSE(r.ok()) << "a file cut to " << n << " of " << bytes.size() << " bytes loaded";
    EXPECT_EQ(r.status().code(), ErrorCode::InvalidProgram) << n;
  }
  EXPECT_TRUE(ProgramFile::from_bytes(bytes).ok());
}

TEST(ReaderRobustness, RandomBytesFailCleanly) {
  std::mt19937_64 rng(12345);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<uint8_t> bytes(rng() % 600);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    auto r = ProgramFile::from_bytes(std::move(bytes));
    EXPECT_FALSE(r.ok()) << trial;
    EXPECT_EQ(r.status().code(), ErrorCode::InvalidProgram) << trial << ": " << r.status().to_string();
  }
}

TEST(ReaderRobustness, RandomBytesBehindAValidHeaderFailCleanly) {
  const std::vector<uint8_t> good = cuda_file();
  const FileHeader h = read_header(good);
  std::mt19937_64 rng(777);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<uint8_t> bytes = good;
    for (size_t i = 64; i < 64 + h.flatbuffer_size; ++i) bytes[i] = static_cast<uint8_t>(rng());
    auto r = ProgramFile::from_bytes(std::move(bytes));
    EXPECT_FALSE(r.ok()) << trial;
    EXPECT_EQ(r.status().code(), ErrorCode::InvalidProgram) << trial << ": " << r.status().to_string();
    // Its identifier is random too: the FlatBuffer verifier refuses it.
    EXPECT_NE(r.status().message().find("is not a valid program"), std::string::npos)
        << trial << ": " << r.status().message();
  }
}

TEST(ReaderRobustness, BitFlipsEitherFailOrLoadSomethingSafeToUse) {
  const std::vector<uint8_t> good = cuda_file();
  const FileHeader h = read_header(good);
  std::mt19937_64 rng(4242);
  int refused = 0;
  const int trials = 20000;
  for (int trial = 0; trial < trials; ++trial) {
    std::vector<uint8_t> bytes = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      // Mostly inside the header and FlatBuffer, where the structure is.
      size_t at = rng() % (64 + h.flatbuffer_size);
      bytes[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
    }
    auto r = ProgramFile::from_bytes(std::move(bytes));
    if (!r.ok()) {
      ++refused;
      EXPECT_FALSE(r.status().message().empty());
      continue;
    }
    use_everything(*r);
  }
  // Most flips hit something checked; if none were refused the checks are not running.
  EXPECT_GT(refused, trials / 10);
}

}  // namespace
}  // namespace planrt::format
