/* sys.settrace that is off while library code runs (CPython 3.11; built only there).
 *
 * Under sys.settrace the interpreter runs every Python function in its tracing mode,
 * checking for a new line at each instruction, and calls the trace function on every
 * call: torch's ~106 Python calls of a training step cost 1.19x with a trace function
 * that does nothing. A profile function in its place (to see calls and returns) still
 * keeps that mode on: 1.09-1.22x. The gate instead hooks the interpreter's frame
 * evaluation (PEP 523, as torch.compile does), which sees every Python frame start and
 * end with no tracing mode at all, and switches the trace function on exactly while a
 * frame that may have a local tracer runs: user code, unknown code, and the library
 * frames the module tree watches.
 *
 *   a frame starts:  it wants tracing (user, unknown or watched code) -> on while it
 *                    runs, off while library code runs; the trace function then sees the
 *                    frame's own call, lines, return and exceptions as sys.settrace would.
 *   it ends (returns, yields or unwinds): the state before it is restored.
 *
 * The interpreter does not inline Python calls while a hook is set: each costs some C
 * stack (about 0.5 KB). Past MAX_DEPTH frames nested in the hook, which only a program
 * that raised the recursion limit reaches, the gate falls back to plain sys.settrace for
 * the rest of the run (tracing on, the hook unlinked), so deep recursion cannot overflow
 * the C stack.
 *
 * A trace or profile function that is not ours (pdb, a debugger attached later,
 * torch.profiler) is never touched; other threads are left alone (they get plain
 * sys.settrace). Events are handed to the Python functions as sys.settrace would, without
 * building the frame's locals dict first (the recorder reads frame.f_locals only on the
 * statements it samples).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030C0000
#error "the gate reads CPython 3.11's frames: setup.py builds it for 3.11 only"
#endif

/* The CPython this module was compiled for (PY_VERSION_HEX; tests define another to build a
 * mismatched gate). It loads only there: the frame layout below is checked at load, but a
 * wrong layout may crash that very check, so another interpreter, even another 3.11.x,
 * never gets that far. */
#ifndef GATE_BUILT_FOR
#define GATE_BUILT_FOR PY_VERSION_HEX
#endif

/* The leading fields of CPython 3.11's frames, as Include/internal/pycore_frame.h declares
 * them. Its public headers keep both structs opaque, and no public function reads the frame
 * a PEP 523 hook is handed (3.12 added PyUnstable_InterpreterFrame_GetCode): the hook needs
 * the frame's code and caller, and the trace function a frame's f_trace on every event. The
 * internal header itself would need Py_BUILD_CORE, so the layout is copied here instead and
 * checked against the running interpreter when the module loads (layout_checked): a layout
 * that differs means no gate (plain sys.settrace), never a wrong read. */
typedef struct InterpreterFrame {
    PyObject *f_func;
    PyObject *f_globals;
    PyObject *f_builtins;
    PyObject *f_locals;
    PyCodeObject *f_code;
    PyFrameObject *frame_obj;
    struct InterpreterFrame *previous;
} InterpreterFrame; /* _PyInterpreterFrame */

typedef struct {
    PyObject_HEAD
    PyFrameObject *f_back;
    InterpreterFrame *f_frame;
    PyObject *f_trace;
} FrameObject; /* struct _frame, PyFrameObject */

#define FRAME(frame) ((FrameObject *)(frame))
#define CURRENT_FRAME(tstate) ((InterpreterFrame *)(tstate)->cframe->current_frame)

typedef struct {
    PyObject_HEAD
    PyObject *codes;        /* id(code) -> what the recorder knows, None for library code */
    PyObject *global;       /* the Python global trace function */
    PyObject *watched;      /* library code whose calls the global function still sees */
    int watch_paused;       /* then only its calls made by a frame with a local tracer */
    uintptr_t generation;   /* this gate's mark in a library code's co_extra slot */
    PyThreadState *thread;  /* the thread it traces (set by install) */
    int plain;              /* fell back to plain sys.settrace (deep recursion) */
} Gate;

#define MAX_DEPTH 1200 /* frames nested in the hook; the default recursion limit is 1000 */

static PyObject *event_names[8];
static Py_ssize_t extra_index = -1; /* our co_extra slot: "library code for gate N" */
static uintptr_t last_generation = 0;
static Gate *active_gate = NULL;    /* strong reference while installed */
static _PyFrameEvalFunction next_eval = NULL; /* what evaluated frames before our hook */
static int linked = 0;              /* our hook is in the interpreter's chain */
static int depth = 0;               /* frames of the traced thread nested in the hook */

static int gate_trace(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg);

/* The lines of one code object, from its first: a line is off while its mark is the epoch. */
typedef struct {
    int first;
    int size;
    uint32_t mark[];
} LineMarks;

static Py_ssize_t marks_index = -1; /* our co_extra slot for LineMarks */
static uint32_t off_epoch = 1;      /* marks start at 0: on */

static void
free_marks(void *marks)
{
    PyMem_Free(marks);
}

/* The frame is on a line switched off: its event goes nowhere. */
static inline int
line_is_off(FrameObject *f)
{
    void *extra = NULL;
    if (marks_index < 0 ||
        _PyCode_GetExtra((PyObject *)f->f_frame->f_code, marks_index, &extra) < 0) {
        PyErr_Clear();
        return 0;
    }
    if (extra == NULL) {
        return 0;
    }
    LineMarks *marks = (LineMarks *)extra;
    int at = PyFrame_GetLineNumber((PyFrameObject *)f) - marks->first;
    return at >= 0 && at < marks->size && marks->mark[at] == off_epoch;
}

static inline int
trace_is_ours(PyThreadState *tstate, Gate *self)
{
    return tstate->c_tracefunc == gate_trace && tstate->c_traceobj == (PyObject *)self;
}

/* Tracing on (the gate's trace function) or off in this thread; the profile function,
   whoever's, stays. The cost of sys.settrace without its audit event and allocations. */
static inline void
set_tracing(PyThreadState *tstate, Gate *on)
{
    PyObject *old = tstate->c_traceobj;
    if (on != NULL) {
        Py_INCREF(on);
        tstate->c_tracefunc = gate_trace;
        tstate->c_traceobj = (PyObject *)on;
    } else {
        tstate->c_tracefunc = NULL;
        tstate->c_traceobj = NULL;
    }
    Py_XDECREF(old);
    /* what CPython's internal _PyThreadState_UpdateTracingState does, on public fields */
    int use_tracing = tstate->tracing == 0 &&
                      (tstate->c_tracefunc != NULL || tstate->c_profilefunc != NULL);
    tstate->cframe->use_tracing = use_tracing ? 255 : 0;
}

/* A frame that will be (or, from the trace function, was just) called by `caller`. */
static inline int
has_local_tracer(InterpreterFrame *caller)
{
    return caller != NULL && caller->frame_obj != NULL && FRAME(caller->frame_obj)->f_trace != NULL;
}

/* 1: frames of the code want tracing (their calls go to the global function); 0: library
   code; -1: error. `caller` is the frame that calls it. */
static int
wants_tracing(Gate *self, PyCodeObject *code, InterpreterFrame *caller)
{
    void *extra = NULL;
    if ((PyObject *)code == self->watched) {
        /* paused: only calls by user code are checked (the module tree) */
        return !self->watch_paused || has_local_tracer(caller);
    }
    if (extra_index >= 0 && _PyCode_GetExtra((PyObject *)code, extra_index, &extra) == 0 &&
        (uintptr_t)extra == self->generation) {
        return 0; /* known library code: no lookup, no allocation */
    }
    PyObject *key = PyLong_FromVoidPtr(code);
    if (key == NULL) {
        return -1;
    }
    PyObject *info = PyDict_GetItemWithError(self->codes, key); /* borrowed */
    Py_DECREF(key);
    if (info == Py_None) { /* the recorder never changes its mind about a code */
        if (extra_index >= 0 &&
            _PyCode_SetExtra((PyObject *)code, extra_index, (void *)self->generation) < 0) {
            PyErr_Clear();
        }
        return 0;
    }
    return info == NULL && PyErr_Occurred() ? -1 : 1;
}

static PyObject *gate_eval(PyThreadState *tstate, struct _PyInterpreterFrame *frame, int throwflag);

static void
unlink_hook(PyInterpreterState *interp)
{
    if (linked && _PyInterpreterState_GetEvalFrameFunc(interp) == gate_eval) {
        _PyInterpreterState_SetEvalFrameFunc(interp, next_eval);
        linked = 0;
    } /* else a hook in front of ours calls it (torch.compile's): it stays, passing through */
}

static int
gate_trace(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    Gate *self = (Gate *)obj;
    FrameObject *f = FRAME(frame);
    PyObject *callback;
    if (what == PyTrace_CALL) {
        int wanted = wants_tracing(self, f->f_frame->f_code, f->f_frame->previous);
        if (wanted < 0) {
            return -1;
        }
        callback = wanted ? self->global : NULL;
    } else {
        callback = f->f_trace;
        if (what == PyTrace_LINE && callback != NULL && line_is_off(f)) {
            return 0;
        }
    }
    if (callback == NULL) {
        return 0;
    }
    PyObject *stack[3] = {(PyObject *)frame, event_names[what], arg != NULL ? arg : Py_None};
    Py_INCREF(callback);
    Py_INCREF(self); /* the callback may remove the gate and drop the last reference to it */
    PyObject *result = PyObject_Vectorcall(callback, stack, 3, NULL);
    Py_DECREF(callback);
    int failed = result == NULL;
    if (failed) {
        /* As sys.settrace's trampoline does when a trace function raises: tracing off in
           this thread until it is set again. The gate goes too (as remove()), or its hook
           would turn tracing back on in the next frame that wants it. */
        if (active_gate == self) {
            Py_CLEAR(active_gate);
            unlink_hook(PyThreadState_Get()->interp);
        }
        PyEval_SetTrace(NULL, NULL);
        Py_CLEAR(f->f_trace);
    } else if (result != Py_None) {
        Py_XSETREF(f->f_trace, result);
    } else {
        Py_DECREF(result);
        if (what == PyTrace_CALL) {
            Py_CLEAR(f->f_trace);
        }
    }
    Py_DECREF(self);
    return failed ? -1 : 0;
}

/* Plain sys.settrace from now on (calls are inlined again); frames still inside the hook
   leave the state as it is when they end. */
static void
fall_back(Gate *self, PyThreadState *tstate)
{
    self->plain = 1;
    set_tracing(tstate, self);
    Py_CLEAR(active_gate);
    unlink_hook(tstate->interp);
}

static PyObject *
evaluate(Gate *self, PyThreadState *tstate, struct _PyInterpreterFrame *frame, int throwflag);

/* The frame evaluation hook: tracing on while frames that want it run, off while library
   code runs, restored when the frame ends (its caller's state). */
static PyObject *
gate_eval(PyThreadState *tstate, struct _PyInterpreterFrame *frame, int throwflag)
{
    Gate *self = active_gate;
    if (self == NULL || tstate != self->thread || tstate->tracing) {
        return next_eval(tstate, frame, throwflag);
    }
    if (!trace_is_ours(tstate, self) && tstate->c_tracefunc != NULL) {
        return next_eval(tstate, frame, throwflag); /* someone else's tracer: never touched */
    }
    if (depth >= MAX_DEPTH) {
        fall_back(self, tstate);
        return next_eval(tstate, frame, throwflag);
    }
    /* Held while the frame runs: its code may remove the gate and drop the last reference
       to it, and the frame's end still compares it with the active gate. */
    Py_INCREF(self);
    depth++;
    PyObject *result = evaluate(self, tstate, frame, throwflag);
    depth--;
    Py_DECREF(self);
    return result;
}

static PyObject *
evaluate(Gate *self, PyThreadState *tstate, struct _PyInterpreterFrame *frame, int throwflag)
{
    _PyFrameEvalFunction next = next_eval;
    int tracing = trace_is_ours(tstate, self);
    PyObject *type = NULL, *value = NULL, *traceback = NULL;
    if (throwflag) { /* gen.throw(): the exception to raise in the frame is pending */
        PyErr_Fetch(&type, &value, &traceback);
    }
    int wanted = wants_tracing(self, ((InterpreterFrame *)frame)->f_code, CURRENT_FRAME(tstate));
    if (wanted < 0) {
        PyErr_Clear(); /* unknown: traced (the global function decides) */
        wanted = 1;
    }
    if (throwflag) {
        PyErr_Restore(type, value, traceback);
    }
    if (wanted == tracing) {
        return next(tstate, frame, throwflag);
    }
    set_tracing(tstate, wanted ? self : NULL);
    PyObject *result = next(tstate, frame, throwflag);
    /* as before the frame, unless the gate went or another tracer came meanwhile */
    if (active_gate == self &&
        (tstate->c_tracefunc == NULL || trace_is_ours(tstate, self))) {
        set_tracing(tstate, tracing ? self : NULL);
    }
    return result;
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
    self->thread = NULL;
    self->plain = 0;
    self->generation = ++last_generation; /* marks of earlier gates no longer count */
    off_epoch++; /* nor lines they switched off */
    return 0;
}

static void
gate_dealloc(Gate *self)
{
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
    PyThreadState *tstate = PyThreadState_Get();
    if (self->plain) {
        set_tracing(tstate, self);
        Py_RETURN_NONE;
    }
    if (!linked) {
        /* torch.compile links its own hook in front of ours later, and calls ours */
        next_eval = _PyInterpreterState_GetEvalFrameFunc(tstate->interp);
        _PyInterpreterState_SetEvalFrameFunc(tstate->interp, gate_eval);
        linked = 1;
    }
    self->thread = tstate;
    Py_XSETREF(active_gate, (Gate *)Py_NewRef(self));
    set_tracing(tstate, self); /* the frame that installs it is user code */
    Py_RETURN_NONE;
}

static void
deactivate(Gate *self)
{
    PyThreadState *tstate = PyThreadState_Get();
    if (trace_is_ours(tstate, self)) {
        set_tracing(tstate, NULL);
    }
    if (active_gate == self) {
        Py_CLEAR(active_gate); /* the hook, still linked, passes frames through */
    }
}

static PyObject *
gate_uninstall(Gate *self, PyObject *unused)
{
    deactivate(self);
    Py_RETURN_NONE;
}

static PyObject *
gate_remove(Gate *self, PyObject *unused)
{
    deactivate(self);
    if (active_gate == NULL) {
        unlink_hook(PyThreadState_Get()->interp);
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

/* The marks of `code`'s lines, made on first use (NULL: error set). They are never
   replaced, so their size covers every line the code has. */
static LineMarks *
marks_of(PyObject *code)
{
    void *extra = NULL;
    if (_PyCode_GetExtra(code, marks_index, &extra) < 0) {
        return NULL;
    }
    if (extra != NULL) {
        return (LineMarks *)extra;
    }
    int first = ((PyCodeObject *)code)->co_firstlineno, last = first;
    PyObject *lines = PyObject_CallMethod(code, "co_lines", NULL);
    PyObject *item;
    PyObject *iterator = lines == NULL ? NULL : PyObject_GetIter(lines);
    Py_XDECREF(lines);
    if (iterator == NULL) {
        return NULL;
    }
    while ((item = PyIter_Next(iterator)) != NULL) {
        PyObject *line = PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 3
                             ? PyTuple_GET_ITEM(item, 2) : Py_None;
        if (line != Py_None) {
            long value = PyLong_AsLong(line);
            if (value > last && value < first + (1 << 20)) {
                last = (int)value;
            }
        }
        Py_DECREF(item);
    }
    Py_DECREF(iterator);
    if (PyErr_Occurred()) {
        return NULL;
    }
    int size = last - first + 1;
    LineMarks *marks = PyMem_Calloc(1, sizeof(LineMarks) + (size_t)size * sizeof(uint32_t));
    if (marks == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    marks->first = first;
    marks->size = size;
    if (_PyCode_SetExtra(code, marks_index, marks) < 0) {
        PyMem_Free(marks);
        return NULL;
    }
    return marks;
}

static PyObject *
gate_switch_off(Gate *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyCode_Check(args[0]) || !PyLong_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "switch_off(code, line)");
        return NULL;
    }
    if (marks_index < 0) {
        Py_RETURN_FALSE; /* no slot: lines stay on */
    }
    long line = PyLong_AsLong(args[1]);
    if (line == -1 && PyErr_Occurred()) {
        return NULL;
    }
    LineMarks *marks = marks_of(args[0]);
    if (marks == NULL) {
        return NULL;
    }
    long at = line - marks->first;
    if (at < 0 || at >= marks->size) {
        Py_RETURN_FALSE;
    }
    marks->mark[at] = off_epoch;
    Py_RETURN_TRUE;
}

static PyObject *
gate_switch_all_on(Gate *self, PyObject *unused)
{
    off_epoch++;
    Py_RETURN_NONE;
}

static PyMethodDef gate_methods[] = {
    {"switch_off", (PyCFunction)(void (*)(void))gate_switch_off, METH_FASTCALL,
     "switch_off(code, line): drop the line's events until switch_all_on(); False if it "
     "cannot (not a line of the code)."},
    {"switch_all_on", (PyCFunction)gate_switch_all_on, METH_NOARGS,
     "Every line switched off gets its events again."},
    {"install", (PyCFunction)gate_install, METH_NOARGS,
     "Install the gate for this thread (its frame hook, and tracing on)."},
    {"uninstall", (PyCFunction)gate_uninstall, METH_NOARGS,
     "Tracing off where it is ours, until install(); the frame hook passes frames through."},
    {"remove", (PyCFunction)gate_remove, METH_NOARGS,
     "uninstall(), and the interpreter evaluates frames as before the first install()."},
    {"watch", (PyCFunction)gate_watch, METH_O,
     "Calls of this (library) code go to the global function too."},
    {"pause_watch", (PyCFunction)gate_pause_watch, METH_O,
     "While true, only the watched code's calls made by user code go to the global function."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject GateType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shapelens.engine.backends._library_gate.Gate",
    .tp_doc = "Gate(codes, global_function): sys.settrace that is off in library code.",
    .tp_basicsize = sizeof(Gate),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)gate_init,
    .tp_dealloc = (destructor)gate_dealloc,
    .tp_call = (ternaryfunc)gate_call,
    .tp_methods = gate_methods,
};

static PyObject *
hooked(PyObject *module, PyObject *unused)
{
    return PyBool_FromLong(linked);
}

static PyMethodDef module_methods[] = {
    {"hooked", hooked, METH_NOARGS,
     "Whether the interpreter's frame evaluation goes through the gate's hook."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef gate_module = {
    PyModuleDef_HEAD_INIT, "_library_gate", "sys.settrace that is off in library code.", -1,
    module_methods,
};

/* Whether the copied layouts are this interpreter's: read through them, the frame that
   imports this module says what the public API says of it. 1: yes, 0: no, -1: error. */
static int
layout_checked(void)
{
    PyFrameObject *frame = PyEval_GetFrame(); /* borrowed */
    if (frame == NULL) {
        return 0;
    }
    InterpreterFrame *inner = FRAME(frame)->f_frame;
    PyCodeObject *code = PyFrame_GetCode(frame);
    PyFrameObject *back = PyFrame_GetBack(frame);
    int same = inner == CURRENT_FRAME(PyThreadState_Get()) && inner->frame_obj == frame &&
               inner->f_code == code &&
               inner->previous == (back != NULL ? FRAME(back)->f_frame : NULL);
    Py_DECREF(code);
    Py_XDECREF(back);
    PyObject *trace = PyObject_GetAttrString((PyObject *)frame, "f_trace");
    if (trace == NULL) {
        return -1;
    }
    /* f_trace set through the public attribute, read through the copy, then restored */
    int failed = PyObject_SetAttrString((PyObject *)frame, "f_trace", Py_Ellipsis) < 0;
    same = same && !failed && FRAME(frame)->f_trace == Py_Ellipsis;
    failed = PyObject_SetAttrString((PyObject *)frame, "f_trace", trace) < 0 || failed;
    Py_DECREF(trace);
    return failed ? -1 : same;
}

PyMODINIT_FUNC
PyInit__library_gate(void)
{
    if (Py_Version != GATE_BUILT_FOR) {
        PyErr_Format(PyExc_ImportError, "the gate was built for CPython %d.%d.%d, this is %d.%d.%d",
                     (GATE_BUILT_FOR >> 24) & 0xFF, (GATE_BUILT_FOR >> 16) & 0xFF,
                     (GATE_BUILT_FOR >> 8) & 0xFF, (int)(Py_Version >> 24) & 0xFF,
                     (int)(Py_Version >> 16) & 0xFF, (int)(Py_Version >> 8) & 0xFF);
        return NULL;
    }
    static const char *names[8] = {"call",   "exception", "line",     "return",
                                   "c_call", "c_exception", "c_return", "opcode"};
    for (int i = 0; i < 8; i++) {
        event_names[i] = PyUnicode_InternFromString(names[i]);
        if (event_names[i] == NULL) {
            return NULL;
        }
    }
    int checked = layout_checked();
    if (checked <= 0) {
        if (checked == 0) {
            PyErr_SetString(PyExc_ImportError,
                            "the gate does not know this interpreter's frame layout");
        }
        return NULL;
    }
    extra_index = _PyEval_RequestCodeExtraIndex(NULL);
    if (extra_index < 0) {
        PyErr_Clear(); /* every slot taken: codes are looked up each time */
    }
    marks_index = _PyEval_RequestCodeExtraIndex(free_marks);
    if (marks_index < 0) {
        PyErr_Clear(); /* every slot taken: no line is switched off */
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
    return module;
}
