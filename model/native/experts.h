// SwiGLU experts and their gated combination: y[N,C] = sum over a token's kept candidates, in expert
// order, of gate * expert(x). Every output element is one chain of multiply-adds over its inputs in
// input order (simd.h: fused on the AVX paths), whatever the rows beside it, the step's size or the
// thread that computes it, so a row's bits depend on nothing but the row and the build's path.
//
// Three phases, each parallel over torch's intra-op threads (runs of work items taken in turn from a
// shared counter, so any thread may take any item: the split changes no bits):
//   1. per (expert, block of its rows, block of outputs): gate and up of those outputs, then
//      a = silu(gate) * up, into the candidate's row of `a`;
//   2. per (expert, block of its rows, block of outputs): out = a @ w_out, into the candidate's row;
//   3. per block of tokens: y = the token's gated outputs multiply-added in expert order.
// Weights are packed per expert in blocks of WIDTH outputs that stream once for all of an item's rows:
// at a decode step (a row or two an expert) the step is weight streaming, at a prefill a
// register-blocked GEMM of up to RMAX rows at a time. A prefill of experts that fit a core's cache runs
// 1 and 2 as one item per (expert, block of its rows), so its activations never leave the cache. The
// phases' split, like the threads', changes no bits: each output is the same chain either way.
// Their scratch memory (a and out) is kept per calling thread between calls.

#pragma once

#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "simd.h"

namespace experts_impl {

using simd::LANES;
using simd::RMAX;
using simd::vec;
constexpr int NV = 4;                        // vectors of outputs per block
constexpr int64_t WIDTH = NV * LANES;        // outputs per packed block
constexpr int64_t ROWS = 8 * RMAX;           // rows per work item (an item's block stays in cache)
constexpr int64_t PREFETCH = 1024;           // floats ahead of use: weights stream before the FMAs reach them
constexpr int64_t PARALLEL_WORK = 1 << 16;   // multiply-adds below which a phase stays on this thread
constexpr int64_t FUSE_ROWS = 16 * ROWS;     // rows from which phases 1 and 2 run as one (a prefill)...
constexpr int64_t FUSE_BYTES = 1 << 20;      // ... of experts whose weights stay in a core's cache

// Packed block [n_in][width] of w[row0 .. row0 + width)[n_in] (inputs outer, its outputs contiguous),
// so a row's outputs accumulate as whole vectors: out[o] = sum over i in order of x[i] * w[o][i].
inline void pack_block(const float* w, int64_t row0, int64_t width, int64_t n_in, float* dst) {
  for (int64_t i = 0; i < n_in; ++i)
    for (int64_t v = 0; v < width; ++v) dst[i * width + v] = w[(row0 + v) * n_in + i];
}

// How a pass over a packed block prefetches: its own weights ahead of use (the first pass, which streams
// them from memory), or `lines` cache lines of the next block per input (a later pass, whose weights are
// in cache: the next block's stream then overlaps this pass's arithmetic).
enum Fetch { OWN, NEXT };

// y[r][0 .. LANES*nv) = x[r] @ block for R rows (pointers to rows of n_in), rows of y `stride` apart.
template <int R, int nv, Fetch fetch>
inline void block_rows(const float* const* x, int64_t n_in, const float* block, float* y, int64_t stride,
                       const float* next, int64_t lines) {
  vec acc[R][nv];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < nv; ++v) acc[r][v] = simd::zero();
  for (int64_t i = 0; i < n_in; ++i) {
    const float* wi = block + i * nv * LANES;
    if (fetch == OWN)
      for (int v = 0; v < nv * LANES; v += 16) __builtin_prefetch(wi + PREFETCH + v);
    if (fetch == NEXT)
      for (int64_t l = 0; l < lines; ++l) __builtin_prefetch(next + (i * lines + l) * 16, 0, 2);
    vec wv[nv];
    for (int v = 0; v < nv; ++v) wv[v] = simd::load(wi + v * LANES);
    for (int r = 0; r < R; ++r) {
      const vec xr = simd::set1(x[r][i]);
      for (int v = 0; v < nv; ++v) acc[r][v] = simd::fmadd(wv[v], xr, acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < nv; ++v) simd::store(y + r * stride + v * LANES, acc[r][v]);
}

template <int R, Fetch fetch>
inline void block_rows_nv(int nv, const float* const* x, int64_t n_in, const float* block, float* y, int64_t stride,
                          const float* next, int64_t lines) {
  switch (nv) {
    case 1: block_rows<R, 1, fetch>(x, n_in, block, y, stride, next, lines); break;
    case 2: block_rows<R, 2, fetch>(x, n_in, block, y, stride, next, lines); break;
    case 3: block_rows<R, 3, fetch>(x, n_in, block, y, stride, next, lines); break;
    default: block_rows<R, NV, fetch>(x, n_in, block, y, stride, next, lines); break;
  }
}

template <Fetch fetch>
inline void rows_of(int rows, int nv, const float* const* x, int64_t n_in, const float* block, float* y,
                    int64_t stride, const float* next, int64_t lines) {
  switch (rows) {
    case 1: block_rows_nv<1, fetch>(nv, x, n_in, block, y, stride, next, lines); break;
    case 2: block_rows_nv<2, fetch>(nv, x, n_in, block, y, stride, next, lines); break;
#if defined(MOE_ISA_AVX512)
    case 3: block_rows_nv<3, fetch>(nv, x, n_in, block, y, stride, next, lines); break;
    case 4: block_rows_nv<4, fetch>(nv, x, n_in, block, y, stride, next, lines); break;
    case 5: block_rows_nv<5, fetch>(nv, x, n_in, block, y, stride, next, lines); break;
    case 6: block_rows_nv<6, fetch>(nv, x, n_in, block, y, stride, next, lines); break;
#endif
    default: break;
  }
}

// y rows (stride apart) = m rows x @ one packed block of `width` outputs over n_in inputs. The first pass
// (RMAX rows) streams the block from memory; the later passes, whose arithmetic reads it from cache, fetch
// the `next_floats` weights at `next` (the block a thread runs next) into L2, spread over their inputs.
inline void matmul_block(const float* const* x, int64_t m, int64_t n_in, const float* block, int64_t width,
                         float* y, int64_t stride, const float* next, int64_t next_floats) {
  const int nv = int(width / LANES);
  const int64_t later = (m - 1) / RMAX;  // passes after the first
  const int64_t lines = later ? (next_floats / 16 + later * n_in - 1) / (later * n_in) : 0;
  for (int64_t r = 0, pass = 0; r < m; r += RMAX, ++pass) {
    const int rows = int(std::min<int64_t>(RMAX, m - r));
    if (r == 0) rows_of<OWN>(rows, nv, x + r, n_in, block, y + r * stride, stride, nullptr, 0);
    else rows_of<NEXT>(rows, nv, x + r, n_in, block, y + r * stride, stride, next + (pass - 1) * n_in * lines * 16,
                       lines);
  }
}

// Runs item(i) for i in [0, n) over torch's intra-op threads, or on this thread when the work is small.
// A thread takes the next run of items from a shared counter, a run of a share of what is left (at
// least one item): consecutive items stream consecutive weights, so a thread's prefetches run into its
// own next item, and the last runs are single items, which even out a thread that was descheduled.
template <class F>
void each_item(int64_t n, int64_t work, const F& item) {
  if (work < PARALLEL_WORK || n < 2) {
    for (int64_t i = 0; i < n; ++i) item(i);
    return;
  }
  const int64_t threads = std::min<int64_t>(n, at::get_num_threads());
  std::atomic<int64_t> next{0};
  at::parallel_for(0, threads, 1, [&](int64_t, int64_t) {
    int64_t start = next.load();
    for (;;) {
      const int64_t left = n - start;
      if (left <= 0) return;
      const int64_t take = std::max<int64_t>(1, left / (2 * threads));
      if (!next.compare_exchange_weak(start, start + take)) continue;
      for (int64_t i = start; i < start + take; ++i) item(i);
      start = next.load();
    }
  });
}

// Scratch floats for one call, kept on the calling thread between calls and grown to the largest step
// it has run: a step allocates, zeroes and faults in no memory for its activations and expert outputs
// (megabytes at a prefill), 64-byte aligned.
inline float* scratch(int64_t floats) {
  thread_local std::unique_ptr<float[]> buffer;
  thread_local int64_t size = 0;
  if (floats > size) {
    buffer.reset();
    buffer.reset(new float[floats + 16]);
    size = floats;
  }
  const auto at = reinterpret_cast<uintptr_t>(buffer.get());
  return reinterpret_cast<float*>((at + 63) & ~uintptr_t(63));
}

struct Item {
  int64_t expert, row0, rows, block;
};

// (expert, output block, block of ROWS rows) for every expert with rows: count[e]..count[e+1]; an output
// block's row blocks follow each other, so a thread that takes them in turn finds the block in its cache.
inline std::vector<Item> items(const std::vector<int64_t>& count, int64_t blocks) {
  std::vector<Item> out;
  int64_t n = 0;
  for (size_t e = 0; e + 1 < count.size(); ++e) n += blocks * ((count[e + 1] - count[e] + ROWS - 1) / ROWS);
  out.reserve(n);
  for (size_t e = 0; e + 1 < count.size(); ++e)
    for (int64_t b = 0; b < blocks && count[e + 1] > count[e]; ++b)
      for (int64_t r = count[e]; r < count[e + 1]; r += ROWS)
        out.push_back({int64_t(e), r, std::min(ROWS, count[e + 1] - r), b});
  return out;
}

}  // namespace experts_impl

// w[E, n_out, n_in] float32 -> packed [E, n_out * n_in]: blocks of WIDTH outputs; `paired` (w_in, whose
// outputs are gate then up, n_out = 2F): block pair p holds gate outputs [pW, pW + w) then up outputs
// [F + pW, F + pW + w), so one item computes both halves of its activations.
torch::Tensor pack(torch::Tensor w, bool paired) {
  using namespace experts_impl;
  TORCH_CHECK(w.dtype() == torch::kFloat32 && w.dim() == 3, "pack: w[E, out, in] float32");
  auto wc = w.contiguous();
  const int64_t E = wc.size(0), n_out = wc.size(1), n_in = wc.size(2);
  const int64_t n = paired ? n_out / 2 : n_out;
  TORCH_CHECK(n % LANES == 0 && (!paired || n_out % 2 == 0), "pack: outputs must be a multiple of the vector width");
  auto packed = torch::empty({E, n_out * n_in}, wc.options());
  const float* src = wc.data_ptr<float>();
  float* dst = packed.data_ptr<float>();
  for (int64_t e = 0; e < E; ++e) {
    const float* we = src + e * n_out * n_in;
    float* de = dst + e * n_out * n_in;
    for (int64_t b = 0; b * WIDTH < n; ++b) {
      const int64_t width = std::min(WIDTH, n - b * WIDTH);
      if (paired) {
        pack_block(we, b * WIDTH, width, n_in, de + 2 * b * WIDTH * n_in);
        pack_block(we, n + b * WIDTH, width, n_in, de + (2 * b * WIDTH + width) * n_in);
      } else {
        pack_block(we, b * WIDTH, width, n_in, de + b * WIDTH * n_in);
      }
    }
  }
  return packed;
}

namespace experts_impl {

// y[N][C] = the experts' gated sum for x[N][C] (rows contiguous) with w_in[E][2F*C] (pack(paired)) and
// w_out[E][C*F] (pack), each token's K candidates in expert[N*K] (int64), kept[N*K], gate[N*K] (float).
inline void run(const float* x_p, int64_t N, int64_t C, const float* wi_p, const float* wo_p, int64_t E, int64_t F,
                const int64_t* e_p, const bool* k_p, const float* g_p, int64_t K, float* y_p) {
  // kept candidates grouped by expert, arrival order (n, then j) inside each; at[c]: candidate c's place
  std::vector<int64_t> count(E + 1, 0);
  for (int64_t c = 0; c < N * K; ++c)
    if (k_p[c] && e_p[c] >= 0 && e_p[c] < E) ++count[e_p[c] + 1];
  for (int64_t e = 0; e < E; ++e) count[e + 1] += count[e];
  const int64_t M = count[E];
  std::vector<int64_t> at(N * K, -1);
  std::vector<const float*> x_rows(M), a_rows(M);
  {
    std::vector<int64_t> fill(count.begin(), count.end() - 1);
    for (int64_t c = 0; c < N * K; ++c)
      if (k_p[c] && e_p[c] >= 0 && e_p[c] < E) {
        at[c] = fill[e_p[c]]++;
        x_rows[at[c]] = x_p + (c / K) * C;
      }
  }
  float* const a = scratch(M * (F + C));  // a[M][F], then out[M][C]
  float* const out = a + M * F;
  for (int64_t r = 0; r < M; ++r) a_rows[r] = a + r * F;

  // 1. a = silu(x @ gate) * (x @ up) for an item's rows and its block pair p of WIDTH outputs
  auto activations = [&](const Item& it, int64_t p) {
    const int64_t width = std::min(WIDTH, F - p * WIDTH);
    const float* pair = wi_p + it.expert * 2 * F * C + 2 * p * WIDTH * C;
    float h[2][ROWS * WIDTH];
    matmul_block(x_rows.data() + it.row0, it.rows, C, pair, width, h[0], WIDTH, pair + width * C, width * C);
    matmul_block(x_rows.data() + it.row0, it.rows, C, pair + width * C, width, h[1], WIDTH, pair + 2 * width * C,
                 width * C);
    for (int64_t r = 0; r < it.rows; ++r) {
      float* ar = a + (it.row0 + r) * F + p * WIDTH;
      for (int64_t f = 0; f < width; f += LANES)
        simd::store(ar + f, simd::silu_times(simd::load(h[0] + r * WIDTH + f), simd::load(h[1] + r * WIDTH + f)));
    }
  };
  // 2. out = a @ w_out for an item's rows and its block b of WIDTH outputs
  auto outputs = [&](const Item& it, int64_t b) {
    const int64_t width = std::min(WIDTH, C - b * WIDTH);
    const float* block = wo_p + it.expert * C * F + b * WIDTH * F;
    matmul_block(a_rows.data() + it.row0, it.rows, F, block, width, out + it.row0 * C + b * WIDTH, C,
                 block + width * F, width * F);
  };
  const int64_t pairs = (F + WIDTH - 1) / WIDTH, blocks = (C + WIDTH - 1) / WIDTH;
  if (M >= FUSE_ROWS && 3 * F * C * int64_t(sizeof(float)) <= FUSE_BYTES) {
    // a prefill of small experts: 1 then 2 per (expert, block of rows), whose activations stay in cache
    const auto both = items(count, 1);
    each_item(int64_t(both.size()), M * 3 * F * C, [&](int64_t i) {
      for (int64_t p = 0; p < pairs; ++p) activations(both[i], p);
      for (int64_t b = 0; b < blocks; ++b) outputs(both[i], b);
    });
  } else {
    const auto first = items(count, pairs);
    each_item(int64_t(first.size()), M * 2 * F * C, [&](int64_t i) { activations(first[i], first[i].block); });
    const auto second = items(count, blocks);
    each_item(int64_t(second.size()), M * C * F, [&](int64_t i) { outputs(second[i], second[i].block); });
  }
  // 3. y[n] = sum over the token's kept candidates in expert order (then j) of gate * out
  const int64_t token_blocks = (N + 15) / 16;
  each_item(token_blocks, N * K * C, [&](int64_t i) {
    int64_t small[16];
    std::vector<int64_t> large(K > 16 ? K : 0);
    int64_t* order = K > 16 ? large.data() : small;
    for (int64_t n = i * 16; n < std::min(N, i * 16 + 16); ++n) {
      int64_t kept_n = 0;
      for (int64_t j = 0; j < K; ++j) {  // insertion in expert order, after equal experts (a stable sort)
        if (at[n * K + j] < 0) continue;
        int64_t k = kept_n++;
        for (; k > 0 && e_p[order[k - 1]] > e_p[n * K + j]; --k) order[k] = order[k - 1];
        order[k] = n * K + j;
      }
      float* yr = y_p + n * C;
      for (int64_t c = 0; c < C; c += LANES) {
        vec acc = simd::zero();
        for (int64_t k = 0; k < kept_n; ++k)
          acc = simd::fmadd(simd::set1(g_p[order[k]]), simd::load(out + at[order[k]] * C + c), acc);
        simd::store(yr + c, acc);
      }
    }
  });
}

}  // namespace experts_impl

// x[..., C]; w_in[E, 2F*C] (pack(paired)) and w_out[E, C*F] (pack); expert/kept/gate [..., K] over the same
// tokens. Returns y shaped as x.
torch::Tensor experts(torch::Tensor x_in, torch::Tensor w_in, torch::Tensor w_out, int64_t F, torch::Tensor expert,
                      torch::Tensor kept, torch::Tensor gate) {
  using namespace experts_impl;
  TORCH_CHECK(x_in.dtype() == torch::kFloat32 && w_in.dtype() == torch::kFloat32 && w_out.dtype() == torch::kFloat32,
              "experts: float32 only");
  const int64_t C = x_in.size(-1), K = expert.size(-1);
  auto x = x_in.contiguous();
  const int64_t N = x.numel() / C, E = w_in.size(0);
  TORCH_CHECK(C % LANES == 0 && F % LANES == 0, "experts: widths must be multiples of the vector width");
  TORCH_CHECK(w_in.size(1) == 2 * F * C && w_out.size(0) == E && w_out.size(1) == C * F, "experts: packed shapes");
  TORCH_CHECK(expert.numel() == N * K && kept.numel() == N * K && gate.numel() == N * K, "experts: [..., K] per token");
  auto ex = expert.contiguous().to(torch::kInt64);
  auto kp = kept.contiguous().to(torch::kBool);
  auto gt = gate.contiguous().to(torch::kFloat32);
  auto wi = w_in.contiguous();
  auto wo = w_out.contiguous();
  auto y = torch::empty(x.sizes(), x.options());
  run(x.data_ptr<float>(), N, C, wi.data_ptr<float>(), wo.data_ptr<float>(), E, F, ex.data_ptr<int64_t>(),
      kp.data_ptr<bool>(), gt.data_ptr<float>(), K, y.data_ptr<float>());
  return y;
}
