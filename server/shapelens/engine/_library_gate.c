/* sys.settrace that is off while library code runs (CPython 3.11; built only there).
 *
 * Under sys.settrace the interpreter runs every Python function in its tracing mode,
 * checking for a new line at each instruction, and calls the trace function on every
 * call: torch's ~106 Python calls of a training step cost 1.19x with a trace function
 * that does nothing. The gate keeps a *profile* function installed instead (called on
 * calls and returns only) and switches the trace function on exactly while a frame that
 * has a local tracer runs: user code, and the library frames the module tree watches.
 *
 *   call of a frame:  tracing on  -> the trace function saw the call; off again when it
 *                                    gave the frame no local tracer (library code);
 *                     tracing off -> on, and the call handed to the trace function, when
 *                                    the code is user code, unknown, or watched.
 *   return of a frame (also when an exception unwinds it): tracing on when the frame it
 *                     returns to has a local tracer, off otherwise.
 *
 * The interpreter calls the trace function before the profile function on both, so a
 * frame's own call and return events are never lost. A trace function that is not ours
 * (pdb, a debugger attached later) is never touched. Events are handed to the Python
 * functions as sys.settrace would, without building the frame's locals dict first (the
 * recorder reads frame.f_locals only on the statements it samples).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#define Py_BUILD_CORE 1
#include <internal/pycore_frame.h> /* PyFrameObject.f_trace */
#undef Py_BUILD_CORE

typedef struct {
    PyObject_HEAD
    PyObject *codes;   /* id(code) -> what the recorder knows, None for library code */
    PyObject *global;  /* the Python global trace function */
    PyObject *watched; /* library code whose calls the global function still sees */
    int watch_paused;  /* then only its calls made by a frame with a local tracer */
    uintptr_t generation; /* this gate's mark in a library code's co_extra slot */
} Gate;

static PyObject *event_names[8];
static Py_ssize_t extra_index = -1; /* our co_extra slot: "library code for gate N" */
static uintptr_t last_generation = 0;
static Gate *active_gate = NULL; /* the gate installed last (borrowed: cleared on removal) */

static int gate_trace(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg);

static int
trace_is_ours(PyThreadState *tstate, Gate *self)
{
    return tstate->c_tracefunc == gate_trace && tstate->c_traceobj == (PyObject *)self;
}

/* 1: calls of the code go to the global function; 0: library code; -1: error. */
static int
wants_calls(Gate *self, PyFrameObject *frame)
{
    PyCodeObject *code = PyFrame_GetCode(frame);
    int wanted = 1;
    void *extra = NULL;
    if ((PyObject *)code == self->watched) {
        if (self->watch_paused) { /* only calls by user code are checked (the module tree) */
            PyFrameObject *back = PyFrame_GetBack(frame);
            wanted = back != NULL && back->f_trace != NULL;
            Py_XDECREF(back);
        }
    } else if (extra_index >= 0 && _PyCode_GetExtra((PyObject *)code, extra_index, &extra) == 0 &&
               (uintptr_t)extra == self->generation) {
        wanted = 0; /* known library code: no lookup, no allocation */
    } else {
        PyObject *key = PyLong_FromVoidPtr(code);
        if (key == NULL) {
            wanted = -1;
        } else {
            PyObject *info = PyDict_GetItemWithError(self->codes, key); /* borrowed */
            Py_DECREF(key);
            if (info == Py_None) { /* the recorder never changes its mind about a code */
                wanted = 0;
                if (extra_index >= 0 &&
                    _PyCode_SetExtra((PyObject *)code, extra_index, (void *)self->generation) < 0) {
                    PyErr_Clear();
                }
            } else if (info == NULL && PyErr_Occurred()) {
                wanted = -1;
            }
        }
    }
    Py_DECREF(code);
    return wanted;
}

static int
gate_trace(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    Gate *self = (Gate *)obj;
    PyObject *callback;
    if (what == PyTrace_CALL) {
        int wanted = wants_calls(self, frame);
        if (wanted <= 0) {
            return wanted;
        }
        callback = self->global;
    } else {
        callback = frame->f_trace;
        if (callback == NULL) {
            return 0;
        }
    }
    PyObject *stack[3] = {(PyObject *)frame, event_names[what], arg != NULL ? arg : Py_None};
    Py_INCREF(callback);
    PyObject *result = PyObject_Vectorcall(callback, stack, 3, NULL);
    Py_DECREF(callback);
    if (result == NULL) {
        /* as sys.settrace's trampoline does when a trace function raises */
        PyEval_SetTrace(NULL, NULL);
        Py_CLEAR(frame->f_trace);
        return -1;
    }
    if (result != Py_None) {
        Py_XSETREF(frame->f_trace, result);
    } else {
        Py_DECREF(result);
        if (what == PyTrace_CALL) {
            Py_CLEAR(frame->f_trace);
        }
    }
    return 0;
}

static int
gate_profile(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    Gate *self = (Gate *)obj;
    PyThreadState *tstate = PyThreadState_Get();
    if (what == PyTrace_CALL) {
        if (tstate->c_tracefunc == NULL) {
            int wanted = wants_calls(self, frame);
            if (wanted <= 0) {
                return wanted;
            }
            PyEval_SetTrace(gate_trace, obj);
            if (gate_trace(obj, frame, PyTrace_CALL, Py_None) < 0) {
                return -1;
            }
            if (frame->f_trace == NULL) {
                PyEval_SetTrace(NULL, NULL);
            }
        } else if (frame->f_trace == NULL && trace_is_ours(tstate, self)) {
            PyEval_SetTrace(NULL, NULL);
        }
    } else if (what == PyTrace_RETURN) {
        PyFrameObject *back = PyFrame_GetBack(frame); /* NULL: back to the interpreter's caller */
        int wanted = back == NULL || back->f_trace != NULL;
        Py_XDECREF(back);
        if (tstate->c_tracefunc == NULL) {
            if (wanted) {
                PyEval_SetTrace(gate_trace, obj);
            }
        } else if (!wanted && trace_is_ours(tstate, self)) {
            PyEval_SetTrace(NULL, NULL);
        }
    }
    return 0;
}

/* Another profile function is about to replace ours (torch.profiler with with_stack=True,
   cProfile): were tracing off now, in library code, nothing would switch it on again for
   the user's next line. So it goes on for good: plain sys.settrace, in C, until the gate's
   profile function is back. The interpreter audits every PyEval_SetProfile, from C too. */
static int
gate_audit(const char *event, PyObject *args, void *data)
{
    if (active_gate == NULL || strcmp(event, "sys.setprofile") != 0) {
        return 0;
    }
    PyThreadState *tstate = PyThreadState_Get(); /* the thread whose profile changes */
    if (tstate->c_profilefunc == gate_profile && tstate->c_profileobj == (PyObject *)active_gate &&
        tstate->c_tracefunc == NULL) {
        PyEval_SetTrace(gate_trace, (PyObject *)active_gate);
    }
    return 0;
}

static int
gate_init(Gate *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"codes", "global_function", NULL};
    PyObject *codes, *global;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O:Gate", keywords, &PyDict_Type, &codes,
                                     &global)) {
        return -1;
    }
    Py_XSETREF(self->codes, Py_NewRef(codes));
    Py_XSETREF(self->global, Py_NewRef(global));
    Py_XSETREF(self->watched, Py_NewRef(Py_None));
    self->watch_paused = 0;
    self->generation = ++last_generation; /* marks of earlier gates no longer count */
    return 0;
}

static void
gate_dealloc(Gate *self)
{
    if (active_gate == self) {
        active_gate = NULL;
    }
    Py_XDECREF(self->codes);
    Py_XDECREF(self->global);
    Py_XDECREF(self->watched);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
gate_call(Gate *self, PyObject *args, PyObject *kwargs)
{
    /* sys.gettrace() returns the gate: calling it is calling the global function */
    return PyObject_Call(self->global, args, kwargs);
}

static PyObject *
gate_install(Gate *self, PyObject *unused)
{
    active_gate = self;
    PyEval_SetProfile(gate_profile, (PyObject *)self);
    PyEval_SetTrace(gate_trace, (PyObject *)self);
    Py_RETURN_NONE;
}

static PyObject *
gate_uninstall(Gate *self, PyObject *unused)
{
    PyThreadState *tstate = PyThreadState_Get();
    if (tstate->c_profilefunc == gate_profile && tstate->c_profileobj == (PyObject *)self) {
        PyEval_SetProfile(NULL, NULL);
    }
    if (trace_is_ours(tstate, self)) {
        PyEval_SetTrace(NULL, NULL);
    }
    if (active_gate == self) {
        active_gate = NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
gate_watch(Gate *self, PyObject *code)
{
    Py_XSETREF(self->watched, Py_NewRef(code));
    Py_RETURN_NONE;
}

static PyObject *
gate_pause_watch(Gate *self, PyObject *paused)
{
    int value = PyObject_IsTrue(paused);
    if (value < 0) {
        return NULL;
    }
    self->watch_paused = value;
    Py_RETURN_NONE;
}

static PyMethodDef gate_methods[] = {
    {"install", (PyCFunction)gate_install, METH_NOARGS,
     "Install the gate in this thread (its profile function, and tracing on)."},
    {"uninstall", (PyCFunction)gate_uninstall, METH_NOARGS,
     "Remove the gate's profile and trace functions from this thread, where they are ours."},
    {"watch", (PyCFunction)gate_watch, METH_O,
     "Calls of this (library) code go to the global function too."},
    {"pause_watch", (PyCFunction)gate_pause_watch, METH_O,
     "While true, only the watched code's calls made by user code go to the global function."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject GateType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shapelens.engine._library_gate.Gate",
    .tp_doc = "Gate(codes, global_function): sys.settrace that is off in library code.",
    .tp_basicsize = sizeof(Gate),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)gate_init,
    .tp_dealloc = (destructor)gate_dealloc,
    .tp_call = (ternaryfunc)gate_call,
    .tp_methods = gate_methods,
};

static struct PyModuleDef gate_module = {
    PyModuleDef_HEAD_INIT, "_library_gate", "sys.settrace that is off in library code.", -1,
};

PyMODINIT_FUNC
PyInit__library_gate(void)
{
    static const char *names[8] = {"call",   "exception", "line",     "return",
                                   "c_call", "c_exception", "c_return", "opcode"};
    for (int i = 0; i < 8; i++) {
        event_names[i] = PyUnicode_InternFromString(names[i]);
        if (event_names[i] == NULL) {
            return NULL;
        }
    }
    extra_index = _PyEval_RequestCodeExtraIndex(NULL);
    if (extra_index < 0) {
        PyErr_Clear(); /* every slot taken: codes are looked up each time */
    }
    if (PyType_Ready(&GateType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&gate_module);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "Gate", (PyObject *)&GateType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    /* Without the audit hook a displaced profile function would leave lines untraced:
       PROTECTED tells the tracer whether the gate may be used. */
    int protected = PySys_AddAuditHook(gate_audit, NULL) == 0;
    if (!protected) {
        PyErr_Clear();
    }
    if (PyModule_AddObjectRef(module, "PROTECTED", protected ? Py_True : Py_False) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
