// Decode / verify attention that reads the paged KV pool where its blocks lie (no gather).
//
// Built by specgauge/engine/models/paged_kernel.py with torch.utils.cpp_extension; the Python side
// states the invariance argument. In short: every (row, q head) is computed by attend_rows alone,
// over its visible keys in ascending position order, with a fixed summation order inside each dot
// product and each sum; nothing depends on the batch, the group's padding, the row's place or the
// thread that computes it.
//
// Vectorization: attend_rows is compiled three times (GCC's target_clones: AVX-512, AVX2+FMA, plain
// x86-64); the loader picks one at load time from the CPU's flags (an ifunc, i.e. a runtime probe).
// The inner loops work on 16 independent lanes, which the compiler vectorizes without reordering
// any sum, so each clone's bits are fixed by its code alone.

#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <limits>
#include <vector>

namespace {

constexpr int LANES = 16;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SPECGAUGE_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SPECGAUGE_CLONES
#endif

// One query row of one sequence, the `group` q heads that share kv head `kv`.
//   q:      (group, D) rows of those heads, `q_head_stride` apart
//   k, v:   the layer's pool (Hkv, S, D), contiguous; this kv head's slots start at kv * S * D
//   blocks: (nb,) the sequence's block table; key position t lies in slot blocks[t / bs] * bs + t % bs
//   mask:   (Tk,) additive, `mask_stride` apart; -inf keys are skipped entirely
//   out:    (group, D) rows, `out_head_stride` apart
//   scratch: at least Tk ints and group * Tk floats
SPECGAUGE_CLONES
void attend_rows(const float* q, int64_t q_head_stride, int group, const float* k, const float* v,
                 const int64_t* blocks, int64_t bs, const float* mask, int64_t mask_stride, int64_t tk,
                 int64_t d, float scale, float* out, int64_t out_head_stride, int64_t* slots, float* scores) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  int64_t visible = 0;
  for (int64_t t = 0; t < tk; ++t) {
    if (mask[t * mask_stride] != neg_inf) slots[visible++] = t;
  }
  for (int g = 0; g < group; ++g) {
    float* o = out + g * out_head_stride;
    for (int64_t j = 0; j < d; ++j) o[j] = 0.0f;
  }
  if (visible == 0) return;  // a row that sees nothing (never built by the engine): zeros
  float row_max[64];
  for (int g = 0; g < group; ++g) row_max[g] = neg_inf;
  // scores: key by key in position order, each key row loaded once for the group's heads
  for (int64_t i = 0; i < visible; ++i) {
    const int64_t t = slots[i];
    const float* kr = k + (blocks[t / bs] * bs + t % bs) * d;
    const float add = mask[t * mask_stride];
    for (int g = 0; g < group; ++g) {
      const float* qr = q + g * q_head_stride;
      float lane[LANES] = {0};
      int64_t j = 0;
      for (; j + LANES <= d; j += LANES)
        for (int l = 0; l < LANES; ++l) lane[l] += qr[j + l] * kr[j + l];
      for (int l = 0; j + l < d; ++l) lane[l] += qr[j + l] * kr[j + l];
      for (int w = LANES / 2; w >= 1; w /= 2)  // a fixed pairwise tree
        for (int l = 0; l < w; ++l) lane[l] += lane[l + w];
      const float s = lane[0] * scale + add;
      scores[g * visible + i] = s;
      if (s > row_max[g]) row_max[g] = s;
    }
  }
  // softmax weights and the weighted sum of values, again in position order
  float total[64];
  for (int g = 0; g < group; ++g) {
    total[g] = 0.0f;
    for (int64_t i = 0; i < visible; ++i) {
      const float p = std::exp(scores[g * visible + i] - row_max[g]);
      scores[g * visible + i] = p;
      total[g] += p;
    }
  }
  for (int64_t i = 0; i < visible; ++i) {
    const int64_t t = slots[i];
    const float* vr = v + (blocks[t / bs] * bs + t % bs) * d;
    for (int g = 0; g < group; ++g) {
      const float p = scores[g * visible + i];
      float* o = out + g * out_head_stride;
      for (int64_t j = 0; j < d; ++j) o[j] += p * vr[j];
    }
  }
  for (int g = 0; g < group; ++g) {
    float* o = out + g * out_head_stride;
    const float inv = 1.0f / total[g];
    for (int64_t j = 0; j < d; ++j) o[j] *= inv;
  }
}

// q (B*Tq, Hq, D) fp32, last dim contiguous; k_pool, v_pool (Hkv, S, D) fp32 contiguous;
// table (B, nb) int64 contiguous; mask (B, Tq, Tk) fp32 additive (any strides, e.g. broadcast).
// Returns (B*Tq, Hq*D) fp32.
torch::Tensor paged_attention(torch::Tensor q, torch::Tensor k_pool, torch::Tensor v_pool, torch::Tensor table,
                              torch::Tensor mask, int64_t block_size, double scale) {
  TORCH_CHECK(q.dim() == 3 && q.scalar_type() == torch::kFloat32 && q.stride(2) == 1, "q must be (N, Hq, D) fp32");
  TORCH_CHECK(k_pool.dim() == 3 && k_pool.scalar_type() == torch::kFloat32 && k_pool.is_contiguous(),
              "k_pool must be a contiguous (Hkv, S, D) fp32 tensor");
  TORCH_CHECK(v_pool.sizes() == k_pool.sizes() && v_pool.scalar_type() == torch::kFloat32 && v_pool.is_contiguous(),
              "v_pool must match k_pool");
  TORCH_CHECK(table.dim() == 2 && table.scalar_type() == torch::kInt64 && table.is_contiguous(),
              "table must be a contiguous (B, nb) int64 tensor");
  TORCH_CHECK(mask.dim() == 3 && mask.scalar_type() == torch::kFloat32, "mask must be (B, Tq, Tk) fp32");
  const int64_t n = q.size(0), hq = q.size(1), d = q.size(2);
  const int64_t hkv = k_pool.size(0), slots_total = k_pool.size(1);
  const int64_t b = table.size(0), nb = table.size(1);
  const int64_t tk = mask.size(2);
  TORCH_CHECK(k_pool.size(2) == d, "k_pool's head size differs from q's");
  TORCH_CHECK(hq % hkv == 0 && hq / hkv <= 64, "q heads must be a multiple (at most 64) of kv heads");
  TORCH_CHECK(b > 0 && n % b == 0, "q's rows must be B * Tq");
  const int64_t tq = n / b;
  TORCH_CHECK(mask.size(0) == b && mask.size(1) == tq, "mask must be (B, Tq, Tk)");
  TORCH_CHECK(tk <= nb * block_size, "mask has more keys than the block table holds");
  TORCH_CHECK(table.numel() == 0 || (table.min().item<int64_t>() >= 0 &&
              (table.max().item<int64_t>() + 1) * block_size <= slots_total), "block table outside the pool");
  const int group = static_cast<int>(hq / hkv);
  auto out = torch::empty({n, hq * d}, q.options().memory_format(torch::MemoryFormat::Contiguous));
  const float* qp = q.data_ptr<float>();
  const float* kp = k_pool.data_ptr<float>();
  const float* vp = v_pool.data_ptr<float>();
  const int64_t* tp = table.data_ptr<int64_t>();
  const float* mp = mask.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const int64_t qs0 = q.stride(0), qs1 = q.stride(1);
  const int64_t ms0 = mask.stride(0), ms1 = mask.stride(1), ms2 = mask.stride(2);
  const float fscale = static_cast<float>(scale);
  // one task per (row, kv head): tasks never share an output, so no sum crosses threads
  at::parallel_for(0, n * hkv, 1, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> slots(tk);
    std::vector<float> scores(static_cast<size_t>(group) * tk);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t row = task / hkv, kv = task % hkv;
      const int64_t seq = row / tq, i = row % tq;
      attend_rows(qp + row * qs0 + kv * group * qs1, qs1, group, kp + kv * slots_total * d,
                  vp + kv * slots_total * d, tp + seq * nb, block_size, mp + seq * ms0 + i * ms1, ms2, tk, d,
                  fscale, op + row * hq * d + kv * group * d, d, slots.data(), scores.data());
    }
  });
  return out;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("paged_attention", &paged_attention, "decode/verify attention over the paged KV pool, read in place");
}
