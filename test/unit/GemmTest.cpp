//===- GemmTest.cpp - zplan's AVX-512 GEMM against a loop in double -------===//
//
// sgemmAvx512 (runtime/cpu/Gemm.h) on shapes that cut its 4 x 96 tile and
// its 16 x 16 transposes everywhere -- rows, columns and depth one short of
// a block, one past, one block, several -- with and without transposed B,
// a C to accumulate onto, a scale, padded leading dimensions and streamed
// stores. Each element is checked against the product in double within
// the bound of a K-term f32 sum; the elements past each row's N are
// checked untouched. Then the property the kernel threads rely on: a
// band of rows or of columns, computed alone, holds the same bits as the
// same elements of the whole product.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

using namespace zplan::cpu::detail;

namespace {

constexpr float kSentinel = -12345.0f;

std::mt19937 &rng() {
  static std::mt19937 generator(77);
  return generator;
}

std::vector<float> randomValues(size_t count) {
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float &x : values)
    x = value(rng());
  return values;
}

/// A 64-byte aligned float buffer (streamed stores need it), filled with
/// kSentinel.
struct Aligned {
  struct Free {
    void operator()(float *p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> storage;
  size_t count;
  explicit Aligned(size_t count)
      : storage(static_cast<float *>(
            std::aligned_alloc(64, 64 * ((sizeof(float) * count + 63) / 64)))),
        count(count) {
    std::fill(get(), get() + count, kSentinel);
  }
  float *get() const { return storage.get(); }
};

struct Case {
  int m, n, k;
  bool transposeB;
  float alpha, beta;
  int pad; // extra elements per row of A, B and C
  bool stream;
};

std::string describe(const Case &c) {
  return "M=" + std::to_string(c.m) + " N=" + std::to_string(c.n) +
         " K=" + std::to_string(c.k) + (c.transposeB ? " B^T" : " B") +
         " alpha=" + std::to_string(c.alpha) +
         " beta=" + std::to_string(c.beta) + " pad=" + std::to_string(c.pad) +
         (c.stream ? " streamed" : "");
}

void checkCase(const Case &c) {
  SCOPED_TRACE(describe(c));
  int lda = c.k + c.pad, ldc = c.n + c.pad;
  int ldb = (c.transposeB ? c.k : c.n) + c.pad;
  int bRows = c.transposeB ? c.n : c.k;
  std::vector<float> a = randomValues(size_t(c.m) * lda);
  std::vector<float> b = randomValues(size_t(bRows) * ldb);
  std::vector<float> start = randomValues(size_t(c.m) * ldc);
  Aligned result(size_t(c.m) * ldc);
  for (int i = 0; i < c.m; ++i)
    for (int j = 0; j < c.n; ++j)
      result.get()[i * ldc + j] = start[i * ldc + j];

  sgemmAvx512(c.transposeB, c.m, c.n, c.k, c.alpha, a.data(), lda, b.data(),
              ldb, c.beta, result.get(), ldc, c.stream);

  int failures = 0;
  for (int i = 0; i < c.m && failures < 5; ++i) {
    for (int j = 0; j < ldc && failures < 5; ++j) {
      float got = result.get()[i * ldc + j];
      if (j >= c.n) {
        if (std::memcmp(&got, &kSentinel, sizeof(float)) != 0) {
          ADD_FAILURE() << "(" << i << ", " << j << ") past N was written";
          ++failures;
        }
        continue;
      }
      double sum = 0, magnitude = 0;
      for (int kk = 0; kk < c.k; ++kk) {
        double bValue =
            c.transposeB ? b[size_t(j) * ldb + kk] : b[size_t(kk) * ldb + j];
        sum += double(a[size_t(i) * lda + kk]) * bValue;
        magnitude += std::abs(double(a[size_t(i) * lda + kk]) * bValue);
      }
      double expected = c.alpha * sum + c.beta * start[i * ldc + j];
      double bound = (c.k + 2) * std::numeric_limits<float>::epsilon() *
                     (std::abs(c.alpha) * magnitude +
                      std::abs(c.beta * start[i * ldc + j]));
      if (!(std::abs(got - expected) <= bound)) {
        ADD_FAILURE() << "(" << i << ", " << j << "): got " << got
                      << ", expected " << expected << " within " << bound;
        ++failures;
      }
    }
  }
}

class Avx512Gemm : public ::testing::Test {
protected:
  void SetUp() override {
    if (!useAvx512Gemm())
      GTEST_SKIP() << "no AVX-512 here (or ZPLAN_GEMM=openblas)";
  }
};

TEST_F(Avx512Gemm, MatchesTheProductInDouble) {
  for (int m : {1, 3, 4, 5, 7, 13})
    for (int n : {1, 15, 16, 17, 33, 95, 96, 97, 150, 200})
      for (int k : {0, 1, 15, 16, 17, 40})
        for (bool transposeB : {false, true})
          checkCase({m, n, k, transposeB, 1.0f, 0.0f, 0, false});
}

TEST_F(Avx512Gemm, AccumulatesScalesAndStridesAndStreams) {
  for (bool transposeB : {false, true}) {
    // Onto C (the bias Matmul.cpp writes first), and scaled (attention's
    // scores).
    checkCase({29, 45, 33, transposeB, 1.0f, 1.0f, 0, false});
    checkCase({29, 45, 33, transposeB, 0.125f, 0.0f, 0, false});
    // Padded rows: nothing past each row's N is written.
    checkCase({26, 50, 19, transposeB, 1.0f, 0.0f, 3, false});
    checkCase({26, 50, 19, transposeB, 1.0f, 1.0f, 5, false});
    for (int n : {31, 33, 111, 127}) // last panels 31, 33, 15, 31 wide
      checkCase({13, n, 9, transposeB, 1.0f, 0.0f, 1, false});
    // Streamed stores: full tiles on aligned rows (ldc a multiple of 16),
    // masked stores on the last panel; unaligned rows fall back.
    checkCase({37, 208, 24, transposeB, 1.0f, 0.0f, 0, true});
    checkCase({37, 208, 24, transposeB, 1.0f, 1.0f, 0, true});
    checkCase({37, 200, 24, transposeB, 1.0f, 0.0f, 1, true});
  }
}

/// C[m, n] of the whole product, then rows [r0, r1) and columns [c0, c1)
/// computed alone: the same bytes.
TEST_F(Avx512Gemm, BandsAreTheSameBitsAsTheWhole) {
  int m = 61, n = 230, k = 77;
  for (bool transposeB : {false, true}) {
    for (float beta : {0.0f, 1.0f}) {
      SCOPED_TRACE(std::string(transposeB ? "B^T" : "B") + " beta " +
                   std::to_string(beta));
      int ldb = transposeB ? k : n;
      std::vector<float> a = randomValues(size_t(m) * k);
      std::vector<float> b = randomValues(size_t(transposeB ? n : k) * ldb);
      std::vector<float> start = randomValues(size_t(m) * n);
      std::vector<float> whole = start;
      sgemmAvx512(transposeB, m, n, k, 1.0f, a.data(), k, b.data(), ldb, beta,
                  whole.data(), n, false);
      // Rows 7 .. 30 (a band that starts inside a tile).
      std::vector<float> rows = start;
      sgemmAvx512(transposeB, 23, n, k, 1.0f, a.data() + 7 * k, k, b.data(),
                  ldb, beta, rows.data() + 7 * n, n, false);
      // Columns 50 .. 169 (from inside a panel, across the next).
      std::vector<float> columns = start;
      const float *bColumns = transposeB ? b.data() + 50 * ldb : b.data() + 50;
      sgemmAvx512(transposeB, m, 120, k, 1.0f, a.data(), k, bColumns, ldb, beta,
                  columns.data() + 50, n, false);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          if (i >= 7 && i < 30) {
            ASSERT_EQ(std::memcmp(&rows[i * n + j], &whole[i * n + j], 4), 0)
                << "row band (" << i << ", " << j << ")";
          }
          if (j >= 50 && j < 170) {
            ASSERT_EQ(std::memcmp(&columns[i * n + j], &whole[i * n + j], 4), 0)
                << "column band (" << i << ", " << j << ")";
          }
        }
    }
  }
}

/// RaggedRows: each block of rows writes only its columns, each a sum over
/// its depth only -- the same bits as a product of that depth -- and leaves
/// the rest of C as it was. A null `columns` or `depth` is all of N or K.
TEST_F(Avx512Gemm, RaggedRowsComputeOnlyTheirColumnsAndDepth) {
  int m = 40, n = 150, k = 37, ldc = n;
  // Blocks of 16 rows (the last partial): columns 20, 200 (cut to N), 97;
  // depths 5, 37, 0.
  const std::vector<int> columns = {20, 200, 97}, depth = {5, 37, 0};
  for (bool transposeB : {false, true}) {
    for (int given : {0, 1, 2}) { // both, columns only, depth only
      SCOPED_TRACE(std::string(transposeB ? "B^T" : "B") + ", given " +
                   std::to_string(given));
      int ldb = transposeB ? k : n;
      std::vector<float> a = randomValues(size_t(m) * k);
      std::vector<float> b = randomValues(size_t(transposeB ? n : k) * ldb);
      RaggedRows ragged{16, given != 2 ? columns.data() : nullptr,
                        given != 1 ? depth.data() : nullptr};
      std::vector<float> c(size_t(m) * ldc, kSentinel);
      sgemmAvx512(transposeB, m, n, k, 0.5f, a.data(), k, b.data(), ldb, 0.0f,
                  c.data(), ldc, false, &ragged);
      for (int block = 0; block < 3; ++block) {
        int first = 16 * block, rows = std::min(16, m - first);
        int width = ragged.columns ? std::min(n, columns[block]) : n;
        int blockDepth = ragged.depth ? depth[block] : k;
        // The same rows as a plain product of that depth.
        std::vector<float> plain(size_t(rows) * ldc, kSentinel);
        if (width > 0)
          sgemmAvx512(transposeB, rows, width, blockDepth, 0.5f,
                      a.data() + size_t(first) * k, k, b.data(), ldb, 0.0f,
                      plain.data(), ldc, false);
        for (int i = 0; i < rows; ++i)
          for (int j = 0; j < n; ++j) {
            float got = c[size_t(first + i) * ldc + j];
            float expected = j < width ? plain[size_t(i) * ldc + j] : kSentinel;
            ASSERT_EQ(std::memcmp(&got, &expected, 4), 0)
                << "block " << block << " (" << i << ", " << j << ")";
          }
      }
    }
  }
}

} // namespace

/// packB then sgemmAvx512Packed (a weight packed once, StationaryWeights.h):
/// the same bits as sgemmAvx512 packing per call, for B and B^T, onto C
/// and not, streamed, on N that ends a panel early and on bands of rows
/// and of whole panels (Matmul.cpp's gemmPacked); nothing past N written.
TEST_F(Avx512Gemm, PackedOnceIsTheSameBitsAsPackedPerCall) {
  int m = 45, k = 53;
  for (int n : {1, 95, 96, 97, 230})
    for (bool transposeB : {false, true})
      for (float beta : {0.0f, 1.0f})
        for (bool stream : {false, true}) {
          SCOPED_TRACE("N=" + std::to_string(n) + (transposeB ? " B^T" : " B") +
                       " beta " + std::to_string(beta) +
                       (stream ? " streamed" : ""));
          int ldb = transposeB ? k + 3 : n + 3, ldc = n + 16;
          std::vector<float> a = randomValues(size_t(m) * k);
          std::vector<float> b = randomValues(size_t(transposeB ? n : k) * ldb);
          std::vector<float> start = randomValues(size_t(m) * ldc);
          Aligned packed(static_cast<size_t>(packedBFloats(n, k)));
          packB(transposeB, n, k, b.data(), ldb, packed.get());

          Aligned perCall(start.size()), once(start.size());
          std::copy(start.begin(), start.end(), perCall.get());
          std::copy(start.begin(), start.end(), once.get());
          sgemmAvx512(transposeB, m, n, k, 1.0f, a.data(), k, b.data(), ldb,
                      beta, perCall.get(), ldc, stream);
          sgemmAvx512Packed(m, n, k, a.data(), k, packed.get(), beta,
                            once.get(), ldc, stream);
          ASSERT_EQ(std::memcmp(perCall.get(), once.get(), 4 * start.size()),
                    0);

          // Rows 9 .. 30 alone; the panels from the second on alone.
          Aligned rows(start.size()), panels(start.size());
          std::copy(start.begin(), start.end(), rows.get());
          std::copy(start.begin(), start.end(), panels.get());
          sgemmAvx512Packed(21, n, k, a.data() + 9 * k, k, packed.get(), beta,
                            rows.get() + 9 * ldc, ldc, stream);
          if (n > 96)
            sgemmAvx512Packed(m, n - 96, k, a.data(), k,
                              packed.get() + int64_t(k) * 96, beta,
                              panels.get() + 96, ldc, stream);
          for (int i = 0; i < m; ++i)
            for (int j = 0; j < ldc; ++j) {
              const float *whole = &perCall.get()[i * ldc + j];
              const float *before = &start[size_t(i) * ldc + j];
              bool inRows = i >= 9 && i < 30 && j < n;
              bool inPanels = n > 96 && j >= 96 && j < n;
              ASSERT_EQ(std::memcmp(&rows.get()[i * ldc + j],
                                    inRows ? whole : before, 4),
                        0)
                  << "row band (" << i << ", " << j << ")";
              ASSERT_EQ(std::memcmp(&panels.get()[i * ldc + j],
                                    inPanels ? whole : before, 4),
                        0)
                  << "panel band (" << i << ", " << j << ")";
            }
        }
}
