//===- AttentionTiles.cuh - the tiles attention and its gradient share ----===//
//
// nn.attention (Attention.cu) and nn.attention_grad (AttentionGrad.cu) are
// flash-style: no [S, T] scores tensor ever reaches global memory. A block
// of kThreads threads owns 64 x 64 tiles of the scores of one (batch, head)
// entry and recomputes them from q and k whenever it needs them. The pieces
// both files build their kernels from are here:
//
//  - AttentionParams: the operands' device addresses, extents, scale and
//    mask of one call, built on the host from the checks the CPU runs too
//    (ops::checkAttention / checkAttentionGrad, runtime/ops/AttentionOps.h),
//    so shapes, mask rules and messages are the CPU's;
//  - dotTile(): a 64 x 64 tile of A B^T for row-major A [rows, n],
//    B [rows, n], staged through shared memory in 32-wide slices of n
//    (scores = q k^T, and attention_grad's dP = dout v^T);
//  - maskScores(): scale and mask applied exactly as the CPU's
//    attentionProbabilities does (scale * dot, then the additive mask
//    added, or masked_value where a select mask is false);
//  - accumulateTile(): out[64, W] += W[64, 64] X[64, W] (or W^T X) with the
//    weights in shared memory and X staged 16 rows at a time (P v in the
//    forward, dS k, dS^T q and P^T dout in the backward).
//
// Thread layout inside a tile: thread (ty, tx) = (threadIdx.x / 16,
// threadIdx.x % 16) owns rows ty + 16 i and columns tx + 16 j (i, j < 4),
// so the 16 threads of one row are 16 consecutive lanes of one warp (row
// reductions are 4 xor-shuffles) and shared-memory reads are conflict-free
// (a row's values are broadcast; 16 consecutive columns hit distinct
// banks), two consecutive elements at a time (float2) along the
// contracted dimension.
// Output chunks are W = 16 * COLS columns wide (COLS = 4 or 8); a wider
// value/head dimension is covered by more blocks, each recomputing its
// scores. q, k and v may each be bf16 (mixed precision): TileInput widens
// them as the tiles load them; everything after the load is f32.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CUDA_ATTENTIONTILES_CUH
#define ZPLAN_RUNTIME_CUDA_ATTENTIONTILES_CUH

#include "runtime/cuda/DeviceSupport.cuh"
#include "runtime/cuda/Strided.cuh"
#include "runtime/ops/AttentionOps.h"
#include "runtime/support/Bfloat16.h"

#include <climits>

namespace zplan::cuda::attention {

/// Rows (queries) and columns (keys) of a scores tile.
constexpr int kTile = 64;
constexpr int kThreads = 256;
/// Each thread's rows and score columns: kTile / 16.
constexpr int kPerThread = 4;
/// The slice of the contracted dimension dotTile stages at a time.
constexpr int kInner = 32;
/// Rows of X accumulateTile stages at a time.
constexpr int kStage = 16;

/// One call's operands and attributes, passed to the kernels by value.
/// An input of the attention kernels as the tiles load it: f32, or bf16
/// (mixed precision's q, k or v) widened as each element is loaded into
/// shared memory -- what an f32 cast of it would hold, without that copy.
/// Which one is a flag, the same for every thread of a launch.
struct TileInput {
  const void *data = nullptr;
  bool bf16 = false;

  TileInput() = default;
  __host__ __device__ TileInput(const float *f32) : data(f32) {}
  __host__ __device__ TileInput(const void *data, bool bf16)
      : data(data), bf16(bf16) {}
  /// The call's operand `input` (f32 or bf16, as the checks allow).
  static TileInput of(const TensorRef &input) {
    return {input.data, input.dtype == ElementType::BF16};
  }

  __device__ float operator[](int64_t i) const {
    return bf16 ? bf16ToFloat(static_cast<const uint16_t *>(data)[i])
                : static_cast<const float *>(data)[i];
  }
  __host__ __device__ TileInput operator+(int64_t offset) const {
    if (bf16)
      return {static_cast<const uint16_t *>(data) + offset, true};
    return {static_cast<const float *>(data) + offset, false};
  }
};

struct AttentionParams {
  TileInput q, k, v;
  int64_t entries = 0, s = 0, t = 0, d = 0, dv = 0;
  float scale = 1;
  const float *additive = nullptr;
  const uint8_t *select = nullptr;
  float maskedValue = 0;
  /// Entry -> where its mask elements start; then s and t step with the
  /// row and column strides (0 where the mask broadcasts).
  StridedLayout<1> maskBatch;
  int64_t maskRowStride = 0, maskColumnStride = 0;
};

/// The shared checks of an attention call (ops::checkAttention or
/// checkAttentionGrad): arity, types, shapes, scale and mask.
using AttentionCheck = Status (*)(const ops::KernelCall &,
                                  ops::AttentionShape &, float &,
                                  ops::AttentionMask &);

/// Runs `check` on the call, then fills `params` from the checked shape,
/// scale and mask (q, k, v: the call's operands `first`, `first + 1`,
/// `first + 2`).
inline Status readAttention(const KernelCall &call, AttentionCheck check,
                            size_t first, ops::AttentionShape &shape,
                            AttentionParams &params) {
  float scale;
  ops::AttentionMask mask;
  if (Status status = check(call.host, shape, scale, mask); !status.ok())
    return status;
  const std::vector<TensorRef> &operands = call.host.operands;
  params.q = TileInput::of(operands[first]);
  params.k = TileInput::of(operands[first + 1]);
  params.v = TileInput::of(operands[first + 2]);
  params.entries = ops::product(shape.batch);
  params.s = shape.s;
  params.t = shape.t;
  params.d = shape.d;
  params.dv = shape.dv;
  params.scale = scale;
  params.additive = mask.additive;
  params.select = mask.select;
  params.maskedValue = mask.maskedValue;
  params.maskRowStride = mask.rowStride;
  params.maskColumnStride = mask.columnStride;
  return makeStridedLayout<1>(call, shape.batch, {mask.batchStrides}, {0},
                              params.maskBatch);
}

/// Issues zeros into f32 `tensor` (an output an empty dimension leaves 0).
inline Status zeroFill(const KernelCall &call, const TensorRef &tensor) {
  return checkCuda(call,
                   cudaMemsetAsync(tensor.data, 0,
                                   tensor.numElements() * sizeof(float),
                                   call.device.stream),
                   "cudaMemsetAsync");
}

/// Columns per output chunk: 64, or 128 for a wider dimension.
inline int chunkColumns(int64_t width) { return width <= 64 ? 64 : 128; }

/// Chunks of chunkColumns(width) covering `width`.
inline int64_t chunkCount(int64_t width) {
  int64_t columns = chunkColumns(width);
  return (width + columns - 1) / columns;
}

/// Calls launch(grid) for a 1-D grid of `blocks` (nothing when there are
/// none; an error past gridDim.x's limit), then checks the launch.
template <typename Launch>
Status launchBlocks(const KernelCall &call, int64_t blocks, Launch &&launch) {
  if (blocks == 0)
    return Status::success();
  if (blocks > INT_MAX)
    return call.error("needs " + std::to_string(blocks) +
                      " thread blocks, more than one launch holds");
  launch(static_cast<unsigned>(blocks));
  return launched(call);
}

/// What one block of a 1-D grid of (entry, row tile, output chunk) -- the
/// chunk fastest, so that the blocks of one tile run together and share
/// their q and k in L2 -- works on: its (batch, head) entry and that
/// entry's q, k, v and first mask element, the first of its 64 rows (query
/// rows, or key rows for dk and dv), and its first output column.
struct TileBlock {
  int64_t entry = 0, row0 = 0, column0 = 0, maskBase = 0;
  TileInput q, k, v;
};

template <int COLS>
__device__ inline TileBlock tileBlock(const AttentionParams &p,
                                      int64_t rowTiles, int64_t chunks) {
  TileBlock tile;
  int64_t block = blockIdx.x;
  tile.column0 = block % chunks * 16 * COLS;
  block /= chunks;
  tile.row0 = block % rowTiles * kTile;
  tile.entry = block / rowTiles;
  tile.q = p.q + tile.entry * p.s * p.d;
  tile.k = p.k + tile.entry * p.t * p.d;
  tile.v = p.v + tile.entry * p.t * p.dv;
  if (p.additive || p.select) {
    int64_t offset[1];
    p.maskBatch.locate(tile.entry, offset);
    tile.maskBase = offset[0];
  }
  return tile;
}

/// Shared memory of dotTile: one 64 x kInner slice of each operand. A row
/// is kInner + 2 floats: 8-byte aligned, so a thread reads two consecutive
/// x as one float2 (half the shared-memory instructions of scalar reads,
/// which bound the tile otherwise), and 16 consecutive rows -- the 16
/// columns of one tile row -- then cover 32 distinct banks.
constexpr int kStageRow = kInner + 2;
struct DotStage {
  alignas(8) float a[kTile][kStageRow];
  alignas(8) float b[kTile][kStageRow];
};

/// fmaf over the two pairs, in order: the sum of scalar steps.
__device__ inline float fma2(float2 a, float2 b, float acc) {
  return fmaf(a.y, b.y, fmaf(a.x, b.x, acc));
}

__device__ inline int tileRow() { return threadIdx.x / 16; }
__device__ inline int tileColumn() { return threadIdx.x % 16; }

/// acc[i][j] = sum_x a[a0 + ty + 16 i][x] * b[b0 + tx + 16 j][x] over
/// x < n, for row-major a [aRows, n] and b [bRows, n]; rows past aRows or
/// bRows read as 0. Every thread of the block must call it (it
/// synchronizes); `stage` is free again when it returns.
__device__ inline void dotTile(TileInput a, int64_t aRows, int64_t a0,
                               TileInput b, int64_t bRows, int64_t b0,
                               int64_t n, DotStage &stage,
                               float acc[kPerThread][kPerThread]) {
  int ty = tileRow(), tx = tileColumn();
  for (int i = 0; i < kPerThread; ++i)
    for (int j = 0; j < kPerThread; ++j)
      acc[i][j] = 0.0f;
  for (int64_t x0 = 0; x0 < n; x0 += kInner) {
    // 32 consecutive threads load one row's 32 consecutive elements: one
    // coalesced transaction per row.
    for (int e = threadIdx.x; e < kTile * kInner; e += kThreads) {
      int row = e / kInner, x = e % kInner;
      bool inside = x0 + x < n;
      stage.a[row][x] =
          inside && a0 + row < aRows ? a[(a0 + row) * n + x0 + x] : 0.0f;
      stage.b[row][x] =
          inside && b0 + row < bRows ? b[(b0 + row) * n + x0 + x] : 0.0f;
    }
    __syncthreads();
#pragma unroll 4
    for (int x = 0; x < kInner; x += 2) {
      float2 av[kPerThread], bv[kPerThread];
      for (int i = 0; i < kPerThread; ++i)
        av[i] = *reinterpret_cast<const float2 *>(&stage.a[ty + 16 * i][x]);
      for (int j = 0; j < kPerThread; ++j)
        bv[j] = *reinterpret_cast<const float2 *>(&stage.b[tx + 16 * j][x]);
      for (int i = 0; i < kPerThread; ++i)
        for (int j = 0; j < kPerThread; ++j)
          acc[i][j] = fma2(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
}

/// Turns the raw dot products of the tile at (q0, k0) of the entry whose
/// mask elements start at `maskBase` into the masked scores the CPU softmaxes:
/// scale * dot, then the additive mask added, or masked_value where a select
/// mask is false
/// (`kept` says where it is not, and is false past T: attention_grad
/// zeroes dS there). Columns past T become -inf (no weight, no effect on a
/// row's maximum); rows past S are left as they are (never written).
__device__ inline void maskScores(const AttentionParams &p, int64_t maskBase,
                                  int64_t q0, int64_t k0,
                                  float scores[kPerThread][kPerThread],
                                  bool kept[kPerThread][kPerThread]) {
  int ty = tileRow(), tx = tileColumn();
  for (int i = 0; i < kPerThread; ++i) {
    int64_t row = q0 + ty + 16 * i;
    for (int j = 0; j < kPerThread; ++j) {
      int64_t column = k0 + tx + 16 * j;
      // A column past T has no weight and no gradient; its dS must be 0
      // even in a NaN row (0 * NaN would leak into dq).
      kept[i][j] = column < p.t;
      if (column >= p.t) {
        scores[i][j] = -INFINITY;
        continue;
      }
      float score = scores[i][j] * p.scale;
      if (row < p.s) {
        int64_t at =
            maskBase + row * p.maskRowStride + column * p.maskColumnStride;
        if (p.additive) {
          score += p.additive[at];
        } else if (p.select && !p.select[at]) {
          score = p.maskedValue;
          kept[i][j] = false;
        }
      }
      scores[i][j] = score;
    }
  }
}

/// Shared memory of accumulateTile: a 64 x 64 weight tile (padded) and
/// kStage (even) rows of X.
template <int COLS> struct AccumulateStage {
  /// Rows of 66 floats: float2 reads along a row (as DotStage's), and the
  /// two tile rows of a warp 2 banks apart.
  alignas(8) float weights[kTile][kTile + 2];
  float x[kStage][16 * COLS];
};

/// acc[i][c] += sum_r w(ty + 16 i, r) * x[x0 + r][c0 + tx + 16 c] over the
/// tile's 64 r, w(o, r) = weights[o][r], or weights[r][o] when TRANSPOSED;
/// x is row-major [xRows, width], rows past xRows and columns past width
/// read as 0 (never garbage: 0 * NaN would be NaN). Every thread must call
/// it, with x0 < xRows (so that it synchronizes at least once before
/// returning: `stage` is then free again); the caller has synchronized
/// after writing `weights`.
template <int COLS, bool TRANSPOSED>
__device__ inline void accumulateTile(AccumulateStage<COLS> &stage, TileInput x,
                                      int64_t xRows, int64_t x0, int64_t width,
                                      int64_t c0, float acc[kPerThread][COLS]) {
  constexpr int kWidth = 16 * COLS;
  int ty = tileRow(), tx = tileColumn();
  for (int r0 = 0; r0 < kTile; r0 += kStage) {
    if (x0 + r0 >= xRows) // uniform across the block
      break;
    for (int e = threadIdx.x; e < kStage * kWidth; e += kThreads) {
      int r = e / kWidth, c = e % kWidth;
      stage.x[r][c] = x0 + r0 + r < xRows && c0 + c < width
                          ? x[(x0 + r0 + r) * width + c0 + c]
                          : 0.0f;
    }
    __syncthreads();
#pragma unroll 2
    for (int r = 0; r < kStage; r += 2) {
      float2 w[kPerThread], xv[COLS];
      for (int i = 0; i < kPerThread; ++i)
        w[i] = TRANSPOSED ? make_float2(stage.weights[r0 + r][ty + 16 * i],
                                        stage.weights[r0 + r + 1][ty + 16 * i])
                          : *reinterpret_cast<const float2 *>(
                                &stage.weights[ty + 16 * i][r0 + r]);
      for (int c = 0; c < COLS; ++c)
        xv[c] =
            make_float2(stage.x[r][tx + 16 * c], stage.x[r + 1][tx + 16 * c]);
      for (int i = 0; i < kPerThread; ++i)
        for (int c = 0; c < COLS; ++c)
          acc[i][c] = fma2(w[i], xv[c], acc[i][c]);
    }
    __syncthreads();
  }
}

/// Where attention_grad wants the forward pass's row statistics: per
/// (entry, query row) the softmax's maximum and 1 / denominator, and
/// delta = dout . out (= rowsum(dP * P)), accumulated in double over the
/// output chunks (zeroed by the caller first).
struct AttentionStats {
  const float *dout = nullptr;
  float *rowMax = nullptr, *rowInverse = nullptr;
  double *delta = nullptr;
};

/// Issues the forward kernel: `out` [entries, S, Dv] receives
/// softmax(mask(scale q k^T)) v, or, when `stats` is given, `out` is
/// unused and the statistics are written instead (chunks covering Dv, at
/// least one even when Dv is 0). Needs S, T > 0 and entries > 0.
/// Defined in Attention.cu.
Status launchAttentionForward(const KernelCall &call,
                              const AttentionParams &params, float *out,
                              const AttentionStats *stats);

} // namespace zplan::cuda::attention

#endif // ZPLAN_RUNTIME_CUDA_ATTENTIONTILES_CUH
