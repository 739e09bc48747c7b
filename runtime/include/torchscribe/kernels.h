// torchscribe/kernels.h: what every generated C++ kernel source includes first (a compiled
// module's KERNELS_CPP starts with `#include <torchscribe/kernels.h>`; runtime/native.py builds
// it with runtime/include on the include path, the headers' hash in the cache key). The
// vectorisable math, the row driver, NaN-propagating max/min and 16-bit float conversions: the
// same in every module, so a module holds only its own kernels (codegen/cpp_kernels.py).
#ifndef TORCHSCRIBE_KERNELS_H
#define TORCHSCRIBE_KERNELS_H

#include "vecmath.h"

#include <algorithm>
#include <initializer_list>
#include <utility>
#include <memory>
#include <tuple>
#include <type_traits>
#include <vector>
#ifdef __linux__
#include <sys/mman.h>
#endif
#ifdef _OPENMP
#include <dlfcn.h>
#include <omp.h>
#endif

// A kernel's parameters: the data pointer of an input and of an output, each the only way the
// kernel reaches that memory (restrict), so that the loops over them vectorise without checks.
template <typename T> using ts_in = const T* __restrict;
template <typename T> using ts_out = T* __restrict;

// The number of threads torch runs its own ops on: at::get_num_threads() of the loaded
// libtorch_cpu, looked up once. That is torch.set_num_threads's count in every Python thread (a
// thread that has not run a parallel torch op yet gets it then, as torch's ops do), where
// OpenMP's own count (omp_get_max_threads) is the setting of the thread that called
// torch.set_num_threads only, the number of cores in the others. OpenMP's count where torch's
// library is not loaded.
static inline int ts_threads() {
#ifdef _OPENMP
  typedef int (*Count)();
  static const Count count = []() -> Count {
    for (const char* name : {"libtorch_cpu.so", "libtorch_cpu.dylib"}) {
      if (void* lib = dlopen(name, RTLD_LAZY | RTLD_NOLOAD)) {  // (already loaded, or nothing)
        return reinterpret_cast<Count>(dlsym(lib, "_ZN2at15get_num_threadsEv"));
      }
    }
    return nullptr;
  }();
  return count != nullptr ? count() : omp_get_max_threads();
#else
  return 1;
#endif
}

// A kernel's new output of `count` elements, which it writes whole (codegen/cpp_kernels.py,
// emit_kernel): Linux is asked to back the 2 MB pages it spans with huge pages (madvise, where
// transparent huge pages are "madvise" only, a common default). The 4 KB pages of a new tensor
// past malloc's mmap threshold fault in one by one as a kernel first writes them: 12288 faults,
// the kernel zeroing each, were 60% of a softmax over a 50 MB tensor (the same softmax into
// memory already touched ran 3x as fast). Below 8 MB, not worth a system call.
template <typename T> static inline void ts_fresh(T* p, int64_t count) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t huge = uintptr_t(1) << 21;
  if (count < int64_t(4 * huge / sizeof(T))) return;
  const uintptr_t begin = ((uintptr_t)p + huge - 1) & ~(huge - 1), end = (uintptr_t)(p + count) & ~(huge - 1);
  if (end > begin) madvise((void*)begin, end - begin, MADV_HUGEPAGE);  // (a failure changes nothing)
#else
  (void)p, (void)count;
#endif
}

// rows(begin, end) over the rows [0, n): split among ts_threads() of OpenMP's threads (torch's
// own pool where torch runs on OpenMP: the kernels' libraries link the libgomp torch loaded)
// when `parallel`, else one plain call. Not an `omp parallel for` with an if clause: gcc
// compiles the loop of that as a function of its own even when it runs serially, reading sizes
// and pointers through a shared struct, and a serial batch-norm + hardswish kernel ran 35%
// slower there.
template <class Rows> static inline void ts_rows(const Rows& rows, int64_t n, bool parallel) {
  if (n <= 0) return;  // (no rows: an outer size is 0, which the rows would divide by)
#ifdef _OPENMP
  const int threads = parallel && n > 1 && !omp_in_parallel() ? (int)std::min<int64_t>(ts_threads(), n) : 1;
  if (threads > 1) {
    #pragma omp parallel num_threads(threads)
    {
      const Rows mine = rows;  // (each thread's own copy: what it captured stays in registers)
      const int64_t t = omp_get_thread_num(), count = omp_get_num_threads();
      mine(n * t / count, n * (t + 1) / count);
    }
    return;
  }
#endif
  rows(0, n);
}

// How many of `n` rows of `inner` elements a kernel folds into one row, where its tensors walk
// them as one: all of them while the row stays short (its loop costs per row); past that, the
// largest power of two dividing n that keeps the row within 4096 elements, so that rows remain
// for ts_rows to share out (a contiguous tensor folded whole into one row ran on one thread).
// Where that leaves rows under 512 elements (n odd, inner small), all of them again: one row,
// on one thread, rather than many rows of a few elements. At least 1 (n may be 0).
static inline int64_t ts_fold(int64_t n, int64_t inner) {
  constexpr int64_t most = 4096, least = 512;
  if (n <= 1) return 1;
  if (n * inner <= most) return n;
  int64_t k = 1;
  while (n % (2 * k) == 0 && 2 * k * inner <= most) k *= 2;
  return k * inner >= least ? k : n;
}

// Folds dim d (`nd` rows) into the inner dim (`n` elements) where `alike`: every tensor walks
// the two as one (its stride along d is its stride along the row times n). Whole while the row
// stays short, else in part (ts_fold), the strides along d (`strides`) then stepping over the
// rows folded together. A dim of 1 folds with nothing to do. Returns whether dim d is now 1, as
// only then may the dim before it fold too: `ts_fold_into(n2, n3, ...) && ts_fold_into(n1, ...)`
// (a (1, 1280, 7, 7) batch-norm kernel runs 1280 rows of 49 elements, not 8960 rows of 7).
template <class... Strides>
static inline bool ts_fold_into(int64_t& nd, int64_t& n, bool alike, Strides&... strides) {
  if (nd == 1) return true;
  if (!alike) return false;
  const int64_t k = ts_fold(nd, n);
  n *= k;
  nd /= k;
  ((strides *= k), ...);
  return nd == 1;
}

// A lambda that must be inlined where it is called (`[&](auto unit) TS_INLINE { ... }`); a
// function that must stay a call (a reduction's row function: the compiler sees its restrict
// pointers and local sizes, which it does not inside an OpenMP region); and the loop over a
// share of the rows, one function with the kernel's row inlined into it (gcc inlined the loop
// into ts_rows and called the row, a sin/cos chain's, as a function: 2% slower).
#if defined(__GNUC__)
#define TS_INLINE __attribute__((always_inline))
#define TS_NOINLINE __attribute__((noinline))
#define TS_ROWS __attribute__((noinline, flatten))
#else
#define TS_INLINE
#define TS_NOINLINE
#define TS_ROWS
#endif

// One loop body for every layout: body(std::true_type) where `unit` (every stride along the row
// is 1), else body(std::false_type). Inside, `unit ? 1 : stride` is a constant step of 1 in the
// first version, which the compiler vectorises as contiguous loads and stores, as it did the
// loop written out twice. Both versions are inlined into the caller: called as functions of
// their own (a template of the rows function), a sin/cos/exp chain ran 1.5% slower.
template <class Body> static inline TS_INLINE void ts_unit_or_strided(bool unit, const Body& body) {
  if (unit) {
    body(std::true_type{});
  } else {
    body(std::false_type{});
  }
}
// The same, `unit` where every one of `strides` is 1.
template <class Body>
static inline TS_INLINE void ts_unit_or_strided(std::initializer_list<int64_t> strides, const Body& body) {
  ts_unit_or_strided(std::all_of(strides.begin(), strides.end(), [](int64_t s) { return s == 1; }), body);
}

// The elements [0, n) of a row, in a vectorised loop: element(j) computes element j and returns
// its stores (a lambda). With `ways` > 1 the loop takes `ways` elements at a time, j, n/ways + j,
// ...: independent chains of math that the scheduler (-fschedule-insns, runtime/native.py)
// interleaves, each element's stores run after all of them are loaded and computed (the compiler
// cannot tell the stores from the other elements' loads). A chain of sin, cos, exp and tanh is
// one long dependency per element, which the core's out-of-order window (a vector iteration of
// ~300 instructions) did not overlap: one element at a time it took 1.57x the time of four at a
// time, two at a time 1.16x (AMD Zen 4, one thread); the element's code is compiled `ways` + 1
// times (the remainder's loop too).
template <class Element, size_t... W>
static inline TS_INLINE void ts_elements_at(const Element& element, int64_t h, int64_t j, std::index_sequence<W...>) {
  const auto stores = std::make_tuple(element((int64_t)W * h + j)...);
  std::apply([](const auto&... store) { (store(), ...); }, stores);
}
template <int ways = 1, class Element> static inline TS_INLINE void ts_elements(int64_t n, const Element& element) {
  const int64_t h = ways > 1 ? n / ways : 0;
  #pragma omp simd
  for (int64_t j = 0; j < h; ++j) ts_elements_at(element, h, j, std::make_index_sequence<ways>{});
  #pragma omp simd
  for (int64_t j = ways * h; j < n; ++j) element(j)();
}

// A kernel of one dim: chunk(o, end) on its elements [o, end), all of them, or each thread's
// share of them above 32768 (ts_rows); with `strides` first, chunk(unit, o, end) as ts_rows_of.
template <class Chunk> static inline void ts_chunks_of(int64_t n, const Chunk& chunk) {
  ts_rows([chunk](int64_t begin, int64_t end) TS_ROWS { chunk(begin, end); }, n, n >= 32768);
}
template <class Chunk>
static inline void ts_chunks_of(std::initializer_list<int64_t> strides, int64_t n, const Chunk& chunk) {
  ts_unit_or_strided(strides, [&](auto unit) TS_INLINE {
    ts_rows([chunk, unit](int64_t begin, int64_t end) TS_ROWS { chunk(unit, begin, end); }, n, n >= 32768);
  });
}

// The rows of a kernel: every index of the outer dims (sizes `outer`), each row `inner`
// elements, on ts_rows's threads. row(i0, ..., o) gets the row's index along each outer dim and
// `o`, its first element in a dense tensor of these sizes; the indices advance row by row (no
// division per row). With `strides` first (each tensor's stride along the row),
// row(unit, i0, ..., o) also gets `unit`: a std::true_type where every one of them is 1, else a
// std::false_type (ts_unit_or_strided), so that the row's loop of steps `unit ? 1 : stride`
// vectorises contiguous loads and stores in the first version. The kernel's lambda holds only
// its loads, its math and its stores.
struct ts_no_unit {};
template <class Row, class Unit, size_t R, size_t... D>
static inline TS_INLINE void ts_call_row(const Row& row, Unit unit, const int64_t (&i)[R], int64_t o,
                                         std::index_sequence<D...>) {
  if constexpr (std::is_same<Unit, ts_no_unit>::value) {
    row(i[D]..., o);
  } else {
    row(unit, i[D]..., o);
  }
}
template <class Unit, size_t R, class Row>
static inline TS_INLINE void ts_rows_with(Unit unit, const int64_t (&outer)[R], int64_t inner, const Row& row) {
  struct Sizes { int64_t n[R]; } sizes;  // (captured by value: each thread's copy in registers)
  int64_t count = 1;
  for (size_t d = 0; d < R; ++d) {
    sizes.n[d] = outer[d];
    count *= outer[d];
  }
  ts_rows([row, sizes, inner, unit](int64_t begin, int64_t end) TS_ROWS {
    int64_t i[R], rest = begin;
    for (size_t d = R - 1; d > 0; --d) {
      i[d] = rest % sizes.n[d];
      rest /= sizes.n[d];
    }
    i[0] = rest;
    for (int64_t r = begin; r < end; ++r) {
      ts_call_row(row, unit, i, r * inner, std::make_index_sequence<R>{});
      size_t d = R - 1;  // (the last index fastest)
      while (d > 0 && ++i[d] == sizes.n[d]) i[d--] = 0;
      if (d == 0) ++i[0];
    }
  }, count, count * inner >= 32768);
}
template <size_t R, class Row>
static inline void ts_rows_of(const int64_t (&outer)[R], int64_t inner, const Row& row) {
  ts_rows_with(ts_no_unit{}, outer, inner, row);
}
template <size_t R, class Row>
static inline void ts_rows_of(std::initializer_list<int64_t> strides, const int64_t (&outer)[R], int64_t inner,
                              const Row& row) {
  ts_unit_or_strided(strides, [&](auto unit) TS_INLINE { ts_rows_with(unit, outer, inner, row); });
}

// The 8 x 8 block of 32-bit elements at x (rows `xs` apart) transposed into y (rows `ys` apart).
#if defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector)
#define TS_TRANSPOSE8 1
template <typename T> static inline void ts_transpose8(T* __restrict y, int64_t ys, const T* __restrict x, int64_t xs) {
  typedef T V __attribute__((vector_size(32)));
  V r[8], u[8], w[8];
  for (int k = 0; k < 8; ++k) __builtin_memcpy(&r[k], x + k * xs, sizeof(V));
  for (int k = 0; k < 8; k += 2) {  // (pairs of rows interleaved in each 128-bit half)
    u[k] = __builtin_shufflevector(r[k], r[k + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    u[k + 1] = __builtin_shufflevector(r[k], r[k + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int k = 0; k < 8; k += 4) {  // (then pairs of pairs)
    w[k] = __builtin_shufflevector(u[k], u[k + 2], 0, 1, 8, 9, 4, 5, 12, 13);
    w[k + 1] = __builtin_shufflevector(u[k], u[k + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    w[k + 2] = __builtin_shufflevector(u[k + 1], u[k + 3], 0, 1, 8, 9, 4, 5, 12, 13);
    w[k + 3] = __builtin_shufflevector(u[k + 1], u[k + 3], 2, 3, 10, 11, 6, 7, 14, 15);
  }
  for (int k = 0; k < 4; ++k) {  // (and the halves of rows k and k + 4)
    const V lo = __builtin_shufflevector(w[k], w[k + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    const V hi = __builtin_shufflevector(w[k], w[k + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    __builtin_memcpy(y + k * ys, &lo, sizeof(V));
    __builtin_memcpy(y + (k + 4) * ys, &hi, sizeof(V));
  }
}
#endif
#endif

// A reduction kernel's row of input K (codegen/cpp_rows.py, row_driver) as a contiguous
// one, for its row function's passes to run vectorised on a row in cache: `p` itself where its
// stride `s` is 1, else a row of this thread's tile. A LayerNorm2d normalises the channels of an
// NCHW tensor, H * W apart, where each of its four passes read them one at a time. The tile holds
// up to 64 bytes' worth of rows that lie side by side (`step` 1: the rows of the next indices of
// the last outer dim, `left` of them there counting this one), each 64-byte line read whole
// once; a row that is not in it fills it again. The driver's lambda holds one gatherer per
// input, captured by value: each thread's copy says what its tile holds during one call. Where
// every stride along the row is 1 (`unit`), the pointer itself, with no test per row.
template <int K, typename T> struct ts_gather {
  mutable const T* base = nullptr;  // the tile's first row; rows base + t for t < count
  mutable int64_t count = 0;
  // (`unit`, of ts_rows_of: a std::true_type where every input's stride along the row is 1)
  const T* operator()(std::true_type, const T* p, int64_t, int64_t, int64_t, int64_t) const { return p; }
  const T* operator()(std::false_type, const T* p, int64_t n, int64_t s, int64_t step, int64_t left) const {
    if (s == 1) return p;
    // (bytes for a bool mask: std::vector<bool> packs bits and has no data())
    using Cell = std::conditional_t<std::is_same_v<T, bool>, unsigned char, T>;
    static thread_local std::vector<Cell> scratch;
    constexpr int64_t width = 64 / sizeof(T);  // (a line)
    if (step == 1 && p >= base && p < base + count) return reinterpret_cast<const T*>(scratch.data()) + (p - base) * n;
    const int64_t most = std::min<int64_t>(width, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, n * sizeof(T))));
    count = step == 1 ? std::min(left, most) : 1;
    base = p;
    if ((int64_t)scratch.size() < count * n) scratch.resize(count * n);
    T* __restrict q = reinterpret_cast<T*>(scratch.data());
    int64_t t0 = 0;  // (the rows before t0 are done)
#ifdef TS_TRANSPOSE8
    if constexpr (sizeof(T) == 4) {  // (8 x 8 blocks transposed in registers: 8 stores, not 64)
      for (; t0 + 8 <= count; t0 += 8) {
        int64_t j0 = 0;
        for (; j0 + 8 <= n; j0 += 8) ts_transpose8(q + t0 * n + j0, n, p + j0 * s + t0, s);
        for (int64_t j = j0; j < n; ++j) {
          for (int64_t t = t0; t < t0 + 8; ++t) q[t * n + j] = p[j * s + t];
        }
      }
    }
#endif
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t t = t0; t < count; ++t) q[t * n + j] = p[j * s + t];
    }
    return q;
  }
};

// Selects are bit-mask blends (math_detail::sel) so that loops with them still vectorise.
using torchscribe::math_detail::sel;
template <typename T> static inline T ts_max(T a, T b) { return (a != a) ? a : ((b != b) ? b : (a > b ? a : b)); }
template <typename T> static inline T ts_min(T a, T b) { return (a != a) ? a : ((b != b) ? b : (a < b ? a : b)); }
// The floating versions give the same bits: !(a <= b) holds where a > b or either is NaN, and b
// replaces it only where b alone is NaN. Against a constant (clamp_min(x, -87), relu) that is one
// compare and one blend, where the nested selects took two of each.
template <typename T> static inline T ts_max_float(T a, T b) { return sel(bool((b != b) & (a == a)), b, sel(!(a <= b), a, b)); }
template <typename T> static inline T ts_min_float(T a, T b) { return sel(bool((b != b) & (a == a)), b, sel(!(a >= b), a, b)); }
static inline float ts_max(float a, float b) { return ts_max_float(a, b); }
static inline double ts_max(double a, double b) { return ts_max_float(a, b); }
static inline float ts_min(float a, float b) { return ts_min_float(a, b); }
static inline double ts_min(double a, double b) { return ts_min_float(a, b); }

// bfloat16 and float16 elements are uint16_t; a value is held as the float it widens to, and
// rounding (to nearest even) gives the float of the nearest 16-bit value. Integer bit tricks,
// branch-free: loops with them vectorise (gcc's _Float16 conversions do not without AVX512-FP16).
static inline uint32_t ts_pick(bool c, uint32_t a, uint32_t b) {
  const uint32_t m = 0u - (uint32_t)c;
  return (a & m) | (b & ~m);
}
// bfloat16 is the high half of a float. A NaN only gets its quiet bit (rounding could carry it
// into an infinity).
static inline float ts_load_bf16(uint16_t h) { return torchscribe::math_detail::f32((uint32_t)h << 16); }
static inline float ts_round_bf16(float x) {
  using namespace torchscribe::math_detail;
  const uint32_t u = bits(x);
  return f32(ts_pick(x != x, u | 0x400000u, u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
}
static inline uint16_t ts_store_bf16(float x) {  // (x rounded)
  return (uint16_t)(torchscribe::math_detail::bits(x) >> 16);
}
// float16: sign, 5 exponent bits (bias 15), 10 mantissa bits; subnormals below 2^-14.
static inline float ts_load_f16(uint16_t h) {
  using namespace torchscribe::math_detail;
  const uint32_t em = (uint32_t)(h & 0x7fffu) << 13;  // exponent and mantissa at a float's places:
  const float v = f32(em) * 0x1p112f;  // 2^-112 times the value, subnormals too
  const float special = f32(em | 0x7f800000u);  // exponent 31: inf or NaN
  return f32(bits(sel(em >= 0x0f800000u, special, v)) | (uint32_t)(h & 0x8000u) << 16);
}
static inline float ts_round_f16(float x) {
  using namespace torchscribe::math_detail;
  const uint32_t sign = bits(x) & 0x80000000u, e = (bits(x) ^ sign) & 0x7f800000u;
  const float a = f32(bits(x) ^ sign);
  // a + s rounds a to the float16 spacing of its binade when that is s's float spacing:
  // s = 2^(e + 13) for a in [2^e, 2^(e+1)), e clamped to float16's binades [-14, 15].
  const float s = f32(std::min(std::max(e, 113u << 23), 142u << 23) + (13u << 23));
  const float r = sel(a >= 65520.0f, inf<float>(), (a + s) - s);  // (65520 rounds past 65504, the largest)
  return f32(bits(r) | sign);
}
static inline uint16_t ts_store_f16(float x) {  // (x rounded)
  using namespace torchscribe::math_detail;
  const uint32_t a = bits(x) & 0x7fffffffu;
  const uint32_t normal = (a - (112u << 23)) >> 13;  // exponent rebiased
  const uint32_t small = bits(f32(a) + 0.5f) - 0x3f000000u;  // subnormal: a multiple of 2^-24
  const uint32_t special = (a >> 13) & 0x7fffu;  // inf and NaN: exponent bits all ones
  const uint32_t h = ts_pick(a >= 0x7f800000u, special, ts_pick(a >= 0x38800000u, normal, small));
  return (uint16_t)(h | (bits(x) >> 16 & 0x8000u));
}


// Max pooling over the windows of NHWC rows (codegen/pool_kernels.py writes the loops over the
// output positions). An element replaces the running maximum when it is greater or NaN, as in
// torch's loop (NaN propagates; of equal values the first one read stays: -0.0 before 0.0).
// E says how an element compares: ts_pool_float<T> for float and double, ts_pool_bf16 and
// ts_pool_f16 for 16-bit floats (uint16_t, compared as the floats they widen to, stored as read).
template <typename T> struct ts_pool_float {
  typedef T type;
  static inline T lowest() { return -torchscribe::math_detail::inf<T>(); }
  static inline T take(T v, T m) { return sel(v > m || v != v, v, m); }
};
struct ts_pool_bf16 {
  typedef uint16_t type;
  static inline uint16_t lowest() { return 0xff80u; }  // (-inf)
  static inline uint16_t take(uint16_t v, uint16_t m) {
    return (ts_load_bf16(v) > ts_load_bf16(m) || ts_load_bf16(v) != ts_load_bf16(v)) ? v : m;
  }
};
struct ts_pool_f16 {
  typedef uint16_t type;
  static inline uint16_t lowest() { return 0xfc00u; }  // (-inf)
  static inline uint16_t take(uint16_t v, uint16_t m) {
    return (ts_load_f16(v) > ts_load_f16(m) || ts_load_f16(v) != ts_load_f16(v)) ? v : m;
  }
};

// The channels a block of ts_pool_block takes: two 64-byte vectors' worth.
template <typename T> constexpr int64_t ts_pool_width = 128 / sizeof(T);

// The maximum of each of the n channels (n <= ts_pool_width) at x (channel stride s) over a
// window of nh x nw positions (strides hs, ws), into o.
template <class E>
static inline void ts_pool_channels(typename E::type* __restrict o, const typename E::type* __restrict x,
                                    int64_t n, int64_t s, int64_t nh, int64_t nw, int64_t hs, int64_t ws) {
  typename E::type m[ts_pool_width<typename E::type>];
  for (int64_t j = 0; j < n; ++j) m[j] = E::lowest();
  for (int64_t h = 0; h < nh; ++h) {
    for (int64_t w = 0; w < nw; ++w) {
      for (int64_t j = 0; j < n; ++j) {
        const typename E::type v = x[h * hs + w * ws + j * s];
        m[j] = E::take(v, m[j]);
      }
    }
  }
  for (int64_t j = 0; j < n; ++j) o[j] = m[j];
}

// The same for ts_pool_width contiguous float or double channels, the running maxima in vector
// registers (gcc's vector extension; the compiler's own vectorisation of the loop above keeps
// them in memory: 0.34 against 0.28 ms for squeezenet's 8x128x55x55 pool).
template <typename T>
static inline void ts_pool_block(T* __restrict o, const T* __restrict x, int64_t nh, int64_t nw, int64_t hs,
                                 int64_t ws) {
#ifdef __AVX512F__
  typedef T V __attribute__((vector_size(64)));
#else  // (without AVX-512 gcc splits a 64-byte vector badly: a pool took 11x as long on Zen 3)
  typedef T V __attribute__((vector_size(32)));
#endif
  typedef typename std::conditional<sizeof(T) == 4, int32_t, int64_t>::type I;
  typedef I M __attribute__((vector_size(sizeof(V))));  // (what comparing two V gives)
  constexpr int64_t lanes = sizeof(V) / sizeof(T), count = ts_pool_width<T> / lanes;
  V m[count];
  for (int64_t k = 0; k < count; ++k) m[k] = (V){} + ts_pool_float<T>::lowest();
  for (int64_t h = 0; h < nh; ++h) {
    for (int64_t w = 0; w < nw; ++w) {
      for (int64_t k = 0; k < count; ++k) {
        V v;
        __builtin_memcpy(&v, x + h * hs + w * ws + k * lanes, sizeof(V));
        const M take = (v > m[k]) | (v != v);
        m[k] = (V)(((M)v & take) | ((M)m[k] & ~take));
      }
    }
  }
  __builtin_memcpy(o, m, sizeof(m));
}

// ---- batch norm in train mode, with the pointwise ops after it (kernel.autograd groups headed
// by a batch norm: ir/passes/autograd_kernels.py, codegen/norm_kernels.py) ----------------------
// The input x is [N, C, S] (S: the product of the dims after the channels), dense, in one of two
// layouts: planar (row-major: element (n, c, s) at (n C + c) S + s) or interleaved (channels
// last, and a 2-d [N, C]: (n S + s) C + c). Every other full-size tensor of the group has x's
// layout (runtime/autograd_kernels.py runs eager's ops otherwise), so one offset `o` reaches an
// element in all of them. The arithmetic is torch's CPU kernel's for a row-major tensor, in its
// order (batch_norm_kernel.cpp): sums in double of float terms, the mean and the sum of squares
// rounded to float, the variance's (x - mean)^2 in float, y = fma(x, alpha, beta) (torch's
// vectorised x * alpha + beta, contracted), so that an element normalised to about 0 falls on
// the same side of a ReLU as in eager (a different rounding flips its gradient): the forward
// gives eager's bits, for a channels-last tensor too, whose statistics torch sums in float per
// thread (ts_channel_sums_by_rows). The backward's sums are in double throughout (torch's
// are partly in float): its results differ from eager's by rounding.
struct ts_bn_dims {
  int64_t n, c, s;
  bool interleaved;
  int64_t count() const { return n * s; }  // (elements per channel)
  bool parallel() const { return n * c * s >= 32768; }
};

// For each channel c, the sums over its elements of a(o, c) and b(o, c), the pair `value`
// returns (doubles), into s1[c] and s2[c]. Planar: the channels shared among the threads, each
// summing its runs of S contiguous elements in a vectorised loop; interleaved: the rows of C
// channels shared, each thread summing its rows into its own C pairs (vectorised along the
// channels), added up after.
template <class Value>
static inline void ts_channel_sums(const ts_bn_dims& d, double* __restrict s1, double* __restrict s2,
                                   const Value& value) {
  if (!d.interleaved) {
    ts_rows([&](int64_t begin, int64_t end) TS_INLINE {
      for (int64_t c = begin; c < end; ++c) {
        // (16 sums of each, in four vectors: one sum waited out each add's latency, 3.5x slower)
        constexpr int64_t W = 16;
        double a[W] = {}, b[W] = {};
        for (int64_t n = 0; n < d.n; ++n) {
          const int64_t o = (n * d.c + c) * d.s;
          int64_t j = 0;
          for (; j + W <= d.s; j += W) {
            #pragma omp simd
            for (int64_t k = 0; k < W; ++k) {
              const auto v = value(o + j + k, c);
              a[k] += v.first;
              b[k] += v.second;
            }
          }
          for (; j < d.s; ++j) {
            const auto v = value(o + j, c);
            a[0] += v.first;
            b[0] += v.second;
          }
        }
        double ta = 0, tb = 0;
        for (int64_t k = 0; k < W; ++k) {
          ta += a[k];
          tb += b[k];
        }
        s1[c] = ta;
        s2[c] = tb;
      }
    }, d.c, d.parallel());
    return;
  }
  const int64_t rows = d.count();
  const int64_t parts = d.parallel() ? std::max<int64_t>(1, std::min<int64_t>(ts_threads(), rows)) : 1;
  std::vector<double> partial(2 * parts * d.c, 0.0);
  ts_rows([&](int64_t begin, int64_t end) TS_INLINE {
    // (each part's sums in memory of its own until the end: side by side in `partial`, two
    // threads' sums shared a cache line, written at every row)
    std::vector<double> own(2 * d.c);
    for (int64_t p = begin; p < end; ++p) {
      std::fill(own.begin(), own.end(), 0.0);
      double* __restrict a = own.data();
      double* __restrict b = a + d.c;
      for (int64_t r = rows * p / parts; r < rows * (p + 1) / parts; ++r) {
        #pragma omp simd
        for (int64_t c = 0; c < d.c; ++c) {
          const auto v = value(r * d.c + c, c);
          a[c] += v.first;
          b[c] += v.second;
        }
      }
      std::copy(own.begin(), own.end(), partial.begin() + 2 * p * d.c);
    }
  }, parts, parts > 1);
  for (int64_t c = 0; c < d.c; ++c) {
    double a = 0, b = 0;
    for (int64_t p = 0; p < parts; ++p) {
      a += partial[2 * p * d.c + c];
      b += partial[(2 * p + 1) * d.c + c];
    }
    s1[c] = a;
    s2[c] = b;
  }
}

// A channels-last tensor's statistic as torch sums it (batch_norm_cpu_collect_stats_channels_
// last_impl): the rows split into ts_threads() chunks of ceil(rows / threads) as at::parallel_for
// splits them, each chunk summed row by row into C values of type T (acc = step(acc, o, c)),
// the chunks' sums then added in double in order, into s[c]. The same split however many
// threads run it, so the sums do not depend on the scheduling. Where there are no more rows than
// threads, torch sums each channel in double, as ts_channel_sums does.
template <typename T, class Step>
static inline void ts_channel_sums_by_rows(const ts_bn_dims& d, double* __restrict s, const Step& step) {
  const int64_t rows = d.count(), parts = ts_threads(), chunk = (rows + parts - 1) / parts;
  std::vector<T> partial(parts * d.c, T(0));
  ts_rows([&](int64_t begin, int64_t end) TS_INLINE {
    std::vector<T> own(d.c);  // (as in ts_channel_sums: no cache line shared while summing)
    for (int64_t p = begin; p < end; ++p) {
      std::fill(own.begin(), own.end(), T(0));
      T* __restrict acc = own.data();
      for (int64_t r = p * chunk; r < std::min(rows, (p + 1) * chunk); ++r) {
        #pragma omp simd
        for (int64_t c = 0; c < d.c; ++c) acc[c] = step(acc[c], r * d.c + c, c);
      }
      std::copy(own.begin(), own.end(), partial.begin() + p * d.c);
    }
  }, parts, d.parallel() && parts > 1);
  for (int64_t c = 0; c < d.c; ++c) {
    double sum = 0;
    for (int64_t p = 0; p < parts; ++p) sum += partial[p * d.c + c];
    s[c] = sum;
  }
}

// element(o, c) for every element of x: planar, the threads share the (n, c) runs of S
// elements; interleaved, the rows of C. The inner loop is vectorised.
template <class Element> static inline void ts_channel_elements(const ts_bn_dims& d, const Element& element) {
  if (!d.interleaved) {
    ts_rows([&](int64_t begin, int64_t end) TS_INLINE {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t c = row % d.c, o = row * d.s;
        #pragma omp simd
        for (int64_t j = 0; j < d.s; ++j) element(o + j, c);
      }
    }, d.n * d.c, d.parallel());
    return;
  }
  ts_rows([&](int64_t begin, int64_t end) TS_INLINE {
    for (int64_t r = begin; r < end; ++r) {
      #pragma omp simd
      for (int64_t c = 0; c < d.c; ++c) element(r * d.c + c, c);
    }
  }, d.count(), d.parallel());
}

// The forward: the batch's mean and 1 / sqrt(var + eps) per channel (into mean and rstd, which
// the backward reads), the running statistics moved by `momentum` as eager moves them (the
// unbiased variance), then chain(o, c, y) for every element, y = x alpha + beta (alpha = rstd
// w, beta = b - mean alpha): the group's pointwise ops on it, which store the outputs at o.
// Two passes for the statistics (the sum, then the squares about the mean), as torch takes.
template <typename T, class Chain>
static inline void ts_batch_norm_train(const ts_bn_dims& d, const T* __restrict x, const T* __restrict weight,
                                       const T* __restrict bias, T* __restrict running_mean,
                                       T* __restrict running_var, double momentum, double eps,
                                       T* __restrict mean, T* __restrict rstd, const Chain& chain) {
  const int64_t m = d.count();
  std::vector<double> s1(d.c), s2(d.c);
  if (d.interleaved && m > ts_threads()) {
    ts_channel_sums_by_rows<T>(d, s1.data(), [&](T acc, int64_t o, int64_t) TS_INLINE { return acc + x[o]; });
  } else {
    ts_channel_sums(d, s1.data(), s2.data(), [&](int64_t o, int64_t) TS_INLINE {
      return std::pair<double, double>(x[o], 0.0);
    });
  }
  for (int64_t c = 0; c < d.c; ++c) mean[c] = T(s1[c] / double(m));
  if (d.interleaved && m > ts_threads()) {
    ts_channel_sums_by_rows<T>(d, s1.data(), [&](T acc, int64_t o, int64_t c) TS_INLINE {
      const T centred = x[o] - mean[c];
      return std::fma(centred, centred, acc);
    });
  } else {
    ts_channel_sums(d, s1.data(), s2.data(), [&](int64_t o, int64_t c) TS_INLINE {
      const T centred = x[o] - mean[c];
      return std::pair<double, double>(centred * centred, 0.0);
    });
  }
  std::vector<T> alpha(d.c), beta(d.c);
  for (int64_t c = 0; c < d.c; ++c) {
    const T squares = T(s1[c]);
    rstd[c] = T(1.0 / std::sqrt(double(squares / T(m)) + eps));
    alpha[c] = rstd[c] * weight[c];
    beta[c] = std::fma(-mean[c], alpha[c], bias[c]);
    // (torch 2.13 moves the running mean in float and the running variance in double: measured
    // bit for bit against its kernel, tests/test_autograd_batch_norm.py)
    running_mean[c] = T(momentum) * mean[c] + T(1 - momentum) * running_mean[c];
    running_var[c] = T(momentum * double(squares / T(m - 1)) + (1 - momentum) * double(running_var[c]));
  }
  const T* __restrict a = alpha.data();
  const T* __restrict b = beta.data();
  ts_channel_elements(d, [&](int64_t o, int64_t c) TS_INLINE { chain(o, c, std::fma(x[o], a[c], b[c])); });
}

// The backward, from what the forward saved (mean, rstd): chain(o, c, y, store) gives the
// gradient gy of the normalised value y at o from the outputs' gradients (the group's pointwise
// ops differentiated), and with `store` a std::true_type also stores the gradients of the
// group's other inputs at o. Then torch's formulas (batch_norm_backward, train mode), in its
// order: with the channel's sums of gy and of (x - mean) gy, grad_bias = sum gy, grad_weight =
// sum (x - mean) gy * rstd, grad_x = (gy - sum gy / M - (x - mean) k) rstd w, k = sum (x - mean)
// gy rstd^2 / M.
template <typename T, class Chain>
static inline void ts_batch_norm_train_backward(const ts_bn_dims& d, const T* __restrict x,
                                                const T* __restrict weight, const T* __restrict bias,
                                                const T* __restrict mean, const T* __restrict rstd,
                                                T* __restrict grad_x, T* __restrict grad_weight,
                                                T* __restrict grad_bias, const Chain& chain) {
  const int64_t m = d.count();
  std::vector<T> alpha(d.c), beta(d.c);
  for (int64_t c = 0; c < d.c; ++c) {
    alpha[c] = rstd[c] * weight[c];
    beta[c] = std::fma(-mean[c], alpha[c], bias[c]);
  }
  const T* __restrict a = alpha.data();
  const T* __restrict b = beta.data();
  std::vector<double> s1(d.c), s2(d.c);
  ts_channel_sums(d, s1.data(), s2.data(), [&](int64_t o, int64_t c) TS_INLINE {
    const T gy = chain(o, c, std::fma(x[o], a[c], b[c]), std::false_type{});
    return std::pair<double, double>(gy, (x[o] - mean[c]) * gy);
  });
  std::vector<T> mean_g(d.c), k(d.c);
  for (int64_t c = 0; c < d.c; ++c) {
    grad_bias[c] = T(s1[c]);
    grad_weight[c] = T(s2[c] * double(rstd[c]));
    mean_g[c] = T(s1[c] / double(m));
    k[c] = T(s2[c]) * rstd[c] * rstd[c] / T(m);
  }
  const T* __restrict g0 = mean_g.data();
  const T* __restrict k0 = k.data();
  ts_channel_elements(d, [&](int64_t o, int64_t c) TS_INLINE {
    const T gy = chain(o, c, std::fma(x[o], a[c], b[c]), std::true_type{});
    grad_x[o] = (gy - g0[c] - (x[o] - mean[c]) * k0[c]) * rstd[c] * weight[c];
  });
}

#endif  // TORCHSCRIBE_KERNELS_H
