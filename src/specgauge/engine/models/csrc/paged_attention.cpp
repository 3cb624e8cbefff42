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
// The inner loops are written lane-wise on 8-float vectors (GCC vector extensions); every sum has
// a fixed order in the code, so each clone's bits are fixed by its code alone.

#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <limits>
#include <vector>

namespace {

// 8 floats, lane-wise arithmetic (GCC vector extensions): one ymm on AVX2 and AVX-512, two xmm on
// plain x86-64. Lane-wise operations round the same way whatever registers hold them.
typedef float f8 __attribute__((vector_size(32)));
typedef int32_t i8 __attribute__((vector_size(32)));
constexpr int LANES = 8;

inline f8 load8(const float* p) {
  f8 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

inline void store8(float* p, f8 v) { __builtin_memcpy(p, &v, sizeof v); }

// q . k over d, summed in 8 lanes, then the lanes in a fixed pairwise tree
inline float dot(const float* q, const float* k, int64_t d) {
  f8 acc = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + LANES <= d; j += LANES) acc += load8(q + j) * load8(k + j);
  float tail = 0.0f;
  for (; j < d; ++j) tail += q[j] * k[j];
  return (((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]))) + tail;
}

// The dot products of q with 8 key rows at once: lane l of the result is q . k[l], summed over d
// in 8 lanes and then the lanes in dot()'s tree ((0+4)+(2+6))+((1+5)+(3+7)) — the same bits as
// dot(q, k[l], d), so a key's score does not depend on which 8 keys it was computed with.
inline f8 dot8(const float* q, const float* const* k, int64_t d) {
  f8 acc[LANES];
  for (int l = 0; l < LANES; ++l) acc[l] = f8{0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + LANES <= d; j += LANES) {
    const f8 qv = load8(q + j);
    for (int l = 0; l < LANES; ++l) acc[l] += qv * load8(k[l] + j);
  }
  typedef int32_t m8 __attribute__((vector_size(32)));
  const m8 lo = {0, 1, 2, 3, 8, 9, 10, 11}, hi = {4, 5, 6, 7, 12, 13, 14, 15};
  f8 t[4];
  for (int p = 0; p < 4; ++p)  // lanes j + (j+4): [key 2p: 4 sums, key 2p+1: 4 sums]
    t[p] = __builtin_shuffle(acc[2 * p], acc[2 * p + 1], lo) + __builtin_shuffle(acc[2 * p], acc[2 * p + 1], hi);
  const m8 lo2 = {0, 1, 8, 9, 4, 5, 12, 13}, hi2 = {2, 3, 10, 11, 6, 7, 14, 15};
  f8 u0 = __builtin_shuffle(t[0], t[1], lo2) + __builtin_shuffle(t[0], t[1], hi2);  // keys 0 2 1 3, 2 sums each
  f8 u1 = __builtin_shuffle(t[2], t[3], lo2) + __builtin_shuffle(t[2], t[3], hi2);  // keys 4 6 5 7
  const m8 even = {0, 2, 8, 10, 4, 6, 12, 14}, odd = {1, 3, 9, 11, 5, 7, 13, 15};
  f8 w = __builtin_shuffle(u0, u1, even) + __builtin_shuffle(u0, u1, odd);  // keys 0 2 4 6 1 3 5 7
  const m8 order = {0, 4, 1, 5, 2, 6, 3, 7};
  w = __builtin_shuffle(w, order);
  if (j < d) {
    for (int l = 0; l < LANES; ++l) {
      float tail = 0.0f;
      for (int64_t jj = j; jj < d; ++jj) tail += q[jj] * k[l][jj];
      w[l] += tail;
    }
  }
  return w;
}

// exp(x) for x <= 0, 8 lanes (Cephes' expf: 2^n times a degree-6 polynomial); below -87 it is
// taken at -87 (about 1.6e-38: nothing next to the row's largest weight, 1)
inline f8 exp8(f8 x) {
  const f8 lo = {-87.0f, -87.0f, -87.0f, -87.0f, -87.0f, -87.0f, -87.0f, -87.0f};
  x = x < lo ? lo : x;
  f8 fx = x * 1.44269504088896341f + 0.5f;
  i8 n = __builtin_convertvector(fx, i8);  // truncation toward zero ...
  f8 fl = __builtin_convertvector(n, f8);
  n += (fl > fx);                           // ... corrected to floor (true is -1)
  fl = __builtin_convertvector(n, f8);
  x = x - fl * 0.693359375f - fl * -2.12194440e-4f;
  f8 y = 1.9875691500e-4f * x + 1.3981999507e-3f;
  y = y * x + 8.3334519073e-3f;
  y = y * x + 4.1665795894e-2f;
  y = y * x + 1.6666665459e-1f;
  y = y * x + 5.0000001201e-1f;
  y = y * (x * x) + x + 1.0f;
  i8 bits = (n + 127) << 23;
  f8 scale;
  __builtin_memcpy(&scale, &bits, sizeof scale);
  return y * scale;
}

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
//   scratch: at least Tk ints and (group + 1) * (Tk + 8) floats
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
  const int64_t stride = (visible + LANES - 1) / LANES * LANES;  // each head's scores, padded to 8
  float row_max[64];
  for (int g = 0; g < group; ++g) row_max[g] = neg_inf;
  // scores, in position order: 8 keys at a time (dot8), the rest one by one (the same bits)
  for (int64_t i = 0; i < visible; ++i) {
    const int64_t t = slots[i];
    slots[i] = (blocks[t / bs] * bs + t % bs) * d;  // from here on: the key's offset in the pool
    scores[group * stride + i] = mask[t * mask_stride];  // the additive mask, after the heads' scores
  }
  const float* adds = scores + group * stride;
  int64_t i = 0;
  for (; i + LANES <= visible; i += LANES) {
    const float* kr[LANES];
    for (int l = 0; l < LANES; ++l) kr[l] = k + slots[i + l];
    const f8 add = load8(adds + i);
    for (int g = 0; g < group; ++g) {
      const f8 sv = dot8(q + g * q_head_stride, kr, d) * scale + add;
      store8(scores + g * stride + i, sv);
      for (int l = 0; l < LANES; ++l) row_max[g] = sv[l] > row_max[g] ? sv[l] : row_max[g];
    }
  }
  for (; i < visible; ++i) {
    const float* kr = k + slots[i];
    for (int g = 0; g < group; ++g) {
      const float sv = dot(q + g * q_head_stride, kr, d) * scale + adds[i];
      scores[g * stride + i] = sv;
      row_max[g] = sv > row_max[g] ? sv : row_max[g];
    }
  }
  // softmax weights (8 at a time, padding lanes set to 0) and their sum in position order
  float total[64];
  for (int g = 0; g < group; ++g) {
    float* sg = scores + g * stride;
    for (int64_t i = visible; i < stride; ++i) sg[i] = neg_inf;
    float sum = 0.0f;
    for (int64_t i = 0; i < stride; i += LANES) {
      f8 p = exp8(load8(sg + i) - row_max[g]);
      for (int l = 0; l < LANES; ++l) {
        if (i + l >= visible) p[l] = 0.0f;
      }
      store8(sg + i, p);
    }
    for (int64_t i = 0; i < visible; ++i) sum += sg[i];
    total[g] = sum;
  }
  // the weighted sum of values, again in position order (32 outputs at a time held in registers)
  for (int g = 0; g < group; ++g) {
    const float* pg = scores + g * stride;
    float* o = out + g * out_head_stride;
    int64_t j = 0;
    for (; j + 4 * LANES <= d; j += 4 * LANES) {
      f8 a0 = load8(o + j), a1 = load8(o + j + 8), a2 = load8(o + j + 16), a3 = load8(o + j + 24);
      for (int64_t n = 0; n < visible; ++n) {
        const float* vr = v + slots[n] + j;
        const float p = pg[n];
        a0 += p * load8(vr);
        a1 += p * load8(vr + 8);
        a2 += p * load8(vr + 16);
        a3 += p * load8(vr + 24);
      }
      store8(o + j, a0), store8(o + j + 8, a1), store8(o + j + 16, a2), store8(o + j + 24, a3);
    }
    for (; j + LANES <= d; j += LANES) {
      f8 a = load8(o + j);
      for (int64_t n = 0; n < visible; ++n) a += pg[n] * load8(v + slots[n] + j);
      store8(o + j, a);
    }
    for (; j < d; ++j) {
      float a = o[j];
      for (int64_t n = 0; n < visible; ++n) a += pg[n] * v[slots[n] + j];
      o[j] = a;
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
    std::vector<float> scores(static_cast<size_t>(group + 1) * (tk + LANES));
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
