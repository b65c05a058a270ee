//===- Gemm.cpp - zplan's f32 GEMM for AVX-512 CPUs -----------------------===//
//
// See Gemm.h for the shape of it and why. The functions that use AVX-512
// carry GCC's target attribute, so the rest of the library stays on the
// baseline x86-64 target; useAvx512Gemm() checks the CPU before any runs.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Gemm.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12's AVX-512 intrinsics start some results from _mm512_undefined_ps,
// a variable initialized from itself, which -Wmaybe-uninitialized reports
// once they are inlined here (a false positive of the header's own).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#define ZPLAN_HAVE_AVX512_GEMM 1
#endif

namespace zplan::cpu::detail {

#ifdef ZPLAN_HAVE_AVX512_GEMM

namespace {

/// The register tile: 4 rows of C by 6 vectors of 16 columns (24 zmm
/// accumulators). Compared standalone with 12 x 32, 8 x 48 and 6 x 64 (the
/// same number of accumulators) on layers' worth of distinct operands, as
/// a forward meets them: alike with everything in cache (112-116 GFLOP/s),
/// 4 x 96 ahead by up to 8% when A and C come from L3 or memory, because
/// each element of A read feeds 96 columns instead of 32.
constexpr int kTileRows = 4;
constexpr int kTileVectors = 6;
constexpr int kPanelColumns = 16 * kTileVectors; // NR
static_assert(kPanelColumns == kPackedPanelColumns);

#define ZPLAN_AVX512 __attribute__((target("avx512f,fma")))

/// The calling thread's panel of op(B): [K][96] floats, 64-byte aligned,
/// grown as needed and kept for the thread's next GEMM.
float *threadPanel(int k) {
  struct Deleter {
    void operator()(float *p) const { std::free(p); }
  };
  thread_local std::unique_ptr<float, Deleter> panel;
  thread_local int64_t capacity = 0;
  int64_t needed = int64_t(k) * kPanelColumns;
  if (needed > capacity) {
    panel.reset(static_cast<float *>(
        std::aligned_alloc(64, sizeof(float) * static_cast<size_t>(needed))));
    capacity = needed;
  }
  return panel.get();
}

/// The mask of columns [16 v, 16 v + 16) that fall within the first `width`.
inline __mmask16 vectorMask(int width, int v) {
  int inside = std::clamp(width - 16 * v, 0, 16);
  return __mmask16((1u << inside) - 1);
}

/// Transposes the 16 x 16 block whose rows are `r` (r[i] lane j = element
/// (i, j)) into `r` (r[j] lane i = element (i, j)).
ZPLAN_AVX512 inline void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  // Pairs of rows interleaved: t[2i] lane 4l.. = r[2i][4l], r[2i+1][4l],
  // r[2i][4l+1], r[2i+1][4l+1]; t[2i+1] the same for 4l+2, 4l+3.
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // Quads: u[4i + c] holds, in its 128-bit lane l, rows 4i .. 4i+3 of
  // column 4l + c.
  for (int i = 0; i < 4; ++i) {
    __m512d t0 = _mm512_castps_pd(t[4 * i]),
            t1 = _mm512_castps_pd(t[4 * i + 1]),
            t2 = _mm512_castps_pd(t[4 * i + 2]),
            t3 = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  // Column 4l + c gathers lane l of u[c], u[4 + c], u[8 + c], u[12 + c].
  for (int c = 0; c < 4; ++c) {
    __m512 even01 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
    __m512 even23 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
    __m512 odd01 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xdd);
    __m512 odd23 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xdd);
    r[c] = _mm512_shuffle_f32x4(even01, even23, 0x88);     // l = 0
    r[8 + c] = _mm512_shuffle_f32x4(even01, even23, 0xdd); // l = 2
    r[4 + c] = _mm512_shuffle_f32x4(odd01, odd23, 0x88);   // l = 1
    r[12 + c] = _mm512_shuffle_f32x4(odd01, odd23, 0xdd);  // l = 3
  }
}

/// Copies columns [j0, j0 + width) of op(B) into `panel` ([K][96]; the
/// vectors past `width` are not written, and the tile does not read them).
ZPLAN_AVX512 void packPanel(bool transposeB, int k, int j0, int width,
                            const float *b, int ldb, float *panel) {
  int vectors = (width + 15) / 16;
  if (!transposeB) { // row k of B holds the panel's row k
    for (int kk = 0; kk < k; ++kk) {
      const float *row = b + int64_t(kk) * ldb + j0;
      for (int v = 0; v < vectors; ++v)
        _mm512_store_ps(
            panel + kk * kPanelColumns + 16 * v,
            _mm512_maskz_loadu_ps(vectorMask(width, v), row + 16 * v));
    }
    return;
  }
  // B [N, K]: the panel's column j is row j0 + j of B. Blocks of 16 rows
  // by 16 k, transposed in registers.
  for (int v = 0; v < vectors; ++v) {
    int rows = std::min(16, width - 16 * v);
    for (int k0 = 0; k0 < k; k0 += 16) {
      int depth = std::min(16, k - k0);
      __mmask16 kMask = __mmask16((1u << depth) - 1);
      __m512 r[16];
      for (int j = 0; j < 16; ++j)
        r[j] = j < rows ? _mm512_maskz_loadu_ps(
                              kMask, b + int64_t(j0 + 16 * v + j) * ldb + k0)
                        : _mm512_setzero_ps();
      transpose16(r);
      for (int kk = 0; kk < depth; ++kk)
        _mm512_store_ps(panel + (k0 + kk) * kPanelColumns + 16 * v, r[kk]);
    }
  }
}

/// The 64-byte lines (16 floats, counted from each row's first) that hold
/// columns [j0, j0 + 96) of op(B): `perRow` lines in each of `rows` rows of
/// B -- (K + 15) / 16 in each of the panel's rows of transposed B, a panel
/// row's vectors in each of K rows otherwise.
struct PanelLines {
  int rows, perRow;
  int count() const { return rows * perRow; }
};

PanelLines panelLines(bool transposeB, int n, int k, int j0) {
  int width = std::min(kPanelColumns, n - j0);
  if (transposeB)
    return {width, (k + 15) / 16};
  return {k, (width + 15) / 16};
}

/// Prefetches lines [first, first + count) of `lines` (the panel at j0's)
/// into L2. The next panel's, a share before each tile of the current one:
/// packing it then finds op(B) in L2, where a weight streamed from memory
/// (the large forward's 134 MB do not fit L3) stalled it (1% of that
/// forward).
ZPLAN_AVX512 void prefetchPanel(bool transposeB, PanelLines lines, int j0,
                                const float *b, int ldb, int first, int count) {
  int end = std::min(first + count, lines.count());
  for (int line = first; line < end; ++line) {
    int row = line / lines.perRow, part = line % lines.perRow;
    const float *address = transposeB ? b + int64_t(j0 + row) * ldb + 16 * part
                                      : b + int64_t(row) * ldb + j0 + 16 * part;
    _mm_prefetch(reinterpret_cast<const char *>(address), _MM_HINT_T1);
  }
}

/// C[R rows, the first `width` <= 16 V columns] = beta * C + alpha * A[R, K]
/// * panel: the register tile, R rows by V vectors. Each accumulator is a
/// chain of FMAs over k in order.
template <int R, int V>
ZPLAN_AVX512 void tile(int k, const float *a, int lda, const float *panel,
                       float *c, int ldc, bool loadC, float alpha, int width,
                       bool stream) {
  __m512 sums[R][V];
  __mmask16 masks[V];
  for (int v = 0; v < V; ++v)
    masks[v] = vectorMask(width, v);
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v)
      sums[i][v] =
          loadC ? _mm512_maskz_loadu_ps(masks[v], c + int64_t(i) * ldc + 16 * v)
                : _mm512_setzero_ps();
  for (int kk = 0; kk < k; ++kk) {
    __m512 columns[V];
    for (int v = 0; v < V; ++v)
      columns[v] = _mm512_load_ps(panel + 16 * v);
    panel += kPanelColumns;
    for (int i = 0; i < R; ++i) {
      __m512 ai = _mm512_set1_ps(a[int64_t(i) * lda + kk]);
      for (int v = 0; v < V; ++v)
        sums[i][v] = _mm512_fmadd_ps(ai, columns[v], sums[i][v]);
    }
  }
  if (alpha != 1.0f) {
    __m512 scale = _mm512_set1_ps(alpha);
    for (int i = 0; i < R; ++i)
      for (int v = 0; v < V; ++v)
        sums[i][v] = _mm512_mul_ps(sums[i][v], scale);
  }
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v) {
      float *to = c + int64_t(i) * ldc + 16 * v;
      if (stream && width == 16 * V)
        _mm512_stream_ps(to, sums[i][v]);
      else
        _mm512_mask_storeu_ps(to, masks[v], sums[i][v]);
    }
}

using TileFn = void (*)(int, const float *, int, const float *, float *, int,
                        bool, float, int, bool);

/// tile<R, V> for the rows past the last full tile (R = 1 .. 4) and the
/// columns of the last panel (V = 1 .. 6): kTiles[R - 1][V - 1].
template <int R, int... V>
constexpr std::array<TileFn, kTileVectors>
tilesOfRows(std::integer_sequence<int, V...>) {
  return {tile<R, V + 1>...};
}
template <int... R>
constexpr std::array<std::array<TileFn, kTileVectors>, kTileRows>
tileTable(std::integer_sequence<int, R...>) {
  return {
      tilesOfRows<R + 1>(std::make_integer_sequence<int, kTileVectors>())...};
}
constexpr auto kTiles = tileTable(std::make_integer_sequence<int, kTileRows>());

} // namespace

bool useAvx512Gemm() {
  static const bool use = [] {
    const char *choice = std::getenv("ZPLAN_GEMM");
    if (choice && std::strcmp(choice, "openblas") == 0)
      return false;
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  }();
  return use;
}

namespace {

/// Where the panels of op(B) come from: packed per call (`b` and `ldb` as
/// sgemmAvx512 takes them) or already packed by packB (`packed`).
struct PanelSource {
  bool transposeB = false;
  const float *b = nullptr;
  int ldb = 0;
  const float *packed = nullptr;
};

/// sgemmAvx512's loop over the panels, whichever their source.
ZPLAN_AVX512 void multiplyPanels(const PanelSource &source, int m, int n, int k,
                                 float alpha, const float *a, int lda,
                                 float beta, float *c, int ldc, bool streamC,
                                 const RaggedRows *ragged) {
  float *own = source.packed ? nullptr : threadPanel(k);
  int64_t panelFloats = int64_t(k) * kPanelColumns;
  bool loadC = beta != 0;
  // Non-temporal stores need every full tile row 64-byte aligned.
  bool stream =
      streamC && reinterpret_cast<uintptr_t>(c) % 64 == 0 && ldc % 16 == 0;
  int reach = n; // no panel past the blocks' columns is packed
  if (ragged && ragged->columns) {
    reach = 0;
    for (int block = 0; block * ragged->rowBlock < m; ++block)
      reach = std::max(reach, std::min(n, ragged->columns[block]));
  }
  for (int j0 = 0; j0 < reach; j0 += kPanelColumns) {
    int width = std::min(kPanelColumns, n - j0);
    const float *panel = own;
    if (source.packed)
      panel = source.packed + int64_t(j0 / kPanelColumns) * panelFloats;
    else
      packPanel(source.transposeB, k, j0, width, source.b, source.ldb, own);
    // The next panel's lines (of op(B), or of the packed panel), a share
    // before each tile of this one.
    int next = j0 + kPanelColumns;
    PanelLines lines{0, 0};
    if (next < reach)
      lines = source.packed ? PanelLines{k, kTileVectors}
                            : panelLines(source.transposeB, n, k, next);
    int tiles = (m + kTileRows - 1) / kTileRows;
    int share = (lines.count() + tiles - 1) / tiles;
    for (int i0 = 0; i0 < m; i0 += kTileRows) {
      if (share > 0) {
        int first = i0 / kTileRows * share;
        if (source.packed)
          prefetchPanel(/*transposeB=*/false, lines, 0, panel + panelFloats,
                        kPanelColumns, first, share);
        else
          prefetchPanel(source.transposeB, lines, next, source.b, source.ldb,
                        first, share);
      }
      int rows = std::min(kTileRows, m - i0), columns = width, depth = k;
      if (ragged) {
        int block = i0 / ragged->rowBlock;
        if (ragged->columns)
          columns = std::min(width, ragged->columns[block] - j0);
        if (ragged->depth)
          depth = std::min(k, ragged->depth[block]);
        if (columns <= 0)
          continue;
      }
      kTiles[rows - 1][(columns + 15) / 16 - 1](
          depth, a + int64_t(i0) * lda, lda, panel, c + int64_t(i0) * ldc + j0,
          ldc, loadC, alpha, columns, stream);
    }
  }
  // Non-temporal stores are weakly ordered: fence them before another
  // thread (the kernel pool's join) reads C.
  if (stream)
    _mm_sfence();
}

} // namespace

ZPLAN_AVX512
void sgemmAvx512(bool transposeB, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta,
                 float *c, int ldc, bool streamC, const RaggedRows *ragged) {
  PanelSource source;
  source.transposeB = transposeB;
  source.b = b;
  source.ldb = ldb;
  multiplyPanels(source, m, n, k, alpha, a, lda, beta, c, ldc, streamC, ragged);
}

int64_t packedBFloats(int n, int k) {
  return int64_t((n + kPanelColumns - 1) / kPanelColumns) * k * kPanelColumns;
}

ZPLAN_AVX512
void packB(bool transposeB, int n, int k, const float *b, int ldb,
           float *packed) {
  for (int j0 = 0; j0 < n; j0 += kPanelColumns)
    packPanel(transposeB, k, j0, std::min(kPanelColumns, n - j0), b, ldb,
              packed + int64_t(j0 / kPanelColumns) * k * kPanelColumns);
}

ZPLAN_AVX512
void sgemmAvx512Packed(int m, int n, int k, const float *a, int lda,
                       const float *packed, float beta, float *c, int ldc,
                       bool streamC) {
  PanelSource source;
  source.packed = packed;
  multiplyPanels(source, m, n, k, 1.0f, a, lda, beta, c, ldc, streamC, nullptr);
}

#else // no AVX-512 GEMM on this target

bool useAvx512Gemm() { return false; }

void sgemmAvx512(bool, int, int, int, float, const float *, int, const float *,
                 int, float, float *, int, bool, const RaggedRows *) {
  std::abort(); // useAvx512Gemm() is false: never called
}

int64_t packedBFloats(int, int) { return 0; }

void packB(bool, int, int, const float *, int, float *) { std::abort(); }

void sgemmAvx512Packed(int, int, int, const float *, int, const float *, float,
                       float *, int, bool) {
  std::abort();
}

#endif

} // namespace zplan::cpu::detail
