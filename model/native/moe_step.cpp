// The MoE block's kernels of kernel version 3, one module per instruction-set path (simd.h): the
// experts (experts.h), position-priority routing of a small step, a whole small step in one call, and
// batch-invariant attention.
//
// route_position: the decision of model.routing._route_by_position (position priorities, batch or
// sequence groups, K <= 2) in host integers: the same float operations on the same float32 values
// (a K <= 2 sum is one IEEE addition, then one division), so the same decision bit for bit.

#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "experts.h"
#include "simd.h"

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

  // the integer fields share one allocation, each a contiguous tensor made without the dispatcher (a
  // decode step's microseconds: no view records, no operator calls)
  auto ints = torch::empty({2 * N * K + N + 2 * G * E + 2 * G}, torch::TensorOptions().dtype(torch::kInt64));
  int64_t at_ = 0;
  auto take = [&](c10::IntArrayRef shape) {
    auto t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(ints.storage()), ints.key_set(), ints.dtype());
    t.unsafeGetTensorImpl()->set_sizes_contiguous(shape);
    t.unsafeGetTensorImpl()->set_storage_offset(at_);
    at_ += t.numel();
    return t;
  };
  auto expert = take({B, T, K});
  auto slot = take({B, T, K});
  auto group = take({B, T});
  auto requested = take({G, E});
  auto kept_count = take({G, E});
  auto group_tokens = take({G});
  auto cap_copy = take({G});
  std::fill_n(requested.data_ptr<int64_t>(), G * E, int64_t(0));
  std::fill_n(group_tokens.data_ptr<int64_t>(), G, int64_t(0));
  auto gate = torch::empty({B, T, K}, torch::TensorOptions().dtype(torch::kFloat32));
  auto kept = torch::empty({B, T, K}, torch::TensorOptions().dtype(torch::kBool));
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
  std::copy_n(cap, G, cap_copy.data_ptr<int64_t>());
  out = {expert, gate, kept, slot, group, cap_copy, requested, kept_count, group_tokens};
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
// mode; for x[B,T,C] without a bias torch's linear is the matrix product of x's rows [B*T,C] and the
// weight's transpose, which is called here directly), or tiles of `tile` rows padded with zero rows, one
// bmm against the weight's stride-0 view (batch-invariant mode). The same kernels on the same shapes:
// the same bits.
torch::Tensor router_logits(const torch::Tensor& x, const torch::Tensor& router, int64_t tile) {
  const int64_t C = x.size(-1), E = router.size(0);
  if (tile <= 0) {
    if (x.dim() != 3 || !x.is_contiguous()) return at::linear(x, router);
    return at::mm(x.view({-1, C}), router.t()).view({x.size(0), x.size(1), E});
  }
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
  TORCH_CHECK(x.dtype() == torch::kFloat32 && w_in.dtype() == torch::kFloat32 && w_out.dtype() == torch::kFloat32,
              "moe_step: float32 only");
  const int64_t C = x.size(-1), E = w_in.size(0);
  TORCH_CHECK(C % simd::LANES == 0 && F % simd::LANES == 0 && w_in.size(1) == 2 * F * C && w_out.size(0) == E &&
              w_out.size(1) == C * F && router.size(0) == E, "moe_step: packed shapes");
  auto xc = x.contiguous();
  auto wi = w_in.contiguous();
  auto wo = w_out.contiguous();
  auto y = torch::empty(xc.sizes(), xc.options());
  experts_impl::run(xc.data_ptr<float>(), xc.numel() / C, C, wi.data_ptr<float>(), wo.data_ptr<float>(), E, F,
                    out[0].data_ptr<int64_t>(), out[2].data_ptr<bool>(), out[1].data_ptr<float>(), K,
                    y.data_ptr<float>());
  out.insert(out.begin(), {y, logits, probs});
  return as_tuple(out);
}

namespace {

// sum over d of a[d] * b[d] for n floats: LANES-wide chains in order, a fixed tree over the lanes, then
// the tail in order; the same order for every call of one length.
inline float dot(const float* a, const float* b, int64_t n) {
  simd::vec acc = simd::zero();
  int64_t d = 0;
  for (; d + simd::LANES <= n; d += simd::LANES) acc = simd::fmadd(simd::load(a + d), simd::load(b + d), acc);
  float lanes[simd::LANES];
  simd::store(lanes, acc);
  for (int width = simd::LANES / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  float sum = lanes[0];
  for (; d < n; ++d) sum = simd::madd(a[d], b[d], sum);
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
        for (int64_t d = 0; d < D; ++d) acc[d] = simd::madd(p, vj[d], acc[d]);
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
  m.attr("lanes") = simd::LANES;
  m.attr("isa") = simd::ISA;
  m.def("pack", &pack, "expert weights in the experts kernel's layout");
  m.def("experts", &experts, "SwiGLU experts and their gated combination, batch-invariant");
  m.def("route_position", &route_position, "position-priority routing of a small step");
  m.def("attention", &attention, "batch-invariant causal attention, one query row at a time");
  m.def("moe_step", &moe_step, "an MoE step of a few tokens: router, routing and experts");
}
