// convbench's compiled call path: y = impl(x, k) for a layer whose launch is prepared, in one C++ call.
//
// Why: at 100 images a layer is a few microseconds of GPU work, and the driver's cuLaunchKernel alone costs about
// 4 us of host time. The Python path around it (checking x and k, finding the prepared launch, taking the output
// from core/outputs.py's pool, reading three data pointers) costs 3-4 us more, one torch attribute at a time. Here
// the same steps read the tensors' C++ objects directly: a few dozen nanoseconds.
//
// Built against the installed torch at first use (core/gpu/fastcall.py), because at::Tensor has no stable ABI.
//
//   FastConv(name, pooled, stream_of, new_output, prepare, max_entries, max_bytes, device_type)
//     pooled       core/outputs.py's ContextVar: outputs are pooled only while it is True; else None is returned
//     stream_of    stream_of(device index) -> the current stream's handle (an int)
//     new_output   new_output(x, k) -> a new NaN-filled output tensor
//     prepare      prepare(x, k, y) -> the layer's prepared launch (anything with .launch(stream, y, x, k) taking
//                  data pointers), or None where this path does not serve the layer; it checks the shapes and
//                  raises on a bad layer
//   fast(x, k), or call(x, k) -> y, or None: the caller takes its own path (outside pooled(), a tensor that is not a plain
//                 contiguous float32 tensor on the device, a layer prepare() turned down)
//   clear()     drops every prepared launch and kept output (a tuning plan was recorded)
//   launches_from_cpp (module): whether C Launches are fired through _launch.c's launch_raw capsule (else through
//               their launch method, as any other prepared launch is)
//
// A kept output is handed out again only when nothing holds it: this object's reference alone, no weak
// reference, no other at::Tensor on its TensorImpl, no other holder of its storage (a view, a detached tensor, a
// Python storage handle), and its data pointer, shape and strides as made. Else a new one is made.
// The GIL is held throughout, except inside the Python callbacks: after one, entries are looked up again.
#include <Python.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace {

struct Entry {
    int64_t xs[4], ks[4];
    int device;
    unsigned long long stream;
    PyObject *launch;  // owned; Py_None: the caller's path serves this layer
    PyObject *y;       // owned; nullptr: none kept
    void *y_ptr;
    unsigned long long used;  // when it last served a call (the least recently used entry goes first)
};

struct FastConv {
    PyObject_HEAD
    vectorcallfunc vectorcall;  // fast(x, k): the same as fast.call(x, k)
    PyObject *name, *pooled, *stream_of, *new_output, *prepare;
    std::vector<Entry> *entries;
    Py_ssize_t max_entries;
    long long max_bytes;
    int cuda;  // 1: tensors must be CUDA tensors; 0: CPU tensors (tests of this path on a machine without a GPU)
    unsigned long long clock;
};

PyObject *launch_name;  // "launch", interned
// _launch.c's launch_raw: a C Launch fired without Python objects (nullptr where the C launcher was not built)
int (*launch_raw)(PyObject *, unsigned long long, const uint64_t *, Py_ssize_t);

void drop(Entry &e) {
    Py_CLEAR(e.launch);
    Py_CLEAR(e.y);
}

// what a raw-pointer kernel assumes (core/gpu/launcher.py's check_tensors, but the shape)
bool plain(const at::Tensor &t, int cuda) {
    return t.dim() == 4 && t.scalar_type() == at::kFloat && (cuda ? t.is_cuda() : t.is_cpu()) &&
           t.is_contiguous() && !t.is_neg();
}

bool same_sizes(const at::Tensor &t, const int64_t s[4]) {
    auto sz = t.sizes();
    return sz[0] == s[0] && sz[1] == s[1] && sz[2] == s[2] && sz[3] == s[3];
}

// a kept y that nothing else holds, as it was made: then it may be written again
bool free_to_reuse(PyObject *y, const Entry &e) {
    if (Py_REFCNT(y) != 1)
        return false;
    Py_ssize_t off = Py_TYPE(y)->tp_weaklistoffset;  // the weak reference list, as CPython finds it
    if (off != 0 && *reinterpret_cast<PyObject **>(reinterpret_cast<char *>(y) + off) != nullptr)
        return false;
    const at::Tensor &t = THPVariable_Unpack(y);
    if (t.use_count() != 1 || !t.has_storage() || t.storage().use_count() != 1)
        return false;
    int64_t ys[4] = {e.xs[0], e.ks[0], e.xs[2] - e.ks[2] + 1, e.xs[3] - e.ks[3] + 1};
    return t.data_ptr() == e.y_ptr && same_sizes(t, ys) && t.is_contiguous() && t.scalar_type() == at::kFloat &&
           !t.requires_grad() && !t.is_neg();
}

Entry *find(FastConv *self, const at::Tensor &x, const at::Tensor &k, int device, unsigned long long stream) {
    for (Entry &e : *self->entries)
        if (e.device == device && e.stream == stream && same_sizes(x, e.xs) && same_sizes(k, e.ks))
            return &e;
    return nullptr;
}

// a new output from new_output(x, k), checked: a plain float32 tensor of the layer's shape on x's device
PyObject *new_output(FastConv *self, PyObject *x, PyObject *k, const at::Tensor &xt, const at::Tensor &kt) {
    PyObject *args[] = {x, k};
    PyObject *y = PyObject_Vectorcall(self->new_output, args, 2, nullptr);
    if (y == nullptr)
        return nullptr;
    if (!THPVariable_Check(y)) {
        Py_DECREF(y);
        PyErr_SetString(PyExc_TypeError, "new_output did not return a tensor");
        return nullptr;
    }
    const at::Tensor &t = THPVariable_Unpack(y);
    int64_t ys[4] = {xt.size(0), kt.size(0), xt.size(2) - kt.size(2) + 1, xt.size(3) - kt.size(3) + 1};
    if (!plain(t, self->cuda) || !same_sizes(t, ys) || t.device() != xt.device()) {
        Py_DECREF(y);
        PyErr_SetString(PyExc_TypeError, "new_output returned a tensor that is not the layer's plain float32 output");
        return nullptr;
    }
    return y;
}

// keep y in the entry of this key (found again: a callback may have changed the table), or in a new entry
void keep(FastConv *self, const at::Tensor &xt, const at::Tensor &kt, int device, unsigned long long stream,
          PyObject *launch, PyObject *y) {
    Entry *e = find(self, xt, kt, device, stream);
    if (e == nullptr) {
        if ((Py_ssize_t)self->entries->size() >= self->max_entries) {  // the least recently used goes
            auto oldest = self->entries->begin();
            for (auto it = self->entries->begin(); it != self->entries->end(); ++it)
                if (it->used < oldest->used)
                    oldest = it;
            drop(*oldest);
            self->entries->erase(oldest);
        }
        Entry fresh{};
        for (int i = 0; i < 4; ++i) {
            fresh.xs[i] = xt.size(i);
            fresh.ks[i] = kt.size(i);
        }
        fresh.device = device;
        fresh.stream = stream;
        self->entries->push_back(fresh);
        e = &self->entries->back();
    }
    Py_INCREF(launch);
    Py_XSETREF(e->launch, launch);
    e->used = ++self->clock;
    const at::Tensor *t = y != nullptr ? &THPVariable_Unpack(y) : nullptr;
    if (t != nullptr && (long long)t->nbytes() <= self->max_bytes) {
        Py_INCREF(y);
        Py_XSETREF(e->y, y);
        e->y_ptr = t->data_ptr();
    } else {
        Py_CLEAR(e->y);
    }
}

PyObject *FastConv_call(FastConv *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "call(x, k) takes two tensors");
        return nullptr;
    }
    PyObject *x = args[0], *k = args[1];
    PyObject *on = nullptr;
    if (PyContextVar_Get(self->pooled, Py_False, &on) < 0)
        return nullptr;
    bool pooled = on == Py_True;
    Py_DECREF(on);
    if (!pooled || !THPVariable_CheckExact(x) || !THPVariable_CheckExact(k))
        Py_RETURN_NONE;
    const at::Tensor &xt = THPVariable_Unpack(x);
    const at::Tensor &kt = THPVariable_Unpack(k);
    if (!plain(xt, self->cuda) || !plain(kt, self->cuda) || xt.device() != kt.device())
        Py_RETURN_NONE;
    int device = self->cuda ? xt.get_device() : -1;
    PyObject *index = PyLong_FromLong(device);
    if (index == nullptr)
        return nullptr;
    PyObject *handle = PyObject_CallOneArg(self->stream_of, index);
    Py_DECREF(index);
    if (handle == nullptr)
        return nullptr;
    unsigned long long stream = PyLong_AsUnsignedLongLong(handle);
    Py_DECREF(handle);
    if (stream == (unsigned long long)-1 && PyErr_Occurred())
        return nullptr;

    PyObject *y = nullptr, *launch = nullptr;  // both owned here
    Entry *e = find(self, xt, kt, device, stream);
    if (e != nullptr && e->launch == Py_None)
        Py_RETURN_NONE;
    if (e != nullptr) {
        e->used = ++self->clock;
        launch = Py_NewRef(e->launch);
        if (e->y != nullptr && free_to_reuse(e->y, *e))
            y = Py_NewRef(e->y);
    }
    if (y == nullptr) {
        y = new_output(self, x, k, xt, kt);
        if (y == nullptr) {
            Py_XDECREF(launch);
            return nullptr;
        }
        if (launch == nullptr) {  // a layer not seen before: its launch, prepared once
            PyObject *pargs[] = {x, k, y};
            launch = PyObject_Vectorcall(self->prepare, pargs, 3, nullptr);
            if (launch == nullptr) {
                Py_DECREF(y);
                return nullptr;
            }
        }
        keep(self, xt, kt, device, stream, launch, launch == Py_None ? nullptr : y);
        if (launch == Py_None) {
            Py_DECREF(launch);
            Py_DECREF(y);
            Py_RETURN_NONE;
        }
    }
    const at::Tensor &yt = THPVariable_Unpack(y);
    if (launch_raw != nullptr) {
        const uint64_t pointers[3] = {(uint64_t)(uintptr_t)yt.data_ptr(), (uint64_t)(uintptr_t)xt.const_data_ptr(),
                                      (uint64_t)(uintptr_t)kt.const_data_ptr()};
        int rc = launch_raw(launch, stream, pointers, 3);
        if (rc <= 0) {
            Py_DECREF(launch);
            if (rc < 0)
                Py_CLEAR(y);
            return y;
        }
    }  // not a C Launch: its launch method
    PyObject *largs[] = {
        launch,
        PyLong_FromUnsignedLongLong(stream),
        PyLong_FromVoidPtr(yt.data_ptr()),
        PyLong_FromVoidPtr(const_cast<void *>(xt.const_data_ptr())),
        PyLong_FromVoidPtr(const_cast<void *>(kt.const_data_ptr())),
    };
    PyObject *done = nullptr;
    if (largs[1] != nullptr && largs[2] != nullptr && largs[3] != nullptr && largs[4] != nullptr)
        done = PyObject_VectorcallMethod(launch_name, largs, 5 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
    for (int i = 1; i < 5; ++i)
        Py_XDECREF(largs[i]);
    Py_DECREF(launch);
    if (done == nullptr) {
        Py_DECREF(y);
        return nullptr;
    }
    Py_DECREF(done);
    return y;
}

PyObject *FastConv_clear(FastConv *self, PyObject *) {
    std::vector<Entry> gone;
    gone.swap(*self->entries);  // the table is empty before any reference is released (a release may run code)
    for (Entry &e : gone)
        drop(e);
    Py_RETURN_NONE;
}

PyObject *FastConv_len(FastConv *self, PyObject *) {
    return PyLong_FromSsize_t((Py_ssize_t)self->entries->size());
}

PyObject *FastConv_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames);

int FastConv_init(FastConv *self, PyObject *args, PyObject *kwds) {
    static const char *kwlist[] = {"name", "pooled", "stream_of", "new_output", "prepare", "max_entries",
                                   "max_bytes", "device_type", nullptr};
    PyObject *name, *pooled, *stream_of, *new_output, *prepare;
    Py_ssize_t max_entries;
    long long max_bytes;
    const char *device_type;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "UOOOOnLs", const_cast<char **>(kwlist), &name, &pooled,
                                     &stream_of, &new_output, &prepare, &max_entries, &max_bytes, &device_type))
        return -1;
    if (self->entries != nullptr) {
        PyErr_SetString(PyExc_TypeError, "a FastConv is made once");
        return -1;
    }
    if (!PyContextVar_CheckExact(pooled) || !PyCallable_Check(stream_of) || !PyCallable_Check(new_output) ||
        !PyCallable_Check(prepare) || max_entries < 1 || max_bytes < 0) {
        PyErr_SetString(PyExc_TypeError, "FastConv(name, a ContextVar, three callables, max_entries >= 1, "
                                         "max_bytes >= 0, device_type)");
        return -1;
    }
    std::string dev(device_type);
    if (dev != "cuda" && dev != "cpu") {
        PyErr_SetString(PyExc_ValueError, "device_type: cuda or cpu");
        return -1;
    }
    self->cuda = dev == "cuda";
    self->name = Py_NewRef(name);
    self->pooled = Py_NewRef(pooled);
    self->stream_of = Py_NewRef(stream_of);
    self->new_output = Py_NewRef(new_output);
    self->prepare = Py_NewRef(prepare);
    self->max_entries = max_entries;
    self->max_bytes = max_bytes;
    self->entries = new std::vector<Entry>();
    self->vectorcall = FastConv_vectorcall;
    return 0;
}

void FastConv_dealloc(FastConv *self) {
    if (self->entries != nullptr) {
        FastConv_clear(self, nullptr);
        delete self->entries;
    }
    Py_XDECREF(self->name);
    Py_XDECREF(self->pooled);
    Py_XDECREF(self->stream_of);
    Py_XDECREF(self->new_output);
    Py_XDECREF(self->prepare);
    Py_TYPE(self)->tp_free(reinterpret_cast<PyObject *>(self));
}

bool ready(FastConv *self) {
    if (self->entries != nullptr)
        return true;
    PyErr_SetString(PyExc_TypeError, "a FastConv is used only once __init__ has made it");
    return false;
}

PyObject *call_checked(FastConv *self, PyObject *const *args, Py_ssize_t nargs) {
    return ready(self) ? FastConv_call(self, args, nargs) : nullptr;
}

PyObject *clear_checked(FastConv *self, PyObject *arg) {
    return ready(self) ? FastConv_clear(self, arg) : nullptr;
}

PyObject *len_checked(FastConv *self, PyObject *arg) {
    return ready(self) ? FastConv_len(self, arg) : nullptr;
}

PyObject *FastConv_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) > 0) {
        PyErr_SetString(PyExc_TypeError, "a FastConv takes x and k, no keywords");
        return nullptr;
    }
    return call_checked(reinterpret_cast<FastConv *>(callable), args, PyVectorcall_NARGS(nargsf));
}

PyMethodDef FastConv_methods[] = {
    {"call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(call_checked)), METH_FASTCALL,
     "call(x, k) -> y, or None where the caller takes its own path"},
    {"clear", reinterpret_cast<PyCFunction>(clear_checked), METH_NOARGS, "drop every prepared launch and output"},
    {"entries", reinterpret_cast<PyCFunction>(len_checked), METH_NOARGS, "how many layers are kept"},
    {nullptr, nullptr, 0, nullptr},
};

PyTypeObject FastConvType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "convbench.core.gpu._fastconv", "convbench's compiled call path", -1,
                          nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__fastconv(void) {
    FastConvType.tp_name = "convbench.core.gpu._fastconv.FastConv";
    FastConvType.tp_basicsize = sizeof(FastConv);
    FastConvType.tp_dealloc = reinterpret_cast<destructor>(FastConv_dealloc);
    FastConvType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
    FastConvType.tp_vectorcall_offset = offsetof(FastConv, vectorcall);
    FastConvType.tp_call = PyVectorcall_Call;
    FastConvType.tp_doc = "y = impl(x, k) for prepared launches, in one call (see the source's header)";
    FastConvType.tp_methods = FastConv_methods;
    FastConvType.tp_init = reinterpret_cast<initproc>(FastConv_init);
    FastConvType.tp_new = PyType_GenericNew;
    if (PyType_Ready(&FastConvType) < 0)
        return nullptr;
    launch_name = PyUnicode_InternFromString("launch");
    launch_raw = reinterpret_cast<decltype(launch_raw)>(PyCapsule_Import("convbench.core.gpu._launch.launch_raw", 0));
    if (launch_raw == nullptr)  // the C launcher was not built: launches go through their launch method
        PyErr_Clear();
    PyObject *m = PyModule_Create(&module_def);
    if (m == nullptr || launch_name == nullptr)
        return nullptr;
    if (PyModule_AddObjectRef(m, "FastConv", reinterpret_cast<PyObject *>(&FastConvType)) < 0 ||
        PyModule_AddObjectRef(m, "launches_from_cpp", launch_raw != nullptr ? Py_True : Py_False) < 0) {
        Py_DECREF(m);
        return nullptr;
    }
    return m;
}
