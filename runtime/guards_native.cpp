// Native fast paths of the entry checks in runtime/guards.py: check_module, check_entry,
// check_tensor, check_value, attr and item. A compiled model runs a thousand of them a call
// (mobilenet_v3_small: 1161), and in Python they cost about 1 ms of a 10 ms forward at batch 1.
//
// Each function here takes, step by step, the path on which its Python twin passes, with the
// same reads in the same order, and returns only where that path returns the same value. Anything
// else (a check that fails, a type or container it does not know, a Python error, keyword
// arguments) calls the Python function with the same arguments, which decides and writes the
// message: the Python code stays the definition, and this file only makes its passing path cheap.
// runtime/guards.py builds it (runtime/native.py, cached like kernels) and `setup` hands it the
// Python functions and the tables they share (which classes matched, parsed paths, conditions).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace {

struct State {
  // the Python functions: the fallback of each fast path
  PyObject* check_module;
  PyObject* check_entry;
  PyObject* check_tensor;
  PyObject* check_value;
  PyObject* attr;
  PyObject* attrs;
  PyObject* at;
  PyObject* item;
  PyObject* value_refused;  // raises check_value's failure, its message written when read
  // what they read, shared with them
  PyObject* getattr_names;   // type -> set of names `attr` may read past the class
  PyObject* attr_names;      // `attrs`'s names -> the tuple of them
  PyObject* matched;         // qualname -> the set of classes that matched it
  PyObject* paths;           // path -> ((step, may_be_none), ...)
  PyObject* conditions;      // condition name -> test
  PyObject* native_conditions;  // test -> (kind, n): the tests condition_holds runs here
  PyObject* module_globals;  // torch.nn.modules.module: the global hook dicts
  PyObject* sequential_getitem;
  PyObject* modulelist_getitem;
  PyObject* moduledict_getitem;
  PyObject* tensor_type;
  PyObject* parameter_type;
  PyObject* zero;
  PyObject* module_dict;          // nn.Module.__dict__["__dict__"]
  PyObject* object_getattribute;  // object.__dict__["__getattribute__"]
  // interned names
  PyObject *s_dict, *s_getattribute, *s_getitem, *s_modules, *s_parameters, *s_buffers, *s_forward, *s_dtype, *s_is_cpu,
      *s_device, *s_type, *s_shape, *s_cpu, *s_len, *s_eval, *s_training, *s_zeros_padding, *s_padding_mode,
      *s_zeros, *s_running_stats, *s_running_mean, *s_running_var;
  PyObject* global_hooks[4];
  PyObject* module_hooks[4];
  bool ready;
};

State S;

// The Python function on the same arguments; clears an error the fast path left behind (the
// Python function meets it again where it matters).
PyObject* fallback(PyObject* fn, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyErr_Clear();
  return PyObject_Vectorcall(fn, args, nargs | PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames);
}

// obj.__dict__ when it is a plain dict (new reference); nullptr otherwise. A module class that
// finds nn.Module's `__dict__` descriptor and object's `__getattribute__` along its MRO reads it
// through the generic getter, which those call: a read through its `__getattr__` hook costs more
// than the rest of a check (50 against 5 ns).
PyObject* instance_dict(PyObject* obj) {
  PyTypeObject* cls = Py_TYPE(obj);
  PyObject* d = _PyType_Lookup(cls, S.s_dict) == S.module_dict && _PyType_Lookup(cls, S.s_getattribute) == S.object_getattribute
                    ? PyObject_GenericGetDict(obj, nullptr)
                    : PyObject_GetAttr(obj, S.s_dict);
  if (d != nullptr && !PyDict_CheckExact(d)) {
    Py_DECREF(d);
    return nullptr;
  }
  return d;
}

// guards.item's passing path: container[index] of an nn.Sequential or nn.ModuleList, or the entry
// str(index) of an nn.ModuleDict, read from its _modules. New reference, or nullptr for "ask
// Python".
PyObject* fast_item(PyObject* container, PyObject* index) {
  if (!PyLong_CheckExact(index)) return nullptr;
  Py_ssize_t i = PyLong_AsSsize_t(index);
  if (i < 0) return nullptr;  // (-1 with an error set too)
  // type(container).__getitem__: for a class whose metaclass is `type` (which has no attribute of
  // that name), the function found along the class's MRO, which a read through the class returns
  if (Py_TYPE(Py_TYPE(container)) != &PyType_Type) return nullptr;
  PyObject* getitem = _PyType_Lookup(Py_TYPE(container), S.s_getitem);  // (borrowed)
  bool sequential = getitem == S.sequential_getitem;
  bool list = getitem == S.modulelist_getitem || getitem == S.moduledict_getitem;
  if (!sequential && !list) return nullptr;
  PyObject* d = instance_dict(container);
  if (d == nullptr) return nullptr;
  PyObject* found = nullptr;
  PyObject* modules = PyDict_GetItemWithError(d, S.s_modules);
  if (modules != nullptr && PyDict_CheckExact(modules)) {
    if (sequential) {
      if (i < PyDict_GET_SIZE(modules)) {
        Py_ssize_t pos = 0, n = 0;
        PyObject *key, *value;
        while (PyDict_Next(modules, &pos, &key, &value)) {
          if (n++ == i) {
            found = value;
            break;
          }
        }
      }
    } else {
      PyObject* key = PyUnicode_FromFormat("%zd", i);
      if (key != nullptr) {
        found = PyDict_GetItemWithError(modules, key);
        Py_DECREF(key);
      }
      if (found == Py_None) found = nullptr;
    }
  }
  Py_XINCREF(found);
  Py_DECREF(d);
  return found;
}

// guards.attr's passing path: a name the class leaves to its instances, read from the instance's
// __dict__, else its parameters, buffers or submodules. New reference, or nullptr.
PyObject* fast_attr(PyObject* obj, PyObject* name) {
  PyObject* names = PyDict_GetItemWithError(S.getattr_names, (PyObject*)Py_TYPE(obj));
  if (names == nullptr || !PySet_CheckExact(names) || PySet_Contains(names, name) != 1) return nullptr;
  PyObject* d = instance_dict(obj);
  if (d == nullptr) return nullptr;
  PyObject* found = PyDict_GetItemWithError(d, name);
  if (found == nullptr && !PyErr_Occurred()) {
    PyObject* tables[3] = {S.s_parameters, S.s_buffers, S.s_modules};
    for (PyObject* key : tables) {
      PyObject* table = PyDict_GetItemWithError(d, key);
      if (table == nullptr || !PyDict_CheckExact(table)) break;
      found = PyDict_GetItemWithError(table, name);
      if (found != nullptr || PyErr_Occurred()) break;
    }
  }
  Py_XINCREF(found);
  Py_DECREF(d);
  return found;
}

// 1 when obj is truthy, 0 when falsy, -1 on an error.
int truthy(PyObject* obj) { return PyObject_IsTrue(obj); }

// Whether condition `test` holds for `module`, as calling it says: 1 holds; 0 does not, or a
// Python error. Runs the tests guards._NATIVE_CONDITIONS names here, and calls any other.
int condition_holds(PyObject* test, PyObject* module) {
  PyObject* native = PyDict_GetItemWithError(S.native_conditions, test);  // (kind, n)
  if (native == nullptr || !PyTuple_CheckExact(native) || PyTuple_GET_SIZE(native) != 2) {
    if (PyErr_Occurred()) return 0;
    PyObject* holds = PyObject_CallOneArg(test, module);
    if (holds == nullptr) return 0;
    int ok = truthy(holds);
    Py_DECREF(holds);
    return ok == 1;
  }
  PyObject* kind = PyTuple_GET_ITEM(native, 0);
  if (kind == S.s_len) {  // len(m._modules) == n
    PyObject* modules = PyObject_GetAttr(module, S.s_modules);
    if (modules == nullptr) return 0;
    Py_ssize_t size = PyObject_Size(modules);
    Py_DECREF(modules);
    return size >= 0 && size == PyLong_AsSsize_t(PyTuple_GET_ITEM(native, 1));
  }
  if (kind == S.s_eval) {  // not m.training
    PyObject* training = PyObject_GetAttr(module, S.s_training);
    if (training == nullptr) return 0;
    int t = truthy(training);
    Py_DECREF(training);
    return t == 0;
  }
  if (kind == S.s_zeros_padding) {  // m.padding_mode == "zeros"
    PyObject* mode = PyObject_GetAttr(module, S.s_padding_mode);
    if (mode == nullptr) return 0;
    PyObject* same = PyObject_RichCompare(mode, S.s_zeros, Py_EQ);
    Py_DECREF(mode);
    if (same == nullptr) return 0;
    int t = truthy(same);
    Py_DECREF(same);
    return t == 1;
  }
  if (kind == S.s_running_stats) {  // m._buffers["running_mean"] and m._buffers["running_var"] are not None
    PyObject* names[] = {S.s_running_mean, S.s_running_var};
    for (PyObject* name : names) {
      PyObject* buffers = PyObject_GetAttr(module, S.s_buffers);
      if (buffers == nullptr) return 0;
      PyObject* buffer = PyDict_CheckExact(buffers) ? PyDict_GetItemWithError(buffers, name) : nullptr;
      Py_DECREF(buffers);
      if (buffer == nullptr || buffer == Py_None) return 0;
    }
    return 1;
  }
  return 0;
}

// Whether no global module hooks are registered (reading them fails the check: "ask Python").
bool no_global_hooks() {
  PyObject* globals = PyModule_GetDict(S.module_globals);  // (what reading its attributes reads)
  for (PyObject* name : S.global_hooks) {
    PyObject* hooks = PyDict_GetItemWithError(globals, name);
    if (hooks == nullptr || truthy(hooks) != 0) return false;
  }
  return true;
}

// The walk of guards._plain_module_at: `steps` ((step, may_be_none), ...) below `module`. A new
// reference to what it reaches (Py_None where an optional part is None: *absent is set), or
// nullptr for "ask Python".
PyObject* fast_walk(PyObject* module, PyObject* steps, bool* absent) {
  *absent = false;
  if (!PyTuple_CheckExact(steps)) return nullptr;
  Py_INCREF(steps);  // (a table may change while the walk calls Python)
  Py_INCREF(module);
  for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(steps); ++k) {
    PyObject* part = PyTuple_GET_ITEM(steps, k);
    if (!PyTuple_CheckExact(part) || PyTuple_GET_SIZE(part) != 2) {
      Py_DECREF(module);
      Py_DECREF(steps);
      return nullptr;
    }
    PyObject* step = PyTuple_GET_ITEM(part, 0);
    PyObject* next = PyLong_CheckExact(step) ? fast_item(module, step) : fast_attr(module, step);
    Py_DECREF(module);
    if (next == nullptr) {
      Py_DECREF(steps);
      return nullptr;
    }
    module = next;
    if (module == Py_None && PyTuple_GET_ITEM(part, 1) == Py_True) {
      *absent = true;  // an optional part is None: the check passes
      break;
    }
  }
  Py_DECREF(steps);
  return module;
}

// Whether `module` passes the class, hook, forward and condition tests of
// guards._plain_module_at for `qualname` (false also for "ask Python").
bool fast_module_ok(PyObject* module, PyObject* qualname, PyObject* const* conditions, Py_ssize_t n) {
  PyObject* classes = PyDict_GetItemWithError(S.matched, qualname);  // (a set of classes)
  if (classes == nullptr || !PySet_CheckExact(classes) || PySet_Contains(classes, (PyObject*)Py_TYPE(module)) != 1)
    return false;
  PyObject* d = instance_dict(module);
  if (d == nullptr) return false;
  for (PyObject* name : S.module_hooks) {
    PyObject* hooks = PyDict_GetItemWithError(d, name);
    if (hooks == nullptr || truthy(hooks) != 0) {
      Py_DECREF(d);
      return false;
    }
  }
  int own_forward = PyDict_Contains(d, S.s_forward);
  Py_DECREF(d);
  if (own_forward != 0) return false;
  for (Py_ssize_t k = 0; k < n; ++k) {
    PyObject* test = PyDict_GetItemWithError(S.conditions, conditions[k]);
    if (test == nullptr || !condition_holds(test, module)) return false;
  }
  return true;
}

// guards.check_module's passing path; nullptr for "ask Python".
PyObject* fast_check_module(PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 3 || !no_global_hooks()) return nullptr;
  PyObject* steps = PyDict_GetItemWithError(S.paths, args[1]);
  if (steps == nullptr) return nullptr;
  bool absent;
  PyObject* module = fast_walk(args[0], steps, &absent);
  if (module == nullptr || absent) return module;
  if (fast_module_ok(module, args[2], args + 3, nargs - 3)) return module;
  Py_DECREF(module);
  return nullptr;
}

// guards._read_on's passing path: `steps` below the root or the module row `base` found. A new
// reference (Py_None for "absent": an optional part is None; *absent is set), or nullptr for
// "ask Python".
PyObject* fast_read_on(PyObject* root, PyObject** found, Py_ssize_t done, PyObject* base_index, PyObject* steps,
                       bool* absent) {
  *absent = false;
  if (!PyLong_CheckExact(base_index)) return nullptr;
  Py_ssize_t base = PyLong_AsSsize_t(base_index);
  if (base >= done || base < -1) return nullptr;  // (-1 with an error set too)
  if (base >= 0 && found[base] == Py_None) {  // an optional part of the module row is None
    *absent = true;
    Py_INCREF(Py_None);
    return Py_None;
  }
  return fast_walk(base < 0 ? root : found[base], steps, absent);
}

// guards.check_value's test: 0 when it passes (value is expected, or neither is None and they
// compare equal), 1 when it fails, -1 on an error (for "ask Python").
int value_differs(PyObject* value, PyObject* expected) {
  if (value == expected) return 0;
  if (expected == Py_None) return 1;
  PyObject* differs = PyObject_RichCompare(value, expected, Py_NE);
  if (differs == nullptr) return -1;
  int t = truthy(differs);
  Py_DECREF(differs);
  return t;
}

bool fast_same_value(PyObject* value, PyObject* expected) { return value_differs(value, expected) == 0; }

bool fast_check_tensor(PyObject* const* args, Py_ssize_t nargs);

// guards.check_entry's passing path: every row of a guards.entry_checks table (the modules, each
// read on from the module row it names, then the tensors and the values); nullptr for "ask
// Python", which makes the checks again and names the first that fails. Where every check
// before a value row passed here and the value differs, Python would fail at that row: that
// failure is raised here (guards.value_refused, *raised set), without making the checks again
// (a call that one specialisation refuses and the next accepts: a train and an eval one).
PyObject* fast_check_entry(PyObject* const* args, Py_ssize_t nargs, bool* raised) {
  *raised = false;
  if (nargs != 2 || !no_global_hooks()) return nullptr;
  PyObject* root = args[0];
  PyObject* table = args[1];
  if (!PyTuple_CheckExact(table) || PyTuple_GET_SIZE(table) != 4) return nullptr;
  PyObject* rows = PyTuple_GET_ITEM(table, 0);
  PyObject* tensors = PyTuple_GET_ITEM(table, 1);
  PyObject* values = PyTuple_GET_ITEM(table, 2);
  PyObject* returns = PyTuple_GET_ITEM(table, 3);
  if (!PyTuple_CheckExact(rows) || !PyTuple_CheckExact(tensors) || !PyTuple_CheckExact(values)
      || !PyTuple_CheckExact(returns))
    return nullptr;
  Py_INCREF(table);  // (what it holds lives while the checks may call Python)
  Py_ssize_t n = PyTuple_GET_SIZE(rows);
  PyObject* small[32];
  PyObject** found = n <= 32 ? small : (PyObject**)PyMem_Malloc(n * sizeof(PyObject*));
  Py_ssize_t done = 0;
  PyObject* result = nullptr;
  if (found == nullptr) goto out;
  for (; done < n; ++done) {
    PyObject* row = PyTuple_GET_ITEM(rows, done);  // (path, qualname, conditions, base, steps)
    if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != 5) goto out;
    PyObject* conditions = PyTuple_GET_ITEM(row, 2);
    if (!PyTuple_CheckExact(conditions)) goto out;
    bool absent;
    PyObject* module = fast_read_on(root, found, done, PyTuple_GET_ITEM(row, 3), PyTuple_GET_ITEM(row, 4), &absent);
    if (module == nullptr) goto out;
    if (!absent && !fast_module_ok(module, PyTuple_GET_ITEM(row, 1), &PyTuple_GET_ITEM(conditions, 0),
                                   PyTuple_GET_SIZE(conditions))) {
      Py_DECREF(module);
      goto out;
    }
    found[done] = module;
  }
  for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(tensors); ++k) {
    PyObject* row = PyTuple_GET_ITEM(tensors, k);  // (name, base, steps, dtype, device_type, shape)
    if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != 6) goto out;
    bool absent;
    PyObject* value = fast_read_on(root, found, n, PyTuple_GET_ITEM(row, 1), PyTuple_GET_ITEM(row, 2), &absent);
    if (value == nullptr) goto out;
    PyObject* check[5] = {value, PyTuple_GET_ITEM(row, 0), PyTuple_GET_ITEM(row, 3), PyTuple_GET_ITEM(row, 4),
                          PyTuple_GET_ITEM(row, 5)};
    bool ok = absent || fast_check_tensor(check, 5);
    Py_DECREF(value);
    if (!ok) goto out;
  }
  for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(values); ++k) {
    PyObject* row = PyTuple_GET_ITEM(values, k);  // (name, base, steps, last, expected)
    if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != 5) goto out;
    bool absent;
    PyObject* value = fast_read_on(root, found, n, PyTuple_GET_ITEM(row, 1), PyTuple_GET_ITEM(row, 2), &absent);
    if (value == nullptr) goto out;
    PyObject* last = PyTuple_GET_ITEM(row, 3);
    if (!absent && last != Py_None) {  // a Python attribute, read as getattr reads it
      PyObject* read = PyUnicode_CheckExact(last) ? PyObject_GetAttr(value, last) : nullptr;
      Py_DECREF(value);
      if (read == nullptr) goto out;
      value = read;
    }
    int differs = absent ? 0 : value_differs(value, PyTuple_GET_ITEM(row, 4));
    if (differs == 1) {
      PyObject* refused[3] = {value, PyTuple_GET_ITEM(row, 4), PyTuple_GET_ITEM(row, 0)};
      PyObject* none = PyObject_Vectorcall(S.value_refused, refused, 3, nullptr);
      Py_XDECREF(none);  // (it raises; should it return, Python makes the checks again)
      *raised = none == nullptr;
    }
    Py_DECREF(value);
    if (differs != 0) goto out;
  }
  {
    Py_ssize_t m = PyTuple_GET_SIZE(returns);
    for (Py_ssize_t k = 0; k < m; ++k) {
      PyObject* index = PyTuple_GET_ITEM(returns, k);
      Py_ssize_t i = PyLong_CheckExact(index) ? PyLong_AsSsize_t(index) : -1;
      if (i < 0 || i >= n) goto out;
    }
    if (m == 0) {
      result = Py_None;
      Py_INCREF(result);
    } else if (m == 1) {
      result = found[PyLong_AsSsize_t(PyTuple_GET_ITEM(returns, 0))];
      Py_INCREF(result);
    } else if ((result = PyTuple_New(m)) != nullptr) {
      for (Py_ssize_t k = 0; k < m; ++k) {
        PyObject* module = found[PyLong_AsSsize_t(PyTuple_GET_ITEM(returns, k))];
        Py_INCREF(module);
        PyTuple_SET_ITEM(result, k, module);
      }
    }
  }
out:
  if (found != nullptr) {
    for (Py_ssize_t k = 0; k < done; ++k) Py_DECREF(found[k]);
    if (found != small) PyMem_Free(found);
  }
  Py_DECREF(table);
  if (result == nullptr && !*raised) PyErr_Clear();  // (the Python function meets any error again)
  return result;
}

// guards.check_tensor's passing path (positional arguments only): false for "ask Python".
bool fast_check_tensor(PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 2 || nargs > 6) return false;
  PyObject* value = args[0];
  PyObject* dtype = nargs > 2 ? args[2] : Py_None;
  PyObject* device_type = nargs > 3 ? args[3] : Py_None;
  PyObject* shape = nargs > 4 ? args[4] : Py_None;
  PyObject* cls = (PyObject*)Py_TYPE(value);
  if (cls != S.tensor_type && cls != S.parameter_type) return false;
  if (dtype != Py_None) {
    PyObject* found = PyObject_GetAttr(value, S.s_dtype);
    if (found == nullptr) return false;
    Py_DECREF(found);  // (dtypes are singletons: the identity outlives the reference)
    if (found != dtype) return false;
  }
  if (device_type != Py_None) {
    int is_cpu_wanted = PyObject_RichCompareBool(device_type, S.s_cpu, Py_EQ);
    if (is_cpu_wanted < 0) return false;
    int ok;
    if (is_cpu_wanted) {
      PyObject* found = PyObject_GetAttr(value, S.s_is_cpu);
      if (found == nullptr) return false;
      ok = truthy(found);
      Py_DECREF(found);
    } else {
      PyObject* device = PyObject_GetAttr(value, S.s_device);
      if (device == nullptr) return false;
      PyObject* type = PyObject_GetAttr(device, S.s_type);
      Py_DECREF(device);
      if (type == nullptr) return false;
      ok = PyObject_RichCompareBool(type, device_type, Py_EQ);
      Py_DECREF(type);
    }
    if (ok != 1) return false;
  }
  if (shape == Py_None) return true;
  PyObject* sizes = PyObject_GetAttr(value, S.s_shape);
  if (sizes == nullptr) return false;
  bool ok = false;
  int same = PyObject_RichCompareBool(sizes, shape, Py_EQ);
  if (same == 1) {
    ok = true;
  } else if (same == 0 && PyTuple_CheckExact(shape) && PyTuple_Check(sizes)
             && PyTuple_GET_SIZE(sizes) == PyTuple_GET_SIZE(shape)) {
    // the rank, the fixed sizes, and no size 0 (so that every symbol's is >= 1)
    ok = true;
    for (Py_ssize_t i = 0; ok && i < PyTuple_GET_SIZE(shape); ++i) {
      PyObject* size = PyTuple_GET_ITEM(sizes, i);
      PyObject* expected = PyTuple_GET_ITEM(shape, i);
      if (expected != Py_None && !PyUnicode_Check(expected)) ok = PyObject_RichCompareBool(size, expected, Py_EQ) == 1;
      if (ok) ok = PyObject_RichCompareBool(size, S.zero, Py_EQ) == 0;
    }
  }
  Py_DECREF(sizes);
  return ok;
}

PyObject* check_module(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (S.ready && kwnames == nullptr) {
    PyObject* found = fast_check_module(args, nargs);
    if (found != nullptr) return found;
  }
  return fallback(S.check_module, args, nargs, kwnames);
}

PyObject* check_entry(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (S.ready && kwnames == nullptr) {
    bool raised;
    PyObject* found = fast_check_entry(args, nargs, &raised);
    if (found != nullptr || raised) return found;
  }
  return fallback(S.check_entry, args, nargs, kwnames);
}

PyObject* check_tensor(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (S.ready && kwnames == nullptr && fast_check_tensor(args, nargs)) Py_RETURN_NONE;
  return fallback(S.check_tensor, args, nargs, kwnames);
}

PyObject* check_value(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (S.ready && kwnames == nullptr && nargs == 3 && fast_same_value(args[0], args[1])) Py_RETURN_NONE;
  return fallback(S.check_value, args, nargs, kwnames);
}

PyObject* attr(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (S.ready && kwnames == nullptr && nargs == 2) {
    PyObject* found = fast_attr(args[0], args[1]);
    if (found != nullptr) return found;
  }
  return fallback(S.attr, args, nargs, kwnames);
}

PyObject* attrs(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (S.ready && kwnames == nullptr && nargs == 2) {
    PyObject* names = PyDict_GetItemWithError(S.attr_names, args[1]);  // (split by the first, Python, call)
    if (names != nullptr && PyTuple_CheckExact(names)) {
      PyObject* found = PyTuple_New(PyTuple_GET_SIZE(names));
      if (found == nullptr) return nullptr;
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); ++i) {
        PyObject* one = fast_attr(args[0], PyTuple_GET_ITEM(names, i));
        if (one == nullptr) {  // (anything but the passing path: the Python function, from the start)
          Py_DECREF(found);
          return fallback(S.attrs, args, nargs, kwnames);
        }
        PyTuple_SET_ITEM(found, i, one);
      }
      return found;
    }
  }
  return fallback(S.attrs, args, nargs, kwnames);
}

PyObject* at(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (S.ready && kwnames == nullptr && nargs == 2) {
    PyObject* steps = PyDict_GetItemWithError(S.paths, args[1]);  // (parsed by the first, Python, call)
    bool absent;
    PyObject* found = steps == nullptr ? nullptr : fast_walk(args[0], steps, &absent);
    if (found != nullptr) return found;  // (Py_None where an optional part is None, as at's)
  }
  return fallback(S.at, args, nargs, kwnames);
}

PyObject* item(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (S.ready && kwnames == nullptr && nargs == 2) {
    PyObject* found = fast_item(args[0], args[1]);
    if (found != nullptr) return found;
  }
  return fallback(S.item, args, nargs, kwnames);
}

// setup(namespace): the Python functions and the tables they share, as attributes (runtime/guards.py
// passes its own, before it rebinds its names to the functions here).
PyObject* setup(PyObject*, PyObject* guards) {
  struct Read {
    PyObject** into;
    const char* name;
  } reads[] = {
      {&S.check_module, "check_module"},     {&S.check_entry, "check_entry"},
      {&S.check_tensor, "check_tensor"},
      {&S.check_value, "check_value"},       {&S.attr, "attr"},           {&S.attrs, "attrs"},
      {&S.at, "at"},                         {&S.value_refused, "value_refused"},
      {&S.item, "item"},                     {&S.getattr_names, "_getattr_names"},
      {&S.matched, "_matched"},              {&S.paths, "_paths"},              {&S.attr_names, "_attr_names"},
      {&S.conditions, "_LAYER_CONDITIONS"},  {&S.native_conditions, "_NATIVE_CONDITIONS"},
      {&S.module_globals, "_module_globals"},
      {&S.sequential_getitem, "_SEQUENTIAL_GETITEM"}, {&S.modulelist_getitem, "_MODULELIST_GETITEM"},
      {&S.moduledict_getitem, "_MODULEDICT_GETITEM"},
      {&S.tensor_type, "_Tensor"},           {&S.parameter_type, "_Parameter"},
      {&S.module_dict, "_MODULE_DICT"},      {&S.object_getattribute, "_OBJECT_GETATTRIBUTE"},
  };
  for (Read& r : reads) {
    PyObject* value = PyObject_GetAttrString(guards, r.name);
    if (value == nullptr) return nullptr;
    Py_XSETREF(*r.into, value);
  }
  if (!PyDict_CheckExact(S.getattr_names) || !PyDict_CheckExact(S.matched) || !PyDict_CheckExact(S.paths)
      || !PyDict_CheckExact(S.attr_names)
      || !PyDict_CheckExact(S.conditions) || !PyDict_CheckExact(S.native_conditions)) {
    PyErr_SetString(PyExc_TypeError, "runtime.guards: its tables are not dicts");
    return nullptr;
  }
  struct Name {
    PyObject** into;
    const char* text;
  } names[] = {
      {&S.s_dict, "__dict__"},     {&S.s_getattribute, "__getattribute__"}, {&S.s_getitem, "__getitem__"}, {&S.s_modules, "_modules"},
      {&S.s_parameters, "_parameters"}, {&S.s_buffers, "_buffers"}, {&S.s_forward, "forward"},
      {&S.s_dtype, "dtype"},       {&S.s_is_cpu, "is_cpu"},       {&S.s_device, "device"},
      {&S.s_type, "type"},         {&S.s_shape, "shape"},         {&S.s_cpu, "cpu"},
      {&S.s_len, "len"},           {&S.s_eval, "eval"},           {&S.s_training, "training"},
      {&S.s_zeros_padding, "zeros_padding"}, {&S.s_padding_mode, "padding_mode"}, {&S.s_zeros, "zeros"},
      {&S.s_running_stats, "running_stats"}, {&S.s_running_mean, "running_mean"},
      {&S.s_running_var, "running_var"},
      {&S.global_hooks[0], "_global_forward_hooks"},   {&S.global_hooks[1], "_global_forward_pre_hooks"},
      {&S.global_hooks[2], "_global_backward_hooks"},  {&S.global_hooks[3], "_global_backward_pre_hooks"},
      {&S.module_hooks[0], "_forward_hooks"},          {&S.module_hooks[1], "_forward_pre_hooks"},
      {&S.module_hooks[2], "_backward_hooks"},         {&S.module_hooks[3], "_backward_pre_hooks"},
  };
  for (Name& n : names) {
    if (*n.into == nullptr && (*n.into = PyUnicode_InternFromString(n.text)) == nullptr) return nullptr;
  }
  if (S.zero == nullptr && (S.zero = PyLong_FromLong(0)) == nullptr) return nullptr;
  if (!PyModule_Check(S.module_globals) || PyObject_HasAttr((PyObject*)&PyType_Type, S.s_getitem)) {
    PyErr_SetString(PyExc_TypeError, "runtime.guards: unexpected module globals or metaclass");
    return nullptr;
  }
  S.ready = true;
  Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"check_module", (PyCFunction)(void (*)(void))check_module, METH_FASTCALL | METH_KEYWORDS,
     "runtime.guards.check_module, its passing path in C++"},
    {"check_entry", (PyCFunction)(void (*)(void))check_entry, METH_FASTCALL | METH_KEYWORDS,
     "runtime.guards.check_entry, its passing path in C++"},
    {"check_tensor", (PyCFunction)(void (*)(void))check_tensor, METH_FASTCALL | METH_KEYWORDS,
     "runtime.guards.check_tensor, its passing path in C++"},
    {"check_value", (PyCFunction)(void (*)(void))check_value, METH_FASTCALL | METH_KEYWORDS,
     "runtime.guards.check_value, its passing path in C++"},
    {"attr", (PyCFunction)(void (*)(void))attr, METH_FASTCALL | METH_KEYWORDS,
     "runtime.guards.attr, its passing path in C++"},
    {"attrs", (PyCFunction)(void (*)(void))attrs, METH_FASTCALL | METH_KEYWORDS,
     "runtime.guards.attrs, its passing path in C++"},
    {"at", (PyCFunction)(void (*)(void))at, METH_FASTCALL | METH_KEYWORDS,
     "runtime.guards.at, its passing path in C++"},
    {"item", (PyCFunction)(void (*)(void))item, METH_FASTCALL | METH_KEYWORDS,
     "runtime.guards.item, its passing path in C++"},
    {"setup", setup, METH_O, "setup(runtime.guards): read the Python checks and their tables"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

// runtime/native.py (runtime_extension) appends the module definition and PyInit_<name>, naming the module after a
// hash of this text.
