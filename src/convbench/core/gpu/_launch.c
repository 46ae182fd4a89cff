/* convbench.core.gpu._launch: one kernel launch from C, for launches prepared once and fired many times.
 *
 * Why C: at 100 images a course layer is a few microseconds of GPU work, so the host's cost of issuing the call is
 * most of its Op Time. Through ctypes, a prepared cuLaunchKernel still converts a dozen argument objects per call;
 * through CuPy, ~20-30 us of Python and Cython argument handling. Here a call is one C function: the argument block
 * is packed once (Python's struct), the pointers that change per call are written into their slots, and the driver
 * is called. Nothing is linked against CUDA: libcuda.so.1 is opened at the first Launch, as CuPy and torch do.
 *
 *   Launch(name, function, grid, block, shared, params, offsets, slots, dependent=False)
 *     name      what a failure message calls the kernel
 *     function  the CUfunction handle (an int)
 *     grid, block  three ints each; shared: dynamic shared memory in bytes
 *     params    the packed argument block (bytes); offsets: each kernel parameter's byte offset in it
 *     slots     indices of the 8-byte parameters given per call (device pointers), in call order
 *     dependent the kernel calls griddepcontrol.wait before touching what earlier kernels write (common.cuh's
 *               griddep_wait), so it may be launched as a programmatic dependent of the kernel before it
 *   launch(stream, *pointers)  -> None; raises the error class given to set_error ("CUDA launch of NAME ... failed:
 *                                 CUDA_ERROR_...: text")
 *   launch_raw_v1 (a capsule): the same call from C or C++ (_fastconv.cpp) on a stream and an array of pointers
 *   set_programmatic(on) -> the previous setting: while on (this thread only), a dependent Launch goes through
 *     cuLaunchKernelEx with programmatic stream serialization (Hopper's programmatic dependent launch: it may start
 *     while the kernel before it finishes); programmatic_available() says whether the driver has cuLaunchKernelEx
 *     and is CUDA 12.3 or later (programmatic dependencies captured into graphs)
 * A slot must be an aligned 8-byte parameter; a Launch whose __init__ did not succeed refuses every use.
 *
 * The GIL is held throughout, so a Launch shared by threads never has its slots written by two calls at once (the
 * driver copies the argument block before cuLaunchKernel returns).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef int (*cu_launch_kernel_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  void *, void **, void **);
typedef int (*cu_error_text_t)(int, const char **);

/* cuda.h's CUlaunchConfig and CUlaunchAttribute, as the driver's ABI lays them out (nothing here includes cuda.h) */
typedef struct {
    int id;                 /* CUlaunchAttributeID */
    char pad[4];
    union {
        _Alignas(8) char bytes[64];
        int programmatic;   /* CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION's value */
    } value;
} launch_attribute_t;
typedef struct {
    unsigned grid[3], block[3], shared;
    void *stream;
    launch_attribute_t *attrs;
    unsigned nattrs;
} launch_config_t;
_Static_assert(sizeof(launch_attribute_t) == 72 && offsetof(launch_attribute_t, value) == 8,
               "CUlaunchAttribute: 72 bytes, the value at 8");
_Static_assert(sizeof(launch_config_t) == 56 && offsetof(launch_config_t, stream) == 32 &&
               offsetof(launch_config_t, attrs) == 40 && offsetof(launch_config_t, nattrs) == 48,
               "CUlaunchConfig: 56 bytes, hStream at 32, attrs at 40, numAttrs at 48");
#define PROGRAMMATIC_STREAM_SERIALIZATION 6
typedef int (*cu_launch_kernel_ex_t)(const launch_config_t *, void *, void **, void **);
typedef int (*cu_driver_get_version_t)(int *);
#define PROGRAMMATIC_MIN_DRIVER 12030  /* CUDA 12.3: programmatic dependencies captured into a CUDA graph */

static cu_launch_kernel_t cu_launch_kernel;
static cu_launch_kernel_ex_t cu_launch_kernel_ex;  /* NULL: a driver before CUDA 12 (no programmatic launches) */
static cu_driver_get_version_t cu_driver_get_version;
static _Thread_local int programmatic;               /* set_programmatic(): this thread's launches */
static cu_error_text_t cu_get_error_name, cu_get_error_string;
static PyObject *error_class;  /* set_error(): convbench's UsageError; RuntimeError until then */

static PyTypeObject LaunchType;  /* defined below */

static int load_driver(void) {
    if (cu_launch_kernel != NULL)
        return 0;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) {
        PyErr_Format(PyExc_OSError, "libcuda.so.1 could not be opened: %s", dlerror());
        return -1;
    }
    cu_launch_kernel = (cu_launch_kernel_t)dlsym(lib, "cuLaunchKernel");
    cu_launch_kernel_ex = (cu_launch_kernel_ex_t)dlsym(lib, "cuLaunchKernelEx");
    cu_driver_get_version = (cu_driver_get_version_t)dlsym(lib, "cuDriverGetVersion");
    cu_get_error_name = (cu_error_text_t)dlsym(lib, "cuGetErrorName");
    cu_get_error_string = (cu_error_text_t)dlsym(lib, "cuGetErrorString");
    if (cu_launch_kernel == NULL) {
        PyErr_SetString(PyExc_OSError, "libcuda.so.1 has no cuLaunchKernel");
        return -1;
    }
    return 0;
}

typedef struct {
    PyObject_HEAD
    PyObject *name;
    void *function;
    unsigned grid[3], block[3], shared;
    char *params;         /* the packed argument block */
    void **param_ptrs;    /* kernelParams: one pointer per parameter, into params */
    Py_ssize_t nparams;
    Py_ssize_t *slots;    /* byte offsets of the per-call pointers */
    Py_ssize_t nslots;
    Py_ssize_t nbytes;    /* the argument block's length */
    int dependent;        /* the kernel waits for the one before it (griddep_wait): it may go out programmatically */
    int ready;            /* set by a successful __init__ only: nothing else may run before */
} Launch;

static void release_buffers(Launch *self) {
    PyMem_Free(self->params);
    PyMem_Free(self->param_ptrs);
    PyMem_Free(self->slots);
    self->params = NULL;
    self->param_ptrs = NULL;
    self->slots = NULL;
}

static int not_ready(Launch *self) {
    if (self->ready)
        return 0;
    PyErr_SetString(PyExc_TypeError, "a Launch is used only once __init__ has prepared it");
    return 1;
}

static void Launch_dealloc(Launch *self) {
    Py_XDECREF(self->name);
    release_buffers(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int three_uints(PyObject *seq, unsigned out[3], const char *what) {
    PyObject *fast = PySequence_Fast(seq, what);
    if (fast == NULL)
        return -1;
    if (PySequence_Fast_GET_SIZE(fast) != 3) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "%s: three ints", what);
        return -1;
    }
    for (int i = 0; i < 3; i++) {
        unsigned long v = PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(fast, i));
        if (PyErr_Occurred() || v == 0 || v > 0xffffffffUL) {
            Py_DECREF(fast);
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "%s: each between 1 and 2**32 - 1", what);
            return -1;
        }
        out[i] = (unsigned)v;
    }
    Py_DECREF(fast);
    return 0;
}

/* an int in [0, limit], else -1 with the exception set (negative, too large, not an int) */
static int bounded(PyObject *value, unsigned long long limit, unsigned long long *out, const char *what) {
    unsigned long long v = PyLong_AsUnsignedLongLong(value);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    if (v > limit) {
        PyErr_Format(PyExc_OverflowError, "%s: %llu is too large", what, v);
        return -1;
    }
    *out = v;
    return 0;
}

static int Launch_init(Launch *self, PyObject *args, PyObject *kwds) {
    PyObject *name, *function, *grid, *block, *shared, *offsets, *slots;
    Py_buffer params;
    int dependent = 0;
    static char *kwlist[] = {"name", "function", "grid", "block", "shared", "params", "offsets", "slots", "dependent",
                             NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "UOOOOy*OO|p", kwlist, &name, &function, &grid, &block, &shared,
                                     &params, &offsets, &slots, &dependent))
        return -1;
    if (self->ready) {  /* a prepared Launch stays as it is */
        PyBuffer_Release(&params);
        PyErr_SetString(PyExc_TypeError, "a Launch is prepared once");
        return -1;
    }
    int rc = -1;
    PyObject *offs = NULL, *sl = NULL;
    unsigned long long fn = 0, smem = 0;
    if (bounded(function, UINTPTR_MAX, &fn, "function") < 0 || bounded(shared, 0xffffffffULL, &smem, "shared") < 0)
        goto done;
    if (fn == 0) {
        PyErr_SetString(PyExc_ValueError, "function: a CUfunction handle, not 0");
        goto done;
    }
    if (load_driver() < 0 || three_uints(grid, self->grid, "grid") < 0 || three_uints(block, self->block, "block") < 0)
        goto done;
    offs = PySequence_Fast(offsets, "offsets: a sequence of ints");
    sl = PySequence_Fast(slots, "slots: a sequence of ints");
    if (offs == NULL || sl == NULL)
        goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(offs), ns = PySequence_Fast_GET_SIZE(sl);
    self->params = PyMem_Malloc(params.len > 0 ? params.len : 1);
    self->param_ptrs = PyMem_Malloc(sizeof(void *) * (n > 0 ? n : 1));
    self->slots = PyMem_Malloc(sizeof(Py_ssize_t) * (ns > 0 ? ns : 1));
    if (self->params == NULL || self->param_ptrs == NULL || self->slots == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(self->params, params.buf, params.len);
    Py_ssize_t previous = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t off = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(offs, i));
        if (PyErr_Occurred())
            goto done;
        if (off <= previous || off + 4 > params.len) {  /* every parameter is 4 bytes or more, in order */
            PyErr_Format(PyExc_ValueError, "offset %zd of parameter %zd is out of order or outside the %zd-byte "
                         "block", off, i, params.len);
            goto done;
        }
        self->param_ptrs[i] = self->params + off;
        previous = off;
    }
    for (Py_ssize_t i = 0; i < ns; i++) {
        Py_ssize_t p = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(sl, i));
        if (PyErr_Occurred())
            goto done;
        Py_ssize_t off = p >= 0 && p < n ? (char *)self->param_ptrs[p] - self->params : -1;
        Py_ssize_t end = p + 1 < n ? (char *)self->param_ptrs[p + 1] - self->params : params.len;
        if (off < 0 || off % 8 != 0 || end - off < 8) {  /* a device pointer: 8 bytes, aligned */
            PyErr_Format(PyExc_ValueError, "slot %zd is not an aligned 8-byte parameter of the block", p);
            goto done;
        }
        self->slots[i] = off;
    }
    self->nparams = n;
    self->nslots = ns;
    self->nbytes = params.len;
    self->function = (void *)(uintptr_t)fn;
    self->shared = (unsigned)smem;
    self->dependent = dependent;
    Py_INCREF(name);
    Py_XSETREF(self->name, name);
    self->ready = 1;
    rc = 0;
done:
    if (rc < 0)
        release_buffers(self);
    Py_XDECREF(offs);
    Py_XDECREF(sl);
    PyBuffer_Release(&params);
    return rc;
}

static PyObject *launch_failed(Launch *self, int result) {
    const char *name = NULL, *text = NULL;
    PyObject *cls = error_class != NULL ? error_class : PyExc_RuntimeError;
    if (cu_get_error_name != NULL && cu_get_error_string != NULL && cu_get_error_name(result, &name) == 0 &&
        cu_get_error_string(result, &text) == 0 && name != NULL && text != NULL)
        return PyErr_Format(cls, "CUDA launch of %U grid=(%u, %u, %u) failed: %s: %s", self->name, self->grid[0],
                            self->grid[1], self->grid[2], name, text);
    return PyErr_Format(cls, "CUDA launch of %U grid=(%u, %u, %u) failed: CUresult %d", self->name, self->grid[0],
                        self->grid[1], self->grid[2], result);
}

/* the driver call with the slots as they stand: 0, or -1 with the error set */
static int fire(Launch *self, unsigned long long stream) {
    int result;
    if (programmatic && self->dependent && cu_launch_kernel_ex != NULL) {
        launch_attribute_t attr;
        memset(&attr, 0, sizeof attr);
        attr.id = PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmatic = 1;
        launch_config_t config = {{self->grid[0], self->grid[1], self->grid[2]},
                                  {self->block[0], self->block[1], self->block[2]},
                                  self->shared, (void *)(uintptr_t)stream, &attr, 1};
        result = cu_launch_kernel_ex(&config, self->function, self->param_ptrs, NULL);
    } else
        result = cu_launch_kernel(self->function, self->grid[0], self->grid[1], self->grid[2], self->block[0],
                                  self->block[1], self->block[2], self->shared, (void *)(uintptr_t)stream,
                                  self->param_ptrs, NULL);
    if (result != 0) {
        launch_failed(self, result);
        return -1;
    }
    return 0;
}

/* launch(stream, *pointers): vectorcall-style, no argument tuple parsing */
static PyObject *Launch_launch(Launch *self, PyObject *const *args, Py_ssize_t nargs) {
    if (not_ready(self))
        return NULL;
    if (nargs != 1 + self->nslots) {
        PyErr_Format(PyExc_TypeError, "launch takes a stream and %zd pointers, got %zd arguments", self->nslots,
                     nargs);
        return NULL;
    }
    unsigned long long stream = PyLong_AsUnsignedLongLong(args[0]);
    if (stream == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    for (Py_ssize_t i = 0; i < self->nslots; i++) {
        uint64_t p = PyLong_AsUnsignedLongLong(args[1 + i]);
        if (p == (uint64_t)-1 && PyErr_Occurred())
            return NULL;
        memcpy(self->params + self->slots[i], &p, 8);
    }
    if (fire(self, stream) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* The same launch for compiled callers (_fastconv.cpp), without a Python object per call; exported as the capsule
 * `launch_raw_v1`. 1: obj is not a Launch (the caller calls its launch method instead); -1: an error is set;
 * 0: done. */
static int launch_raw(PyObject *obj, unsigned long long stream, const uint64_t *pointers, Py_ssize_t n) {
    if (!PyObject_TypeCheck(obj, &LaunchType))
        return 1;
    Launch *self = (Launch *)obj;
    if (not_ready(self))
        return -1;
    if (n != self->nslots) {
        PyErr_Format(PyExc_TypeError, "launch takes %zd pointers, got %zd", self->nslots, n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        memcpy(self->params + self->slots[i], &pointers[i], 8);
    return fire(self, stream);
}

static PyObject *Launch_get_name(Launch *self, void *closure) {
    if (not_ready(self))
        return NULL;
    Py_INCREF(self->name);
    return self->name;
}

static PyObject *Launch_get_grid(Launch *self, void *closure) {
    if (not_ready(self))
        return NULL;
    return Py_BuildValue("(III)", self->grid[0], self->grid[1], self->grid[2]);
}

static PyObject *Launch_get_params(Launch *self, void *closure) {
    /* the argument block as it stands (tests read back what was packed and what the last call wrote) */
    if (not_ready(self))
        return NULL;
    return PyBytes_FromStringAndSize(self->params, self->nbytes);
}

static PyObject *Launch_get_dependent(Launch *self, void *closure) {
    if (not_ready(self))
        return NULL;
    return PyBool_FromLong(self->dependent);
}

static PyMethodDef Launch_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))Launch_launch, METH_FASTCALL,
     "launch(stream, *pointers): the kernel on that stream handle, these pointers in the slots"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Launch_getset[] = {
    {"name", (getter)Launch_get_name, NULL, "what a failure message calls the kernel", NULL},
    {"grid", (getter)Launch_get_grid, NULL, "the grid, three ints", NULL},
    {"params", (getter)Launch_get_params, NULL, "the packed argument block as it stands", NULL},
    {"dependent", (getter)Launch_get_dependent, NULL, "whether it may be launched as a programmatic dependent", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject LaunchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "convbench.core.gpu._launch.Launch",
    .tp_basicsize = sizeof(Launch),
    .tp_dealloc = (destructor)Launch_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "a kernel launch prepared once: Launch(name, function, grid, block, shared, params, offsets, slots, "
              "dependent=False)",
    .tp_methods = Launch_methods,
    .tp_getset = Launch_getset,
    .tp_init = (initproc)Launch_init,
    .tp_new = PyType_GenericNew,
};

static PyObject *set_error(PyObject *module, PyObject *cls) {
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, (PyTypeObject *)PyExc_Exception)) {
        PyErr_SetString(PyExc_TypeError, "set_error takes an exception class");
        return NULL;
    }
    Py_INCREF(cls);
    Py_XSETREF(error_class, cls);
    Py_RETURN_NONE;
}

static PyObject *set_programmatic(PyObject *module, PyObject *on) {
    int flag = PyObject_IsTrue(on);
    if (flag < 0)
        return NULL;
    PyObject *previous = PyBool_FromLong(programmatic);
    programmatic = flag;
    return previous;
}

static PyObject *programmatic_available(PyObject *module, PyObject *unused) {
    if (load_driver() < 0)
        return NULL;
    int version = 0;
    if (cu_launch_kernel_ex == NULL || cu_driver_get_version == NULL || cu_driver_get_version(&version) != 0)
        Py_RETURN_FALSE;
    return PyBool_FromLong(version >= PROGRAMMATIC_MIN_DRIVER);
}

static PyMethodDef module_methods[] = {
    {"set_error", set_error, METH_O, "set_error(cls): the exception class a failed launch raises"},
    {"set_programmatic", set_programmatic, METH_O,
     "set_programmatic(on) -> previous: this thread's dependent launches programmatic (cuLaunchKernelEx) or not"},
    {"programmatic_available", programmatic_available, METH_NOARGS,
     "whether the driver has cuLaunchKernelEx and is CUDA 12.3 or later (programmatic dependent launches)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef launch_module = {
    PyModuleDef_HEAD_INIT, "convbench.core.gpu._launch", "kernel launches prepared once and fired from C", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__launch(void) {
    if (PyType_Ready(&LaunchType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&launch_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&LaunchType);
    if (PyModule_AddObject(m, "Launch", (PyObject *)&LaunchType) < 0) {
        Py_DECREF(&LaunchType);
        Py_DECREF(m);
        return NULL;
    }
    PyObject *raw = PyCapsule_New((void *)launch_raw, "convbench.core.gpu._launch.launch_raw_v1", NULL);
    if (raw == NULL || PyModule_AddObject(m, "launch_raw_v1", raw) < 0) {
        Py_XDECREF(raw);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
