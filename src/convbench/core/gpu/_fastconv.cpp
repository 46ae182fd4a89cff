// convbench's compiled call path: y = impl(x, k) for a layer whose launch is prepared, in one C++ call.
//
// Why: at 100 images a layer is a few microseconds of GPU work, and the driver's cuLaunchKernel alone costs 4-6 us
// of host time. The Python path around it (checking x and k, finding the prepared launch, taking the output from
// core/outputs.py's pool, reading three data pointers) costs as much again, one torch attribute at a time. Here the
// same steps read the tensors' C++ objects directly: a few dozen nanoseconds.
//
// Built against the installed torch at first use (core/gpu/fastcall.py), because at::Tensor has no stable ABI.
//
//   FastConv(name, pooled, stream_of, new_output, prepare, max_entries, max_bytes, device_type, probe)
//     pooled       core/outputs.py's ContextVar: outputs are pooled only while it is True; else None is returned
//     stream_of    stream_of(device index) -> the current stream's handle (an int)
//     new_output   new_output(x, k) -> a new NaN-filled output tensor
//     prepare      prepare(x, k, y) -> the layer's prepared launch (anything with .launch(stream, y, x, k) taking
//                  data pointers), or None where this path does not serve the layer; it checks the shapes and
//                  raises on a bad layer
//     probe        a tensor whose storage was handed to Python once (untyped_storage()) and dropped: how such a
//                  storage's counts read when nothing holds it
//   fast(x, k) -> y, or None: the caller takes its own path (outside pooled(), a tensor that is not a
//                 plain contiguous float32 tensor on the device, a layer prepare() turned down)
//   clear()     drops every prepared launch and kept output (a tuning plan was recorded)
//   launches_from_cpp (module): whether C Launches are fired through _launch.c's launch_raw capsule (else through
//               their launch method, as any other prepared launch is)
//
// A kept output is handed out again only when nothing holds it: this object's reference alone, no weak
// reference, no other at::Tensor on its TensorImpl, no other holder of its storage (a view, a detached tensor, a
// Python storage handle), and its data pointer, shape and strides as made. Else a new one is made.
//
// Python code can run inside a call: the callbacks, and any release of a reference (a finalizer, a weak reference's
// callback, a garbage collection), and it may call clear() or this object again. So nothing points into the entry
// table across such a point: what a call needs from an entry is copied out and held, the table is written in one
// step with no release inside it, and a clear() during the call (a generation count) sends the call back to Python.
#include <Python.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <algorithm>
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
    vectorcallfunc vectorcall;  // fast(x, k)
    PyObject *name, *pooled, *stream_of, *new_output, *prepare;
    std::vector<Entry> *entries;
    Py_ssize_t max_entries;
    long long max_bytes;
    int cuda;  // 1: tensors must be CUDA tensors; 0: CPU tensors (tests of this path on a machine without a GPU)
    unsigned long long clock, generation;  // generation: how many clear()s so far
    long touched_use;       // a storage handed to Python once and dropped: its use count...
    Py_ssize_t touched_ref;  // ...and its Python object's reference count as untyped_storage() returns it
};

PyObject *launch_name, *storage_name;  // "launch", "untyped_storage", interned
// _launch.c's launch_raw: a C Launch fired without Python objects (nullptr where the C launcher was not built)
int (*launch_raw)(PyObject *, unsigned long long, const uint64_t *, Py_ssize_t);

// what a raw-pointer kernel assumes (core/gpu/launcher.py's check_tensors, but the shape): a plain strided tensor
// with its own storage, not one that functorch, functionalization or a Python mode stands in front of
bool plain(const at::Tensor &t, int cuda) {
    static const c10::DispatchKeySet wrapped({c10::DispatchKey::FuncTorchBatched, c10::DispatchKey::Functionalize,
                                              c10::DispatchKey::Python, c10::DispatchKey::FuncTorchGradWrapper});
    return !t.is_nested() && t.layout() == at::kStrided && t.has_storage() && !t.key_set().has_any(wrapped) &&
           t.dim() == 4 && t.scalar_type() == at::kFloat && (cuda ? t.is_cuda() : t.is_cpu()) &&
           t.is_contiguous() && !t.is_neg();
}

bool same_sizes(const at::Tensor &t, const int64_t s[4]) {
    auto sz = t.sizes();
    return sz[0] == s[0] && sz[1] == s[1] && sz[2] == s[2] && sz[3] == s[3];
}

bool no_weakrefs(PyObject *o) {
    Py_ssize_t off = Py_TYPE(o)->tp_weaklistoffset;  // the weak reference list, as CPython finds it
    return off == 0 || *reinterpret_cast<PyObject **>(reinterpret_cast<char *>(o) + off) == nullptr;
}

// the layer's snapshot, taken before any Python code runs in a call
struct Layer {
    int64_t xs[4], ks[4], ys[4];
    int device;
    unsigned long long stream;
    const void *x_ptr, *k_ptr;
};

// Is the kept output y (held by its entry and by the caller's one reference) free to be written again, as it was
// made? May run Python code (untyped_storage()), so the caller holds no pointer into the table.
bool free_to_reuse(FastConv *self, PyObject *y, void *made_at, const Layer &L) {
    if (Py_REFCNT(y) != 2 || !no_weakrefs(y))
        return false;
    const at::Tensor &t = THPVariable_Unpack(y);
    if (t.use_count() != 1 || !plain(t, self->cuda) || t.data_ptr() != made_at || !same_sizes(t, L.ys) ||
        t.requires_grad())
        return false;
    const long use = (long)t.storage().use_count();
    if (use == 1)
        return true;
    if (use != self->touched_use)  // a view, a detached tensor, another tensor on its storage
        return false;
    // Its storage may have been handed to Python (network/model.py reads every layer's), which keeps a Python object
    // on it from then on: free when that object exists already (asking for it adds no holder, where a storage with
    // another tensor on it gets a new one) and reads as a dropped one does
    PyObject *storage = PyObject_CallMethodNoArgs(y, storage_name);
    if (storage == nullptr) {
        PyErr_Clear();
        return false;
    }
    bool free = (long)THPVariable_Unpack(y).storage().use_count() == use && Py_REFCNT(storage) == self->touched_ref &&
                no_weakrefs(storage);
    Py_DECREF(storage);
    return free;
}

Entry *find(FastConv *self, const Layer &L) {
    for (Entry &e : *self->entries)
        if (e.device == L.device && e.stream == L.stream && std::equal(e.xs, e.xs + 4, L.xs) &&
            std::equal(e.ks, e.ks + 4, L.ks))
            return &e;
    return nullptr;
}

// a new output from new_output(x, k), checked: a plain float32 tensor of the layer's shape on x's device
PyObject *new_output(FastConv *self, PyObject *x, PyObject *k, const Layer &L) {
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
    if (!plain(t, self->cuda) || !same_sizes(t, L.ys) || t.get_device() != L.device || t.requires_grad()) {
        Py_DECREF(y);
        PyErr_SetString(PyExc_TypeError, "new_output returned a tensor that is not the layer's plain float32 output");
        return nullptr;
    }
    return y;
}

// Keep the launch and y (nullptr: none) under the layer's key. No reference is released until the table is
// written: what goes out of it (an evicted entry, a replaced launch or output) is returned in `gone`.
void keep(FastConv *self, const Layer &L, PyObject *launch, PyObject *y, std::vector<PyObject *> &gone) {
    Entry *e = find(self, L);
    if (e == nullptr) {
        if ((Py_ssize_t)self->entries->size() >= self->max_entries) {  // the least recently used goes
            auto oldest = self->entries->begin();
            for (auto it = self->entries->begin(); it != self->entries->end(); ++it)
                if (it->used < oldest->used)
                    oldest = it;
            gone.push_back(oldest->launch);
            gone.push_back(oldest->y);
            self->entries->erase(oldest);
        }
        Entry fresh{};
        std::copy(L.xs, L.xs + 4, fresh.xs);
        std::copy(L.ks, L.ks + 4, fresh.ks);
        fresh.device = L.device;
        fresh.stream = L.stream;
        self->entries->push_back(fresh);
        e = &self->entries->back();
    }
    gone.push_back(e->launch);
    e->launch = Py_NewRef(launch);
    e->used = ++self->clock;
    gone.push_back(e->y);
    e->y = nullptr;
    if (y != nullptr) {
        const at::Tensor &t = THPVariable_Unpack(y);
        if ((long long)t.nbytes() <= self->max_bytes) {
            e->y = Py_NewRef(y);
            e->y_ptr = t.data_ptr();
        }
    }
}

void release(std::vector<PyObject *> &gone) {
    for (PyObject *o : gone)
        Py_XDECREF(o);
    gone.clear();
}

PyObject *FastConv_call(FastConv *self, PyObject *const *args, Py_ssize_t nargs) {
    HANDLE_TH_ERRORS
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "a FastConv takes two tensors, x and k");
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
    Layer L;
    {
        const at::Tensor &xt = THPVariable_Unpack(x);
        const at::Tensor &kt = THPVariable_Unpack(k);
        if (!plain(xt, self->cuda) || !plain(kt, self->cuda) || xt.device() != kt.device())
            Py_RETURN_NONE;
        for (int i = 0; i < 4; ++i) {
            L.xs[i] = xt.size(i);
            L.ks[i] = kt.size(i);
        }
        if (L.xs[1] != L.ks[1] || L.ks[2] != L.ks[3] || L.xs[2] < L.ks[2] || L.xs[3] < L.ks[3])
            Py_RETURN_NONE;  // not a layer: the caller's path says what is wrong
        L.ys[0] = L.xs[0];
        L.ys[1] = L.ks[0];
        L.ys[2] = L.xs[2] - L.ks[2] + 1;
        L.ys[3] = L.xs[3] - L.ks[3] + 1;
        L.device = self->cuda ? xt.get_device() : -1;
        L.x_ptr = xt.const_data_ptr();
        L.k_ptr = kt.const_data_ptr();
    }
    const unsigned long long generation = self->generation;
    {
        PyObject *index = PyLong_FromLong(L.device);
        if (index == nullptr)
            return nullptr;
        PyObject *handle = PyObject_CallOneArg(self->stream_of, index);
        Py_DECREF(index);
        if (handle == nullptr)
            return nullptr;
        L.stream = PyLong_AsUnsignedLongLong(handle);
        Py_DECREF(handle);
        if (L.stream == (unsigned long long)-1 && PyErr_Occurred())
            return nullptr;
    }

    PyObject *launch = nullptr, *y = nullptr;  // both owned here
    void *made_at = nullptr;
    if (Entry *e = find(self, L)) {  // copied out: e is not used past this block
        if (e->launch == Py_None)
            Py_RETURN_NONE;
        e->used = ++self->clock;
        launch = Py_NewRef(e->launch);
        y = Py_XNewRef(e->y);
        made_at = e->y_ptr;
    }
    if (y != nullptr && !free_to_reuse(self, y, made_at, L))
        Py_CLEAR(y);  // the entry holds it too: this release frees nothing
    if (y == nullptr) {
        y = new_output(self, x, k, L);
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
        if (self->generation == generation) {
            std::vector<PyObject *> gone;
            keep(self, L, launch, launch == Py_None ? nullptr : y, gone);
            release(gone);
        }
    }
    // Python code may have run since the snapshot (the callbacks, a release): the call goes on only as it began
    bool as_begun = self->generation == generation && launch != Py_None;
    if (as_begun) {
        const at::Tensor &xt = THPVariable_Unpack(x);
        const at::Tensor &kt = THPVariable_Unpack(k);
        as_begun = plain(xt, self->cuda) && plain(kt, self->cuda) && same_sizes(xt, L.xs) && same_sizes(kt, L.ks) &&
                   xt.const_data_ptr() == L.x_ptr && kt.const_data_ptr() == L.k_ptr;
    }
    if (!as_begun) {
        Py_DECREF(launch);
        Py_DECREF(y);
        Py_RETURN_NONE;
    }
    const uint64_t pointers[3] = {(uint64_t)(uintptr_t)THPVariable_Unpack(y).data_ptr(), (uint64_t)(uintptr_t)L.x_ptr,
                                  (uint64_t)(uintptr_t)L.k_ptr};
    int rc = launch_raw != nullptr ? launch_raw(launch, L.stream, pointers, 3) : 1;
    if (rc == 1) {  // not a C Launch: its launch method
        PyObject *largs[] = {launch, PyLong_FromUnsignedLongLong(L.stream), PyLong_FromUnsignedLongLong(pointers[0]),
                             PyLong_FromUnsignedLongLong(pointers[1]), PyLong_FromUnsignedLongLong(pointers[2])};
        PyObject *done = nullptr;
        if (largs[1] != nullptr && largs[2] != nullptr && largs[3] != nullptr && largs[4] != nullptr)
            done = PyObject_VectorcallMethod(launch_name, largs, 5 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
        for (int i = 1; i < 5; ++i)
            Py_XDECREF(largs[i]);
        rc = done != nullptr ? 0 : -1;
        Py_XDECREF(done);
    }
    Py_DECREF(launch);
    if (rc < 0)
        Py_CLEAR(y);
    return y;
    END_HANDLE_TH_ERRORS
}

PyObject *FastConv_clear(FastConv *self, PyObject *) {
    ++self->generation;
    std::vector<Entry> gone;
    gone.swap(*self->entries);  // the table is empty before any reference is released (a release may run code)
    for (Entry &e : gone) {
        Py_CLEAR(e.launch);
        Py_CLEAR(e.y);
    }
    Py_RETURN_NONE;
}

PyObject *FastConv_len(FastConv *self, PyObject *) {
    return PyLong_FromSsize_t((Py_ssize_t)self->entries->size());
}

PyObject *FastConv_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames);

// callable from the start: an object __init__ did not make refuses the call with a message (call_checked)
PyObject *FastConv_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *self = PyType_GenericNew(type, args, kwds);
    if (self != nullptr)
        reinterpret_cast<FastConv *>(self)->vectorcall = FastConv_vectorcall;
    return self;
}

int FastConv_init(FastConv *self, PyObject *args, PyObject *kwds) {
    static const char *kwlist[] = {"name", "pooled", "stream_of", "new_output", "prepare", "max_entries",
                                   "max_bytes", "device_type", "probe", nullptr};
    PyObject *name, *pooled, *stream_of, *new_output, *prepare, *probe;
    Py_ssize_t max_entries;
    long long max_bytes;
    const char *device_type;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "UOOOOnLsO", const_cast<char **>(kwlist), &name, &pooled,
                                     &stream_of, &new_output, &prepare, &max_entries, &max_bytes, &device_type,
                                     &probe))
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
    if (!THPVariable_Check(probe) || !THPVariable_Unpack(probe).has_storage()) {
        PyErr_SetString(PyExc_TypeError, "probe: a tensor whose storage was handed to Python once and dropped");
        return -1;
    }
    self->touched_use = THPVariable_Unpack(probe).storage().use_count();
    PyObject *storage = PyObject_CallMethodNoArgs(probe, storage_name);
    if (storage == nullptr)
        return -1;
    self->touched_ref = Py_REFCNT(storage);
    Py_DECREF(storage);
    self->cuda = dev == "cuda";
    self->name = Py_NewRef(name);
    self->pooled = Py_NewRef(pooled);
    self->stream_of = Py_NewRef(stream_of);
    self->new_output = Py_NewRef(new_output);
    self->prepare = Py_NewRef(prepare);
    self->max_entries = max_entries;
    self->max_bytes = max_bytes;
    self->entries = new std::vector<Entry>();
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
    FastConvType.tp_new = FastConv_new;
    if (PyType_Ready(&FastConvType) < 0)
        return nullptr;
    launch_name = PyUnicode_InternFromString("launch");
    storage_name = PyUnicode_InternFromString("untyped_storage");
    launch_raw = reinterpret_cast<decltype(launch_raw)>(
        PyCapsule_Import("convbench.core.gpu._launch.launch_raw_v1", 0));
    if (launch_raw == nullptr)  // the C launcher was not built: launches go through their launch method
        PyErr_Clear();
    PyObject *m = PyModule_Create(&module_def);
    if (m == nullptr || launch_name == nullptr || storage_name == nullptr)
        return nullptr;
    if (PyModule_AddObjectRef(m, "FastConv", reinterpret_cast<PyObject *>(&FastConvType)) < 0 ||
        PyModule_AddObjectRef(m, "launches_from_cpp", launch_raw != nullptr ? Py_True : Py_False) < 0) {
        Py_DECREF(m);
        return nullptr;
    }
    return m;
}
