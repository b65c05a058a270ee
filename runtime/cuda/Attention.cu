//===- Attention.cu - nn.attention: softmax(mask(q k^T * scale)) v --------===//
//
// The CUDA twin of runtime/cpu/Attention.cpp, flash-style: one block per
// (batch-and-head entry, 64 query rows, chunk of <= 128 value columns)
// walks the keys in tiles of 64. Per tile it computes the 64 x 64 scores in
// registers (dotTile), applies the scale and mask exactly as the CPU does
// (maskScores), and folds them into a running softmax per query row: the
// row maximum so far, the denominator so far (in double, as the CPU sums
// it), and the output accumulator rescaled by exp(old max - new max)
// whenever the maximum grows. The tile's probabilities go through shared
// memory into out += P v (accumulateTile). No scores tensor ever reaches
// global memory, so memory is O(S) whatever T is.
//
// NaN and -inf follow the CPU: a row whose scores are -inf throughout
// (every key masked with -inf) is NaN, as onnxruntime's; an exp of a
// non-finite difference is never formed while a row has no finite score
// yet, so a finite score in a later tile still gives the exact softmax.
//
// The same kernel, in its statistics mode, is attention_grad's first pass
// (AttentionTiles.cuh: AttentionStats).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/AttentionTiles.cuh"

namespace zplan::cuda {

using namespace zplan::cuda::attention;

namespace {

__device__ inline float rowMaxReduce(float value) {
  for (int offset = 8; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

__device__ inline float rowSumReduce(float value) {
  for (int offset = 8; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

/// Blocks are (entry, query tile, output chunk): tileBlock().
template <int COLS, bool STATS>
__global__ __launch_bounds__(kThreads, 2) void attentionForward(
    AttentionParams p, float *__restrict__ out, AttentionStats stats,
    int64_t queryTiles, int64_t chunks) {
  __shared__ DotStage dot;
  __shared__ AccumulateStage<COLS> accumulate;
  TileBlock tile = tileBlock<COLS>(p, queryTiles, chunks);
  int64_t entry = tile.entry, q0 = tile.row0, c0 = tile.column0;
  TileInput q = tile.q, k = tile.k, v = tile.v;
  int64_t maskBase = tile.maskBase;
  int ty = tileRow(), tx = tileColumn();

  float rowMax[kPerThread];
  double rowSum[kPerThread];
  float acc[kPerThread][COLS];
  for (int i = 0; i < kPerThread; ++i) {
    rowMax[i] = -INFINITY;
    rowSum[i] = 0;
    for (int c = 0; c < COLS; ++c)
      acc[i][c] = 0.0f;
  }

  for (int64_t k0 = 0; k0 < p.t; k0 += kTile) {
    float scores[kPerThread][kPerThread];
    bool kept[kPerThread][kPerThread];
    dotTile(q, p.s, q0, k, p.t, k0, p.d, dot, scores);
    maskScores(p, maskBase, q0, k0, scores, kept);
    for (int i = 0; i < kPerThread; ++i) {
      float tileMax = -INFINITY;
      for (int j = 0; j < kPerThread; ++j)
        tileMax = fmaxf(tileMax, scores[i][j]);
      float newMax = fmaxf(rowMax[i], rowMaxReduce(tileMax));
      // No finite score yet: every weight so far is 0 (exp(-inf - -inf)
      // would be NaN); the row turns NaN at the end if it stays so.
      bool none = newMax == -INFINITY;
      float rescale = none ? 1.0f : expf(rowMax[i] - newMax);
      float sum = 0;
      for (int j = 0; j < kPerThread; ++j) {
        float weight = none ? 0.0f : expf(scores[i][j] - newMax);
        accumulate.weights[ty + 16 * i][tx + 16 * j] = weight;
        sum += weight;
      }
      rowSum[i] = rowSum[i] * rescale + rowSumReduce(sum);
      for (int c = 0; c < COLS; ++c)
        acc[i][c] *= rescale;
      rowMax[i] = newMax;
    }
    __syncthreads();
    accumulateTile<COLS, false>(accumulate, v, p.t, k0, p.dv, c0, acc);
  }

  for (int i = 0; i < kPerThread; ++i) {
    int64_t row = q0 + ty + 16 * i;
    bool inside = row < p.s;
    float inverse =
        rowMax[i] == -INFINITY ? NAN : static_cast<float>(1.0 / rowSum[i]);
    int64_t at = (entry * p.s + row) * p.dv; // the row's first output
    if constexpr (!STATS) {
      if (!inside)
        continue;
      for (int c = 0; c < COLS; ++c) {
        int64_t column = c0 + tx + 16 * c;
        if (column < p.dv)
          out[at + column] = acc[i][c] * inverse;
      }
    } else {
      // delta = dout . out over this chunk's columns, summed over the
      // row's 16 threads, then over the chunks in double.
      float partial = 0;
      if (inside)
        for (int c = 0; c < COLS; ++c) {
          int64_t column = c0 + tx + 16 * c;
          if (column < p.dv)
            partial += acc[i][c] * inverse * stats.dout[at + column];
        }
      partial = rowSumReduce(partial);
      if (inside && tx == 0) {
        int64_t index = entry * p.s + row;
        atomicAdd(stats.delta + index, static_cast<double>(partial));
        if (c0 == 0) { // once per row
          stats.rowMax[index] = rowMax[i];
          stats.rowInverse[index] = static_cast<float>(1.0 / rowSum[i]);
        }
      }
    }
  }
}

template <bool STATS>
Status launchForward(const KernelCall &call, const AttentionParams &params,
                     float *out, const AttentionStats &stats) {
  int64_t queryTiles = (params.s + kTile - 1) / kTile;
  // The statistics need one chunk even without value columns.
  int64_t chunks = std::max<int64_t>(chunkCount(params.dv), STATS ? 1 : 0);
  cudaStream_t stream = call.device.stream;
  return launchBlocks(
      call, params.entries * queryTiles * chunks, [&](unsigned grid) {
        if (chunkColumns(params.dv) == 64)
          attentionForward<4, STATS><<<grid, kThreads, 0, stream>>>(
              params, out, stats, queryTiles, chunks);
        else
          attentionForward<8, STATS><<<grid, kThreads, 0, stream>>>(
              params, out, stats, queryTiles, chunks);
      });
}

} // namespace

Status attention::launchAttentionForward(const KernelCall &call,
                                         const AttentionParams &params,
                                         float *out,
                                         const AttentionStats *stats) {
  if (stats)
    return launchForward<true>(call, params, nullptr, *stats);
  return launchForward<false>(call, params, out, AttentionStats());
}

Status runAttention(const KernelCall &call) {
  ops::AttentionShape shape;
  AttentionParams params;
  if (Status status =
          readAttention(call, ops::checkAttention, 0, shape, params);
      !status.ok())
    return status;
  const TensorRef &result = call.host.results[0];
  if (shape.s == 0 || shape.dv == 0 || params.entries == 0)
    return Status::success();
  if (shape.t == 0) // softmax over nothing: the empty sum of values
    return zeroFill(call, result);
  return launchAttentionForward(call, params, result.as<float>(), nullptr);
}

} // namespace zplan::cuda
