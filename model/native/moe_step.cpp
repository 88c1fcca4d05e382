// The MoE block's kernels of kernel version 3: position-priority routing of a small step and the
// SwiGLU experts with their gated combination, each one call from Python.
//
// route_position: the decision of model.routing._route_by_position (position priorities, batch or
// sequence groups, K <= 2) in host integers: the same float operations on the same float32 values
// (a K <= 2 sum is one IEEE addition, then one division), so the same decision bit for bit.
//
// experts: y[N,C] = sum over a token's kept candidates, in expert order, of gate * expert(x). Every
// output element is one chain of fused multiply-adds over its inputs in order, whatever the rows
// beside it, so a row's result depends on nothing but the row (batch-invariant by construction).
// Each expert's weights are packed in blocks of outputs that stream once for all of its rows: at a
// decode step (a row or two an expert) the step is weight streaming, at a prefill a register-blocked
// GEMM of up to RMAX rows at a time.

#include <torch/extension.h>
#include <ATen/Parallel.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

namespace {

// One vector of LANES floats: 16 where the build has AVX-512 (32 vector registers), else 8.
#if defined(__AVX512F__)
constexpr int LANES = 16;
constexpr int RMAX = 6;  // rows per micro-kernel: 6 x 4 accumulators + 4 weights + 1 broadcast <= 32
#else
constexpr int LANES = 8;
constexpr int RMAX = 2;  // 2 x 4 accumulators + 4 weights + 1 broadcast <= 16
#endif
typedef float vf __attribute__((vector_size(LANES * 4)));
typedef int32_t vi __attribute__((vector_size(LANES * 4)));
constexpr int NV = 4;                    // vectors of outputs per block
constexpr int64_t WIDTH = NV * LANES;    // outputs per packed block
constexpr int64_t PREFETCH = 1024;  // floats ahead of use: weights stream before the multiply-adds reach them

inline vf loadv(const float* p) {
  vf v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline void storev(float* p, vf v) { std::memcpy(p, &v, sizeof(v)); }

inline vf splat(float a) {  // one broadcast (0 + a is an addition: it turns -0.0 into +0.0)
  const vf v = {a};
#if defined(__AVX512F__)
  return __builtin_shufflevector(v, v, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
#else
  return __builtin_shufflevector(v, v, 0, 0, 0, 0, 0, 0, 0, 0);
#endif
}

// Weights are packed per expert as blocks of WIDTH outputs: block b holds w[b*WIDTH + v][i] at
// [i][v] (inputs outer, its outputs contiguous), so a block streams as one run of memory and a row's
// outputs accumulate as whole vectors: out[o] = sum over i, in input order, of x[i] * w[o][i] (one
// fused multiply-add chain per output), with no horizontal sums.

// y[r][0..LANES*nv) = x[r] @ block for R rows x[r] (pointers to rows of n_in); block [n_in][LANES*nv].
// `fetch`: the first pass over the block, which streams it from memory (prefetching ahead); later
// passes find it in cache.
template <int R, int nv, bool fetch>
inline void block_rows(const float* const* x, int64_t n_in, const float* block, float* y, int64_t n_out) {
  vf acc[R][nv];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < nv; ++v) acc[r][v] = vf{};
  for (int64_t i = 0; i < n_in; ++i) {
    const float* wi = block + i * nv * LANES;
    if (fetch)  // the same place PREFETCH floats on (the next blocks): weights stream ahead of use
      for (int v = 0; v < nv * LANES; v += 16) __builtin_prefetch(wi + PREFETCH + v);
    vf wv[nv];
    for (int v = 0; v < nv; ++v) wv[v] = loadv(wi + v * LANES);
    for (int r = 0; r < R; ++r) {
      const vf xr = splat(x[r][i]);
      for (int v = 0; v < nv; ++v) acc[r][v] += wv[v] * xr;
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < nv; ++v) storev(y + r * n_out + v * LANES, acc[r][v]);
}

template <int R, bool fetch>
inline void block_rows_nv(int nv, const float* const* x, int64_t n_in, const float* block, float* y, int64_t n_out) {
  switch (nv) {
    case 1: block_rows<R, 1, fetch>(x, n_in, block, y, n_out); break;
    case 2: block_rows<R, 2, fetch>(x, n_in, block, y, n_out); break;
    case 3: block_rows<R, 3, fetch>(x, n_in, block, y, n_out); break;
    default: block_rows<R, NV, fetch>(x, n_in, block, y, n_out); break;
  }
}

template <bool fetch>
inline void rows_any(int rows, int nv, const float* const* x, int64_t n_in, const float* block, float* y,
                     int64_t n_out) {
  switch (rows) {
    case 1: block_rows_nv<1, fetch>(nv, x, n_in, block, y, n_out); break;
    case 2: block_rows_nv<2, fetch>(nv, x, n_in, block, y, n_out); break;
#if defined(__AVX512F__)
    case 3: block_rows_nv<3, fetch>(nv, x, n_in, block, y, n_out); break;
    case 4: block_rows_nv<4, fetch>(nv, x, n_in, block, y, n_out); break;
    case 5: block_rows_nv<5, fetch>(nv, x, n_in, block, y, n_out); break;
    case 6: block_rows_nv<6, fetch>(nv, x, n_in, block, y, n_out); break;
#endif
    default: break;
  }
}

// out[m, n_out] = in[m rows of n_in] @ w^T for one expert's packed weights w (n_out x n_in, see above).
void matmul_rows(const float* const* in, int64_t m, int64_t n_in, const float* packed, int64_t n_out, float* out) {
  const int64_t blocks = (n_out + WIDTH - 1) / WIDTH;
  auto run = [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int nv = int(std::min(WIDTH, n_out - b * WIDTH) / LANES);
      const float* block = packed + b * WIDTH * n_in;
      for (int64_t r = 0; r < m; r += RMAX) {
        const int rows = int(std::min<int64_t>(RMAX, m - r));
        if (r == 0) rows_any<true>(rows, nv, in + r, n_in, block, out + r * n_out + b * WIDTH, n_out);
        else rows_any<false>(rows, nv, in + r, n_in, block, out + r * n_out + b * WIDTH, n_out);
      }
    }
  };
  // A decode step's few rows stay on this thread (a fork costs more than the work).
  if (m * n_in * n_out < (int64_t(1) << 22)) {
    run(0, blocks);
  } else {
    at::parallel_for(0, blocks, 1, run);
  }
}

// exp of LANES floats: Cephes' expf (range reduction by ln 2 in two parts, degree-5 polynomial, 2^n
// from the exponent bits); within 2 ulp of the true value, inputs clamped to +-88.38 (below that, 0 or
// a subnormal: silu's 1 + exp(-g) is then 1 or exp's overflow, g / huge ~ 0).
inline vf expv(vf x) {
  const vf hi = vf{} + 88.3762626647949f, lo = vf{} - 88.3762626647949f;
  x = x > hi ? hi : x;
  x = x < lo ? lo : x;
  vf fx = x * 1.44269504088896341f + 0.5f;
  vf fl = __builtin_convertvector(__builtin_convertvector(fx, vi), vf);
  fl += __builtin_convertvector(fl > fx, vf);  // truncation toward zero -> floor (adds -1 where above)
  x = x - fl * 0.693359375f;
  x = x - fl * -2.12194440e-4f;
  vf y = vf{} + 1.9875691500e-4f;
  y = y * x + 1.3981999507e-3f;
  y = y * x + 8.3334519073e-3f;
  y = y * x + 4.1665795894e-2f;
  y = y * x + 1.6666665459e-1f;
  y = y * x + 5.0000001201e-1f;
  y = y * (x * x) + x + 1.0f;
  vi bits = (__builtin_convertvector(fl, vi) + 127) << 23;
  vf scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return y * scale;
}

#if defined(__AVX512F__)
// silu(g) * up for 16 floats without a division: exp(-g) = 2^n e^r with n = round(-g log2 e) and
// r = -g - n ln 2 (ln 2 in two parts, fused: |r| <= ln 2 / 2 with no cancellation), e^r by its Taylor
// polynomial of degree 7 (relative error below 2e-9), then 1 / (1 + exp(-g)) by the 14-bit reciprocal
// and one Newton step. Beyond |g| = 87 the exponent saturates at +-126: silu is then g, or a number
// within 1e-35 of the true one.
inline __m512 silu_times(__m512 g, __m512 up) {
  const __m512 m = _mm512_sub_ps(_mm512_setzero_ps(), g);  // -g
  const __m512 n = _mm512_min_ps(_mm512_max_ps(
      _mm512_roundscale_ps(_mm512_mul_ps(m, _mm512_set1_ps(1.44269504088896341f)),
                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
      _mm512_set1_ps(-126.0f)), _mm512_set1_ps(126.0f));
  __m512 x = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), m);
  x = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), x);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(1.0f));
  const __m512 d = _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_scalef_ps(p, n));  // 1 + exp(-g)
  __m512 r = _mm512_rcp14_ps(d);
  r = _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.0f)));
  return _mm512_mul_ps(_mm512_mul_ps(g, r), up);
}
#endif

// a[f] = silu(h[f]) * h[F + f] over one row of h[2F] (gate, then up), F a multiple of LANES.
inline void swiglu_row(const float* h, int64_t F, float* a) {
  for (int64_t f = 0; f < F; f += LANES) {
#if defined(__AVX512F__)
    _mm512_storeu_ps(a + f, silu_times(_mm512_loadu_ps(h + f), _mm512_loadu_ps(h + F + f)));
#else
    const vf g = loadv(h + f), up = loadv(h + F + f);
    storev(a + f, g / (1.0f + expv(-g)) * up);
#endif
  }
}

}  // namespace

// w[E, n_out, n_in] float32 -> the packed layout above, [E, n_out * n_in].
torch::Tensor pack(torch::Tensor w) {
  TORCH_CHECK(w.dtype() == torch::kFloat32 && w.dim() == 3, "pack: w[E, out, in] float32");
  auto wc = w.contiguous();
  const int64_t E = wc.size(0), n_out = wc.size(1), n_in = wc.size(2);
  TORCH_CHECK(n_out % LANES == 0, "pack: outputs must be a multiple of the vector width");
  auto packed = torch::empty({E, n_out * n_in}, wc.options());
  const float* src = wc.data_ptr<float>();
  float* dst = packed.data_ptr<float>();
  for (int64_t e = 0; e < E; ++e)
    for (int64_t b = 0; b * WIDTH < n_out; ++b) {
      const int64_t width = std::min(WIDTH, n_out - b * WIDTH);
      float* block = dst + e * n_out * n_in + b * WIDTH * n_in;
      for (int64_t i = 0; i < n_in; ++i)
        for (int64_t v = 0; v < width; ++v) block[i * width + v] = src[(e * n_out + b * WIDTH + v) * n_in + i];
    }
  return packed;
}

// x[..., C]; w_in[E,2F,C] and w_out[E,C,F] float32 as packed by `pack`; expert/kept/gate [..., K]
// over the same tokens. Returns y shaped as x.
torch::Tensor experts(torch::Tensor x_in, torch::Tensor w_in, torch::Tensor w_out, int64_t F, torch::Tensor expert,
                      torch::Tensor kept, torch::Tensor gate) {
  TORCH_CHECK(x_in.dtype() == torch::kFloat32 && w_in.dtype() == torch::kFloat32 && w_out.dtype() == torch::kFloat32,
              "experts: float32 only");
  const int64_t C = x_in.size(-1), K = expert.size(-1);
  auto x = x_in.reshape({-1, C}).contiguous();
  const int64_t N = x.size(0), E = w_in.size(0), F2 = 2 * F;
  TORCH_CHECK(C % LANES == 0 && F % LANES == 0, "experts: widths must be multiples of the vector width");
  TORCH_CHECK(w_in.size(1) == F2 * C && w_out.size(0) == E && w_out.size(1) == C * F, "experts: packed shapes");
  TORCH_CHECK(expert.numel() == N * K && kept.numel() == N * K && gate.numel() == N * K, "experts: [..., K] per token");
  auto ex = expert.contiguous().to(torch::kInt64);
  auto kp = kept.contiguous().to(torch::kBool);
  auto gt = gate.contiguous().to(torch::kFloat32);
  const int64_t* e_p = ex.data_ptr<int64_t>();
  const bool* k_p = kp.data_ptr<bool>();
  const float* g_p = gt.data_ptr<float>();
  const float* x_p = x.data_ptr<float>();

  // kept candidates grouped by expert, arrival order (n, then j) inside each
  std::vector<int64_t> count(E + 1, 0);
  for (int64_t c = 0; c < N * K; ++c)
    if (k_p[c] && e_p[c] >= 0 && e_p[c] < E) ++count[e_p[c] + 1];
  for (int64_t e = 0; e < E; ++e) count[e + 1] += count[e];
  std::vector<int64_t> cand(count[E]);
  {
    std::vector<int64_t> fill(count.begin(), count.end() - 1);
    for (int64_t c = 0; c < N * K; ++c)
      if (k_p[c] && e_p[c] >= 0 && e_p[c] < E) cand[fill[e_p[c]]++] = c;
  }
  int64_t most = 0;
  for (int64_t e = 0; e < E; ++e) most = std::max(most, count[e + 1] - count[e]);

  auto y = torch::zeros({N, C}, x.options());
  float* y_p = y.data_ptr<float>();
  // scratch rows, not zeroed: every element is written before it is read
  std::unique_ptr<float[]> h(new float[most * F2]), a(new float[most * F]), out(new float[most * C]);
  std::vector<const float*> x_rows(most), a_rows(most);
  for (int64_t r = 0; r < most; ++r) a_rows[r] = a.get() + r * F;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t m = count[e + 1] - count[e];
    if (m == 0) continue;
    const int64_t* rows = cand.data() + count[e];
    for (int64_t r = 0; r < m; ++r)
      x_rows[r] = x_p + (rows[r] / K) * C;
    matmul_rows(x_rows.data(), m, C, w_in.data_ptr<float>() + e * F2 * C, F2, h.get());
    for (int64_t r = 0; r < m; ++r) swiglu_row(h.get() + r * F2, F, a.get() + r * F);
    matmul_rows(a_rows.data(), m, F, w_out.data_ptr<float>() + e * C * F, C, out.get());
    for (int64_t r = 0; r < m; ++r) {  // experts in order: a token's contributions add in expert order
      const float g = g_p[rows[r]];
      float* yr = y_p + (rows[r] / K) * C;
      const float* o = out.get() + r * C;
      for (int64_t c = 0; c < C; ++c) yr[c] += g * o[c];
    }
  }
  return y.view(x_in.sizes());
}

// The decision of a position-priority step (see model.routing._route_by_position). probs[B,T,E]
// float32, routed/counted [B,T] bool, capacity[G] int64 (G = B by sequence, else 1). norm: 0 none,
// 1 before_drop, 2 after_drop. Returns (expert, gate, kept, slot, group, capacity, requested,
// kept_count, group_tokens), or None when a score is not finite (the tensor paths decide those).
namespace {

// route_position's work: false when a score is not finite, else `out` holds the decision's tensors.
bool route_impl(const torch::Tensor& probs, const torch::Tensor& routed, const torch::Tensor& counted,
                const torch::Tensor& capacity, int64_t K, bool by_seq, bool seq_major, bool token_major,
                int64_t norm, bool dropless, std::vector<torch::Tensor>& out) {
  TORCH_CHECK(probs.dtype() == torch::kFloat32 && probs.dim() == 3, "route_position: probs[B,T,E] float32");
  auto p_t = probs.contiguous();
  auto r_t = routed.contiguous();
  auto c_t = counted.contiguous();
  const int64_t B = p_t.size(0), T = p_t.size(1), E = p_t.size(2), N = B * T;
  TORCH_CHECK(K >= 1 && K <= 2 && K <= E, "route_position: K must be 1 or 2 and at most E");
  const float* p = p_t.data_ptr<float>();
  const bool* rt = r_t.data_ptr<bool>();
  const bool* ct = c_t.data_ptr<bool>();
  for (int64_t i = 0; i < N * E; ++i)
    if (!std::isfinite(p[i])) return false;
  const int64_t G = by_seq ? B : 1;
  auto cap_t = capacity.contiguous();
  const int64_t* cap = cap_t.data_ptr<int64_t>();

  auto i64 = torch::TensorOptions().dtype(torch::kInt64);
  auto expert = torch::empty({B, T, K}, i64);
  auto slot = torch::empty({B, T, K}, i64);
  auto gate = torch::empty({B, T, K}, torch::TensorOptions().dtype(torch::kFloat32));
  auto kept = torch::empty({B, T, K}, torch::TensorOptions().dtype(torch::kBool));
  auto group = torch::empty({B, T}, i64);
  auto requested = torch::zeros({G, E}, i64);
  auto kept_count = torch::empty({G, E}, i64);
  auto group_tokens = torch::zeros({G}, i64);
  int64_t* ex = expert.data_ptr<int64_t>();
  int64_t* sl = slot.data_ptr<int64_t>();
  float* gt = gate.data_ptr<float>();
  bool* kp = kept.data_ptr<bool>();
  int64_t* gr = group.data_ptr<int64_t>();
  int64_t* req = requested.data_ptr<int64_t>();
  int64_t* kc = kept_count.data_ptr<int64_t>();
  int64_t* S = group_tokens.data_ptr<int64_t>();

  const float tiny = std::numeric_limits<float>::min();
  std::vector<float> raw(N * K);
  for (int64_t n = 0; n < N; ++n) {  // score desc, then expert index asc
    const float* row = p + n * E;
    int64_t best = 0;
    for (int64_t e = 1; e < E; ++e)
      if (row[e] > row[best]) best = e;
    ex[n * K] = best;
    raw[n * K] = row[best];
    if (K == 2) {
      int64_t second = best == 0 ? 1 : 0;
      for (int64_t e = 0; e < E; ++e)
        if (e != best && (row[e] > row[second] || (row[e] == row[second] && e < second))) second = e;
      ex[n * K + 1] = second;
      raw[n * K + 1] = row[second];
    }
    const int64_t g = by_seq ? n / T : 0;
    if (ct[n]) ++S[g];
  }
  // arrival order of the step's group: (j, t) by sequence; (j, n) over the stream otherwise
  auto token_at = [&](int64_t i) -> int64_t {  // i-th token of the group order -> index b*T + t
    if (by_seq || !seq_major) return i;
    const int64_t t = i / B, b = i % B;  // stream t*B + b
    return b * T + t;
  };
  for (int64_t n = 0; n < N * K; ++n) sl[n] = -1;
  if (token_major) {
    for (int64_t i = 0; i < N; ++i) {
      const int64_t n = token_at(i);
      if (!rt[n]) continue;
      const int64_t g = by_seq ? n / T : 0;
      for (int64_t j = 0; j < K; ++j) sl[n * K + j] = req[g * E + ex[n * K + j]];
      for (int64_t j = 0; j < K; ++j) ++req[g * E + ex[n * K + j]];
    }
  } else {
    for (int64_t j = 0; j < K; ++j)
      for (int64_t i = 0; i < N; ++i) {
        const int64_t n = token_at(i);
        if (!rt[n]) continue;
        const int64_t g = by_seq ? n / T : 0;
        sl[n * K + j] = req[g * E + ex[n * K + j]]++;
      }
  }
  for (int64_t g = 0; g < G; ++g)
    for (int64_t e = 0; e < E; ++e)
      kc[g * E + e] = dropless ? req[g * E + e] : std::min(req[g * E + e], cap[g]);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t g = by_seq ? n / T : 0;
    const bool r = rt[n];
    gr[n] = r ? g : -1;
    float g0[2], s = raw[n * K];
    if (K == 2) s = raw[n * K] + raw[n * K + 1];
    for (int64_t j = 0; j < K; ++j) g0[j] = norm == 1 ? raw[n * K + j] / std::max(s, tiny) : raw[n * K + j];
    float kept_sum = 0.0f;
    for (int64_t j = 0; j < K; ++j) {
      const bool k = r && (dropless || sl[n * K + j] < cap[g]);
      kp[n * K + j] = k;
      gt[n * K + j] = k ? g0[j] : 0.0f;
      if (!r) ex[n * K + j] = -1;
    }
    if (norm == 2) {
      kept_sum = K == 2 ? gt[n * K] + gt[n * K + 1] : gt[n * K];
      for (int64_t j = 0; j < K; ++j) gt[n * K + j] = gt[n * K + j] / std::max(kept_sum, tiny);
    }
  }
  // in RoutingDecision's field order, probs apart
  out = {expert, gate, kept, slot, group, cap_t.clone(), requested, kept_count, group_tokens};
  return true;
}

py::tuple as_tuple(const std::vector<torch::Tensor>& items) {
  py::tuple t(items.size());
  for (size_t i = 0; i < items.size(); ++i) t[i] = py::cast(items[i]);
  return t;
}

}  // namespace

py::object route_position(torch::Tensor probs, torch::Tensor routed, torch::Tensor counted, torch::Tensor capacity,
                          int64_t K, bool by_seq, bool seq_major, bool token_major, int64_t norm, bool dropless) {
  std::vector<torch::Tensor> out;
  if (!route_impl(probs, routed, counted, capacity, K, by_seq, seq_major, token_major, norm, dropless, out))
    return py::none();
  return as_tuple(out);
}

// The router's logits[B,T,E] as model.kernels.linear computes them: torch's linear (tile 0: native
// mode), or tiles of `tile` rows padded with zero rows, one bmm against the weight's stride-0 view
// (batch-invariant mode). The same operators on the same shapes: the same bits.
torch::Tensor router_logits(const torch::Tensor& x, const torch::Tensor& router, int64_t tile) {
  if (tile <= 0) return at::linear(x, router);
  const int64_t C = x.size(-1), E = router.size(0);
  auto flat = x.reshape({-1, C});
  const int64_t N = flat.size(0);
  const int64_t extra = std::max(tile, (N + tile - 1) / tile * tile) - N;
  if (extra) flat = at::constant_pad_nd(flat, {0, 0, 0, extra});
  auto tiles = flat.view({-1, tile, C});
  auto out = at::bmm(tiles, router.t().expand({tiles.size(0), C, E}));
  return out.view({-1, E}).slice(0, 0, N).view({x.size(0), x.size(1), E});
}

// A whole MoE step of a few tokens in one call: router logits (`router_logits`), softmax scores
// (torch's), route_position's decision and the experts. x[B,T,C], router[E,C]. Returns (y, logits,
// probs, then the decision as route_position), or None when a score is not finite.
py::object moe_step(torch::Tensor x, torch::Tensor router, int64_t tile, torch::Tensor routed, torch::Tensor counted,
                    torch::Tensor capacity, int64_t K, bool by_seq, bool seq_major, bool token_major, int64_t norm,
                    bool dropless, torch::Tensor w_in, torch::Tensor w_out, int64_t F) {
  auto logits = router_logits(x, router, tile);
  auto probs = at::softmax(logits, -1);
  std::vector<torch::Tensor> out;
  if (!route_impl(probs, routed, counted, capacity, K, by_seq, seq_major, token_major, norm, dropless, out))
    return py::none();
  auto y = experts(x, w_in, w_out, F, out[0], out[2], out[1]);
  out.insert(out.begin(), {y, logits, probs});
  return as_tuple(out);
}

namespace {

// sum over d of a[d] * b[d] for n floats: LANES-wide chains in order, a fixed tree over the lanes, then
// the tail in order; the same order for every call of one length.
inline float dot(const float* a, const float* b, int64_t n) {
  vf acc = vf{};
  int64_t d = 0;
  for (; d + LANES <= n; d += LANES) acc += loadv(a + d) * loadv(b + d);
  float lanes[LANES];
  std::memcpy(lanes, &acc, sizeof(acc));
  for (int width = LANES / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  float sum = lanes[0];
  for (; d < n; ++d) sum += a[d] * b[d];
  return sum;
}

}  // namespace

// Batch-invariant causal attention: q[B,H,Tq,D] over k/v[B,H,Tk,D] (key j at position j), a query at
// q_pos[B,Tq] seeing keys 0..q_pos. Each query row alone: its scores in key order, their maximum, the
// sum of exp(s - max) in key order, the values weighted in key order; nothing depends on other rows,
// on Tq or on keys past the query's position (a decode step with a cache equals full recomputation).
torch::Tensor attention(torch::Tensor q_in, torch::Tensor k_in, torch::Tensor v_in, torch::Tensor q_pos_in) {
  TORCH_CHECK(q_in.dtype() == torch::kFloat32 && k_in.dtype() == torch::kFloat32 && v_in.dtype() == torch::kFloat32,
              "attention: float32 only");
  auto q = q_in.contiguous();
  auto k = k_in.stride(-1) == 1 ? k_in : k_in.contiguous();
  auto v = v_in.stride(-1) == 1 ? v_in : v_in.contiguous();
  auto q_pos = q_pos_in.to(torch::kInt64).contiguous();
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), D = q.size(3), Tk = k.size(2);
  auto out = torch::empty({B, H, Tq, D}, q.options());
  const float* qp = q.data_ptr<float>();
  const float* kp = k.data_ptr<float>();
  const float* vp = v.data_ptr<float>();
  const int64_t* pos = q_pos.data_ptr<int64_t>();
  float* op = out.data_ptr<float>();
  const int64_t ks0 = k.stride(0), ks1 = k.stride(1), ks2 = k.stride(2);
  const int64_t vs0 = v.stride(0), vs1 = v.stride(1), vs2 = v.stride(2);
  const float scale = float(1.0 / std::sqrt(double(D)));
  auto rows = [&](int64_t r0, int64_t r1) {
    std::vector<float> s(Tk), qs(D), acc(D);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / (H * Tq), h = (r / Tq) % H, t = r % Tq;
      const int64_t n = std::min(Tk, std::max<int64_t>(pos[b * Tq + t], 0) + 1);
      const float* qr = qp + r * D;
      for (int64_t d = 0; d < D; ++d) qs[d] = qr[d] * scale;
      const float* kb = kp + b * ks0 + h * ks1;
      const float* vb = vp + b * vs0 + h * vs1;
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < n; ++j) {
        s[j] = dot(qs.data(), kb + j * ks2, D);
        m = std::max(m, s[j]);
      }
      float denom = 0.0f;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = 0; j < n; ++j) {
        const float p = std::exp(s[j] - m);
        denom += p;
        const float* vj = vb + j * vs2;
        for (int64_t d = 0; d < D; ++d) acc[d] += p * vj[d];
      }
      float* o = op + r * D;
      for (int64_t d = 0; d < D; ++d) o[d] = acc[d] / denom;
    }
  };
  const int64_t R = B * H * Tq;
  if (R * Tk * D < (int64_t(1) << 20)) {
    rows(0, R);
  } else {
    at::parallel_for(0, R, 16, rows);
  }
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.attr("lanes") = LANES;
  m.def("pack", &pack, "expert weights in the experts kernel's layout");
  m.def("experts", &experts, "SwiGLU experts and their gated combination, batch-invariant");
  m.def("route_position", &route_position, "position-priority routing of a small step");
  m.def("attention", &attention, "batch-invariant causal attention, one query row at a time");
  m.def("moe_step", &moe_step, "an MoE step of a few tokens: router, routing and experts");
}
