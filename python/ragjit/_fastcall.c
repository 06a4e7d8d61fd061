/* _fastcall.c — a planned call of a ragjit program on PyTorch CPU tensors, in C.
 *
 * Why: on a tiny program a call from Python is all overhead. The planned call of
 * _torch_io.Plan.call spends most of its time being Python (a frame per step, a ctypes
 * conversion per argument of the four or more C calls, tuple unpacking) rather than doing
 * anything, and what remains (PyTorch building the output's nested tensor) is fixed. This
 * module does the same steps with the same checks in C: the tensors' attributes are read
 * through the C API, libragjit is called directly and the interpreter lock is released only
 * around the run, as ctypes would.
 *
 * It is an optional helper of the Python package, never required: where it was not built (no
 * Python headers) or cannot be loaded, Plan.call is the path, and anything this one does not
 * take (any argument other than the plan's) returns NotImplemented for Python to take the
 * general way, which binds everything again and raises its error with its message. A run's
 * own failure is raised here through the context's check, as Plan.call does.
 *
 * It depends on neither PyTorch's headers nor libragjit's symbols: the tensors are Python
 * objects to it, and the library's functions are the addresses of the ones ctypes loaded
 * (Python passes them), so the package never holds two copies of libragjit. Their types are
 * checked against include/ragjit.h at compile time (_Generic, which references nothing).
 *
 * A Caller owns its bindings: a call takes one from its free list (under the interpreter lock)
 * and puts it back after, so calls on many threads at once each have their own. A binding
 * remembers the pointers and sizes last bound to it and binds again only what changed: a
 * binding records pointers, and every run checks what they point to (offsets included), so a
 * model's weights and an unchanged batch cost nothing after their first call.
 *
 * An output nested tensor is made by _torch_io._fast's steps (PyTorch's constructor's, with
 * the input's ragged size), in C: of the 5 us it takes, PyTorch's _make_wrapper_subclass is
 * most (its symbolic sizes call back into Python), and the Python call around it was a fifth.
 * Where those steps are not yet checked against the constructor (_torch_io._fast_ok), or the
 * kept size is for another ragged size, Plan._njt makes it. The steps' arguments come from
 * _torch_io (_wrapper_args; init_needed is _init_needed's twin), and a test compares this module's NJTs with the
 * general path's attribute by attribute. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "ragjit.h"

enum { MAX_PORTS = 32, POOL = 2 };

typedef rj_bind *(*bind_new_fn)(rj_program *);
typedef void (*bind_free_fn)(rj_bind *);
typedef rj_status (*bind_offsets_fn)(rj_bind *, rj_dim, int64_t, const int64_t *, const int64_t *);
typedef rj_status (*bind_input_fn)(rj_bind *, rj_node, const void *, int64_t);
typedef rj_status (*bind_output_fn)(rj_bind *, rj_node, void *, int64_t);
typedef rj_status (*run_fn)(rj_program *, rj_bind *);

#define SAME_TYPE(f, t) _Static_assert(_Generic(&f, t: 1, default: 0), #f " is not " #t)
SAME_TYPE(rj_bind_new, bind_new_fn);
SAME_TYPE(rj_bind_free, bind_free_fn);
SAME_TYPE(rj_bind_offsets, bind_offsets_fn);
SAME_TYPE(rj_bind_input, bind_input_fn);
SAME_TYPE(rj_bind_output, bind_output_fn);
SAME_TYPE(rj_program_run, run_fn);

/* an input of the plan: _torch_io.plan's tuple */
typedef struct {
    PyObject *name, *dtype; /* interned str; torch dtype */
    rj_node node;
    rj_dim sym;              /* ragged symbol; 0 for a dense input */
    int jagged, same, batch; /* same, batch: index of an earlier input, or -1 */
    int ndim;                /* dims of a dense input, inner dims of a jagged one */
    int64_t dims[RJ_MAX_RANK];
} in_spec;

/* an output of the plan */
typedef struct {
    PyObject *dtype, *shape; /* shape: a tuple (a jagged one's inner dims) */
    PyObject *wrap; /* a jagged one's _make_wrapper_subclass arguments (_torch_io._wrapper_args) */
    rj_node node;
    int src, like, nfill; /* src: the input over its symbol, or -1 */
    int fill[RJ_MAX_RANK][2]; /* (position in shape, input whose batch size it is) */
    int64_t itemsize;
} out_spec;

/* a binding and what was bound to it last (0 / -1: nothing yet) */
typedef struct {
    rj_bind *b;
    int64_t in_ptr[MAX_PORTS], in_n[MAX_PORTS];
    int64_t off_ptr[MAX_PORTS], off_n[MAX_PORTS], len_ptr[MAX_PORTS];
    int64_t out_ptr[MAX_PORTS], out_n[MAX_PORTS];
} slot;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    rj_program *prog;
    bind_new_fn bind_new;
    bind_free_fn bind_free;
    bind_offsets_fn bind_offsets;
    bind_input_fn bind_input;
    bind_output_fn bind_output;
    run_fn run;
    int nin, nout;
    in_spec in[MAX_PORTS];
    out_spec out[MAX_PORTS];
    slot *pool[POOL];
    int npool;
    /* Plan.shapes (shared, updated by Plan._njt), _torch_io's globals (for _fast_ok), the
     * nested tensor class, the dense tensor classes, torch.int64, torch.empty, torch.empty_like,
     * torch.Tensor._make_wrapper_subclass, NestedTensor.__init__, Plan._njt, the context's
     * check */
    PyObject *shapes, *globals, *nt, *dense, *int64, *empty, *empty_like, *mws, *init, *slow, *check;
} caller;

/* what a call gathered about one input */
typedef struct {
    PyObject *x, *v, *off, *len; /* the argument, its values, offsets, lengths (new refs) */
    int64_t batch, rows;
} seen;

static PyObject *S_shape, *S_dtype, *S_is_cpu, *S_is_contiguous, *S_data_ptr, *S_numel, *S_values,
    *S_offsets, *S_lengths, *S_ragged_idx, *S_size, *S_strides, *S_metadata_cache, *S_dynamo, *S_fast_ok,
    *S_max_seqlen, *S_min_seqlen, *S_dynamic, *S_kw_dtype, *S_kw_storage, *S_kw_init, *S_one, *S_zero;
static PyObject *trace; /* a list where binds are recorded (tests), or NULL */

/* ---- reading tensors ------------------------------------------------------------------- */

/* Whether r (a new reference, NULL on error) is True: 1, 0, or -1 on error; releases r. */
static int is_true(PyObject *r) {
    if (!r) return -1;
    int t = r == Py_True;
    Py_DECREF(r);
    return t;
}

/* o.name() as an int64; -1 with an exception set on error */
static int64_t method_int(PyObject *o, PyObject *name) {
    PyObject *r = PyObject_CallMethodNoArgs(o, name);
    if (!r) return -1;
    int64_t v = PyLong_AsLongLong(r);
    Py_DECREF(r);
    return v;
}

/* Whether t is a CPU tensor of dtype, contiguous: 1, 0, or -1 on error. */
static int plain(PyObject *t, PyObject *dtype) {
    PyObject *d = PyObject_GetAttr(t, S_dtype);
    if (!d) return -1;
    int ok = d == dtype;
    Py_DECREF(d);
    if (ok <= 0) return ok;
    ok = is_true(PyObject_GetAttr(t, S_is_cpu));
    if (ok <= 0) return ok;
    return is_true(PyObject_CallMethodNoArgs(t, S_is_contiguous));
}

/* Whether t.shape is (lead..., dims) with `lead` leading dims (0 or 1), whose first, if any,
 * goes to *first: 1, 0, or -1. */
static int shape_is(PyObject *t, int lead, const int64_t *dims, int ndim, int64_t *first) {
    PyObject *s = PyObject_GetAttr(t, S_shape);
    if (!s) return -1;
    int ok = PyTuple_Check(s) && PyTuple_GET_SIZE(s) == lead + ndim;
    for (int i = 0; ok > 0 && i < lead + ndim; i++) {
        int64_t v = PyLong_AsLongLong(PyTuple_GET_ITEM(s, i));
        if (v == -1 && PyErr_Occurred()) ok = -1;
        else if (i < lead) *first = v;
        else ok = v == dims[i - lead];
    }
    Py_DECREF(s);
    return ok;
}

static void record(const char *what, int64_t node, int64_t ptr) {
    if (!trace) return;
    PyObject *t = Py_BuildValue("(sLL)", what, (long long)node, (long long)ptr);
    if (!t || PyList_Append(trace, t)) PyErr_Clear();
    Py_XDECREF(t);
}

/* ---- a call ---------------------------------------------------------------------------- */

/* Binds the offsets (and lengths) of input i, the first over its symbol: 1 bound or unchanged,
 * 0 not what was planned, -1 error. */
static int bind_offsets(caller *c, slot *s, int i, seen *x, seen *all) {
    const in_spec *p = &c->in[i];
    static const int64_t none[1] = {0};
    int ok = plain(x->off, c->int64);
    if (ok <= 0) return ok;
    int64_t n = 0;
    if ((ok = shape_is(x->off, 1, none, 0, &n)) <= 0) return ok;
    x->batch = n - 1;
    if (x->batch < 0 || (p->batch >= 0 && all[p->batch].batch != x->batch)) return 0;
    int64_t lp = 0;
    if (x->len != Py_None) {
        if ((ok = plain(x->len, c->int64)) <= 0) return ok;
        int64_t m = 0;
        if ((ok = shape_is(x->len, 1, none, 0, &m)) <= 0) return ok;
        if (m != x->batch) return 0;
        if ((lp = method_int(x->len, S_data_ptr)) == -1 && PyErr_Occurred()) return -1;
    }
    int64_t op = method_int(x->off, S_data_ptr);
    if (op == -1 && PyErr_Occurred()) return -1;
    if (op == s->off_ptr[i] && x->batch == s->off_n[i] && lp == s->len_ptr[i]) return 1;
    if (c->bind_offsets(s->b, p->sym, x->batch, (const int64_t *)(intptr_t)op,
                        lp ? (const int64_t *)(intptr_t)lp : NULL))
        return 0;
    record("offsets", p->sym, op);
    s->off_ptr[i] = op, s->off_n[i] = x->batch, s->len_ptr[i] = lp;
    return 1;
}

/* Checks and binds input i: 1, 0 not what was planned, -1 error. */
static int bind_in(caller *c, slot *s, PyObject *inputs, int i, seen *all) {
    const in_spec *p = &c->in[i];
    seen *x = &all[i];
    PyObject *a = PyDict_GetItemWithError(inputs, p->name);
    if (!a) return PyErr_Occurred() ? -1 : 0;
    Py_INCREF(a);
    x->x = a;
    int ok;
    if (!p->jagged) {
        ok = 0;
        for (Py_ssize_t t = 0; t < PyTuple_GET_SIZE(c->dense); t++)
            ok |= PyTuple_GET_ITEM(c->dense, t) == (PyObject *)Py_TYPE(a);
        if (!ok) return 0;
        if ((ok = shape_is(a, 0, p->dims, p->ndim, NULL)) <= 0) return ok;
        Py_INCREF(a);
        x->v = a;
    } else {
        if ((PyObject *)Py_TYPE(a) != c->nt) return 0;
        PyObject *idx = PyObject_GetAttr(a, S_ragged_idx);
        if (!idx) return -1;
        ok = PyObject_RichCompareBool(idx, S_one, Py_EQ);
        Py_DECREF(idx);
        if (ok <= 0) return ok;
        if (!(x->v = PyObject_GetAttr(a, S_values)) || !(x->off = PyObject_GetAttr(a, S_offsets)) ||
            !(x->len = PyObject_GetAttr(a, S_lengths)))
            return -1;
        if ((ok = shape_is(x->v, 1, p->dims, p->ndim, &x->rows)) <= 0) return ok;
        if (p->same >= 0) {
            if (x->off != all[p->same].off || x->len != all[p->same].len) return 0;
            x->batch = all[p->same].batch;
        } else if ((ok = bind_offsets(c, s, i, x, all)) <= 0) {
            return ok;
        }
    }
    if ((ok = plain(x->v, p->dtype)) <= 0) return ok;
    int64_t vp = method_int(x->v, S_data_ptr), n;
    if ((vp == -1 && PyErr_Occurred()) || ((n = method_int(x->v, S_numel)) == -1 && PyErr_Occurred()))
        return -1;
    if (vp == s->in_ptr[i] && n == s->in_n[i]) return 1;
    if (c->bind_input(s->b, p->node, (const void *)(intptr_t)vp, n)) return 0;
    record("in", p->node, vp);
    s->in_ptr[i] = vp, s->in_n[i] = n;
    return 1;
}


/* The shape of output k's buffer: its planned shape, after the rows of its symbol's input
 * values for a jagged one, with batch sizes filled in (a new tuple, NULL on error). */
static PyObject *out_shape(const out_spec *p, const seen *all) {
    Py_ssize_t n = PyTuple_GET_SIZE(p->shape), lead = p->src >= 0;
    PyObject *shape = PyTuple_New(n + lead);
    if (!shape) return NULL;
    for (Py_ssize_t d = 0; d < n + lead; d++) {
        PyObject *v = d < lead ? PyLong_FromLongLong(all[p->src].rows) : PyTuple_GET_ITEM(p->shape, d - lead);
        if (!v) goto fail;
        if (d >= lead) Py_INCREF(v);
        PyTuple_SET_ITEM(shape, d, v);
    }
    for (int f = 0; f < p->nfill; f++) {
        PyObject *v = PyLong_FromLongLong(all[p->fill[f][1]].batch);
        if (!v) goto fail;
        PyObject *old = PyTuple_GET_ITEM(shape, p->fill[f][0]);
        PyTuple_SET_ITEM(shape, p->fill[f][0], v);
        Py_DECREF(old);
    }
    return shape;
fail:
    Py_DECREF(shape);
    return NULL;
}

/* A new buffer for output k, bound (NULL on error); *ok 0 where the bind failed; *numel its
 * elements. */
static PyObject *make_out(caller *c, slot *s, int k, const seen *all, int64_t *numel, int *ok) {
    const out_spec *p = &c->out[k];
    PyObject *buf;
    *ok = 1;
    if (p->like) {
        PyObject *args[1] = {all[p->src].v};
        buf = PyObject_Vectorcall(c->empty_like, args, 1, NULL);
    } else {
        PyObject *shape = out_shape(p, all);
        if (!shape) return NULL;
        PyObject *args[2] = {shape, p->dtype};
        buf = PyObject_Vectorcall(c->empty, args, 1, S_kw_dtype);
        Py_DECREF(shape);
    }
    if (!buf) return NULL;
    int64_t bp = method_int(buf, S_data_ptr), n = 0;
    if ((bp == -1 && PyErr_Occurred()) || ((n = method_int(buf, S_numel)) == -1 && PyErr_Occurred())) {
        Py_DECREF(buf);
        return NULL;
    }
    *numel = n;
    if (bp == s->out_ptr[k] && n == s->out_n[k]) return buf;
    if (c->bind_output(s->b, p->node, (void *)(intptr_t)bp, n)) {
        *ok = 0;
        return buf;
    }
    record("out", p->node, bp);
    s->out_ptr[k] = bp, s->out_n[k] = n;
    return buf;
}

/* _torch_io._init_needed in C: whether NestedTensor.__init__ would mark a cached max or min
 * length dynamic (a tensor whose dim 0 is not marked yet): 1, 0, or -1 on error. */
static int init_needed(PyObject *cache) {
    if (!PyDict_Check(cache)) return 1; /* __init__ itself, whatever it is */
    PyObject *keys[2] = {S_max_seqlen, S_min_seqlen};
    for (int k = 0; k < 2; k++) {
        PyObject *t = PyDict_GetItemWithError(cache, keys[k]);
        if (!t && PyErr_Occurred()) return -1;
        if (!t || t == Py_None) continue;
        PyObject *marked = PyObject_GetAttr(t, S_dynamic);
        if (!marked) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
            PyErr_Clear();
            return 1;
        }
        int in = PySequence_Contains(marked, S_zero);
        Py_DECREF(marked);
        if (in <= 0) return in < 0 ? -1 : 1;
    }
    return 0;
}

/* _torch_io._fast's steps, in C: NestedTensor.__new__'s with the size and strides given,
 * then NestedTensor.__init__'s assignments where it has nothing to mark dynamic in like's
 * metadata cache (init_needed), else __init__ itself (see _fast for why that is what the
 * constructor makes). */
static PyObject *fast_njt(caller *c, const out_spec *p, PyObject *values, int64_t nbytes, const seen *x,
                          PyObject *size, PyObject *strides) {
    enum { NARGS = 14 };
    if (!PyTuple_Check(p->wrap) || PyTuple_GET_SIZE(p->wrap) != NARGS) {
        PyErr_SetString(PyExc_ValueError, "Caller: an output's wrapper arguments are not 14");
        return NULL;
    }
    PyObject *args[NARGS + 1], *cache = NULL, *r;
    for (int i = 0; i < NARGS; i++) args[i] = PyTuple_GET_ITEM(p->wrap, i);
    args[1] = size, args[2] = strides;
    if (!(args[NARGS] = PyLong_FromLongLong(nbytes))) return NULL;
    r = PyObject_Vectorcall(c->mws, args, NARGS, S_kw_storage);
    Py_DECREF(args[NARGS]);
    if (!r || PyObject_SetAttr(r, S_ragged_idx, S_one) || PyObject_SetAttr(r, S_size, size) ||
        PyObject_SetAttr(r, S_strides, strides) || !(cache = PyObject_GetAttr(x->x, S_metadata_cache)))
        goto fail;
    int full = PyObject_IsTrue(cache);
    if (full > 0) full = init_needed(cache);
    if (full < 0) goto fail;
    if (full) {
        PyObject *init[5] = {r, values, x->off, x->len, cache}, *none;
        if (!(none = PyObject_Vectorcall(c->init, init, 3, S_kw_init))) goto fail;
        Py_DECREF(none);
    } else {
        PyObject *one = PySet_New(NULL), *zero = PySet_New(NULL); /* {1}, {0}: the dims marked */
        int bad = !one || !zero || PySet_Add(one, S_one) || PySet_Add(zero, S_zero) ||
                  PyObject_SetAttr(r, S_values, values) || PyObject_SetAttr(r, S_offsets, x->off) ||
                  PyObject_SetAttr(r, S_lengths, x->len) || PyObject_SetAttr(r, S_metadata_cache, cache) ||
                  PyObject_SetAttr(r, S_dynamo, one) || PyObject_SetAttr(values, S_dynamo, zero);
        Py_XDECREF(one);
        Py_XDECREF(zero);
        if (bad) goto fail;
    }
    Py_DECREF(cache);
    return r;
fail:
    Py_XDECREF(cache);
    Py_XDECREF(r);
    return NULL;
}

/* Output k (jagged, over input x's symbol) as a nested tensor over x's offsets: made as
 * _torch_io._fast makes it, with the size and strides Plan.shapes keeps, where they are for
 * x's ragged size and the fast construction was checked against PyTorch's constructor
 * (_fast_ok), else by Plan._njt (which keeps them for the next call). A new reference, NULL
 * on error. */
static PyObject *make_njt(caller *c, int k, PyObject *buf, int64_t numel, const seen *x) {
    if (k >= PyList_GET_SIZE(c->shapes)) {
        PyErr_SetString(PyExc_ValueError, "Caller: Plan.shapes lost its entries");
        return NULL;
    }
    PyObject *kept = PyList_GET_ITEM(c->shapes, k), *r = NULL; /* (ragged size, size, strides) */
    Py_INCREF(kept);
    PyObject *size = PyObject_GetAttr(x->x, S_size);
    if (!size) goto done;
    int same = PyTuple_Check(kept) && PyTuple_GET_SIZE(kept) == 3 && PyTuple_Check(size) &&
               PyTuple_GET_SIZE(size) > 1 && PyTuple_GET_ITEM(kept, 0) == PyTuple_GET_ITEM(size, 1);
    Py_DECREF(size);
    PyObject *checked = PyDict_GetItemWithError(c->globals, S_fast_ok);
    if (!checked && PyErr_Occurred()) goto done;
    if (same && checked == Py_True) {
        r = fast_njt(c, &c->out[k], buf, numel * c->out[k].itemsize, x, PyTuple_GET_ITEM(kept, 1),
                     PyTuple_GET_ITEM(kept, 2));
    } else {
        PyObject *i = PyLong_FromLong(k);
        if (!i) goto done;
        PyObject *args[3] = {i, buf, x->x};
        r = PyObject_Vectorcall(c->slow, args, 3, NULL);
        Py_DECREF(i);
    }
done:
    Py_DECREF(kept);
    return r;
}

/* A binding of the free list, or a new one (NULL where rj_bind_new failed: the general path
 * then gets its message). */
static slot *take(caller *c) {
    if (c->npool) return c->pool[--c->npool];
    slot *s = PyMem_Calloc(1, sizeof *s);
    if (!s) return NULL;
    for (int i = 0; i < MAX_PORTS; i++) s->in_n[i] = s->off_n[i] = s->out_n[i] = -1;
    if (!(s->b = c->bind_new(c->prog))) {
        PyMem_Free(s);
        return NULL;
    }
    return s;
}

static void give(caller *c, slot *s) {
    if (c->prog && c->npool < POOL) {
        c->pool[c->npool++] = s;
        return;
    }
    c->bind_free(s->b);
    PyMem_Free(s);
}

/* Binds, runs and returns the outputs: the output itself for one, else a tuple; 0 and *res
 * NULL where the call is not what was planned, -1 on error. */
static int call_in(caller *c, slot *s, PyObject *inputs, seen *all, PyObject **bufs, PyObject **res) {
    int64_t numel[MAX_PORTS];
    int ok = 1;
    for (int i = 0; i < c->nin; i++)
        if ((ok = bind_in(c, s, inputs, i, all)) <= 0) return ok;
    for (int k = 0; k < c->nout; k++) {
        if (!(bufs[k] = make_out(c, s, k, all, &numel[k], &ok))) return -1;
        if (!ok) return 0;
    }
    rj_status st;
    Py_BEGIN_ALLOW_THREADS
    st = c->run(c->prog, s->b);
    Py_END_ALLOW_THREADS
    if (st) { /* the context's check raises the run's error with its message */
        PyObject *code = PyLong_FromLong((long)st);
        PyObject *r = code ? PyObject_CallOneArg(c->check, code) : NULL;
        Py_XDECREF(code);
        if (!r) return -1;
        Py_DECREF(r);
    }
    for (int k = 0; k < c->nout; k++) {
        if (c->out[k].src < 0) continue;
        PyObject *o = make_njt(c, k, bufs[k], numel[k], &all[c->out[k].src]);
        if (!o) return -1;
        Py_DECREF(bufs[k]);
        bufs[k] = o;
    }
    if (c->nout == 1) {
        *res = bufs[0];
        bufs[0] = NULL;
        return 1;
    }
    if (!(*res = PyTuple_New(c->nout))) return -1;
    for (int k = 0; k < c->nout; k++) {
        PyTuple_SET_ITEM(*res, k, bufs[k]);
        bufs[k] = NULL;
    }
    return 1;
}

/* caller(inputs): the outputs, or NotImplemented where the call is not what was planned. */
static PyObject *caller_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    caller *c = (caller *)self;
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "ragjit._fastcall.Caller takes one dict of inputs");
        return NULL;
    }
    PyObject *inputs = args[0], *res = NULL;
    if (!c->prog || !c->check || PyDict_GET_SIZE(inputs) != c->nin) /* closed, or cleared */
        Py_RETURN_NOTIMPLEMENTED;
    slot *s = take(c);
    if (!s) Py_RETURN_NOTIMPLEMENTED;
    seen all[MAX_PORTS];
    PyObject *bufs[MAX_PORTS];
    memset(all, 0, sizeof(seen) * (size_t)c->nin);
    memset(bufs, 0, sizeof(PyObject *) * (size_t)c->nout);
    int ok = call_in(c, s, inputs, all, bufs, &res);
    for (int i = 0; i < c->nin; i++) {
        Py_XDECREF(all[i].x);
        Py_XDECREF(all[i].v);
        Py_XDECREF(all[i].off);
        Py_XDECREF(all[i].len);
    }
    for (int k = 0; k < c->nout; k++) Py_XDECREF(bufs[k]);
    give(c, s);
    if (ok < 0) return NULL;
    if (!ok) Py_RETURN_NOTIMPLEMENTED;
    return res;
}

/* ---- the Caller type ------------------------------------------------------------------- */

static int64_t as_int(PyObject *o, int64_t none) {
    return o == Py_None ? none : PyLong_AsLongLong(o);
}

/* dims of a tuple of ints into dims[RJ_MAX_RANK]: their count, -1 on error */
static int read_dims(PyObject *t, int64_t *dims) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) > RJ_MAX_RANK) {
        PyErr_SetString(PyExc_ValueError, "Caller: a shape is not a tuple of at most 8 ints");
        return -1;
    }
    int n = (int)PyTuple_GET_SIZE(t);
    for (int d = 0; d < n; d++)
        if ((dims[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(t, d))) == -1 && PyErr_Occurred()) return -1;
    return n;
}

/* an input of _torch_io.plan: (name, node, dtype, shape, sym, same, batch) */
static int read_in(in_spec *p, PyObject *t) {
    PyObject *name, *dtype, *shape, *sym, *same, *batch;
    int node;
    if (!PyArg_ParseTuple(t, "UiOOOOO", &name, &node, &dtype, &shape, &sym, &same, &batch)) return -1;
    Py_INCREF(name);
    PyUnicode_InternInPlace(&name);
    p->name = name;
    Py_INCREF(dtype);
    p->dtype = dtype;
    p->node = node;
    p->jagged = sym != Py_None;
    p->sym = as_int(sym, 0);
    p->same = (int)as_int(same, -1);
    p->batch = (int)as_int(batch, -1);
    p->ndim = read_dims(shape, p->dims);
    return PyErr_Occurred() || p->ndim < 0 ? -1 : 0;
}

/* an output of _torch_io.plan: (node, dtype, shape, src, like, fill, wrapper arguments) */
static int read_out(out_spec *p, PyObject *t, int nin) {
    PyObject *dtype, *shape, *src, *fill, *wrap;
    int node, like;
    int64_t dims[RJ_MAX_RANK];
    if (!PyArg_ParseTuple(t, "iOOOpOO", &node, &dtype, &shape, &src, &like, &fill, &wrap)) return -1;
    Py_INCREF(wrap);
    p->wrap = wrap;
    Py_INCREF(dtype);
    p->dtype = dtype;
    Py_INCREF(shape);
    p->shape = shape;
    p->node = node;
    p->like = like;
    p->src = (int)as_int(src, -1);
    if (read_dims(shape, dims) < 0 || PyErr_Occurred()) return -1;
    PyObject *size = PyObject_GetAttrString(dtype, "itemsize");
    p->itemsize = size ? PyLong_AsLongLong(size) : -1;
    Py_XDECREF(size);
    if (p->itemsize < 0) return -1;
    if (!PyTuple_Check(fill) || PyTuple_GET_SIZE(fill) > RJ_MAX_RANK) {
        PyErr_SetString(PyExc_ValueError, "Caller: an output's fill is not a tuple");
        return -1;
    }
    p->nfill = (int)PyTuple_GET_SIZE(fill);
    for (int f = 0; f < p->nfill; f++)
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(fill, f), "ii", &p->fill[f][0], &p->fill[f][1])) return -1;
    for (int f = 0; f < p->nfill; f++)
        if (p->fill[f][0] < 0 || p->fill[f][0] >= PyTuple_GET_SIZE(shape) || p->fill[f][1] < 0 ||
            p->fill[f][1] >= nin) {
            PyErr_SetString(PyExc_ValueError, "Caller: an output's fill is out of range");
            return -1;
        }
    if (p->src >= nin) {
        PyErr_SetString(PyExc_ValueError, "Caller: an output's source input is out of range");
        return -1;
    }
    return 0;
}

static int read_ports(caller *c, PyObject *ins, PyObject *outs) {
    if (!PyList_Check(ins) || !PyList_Check(outs) || PyList_GET_SIZE(ins) > MAX_PORTS ||
        PyList_GET_SIZE(outs) > MAX_PORTS || PyList_GET_SIZE(outs) < 1) {
        PyErr_SetString(PyExc_ValueError, "Caller: ins and outs are lists of 1 to 32 ports");
        return -1;
    }
    c->nin = (int)PyList_GET_SIZE(ins);
    for (int i = 0; i < c->nin; i++) {
        if (read_in(&c->in[i], PyList_GET_ITEM(ins, i))) return -1;
        if (c->in[i].same >= i || c->in[i].batch >= i) {
            PyErr_SetString(PyExc_ValueError, "Caller: an input refers to a later one");
            return -1;
        }
    }
    for (int k = 0; k < PyList_GET_SIZE(outs); k++) {
        c->nout = k + 1; /* what it holds is released by the dealloc, should it fail */
        if (read_out(&c->out[k], PyList_GET_ITEM(outs, k), c->nin)) return -1;
    }
    return 0;
}

static void close_pool(caller *c) {
    while (c->npool) {
        slot *s = c->pool[--c->npool];
        c->bind_free(s->b);
        PyMem_Free(s);
    }
    c->prog = NULL;
}

/* Calls f on every object a caller holds, stopping at the first nonzero (the GC's visit, or
 * a clear). The caller is in a cycle: Plan.fast is the caller, which holds Plan._njt. */
static int caller_objects(caller *c, int (*f)(PyObject **, void *), void *arg) {
    PyObject **objs[] = {&c->shapes, &c->globals, &c->nt, &c->dense, &c->int64, &c->empty,
                         &c->empty_like, &c->mws, &c->init, &c->slow, &c->check};
    int r = 0;
    for (size_t i = 0; !r && i < sizeof objs / sizeof *objs; i++) r = f(objs[i], arg);
    for (int i = 0; !r && i < c->nin; i++) r = f(&c->in[i].name, arg) || f(&c->in[i].dtype, arg);
    for (int k = 0; !r && k < c->nout; k++)
        r = f(&c->out[k].dtype, arg) || f(&c->out[k].shape, arg) || f(&c->out[k].wrap, arg);
    return r;
}

typedef struct {
    visitproc visit;
    void *arg;
} visiting;

static int visit_one(PyObject **o, void *arg) {
    visiting *v = arg;
    return *o ? v->visit(*o, v->arg) : 0;
}

static int clear_one(PyObject **o, void *arg) {
    Py_CLEAR(*o);
    return 0;
}

static int caller_traverse(PyObject *self, visitproc visit, void *arg) {
    visiting v = {visit, arg};
    return caller_objects((caller *)self, visit_one, &v);
}

static int caller_clear(PyObject *self) {
    return caller_objects((caller *)self, clear_one, NULL);
}

static void caller_dealloc(PyObject *self) {
    caller *c = (caller *)self;
    PyObject_GC_UnTrack(self);
    if (c->prog) close_pool(c);
    caller_clear(self);
    Py_TYPE(self)->tp_free(self);
}

/* Caller(program address, (rj_bind_new, rj_bind_free, rj_bind_offsets, rj_bind_input,
 * rj_bind_output, rj_program_run addresses), ins, outs, shapes, (globals of _torch_io, the
 * nested tensor class, the dense tensor classes, torch.int64, torch.empty, torch.empty_like,
 * torch.Tensor._make_wrapper_subclass, NestedTensor.__init__, Plan._njt, the context's
 * check)) */
static PyObject *caller_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    unsigned long long prog, f[6];
    PyObject *ins, *outs, *shapes, *env;
    if (kw && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Caller takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "K(KKKKKK)O!O!O!O!", &prog, &f[0], &f[1], &f[2], &f[3], &f[4], &f[5],
                          &PyList_Type, &ins, &PyList_Type, &outs, &PyList_Type, &shapes,
                          &PyTuple_Type, &env))
        return NULL;
    PyObject *o[10];
    if (!PyArg_ParseTuple(env, "O!OO!OOOOOOO", &PyDict_Type, &o[0], &o[1], &PyTuple_Type, &o[2], &o[3],
                          &o[4], &o[5], &o[6], &o[7], &o[8], &o[9]))
        return NULL;
    caller *c = (caller *)type->tp_alloc(type, 0);
    if (!c) return NULL;
    c->vectorcall = caller_call;
    PyObject **objs[] = {&c->globals, &c->nt, &c->dense, &c->int64, &c->empty, &c->empty_like,
                         &c->mws, &c->init, &c->slow, &c->check};
    for (size_t i = 0; i < sizeof objs / sizeof *objs; i++) {
        Py_INCREF(o[i]);
        *objs[i] = o[i];
    }
    Py_INCREF(shapes);
    c->shapes = shapes;
    if (read_ports(c, ins, outs) || PyList_GET_SIZE(shapes) != c->nout || !prog) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Caller: shapes is not one per output");
        Py_DECREF(c);
        return NULL;
    }
    for (int i = 0; i < 6; i++)
        if (!f[i]) {
            PyErr_SetString(PyExc_ValueError, "Caller: a function address is 0");
            Py_DECREF(c);
            return NULL;
        }
    /* the addresses ctypes gives of the functions it loaded */
    c->bind_new = (bind_new_fn)(uintptr_t)f[0];
    c->bind_free = (bind_free_fn)(uintptr_t)f[1];
    c->bind_offsets = (bind_offsets_fn)(uintptr_t)f[2];
    c->bind_input = (bind_input_fn)(uintptr_t)f[3];
    c->bind_output = (bind_output_fn)(uintptr_t)f[4];
    c->run = (run_fn)(uintptr_t)f[5];
    c->prog = (rj_program *)(uintptr_t)prog;
    return (PyObject *)c;
}

static PyObject *caller_close(PyObject *self, PyObject *unused) {
    close_pool((caller *)self);
    Py_RETURN_NONE;
}

static PyMethodDef caller_methods[] = {
    {"close", caller_close, METH_NOARGS,
     "Frees the bindings; later calls return NotImplemented. Call it before the program is freed."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject caller_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ragjit._fastcall.Caller",
    .tp_basicsize = sizeof(caller),
    .tp_dealloc = caller_dealloc,
    .tp_vectorcall_offset = offsetof(caller, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = caller_traverse,
    .tp_clear = caller_clear,
    .tp_doc = "A planned call of a program on PyTorch CPU tensors (see _torch_io.Plan).",
    .tp_methods = caller_methods,
    .tp_new = caller_new,
};

/* ---- the module ------------------------------------------------------------------------ */

static PyObject *set_trace(PyObject *mod, PyObject *list) {
    if (list != Py_None && !PyList_Check(list)) {
        PyErr_SetString(PyExc_TypeError, "set_trace takes a list or None");
        return NULL;
    }
    Py_XDECREF(trace);
    trace = list == Py_None ? NULL : list;
    Py_XINCREF(trace);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"set_trace", set_trace, METH_O,
     "set_trace(list or None): each bind a Caller makes is appended to the list as (what, "
     "node or symbol, address), what being 'in', 'offsets' or 'out' (for tests)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_fastcall", "ragjit's planned calls on PyTorch tensors, in C.", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fastcall(void);

PyMODINIT_FUNC PyInit__fastcall(void) {
    struct { PyObject **s; const char *text; } names[] = {
        {&S_shape, "shape"}, {&S_dtype, "dtype"}, {&S_is_cpu, "is_cpu"},
        {&S_is_contiguous, "is_contiguous"}, {&S_data_ptr, "data_ptr"}, {&S_numel, "numel"},
        {&S_values, "_values"}, {&S_offsets, "_offsets"}, {&S_lengths, "_lengths"},
        {&S_ragged_idx, "_ragged_idx"}, {&S_size, "_size"}, {&S_strides, "_strides"},
        {&S_metadata_cache, "_metadata_cache"}, {&S_dynamo, "_dynamo_propagated_dynamic_indices"},
        {&S_fast_ok, "_fast_ok"}, {&S_max_seqlen, "max_seqlen"}, {&S_min_seqlen, "min_seqlen"},
        {&S_dynamic, "_dynamo_dynamic_indices"},
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!*names[i].s && !(*names[i].s = PyUnicode_InternFromString(names[i].text))) return NULL;
    if (!S_kw_dtype && !(S_kw_dtype = Py_BuildValue("(O)", S_dtype))) return NULL;
    if (!S_kw_storage && !(S_kw_storage = Py_BuildValue("(s)", "storage_size"))) return NULL;
    if (!S_kw_init && !(S_kw_init = Py_BuildValue("(sO)", "lengths", S_metadata_cache))) return NULL;
    if (!S_one && !(S_one = PyLong_FromLong(1))) return NULL;
    if (!S_zero && !(S_zero = PyLong_FromLong(0))) return NULL;
    if (PyType_Ready(&caller_type) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    Py_INCREF(&caller_type);
    if (PyModule_AddObject(m, "Caller", (PyObject *)&caller_type) < 0) {
        Py_DECREF(&caller_type);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
