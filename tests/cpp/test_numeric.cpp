// numeric.h (half_t / bf16_t conversions: exact round trips, round-to-nearest-even on known bit
// patterns incl. subnormals, overflow, inf and nan) and dropout_rng.h (a pure function of its
// arguments, about uniform, the p = 0 and p = 1 limits).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/dropout_rng.h"
#include "core/numeric.h"

namespace iognn::test {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

bool half_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool bf16_is_nan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

// Every 16-bit pattern of H goes to float and back unchanged; a nan comes back as some nan.
template <typename H>
void expect_every_bit_pattern_round_trips(bool (*is_nan)(uint16_t)) {
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const H h{uint16_t(bits)};
    const float f = to_float(h);
    const uint16_t back = from_float<H>(f).bits;
    if (is_nan(h.bits)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << bits;
      EXPECT_TRUE(is_nan(back)) << std::hex << bits;
    } else {
      ASSERT_EQ(back, h.bits) << std::hex << bits;
    }
  }
}

TEST(Half, EveryBitPatternRoundTrips) { expect_every_bit_pattern_round_trips<half_t>(half_is_nan); }

TEST(Half, ToFloatKnownValues) {
  EXPECT_EQ(to_float(half_t{0x3c00}), 1.0f);
  EXPECT_EQ(to_float(half_t{0xc000}), -2.0f);
  EXPECT_EQ(to_float(half_t{0x7bff}), 65504.0f);
  EXPECT_EQ(to_float(half_t{0x0001}), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(to_float(half_t{0x03ff}), 1023 * std::ldexp(1.0f, -24));
  EXPECT_EQ(to_float(half_t{0x0400}), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(to_float(half_t{0x7c00}), std::numeric_limits<float>::infinity());
  EXPECT_EQ(to_float(half_t{0xfc00}), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(to_float(half_t{0x8000})));
  EXPECT_TRUE(std::isnan(to_float(half_t{0x7e00})));
}

TEST(Half, RoundsToNearestEven) {
  struct Case {
    float value;
    uint16_t bits;
  };
  const float ulp_sub = std::ldexp(1.0f, -24);
  const Case cases[] = {
      {1.0f, 0x3c00},
      {0.1f, 0x2e66},
      {1.0f + std::ldexp(1.0f, -11), 0x3c00},      // tie between 0x3c00 and 0x3c01: even
      {1.0f + 3 * std::ldexp(1.0f, -11), 0x3c02},  // tie between 0x3c01 and 0x3c02: even
      {65504.0f, 0x7bff},                          // largest finite
      {65519.0f, 0x7bff},                          // below the midpoint to 65536
      {65520.0f, 0x7c00},                          // the midpoint rounds (to even) to inf
      {1e5f, 0x7c00},                              // overflow
      {-65520.0f, 0xfc00},
      {ulp_sub, 0x0001},                  // smallest subnormal
      {0.5f * ulp_sub, 0x0000},           // tie between 0 and 1 ulp: even
      {0.5f * ulp_sub * 1.0001f, 0x0001},  // just above the tie
      {1.5f * ulp_sub, 0x0002},           // tie between 1 and 2 ulps: even
      {1023 * ulp_sub, 0x03ff},           // largest subnormal
      {1023.5f * ulp_sub, 0x0400},        // rounds up into the normals
      {std::ldexp(1.0f, -14), 0x0400},
      {1e-10f, 0x0000},
      {-1e-10f, 0x8000},
      {-0.0f, 0x8000},
      {std::numeric_limits<float>::infinity(), 0x7c00},
      {-std::numeric_limits<float>::infinity(), 0xfc00},
  };
  for (const Case& c : cases)
    EXPECT_EQ(from_float<half_t>(c.value).bits, c.bits) << c.value;
  EXPECT_TRUE(half_is_nan(from_float<half_t>(std::nanf("")).bits));
  EXPECT_TRUE(half_is_nan(from_float<half_t>(from_bits(0x7f800001u)).bits));  // signalling nan
}

TEST(BFloat16, EveryBitPatternRoundTrips) {
  expect_every_bit_pattern_round_trips<bf16_t>(bf16_is_nan);
}

TEST(BFloat16, RoundsToNearestEven) {
  struct Case {
    uint32_t float_bits;
    uint16_t bits;
  };
  const Case cases[] = {
      {0x3f800000u, 0x3f80},  // 1
      {0x3dcccccdu, 0x3dcd},  // 0.1
      {0x3f808000u, 0x3f80},  // tie: even
      {0x3f818000u, 0x3f82},  // tie: even
      {0x3f808001u, 0x3f81},  // above the tie
      {0xbf808000u, 0xbf80},  // negative tie
      {0x7f7fffffu, 0x7f80},  // largest float rounds to inf
      {0x7f800000u, 0x7f80},  // inf
      {0xff800000u, 0xff80},  // -inf
      {0x00000001u, 0x0000},  // float subnormals round like any other value
      {0x00008000u, 0x0000},
      {0x00018000u, 0x0002},
      {0x80000000u, 0x8000},  // -0
  };
  for (const Case& c : cases)
    EXPECT_EQ(from_float<bf16_t>(from_bits(c.float_bits)).bits, c.bits) << std::hex << c.float_bits;
  const uint16_t nan = from_float<bf16_t>(from_bits(0x7f800001u)).bits;  // signalling nan stays nan
  EXPECT_TRUE(bf16_is_nan(nan));
  EXPECT_EQ(to_float(bf16_t{0x3f80}), 1.0f);
}

TEST(Numeric, LoadStoreUseTheAccumulationType) {
  static_assert(std::is_same_v<acc_t<half_t>, float>);
  static_assert(std::is_same_v<acc_t<bf16_t>, float>);
  static_assert(std::is_same_v<acc_t<double>, double>);
  half_t h;
  store(&h, 1.5f);
  EXPECT_EQ(h.bits, 0x3e00);
  EXPECT_EQ(load(&h), 1.5f);
  double d;
  store(&d, 0.1);
  EXPECT_EQ(load(&d), 0.1);
  EXPECT_EQ(from_double<double>(1e300), 1e300);
  EXPECT_EQ(from_double<half_t>(1e300).bits, 0x7c00);
}

// ---- dropout_rng.h ----------------------------------------------------------------------------

TEST(DropoutRng, IsAPureFunctionOfItsArguments) {
  EXPECT_EQ(dropout_uniform(7, 123, 2, 4), dropout_uniform(7, 123, 2, 4));
  EXPECT_NE(dropout_uniform(7, 123, 2, 4), dropout_uniform(8, 123, 2, 4));  // seed
  EXPECT_NE(dropout_uniform(7, 123, 2, 4), dropout_uniform(7, 124, 2, 4));  // edge
  EXPECT_NE(dropout_uniform(7, 123, 2, 4), dropout_uniform(7, 123, 3, 4));  // head
}

TEST(DropoutRng, RoughlyUniformOnZeroOne) {
  constexpr int kBins = 10, kEdges = 100000, kHeads = 2;
  std::vector<int> hist(kBins, 0);
  double sum = 0;
  for (uint64_t e = 0; e < kEdges; ++e)
    for (uint64_t h = 0; h < kHeads; ++h) {
      const float u = dropout_uniform(2024, e, h, kHeads);
      ASSERT_GE(u, 0.0f);
      ASSERT_LT(u, 1.0f);
      ++hist[int(u * kBins)];
      sum += u;
    }
  const double n = double(kEdges) * kHeads, expected = n / kBins;
  EXPECT_NEAR(sum / n, 0.5, 0.005);
  for (int b = 0; b < kBins; ++b) EXPECT_NEAR(hist[b], expected, 0.03 * expected) << "bin " << b;
}

TEST(DropoutRng, ScaleLimitsAndKeepRate) {
  constexpr int kEdges = 50000;
  const float p = 0.3f;
  int kept = 0;
  for (uint64_t e = 0; e < kEdges; ++e) {
    EXPECT_EQ(dropout_scale(1, e, 0, 1, 0.0f), 1.0f);  // p = 0 keeps everything, unscaled
    EXPECT_EQ(dropout_scale(1, e, 0, 1, 1.0f), 0.0f);  // p = 1 drops everything
    const float s = dropout_scale(1, e, 0, 1, p);
    if (s != 0.0f) {
      EXPECT_EQ(s, 1.0f / (1.0f - p));
      ++kept;
    }
    // The decision is the uniform compared with p.
    EXPECT_EQ(s != 0.0f, dropout_uniform(1, e, 0, 1) >= p);
  }
  EXPECT_NEAR(double(kept) / kEdges, 1.0 - p, 0.01);
}

}  // namespace
}  // namespace iognn::test
