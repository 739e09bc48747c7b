// runtime/stacking.py's stack_last: `torch.stack(parts, -1)` of CPU tensors of one shape and
// dtype, written by one loop. ShuffleNet's channel shuffles, computed in NHWC order
// (ir/passes/layout.py), interleave the channels of two halves this way; torch's stack along a
// last dim copies element by element through its generic cat, 3 to 6 times slower than this
// loop, whose two-part case the compiler vectorises.
//
// stack_last(out, item_size, sizes, parts, strides): `out` the address of a new row-major tensor
// of sizes `sizes + (len(parts),)`, `item_size` the bytes of an element (1, 2, 4 or 8: the copy
// moves bits, whatever the dtype), `parts` the parts' addresses, `strides` each part's strides in
// elements. Arguments that are not that raise TypeError or ValueError; runtime/stacking.py checks
// everything else before it calls.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

constexpr size_t kMaxDims = 12;

// Results of at least this many elements are written by the OpenMP threads, row by row (a
// batch of one image's shuffles are smaller: a thread team costs more than it saves there).
constexpr int64_t kParallelElements = 1 << 17;

// Rows [begin, end) of the result: the outer index counted up row by row (a division per row
// and dim cost more than copying a row of a shuffle's 29 channels).
template <typename T>
void stack_rows(T* __restrict out, const std::vector<const T*>& parts, const std::vector<std::vector<int64_t>>& strides,
                const std::vector<int64_t>& sizes, int64_t begin, int64_t end) {
  const int dims = static_cast<int>(sizes.size());
  const int64_t g = static_cast<int64_t>(parts.size());
  const int64_t inner = dims == 0 ? 1 : sizes[dims - 1];
  const bool pair = g == 2 && dims > 0 && strides[0][dims - 1] == 1 && strides[1][dims - 1] == 1;
  int64_t index[kMaxDims] = {0};  // the outer index of row `begin`
  for (int64_t d = dims - 2, rest = begin; d >= 0; --d) {
    index[d] = rest % sizes[d];
    rest /= sizes[d];
  }
  auto row_start = [&](int64_t k) {  // part k's first element of the row at `index`
    const T* p = parts[k];
    for (int d = 0; d + 1 < dims; ++d) p += index[d] * strides[k][d];
    return p;
  };
  for (int64_t r = begin; r < end; ++r) {
    T* o = out + r * inner * g;
    if (pair) {  // (vectorised: an interleave of two loads)
      const T* a = row_start(0);
      const T* b = row_start(1);
      for (int64_t i = 0; i < inner; ++i) {
        o[2 * i] = a[i];
        o[2 * i + 1] = b[i];
      }
    } else {
      for (int64_t k = 0; k < g; ++k) {
        const T* p = row_start(k);
        const int64_t step = dims == 0 ? 0 : strides[k][dims - 1];
        for (int64_t i = 0; i < inner; ++i) o[i * g + k] = p[i * step];
      }
    }
    for (int d = dims - 2; d >= 0; --d) {  // the next row's index
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
  }
}

template <typename T>
void stack_all(T* out, const std::vector<const T*>& parts, const std::vector<std::vector<int64_t>>& strides,
               const std::vector<int64_t>& sizes) {
  int64_t rows = 1, elements = static_cast<int64_t>(parts.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    elements *= sizes[d];
    if (d + 1 < sizes.size()) rows *= sizes[d];
  }
  if (elements == 0) return;
#pragma omp parallel if (elements >= kParallelElements)
  {
#ifdef _OPENMP
    const int64_t team = omp_get_num_threads(), me = omp_get_thread_num();
#else
    const int64_t team = 1, me = 0;
#endif
    stack_rows(out, parts, strides, sizes, rows * me / team, rows * (me + 1) / team);
  }
}

bool read_ints(PyObject* seq, std::vector<int64_t>& out, const char* what) {
  PyObject* items = PySequence_Fast(seq, what);
  if (items == nullptr) return false;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(items);
  out.resize(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    out[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(items, i));
    if (out[i] == -1 && PyErr_Occurred()) {
      Py_DECREF(items);
      return false;
    }
  }
  Py_DECREF(items);
  return true;
}

PyObject* stack_last(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 5) {
    PyErr_SetString(PyExc_TypeError, "stack_last(out, item_size, sizes, parts, strides)");
    return nullptr;
  }
  void* out = PyLong_AsVoidPtr(args[0]);
  long item = PyLong_AsLong(args[1]);
  std::vector<int64_t> sizes, addresses;
  if (PyErr_Occurred() || !read_ints(args[2], sizes, "sizes") || !read_ints(args[3], addresses, "parts")) return nullptr;
  PyObject* all = PySequence_Fast(args[4], "strides");
  if (all == nullptr) return nullptr;
  std::vector<std::vector<int64_t>> strides(PySequence_Fast_GET_SIZE(all));
  bool ok = strides.size() == addresses.size() && !addresses.empty() && sizes.size() <= kMaxDims;
  for (size_t k = 0; ok && k < strides.size(); ++k) {
    ok = read_ints(PySequence_Fast_GET_ITEM(all, k), strides[k], "strides") && strides[k].size() == sizes.size();
  }
  Py_DECREF(all);
  if (!ok) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "stack_last: parts, strides and sizes do not match");
    return nullptr;
  }
  switch (item) {
#define STACK(bytes, type)                                                                          \
  case bytes: {                                                                                     \
    std::vector<const type*> parts;                                                                 \
    for (int64_t a : addresses) parts.push_back(reinterpret_cast<const type*>(static_cast<intptr_t>(a))); \
    stack_all(static_cast<type*>(out), parts, strides, sizes);                                     \
    break;                                                                                          \
  }
    STACK(1, uint8_t)
    STACK(2, uint16_t)
    STACK(4, uint32_t)
    STACK(8, uint64_t)
#undef STACK
    default:
      PyErr_SetString(PyExc_ValueError, "stack_last: an element of 1, 2, 4 or 8 bytes");
      return nullptr;
  }
  Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"stack_last", (PyCFunction)(void (*)(void))stack_last, METH_FASTCALL,
     "stack_last(out, item_size, sizes, parts, strides): torch.stack(parts, -1) into out"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

// runtime/native.py (runtime_extension) appends the module definition and PyInit_<name>, naming the module after a
// hash of this text.
