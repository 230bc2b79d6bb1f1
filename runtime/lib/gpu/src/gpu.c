/* The host side of the gpu target (gpu.h): an OpenCL device, one kernel, N-deep
 * pipelined batches on three command queues. Written against the OpenCL 1.2 API of
 * the ICD loader, so that it runs on any OpenCL platform (PoCL, a GPU's driver). */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/gpu.h"

/* A slot's OpenCL objects: pinned host buffers (h_*, mapped at in/bytes/out) and the
 * device buffers, and the events of its batch in flight. */
struct slot_cl {
    cl_mem h_in, h_bytes, h_out, d_in, d_bytes, d_out;
    cl_event done;
    size_t nbytes;
};

struct ofl_gpu {
    cl_context ctx;
    cl_device_id dev;
    cl_program prog;
    cl_kernel kern;
    cl_command_queue q_in, q_run, q_out;
    struct ofl_gpu_spec spec;
    struct ofl_gpu_slot slot[OFL_GPU_MAX_DEPTH];
    struct slot_cl cl[OFL_GPU_MAX_DEPTH];
    cl_mem table[OFL_GPU_MAX_TABLES];
    char device[256];
    char err[OFL_GPU_ERRLEN];
};

static int fail(char *buf, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, OFL_GPU_ERRLEN, fmt, ap);
    va_end(ap);
    return rc;
}

/* The first device of `type` on any platform, its platform and device names in
 * `name`; 0 or -ENODEV. */
static int find_device(cl_device_type type, cl_device_id *dev, char *name, size_t len)
{
    cl_platform_id plats[16];
    cl_uint np = 0;
    if (clGetPlatformIDs(16, plats, &np) != CL_SUCCESS) return -ENODEV;
    for (cl_uint p = 0; p < np && p < 16; p++) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], type, 1, dev, &nd) != CL_SUCCESS || nd == 0) continue;
        char pn[96] = "", dn[128] = "";
        clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof pn - 1, pn, NULL);
        clGetDeviceInfo(*dev, CL_DEVICE_NAME, sizeof dn - 1, dn, NULL);
        snprintf(name, len, "%s: %s", pn, dn);
        return 0;
    }
    return -ENODEV;
}

static int pick_device(struct ofl_gpu *g, char *errbuf)
{
    const char *want = getenv("OFFLOW_OPENCL_DEVICE");
    int gpu_only = want && strcmp(want, "gpu") == 0;
    int cpu_only = want && strcmp(want, "cpu") == 0;
    if (want && *want && !gpu_only && !cpu_only)
        return fail(errbuf, -EINVAL, "OFFLOW_OPENCL_DEVICE=%s: expected gpu or cpu", want);
    if (!cpu_only && find_device(CL_DEVICE_TYPE_GPU, &g->dev, g->device, sizeof g->device) == 0)
        return 0;
    if (!gpu_only && find_device(cpu_only ? CL_DEVICE_TYPE_CPU : CL_DEVICE_TYPE_ALL, &g->dev,
                                 g->device, sizeof g->device) == 0)
        return 0;
    return fail(errbuf, -ENODEV, "no OpenCL %sdevice (is an ICD installed in "
                "/etc/OpenCL/vendors or named by OCL_ICD_VENDORS?)", gpu_only ? "GPU " : "");
}

enum diag { DIAG_NONE, DIAG_ERROR, DIAG_WARNING, DIAG_NOTE };

/* What the compiler log's line `line` (NUL-terminated) starts: `KIND: ...` (PoCL) or
 * `WHERE: KIND: ...` (clang, NVIDIA), or none (a source or caret line). */
static enum diag diag_of(const char *line)
{
    static const struct { const char *word; enum diag kind; } kinds[] = {
        {"fatal error:", DIAG_ERROR}, {"error:", DIAG_ERROR}, {"warning:", DIAG_WARNING},
        {"note:", DIAG_NOTE}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        const char *at = strstr(line, kinds[k].word);
        if (at && (at == line || (at >= line + 2 && at[-1] == ' ' && at[-2] == ':')))
            return kinds[k].kind;
    }
    return DIAG_NONE;
}

/* The log less its warnings, in place: each warning line and the lines that go with it
 * (its source and caret lines, its notes). offlow's own headers draw warnings from
 * some OpenCL compilers, and the message has room for OFL_GPU_ERRLEN bytes: the
 * errors, what the user must fix, come first. A log without an error is kept whole. */
static void drop_warnings(char *log)
{
    int errors = 0;
    for (char *line = log; line && *line && !errors;) {
        char *end = strchr(line, '\n');
        if (end) *end = '\0';
        errors = diag_of(line) == DIAG_ERROR;
        if (end) *end = '\n';
        line = end ? end + 1 : NULL;
    }
    if (!errors) return;
    char *out = log;
    int skipping = 0;
    for (char *line = log; *line;) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
        if (end) *end = '\0';
        enum diag d = diag_of(line);
        if (end) *end = '\n';
        if (d != DIAG_NONE) skipping = d == DIAG_WARNING || (skipping && d == DIAG_NOTE);
        if (!skipping) {
            memmove(out, line, len);
            out += len;
        }
        line += len;
    }
    *out = '\0';
}

static int build_kernel(struct ofl_gpu *g, char *errbuf)
{
    cl_int e;
    const char *src = g->spec.source;
    g->prog = clCreateProgramWithSource(g->ctx, 1, &src, NULL, &e);
    if (e != CL_SUCCESS) return fail(errbuf, -ENOMEM, "clCreateProgramWithSource: %d", e);
    e = clBuildProgram(g->prog, 1, &g->dev, g->spec.options ? g->spec.options : "", NULL, NULL);
    if (e != CL_SUCCESS) {
        size_t n = 0;
        clGetProgramBuildInfo(g->prog, g->dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &n);
        char *log = calloc(1, n + 1);
        if (log) {
            clGetProgramBuildInfo(g->prog, g->dev, CL_PROGRAM_BUILD_LOG, n, log, NULL);
            drop_warnings(log);  /* its errors are what matter: they must fit */
        }
        fail(errbuf, -EINVAL, "the OpenCL compiler refused the kernel (error %d):\n%s", e,
             log ? log : "");
        free(log);
        return -EINVAL;
    }
    g->kern = clCreateKernel(g->prog, g->spec.kernel, &e);
    if (e != CL_SUCCESS)
        return fail(errbuf, -EINVAL, "no kernel `%s` in the program (error %d)", g->spec.kernel, e);
    return 0;
}

/* A pinned host buffer of `len` bytes mapped at `*at`, and its device twin (of 8 bytes
 * when nothing crosses: `cross` = 0). */
static int pinned_pair(struct ofl_gpu *g, size_t len, int cross, cl_mem *host, cl_mem *dev,
                       void **at)
{
    cl_int e;
    if (len == 0) len = 8;
    *host = clCreateBuffer(g->ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, len, NULL, &e);
    if (e != CL_SUCCESS) return -ENOMEM;
    *dev = clCreateBuffer(g->ctx, CL_MEM_READ_WRITE, cross ? len : 8, NULL, &e);
    if (e != CL_SUCCESS) return -ENOMEM;
    *at = clEnqueueMapBuffer(g->q_in, *host, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, len, 0,
                             NULL, NULL, &e);
    return e == CL_SUCCESS ? 0 : -ENOMEM;
}

static int make_slots(struct ofl_gpu *g, char *errbuf)
{
    const struct ofl_gpu_spec *s = &g->spec;
    for (unsigned k = 0; k < s->depth; k++) {
        struct slot_cl *c = &g->cl[k];
        struct ofl_gpu_slot *sl = &g->slot[k];
        void *bytes = NULL;
        if (pinned_pair(g, s->batch * s->in_rec, 1, &c->h_in, &c->d_in, &sl->in) < 0 ||
            pinned_pair(g, s->batch * s->out_rec, 1, &c->h_out, &c->d_out, &sl->out) < 0 ||
            pinned_pair(g, s->bytes_cap, s->bytes_cross, &c->h_bytes, &c->d_bytes, &bytes) < 0)
            return fail(errbuf, -ENOMEM, "cannot allocate the buffers of batch slot %u "
                        "(batch %u, %zu bytes of packets)", k, s->batch, s->bytes_cap);
        sl->bytes = s->bytes_cap ? bytes : NULL;
        sl->priv_ = c;
    }
    return 0;
}

int ofl_gpu_open(struct ofl_gpu **out, const struct ofl_gpu_spec *spec, char *errbuf)
{
    *out = NULL;
    errbuf[0] = '\0';
    if (!spec->source || !spec->kernel || spec->batch < 1 || spec->batch > (1u << 20) ||
        spec->depth < 1 || spec->depth > OFL_GPU_MAX_DEPTH || !spec->in_rec || !spec->out_rec)
        return fail(errbuf, -EINVAL, "bad gpu spec: batch %u (1..%u), depth %u (1..%u)",
                    spec->batch, 1u << 20, spec->depth, OFL_GPU_MAX_DEPTH);
    struct ofl_gpu *g = calloc(1, sizeof *g);
    if (!g) return fail(errbuf, -ENOMEM, "out of memory");
    g->spec = *spec;
    int rc = pick_device(g, errbuf);
    cl_int e = CL_SUCCESS;
    if (rc == 0) {
        g->ctx = clCreateContext(NULL, 1, &g->dev, NULL, NULL, &e);
        if (e != CL_SUCCESS) rc = fail(errbuf, -ENODEV, "clCreateContext(%s): %d", g->device, e);
    }
    cl_command_queue *qs[3] = {&g->q_in, &g->q_run, &g->q_out};
    for (int i = 0; i < 3 && rc == 0; i++) {
        *qs[i] = clCreateCommandQueue(g->ctx, g->dev, 0, &e);
        if (e != CL_SUCCESS) rc = fail(errbuf, -ENODEV, "clCreateCommandQueue: %d", e);
    }
    if (rc == 0) rc = build_kernel(g, errbuf);
    if (rc == 0) rc = make_slots(g, errbuf);
    if (rc < 0) {
        ofl_gpu_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

void ofl_gpu_close(struct ofl_gpu *g)
{
    if (!g) return;
    for (unsigned k = 0; k < OFL_GPU_MAX_DEPTH; k++) {
        struct slot_cl *c = &g->cl[k];
        if (c->done) {
            clWaitForEvents(1, &c->done);
            clReleaseEvent(c->done);
        }
        cl_mem ms[6] = {c->h_in, c->h_bytes, c->h_out, c->d_in, c->d_bytes, c->d_out};
        for (int i = 0; i < 6; i++)
            if (ms[i]) clReleaseMemObject(ms[i]);
    }
    for (unsigned i = 0; i < OFL_GPU_MAX_TABLES; i++)
        if (g->table[i]) clReleaseMemObject(g->table[i]);
    if (g->kern) clReleaseKernel(g->kern);
    if (g->prog) clReleaseProgram(g->prog);
    cl_command_queue qs[3] = {g->q_in, g->q_run, g->q_out};
    for (int i = 0; i < 3; i++)
        if (qs[i]) clReleaseCommandQueue(qs[i]);
    if (g->ctx) clReleaseContext(g->ctx);
    free(g);
}

const char *ofl_gpu_device(const struct ofl_gpu *g)
{
    return g->device;
}

const char *ofl_gpu_error(const struct ofl_gpu *g)
{
    return g->err;
}

int ofl_gpu_table(struct ofl_gpu *g, unsigned arg, const void *data, size_t len)
{
    if (arg < OFL_GPU_ARG_TABLES || arg >= OFL_GPU_ARG_TABLES + OFL_GPU_MAX_TABLES)
        return fail(g->err, -EINVAL, "table argument %u out of range", arg);
    static const uint64_t zero = 0;
    cl_int e;
    cl_mem m = clCreateBuffer(g->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                              len ? len : sizeof zero, len ? (void *)(uintptr_t)data
                                                           : (void *)(uintptr_t)&zero, &e);
    if (e != CL_SUCCESS)
        return fail(g->err, -ENOMEM, "cannot copy a %zu-byte table to the device: %d", len, e);
    unsigned i = arg - OFL_GPU_ARG_TABLES;
    if (g->table[i]) clReleaseMemObject(g->table[i]);
    g->table[i] = m;
    e = clSetKernelArg(g->kern, arg, sizeof m, &m);
    if (e != CL_SUCCESS)
        return fail(g->err, -EIO, "kernel argument %u (a table): %d", arg, e);
    return 0;
}

struct ofl_gpu_slot *ofl_gpu_slot(struct ofl_gpu *g, unsigned k)
{
    return k < g->spec.depth ? &g->slot[k] : NULL;
}

/* Copy in, the kernel (when `run`), copy out: each step waits for the one before. */
static int submit(struct ofl_gpu *g, unsigned k, unsigned n, size_t nbytes, int run)
{
    const struct ofl_gpu_spec *s = &g->spec;
    if (k >= s->depth || n < 1 || n > s->batch || nbytes > s->bytes_cap ||
        (nbytes && !s->bytes_cross))
        return fail(g->err, -EINVAL, "submit: slot %u, %u packets, %zu bytes out of range", k, n,
                    nbytes);
    struct ofl_gpu_slot *sl = &g->slot[k];
    struct slot_cl *c = sl->priv_;
    if (sl->busy) return fail(g->err, -EBUSY, "submit: slot %u is in flight", k);
    cl_event in[2] = {NULL, NULL}, ran = NULL;
    cl_uint nin = 0;
    cl_int e = clEnqueueWriteBuffer(g->q_in, c->d_in, CL_FALSE, 0, n * s->in_rec, sl->in, 0,
                                    NULL, &in[nin++]);
    if (e == CL_SUCCESS && nbytes)
        e = clEnqueueWriteBuffer(g->q_in, c->d_bytes, CL_FALSE, 0, nbytes, sl->bytes, 0, NULL,
                                 &in[nin++]);
    cl_uint count = n;
    size_t global = n;
    if (e == CL_SUCCESS && run) {
        e = clSetKernelArg(g->kern, 0, sizeof c->d_in, &c->d_in);
        if (e == CL_SUCCESS) e = clSetKernelArg(g->kern, 1, sizeof c->d_bytes, &c->d_bytes);
        if (e == CL_SUCCESS) e = clSetKernelArg(g->kern, 2, sizeof c->d_out, &c->d_out);
        if (e == CL_SUCCESS) e = clSetKernelArg(g->kern, 3, sizeof count, &count);
        if (e == CL_SUCCESS)
            e = clEnqueueNDRangeKernel(g->q_run, g->kern, 1, NULL, &global, NULL, nin, in, &ran);
    } else if (e == CL_SUCCESS) {
        /* no kernel: the copy out waits for the copy in (a marker of both) */
        e = clEnqueueMarkerWithWaitList(g->q_out, nin, in, &ran);
    }
    cl_event back = NULL;
    if (e == CL_SUCCESS && nbytes)
        e = clEnqueueReadBuffer(g->q_out, c->d_bytes, CL_FALSE, 0, nbytes, sl->bytes, 1, &ran,
                                &back);
    if (e == CL_SUCCESS)
        e = clEnqueueReadBuffer(g->q_out, c->d_out, CL_FALSE, 0, n * s->out_rec, sl->out, 1,
                                &ran, &c->done);
    for (cl_uint i = 0; i < nin; i++)
        if (in[i]) clReleaseEvent(in[i]);
    if (ran) clReleaseEvent(ran);
    if (back) clReleaseEvent(back);  /* the out queue is in order: `done` comes after it */
    if (e != CL_SUCCESS) return fail(g->err, -EIO, "submitting a batch of %u: OpenCL error %d",
                                     n, e);
    clFlush(g->q_in);
    clFlush(g->q_run);
    clFlush(g->q_out);
    sl->n = n;
    sl->busy = 1;
    c->nbytes = nbytes;
    return 0;
}

int ofl_gpu_submit(struct ofl_gpu *g, unsigned k, unsigned n, size_t nbytes)
{
    return submit(g, k, n, nbytes, 1);
}

int ofl_gpu_submit_copy(struct ofl_gpu *g, unsigned k, unsigned n, size_t nbytes)
{
    return submit(g, k, n, nbytes, 0);
}

int ofl_gpu_poll(struct ofl_gpu *g, unsigned k, int wait)
{
    if (k >= g->spec.depth || !g->slot[k].busy)
        return fail(g->err, -EINVAL, "poll: slot %u is not in flight", k);
    struct slot_cl *c = g->slot[k].priv_;
    cl_int status = CL_QUEUED;
    if (wait) {
        cl_int e = clWaitForEvents(1, &c->done);
        status = e == CL_SUCCESS ? CL_COMPLETE : -1;
    } else if (clGetEventInfo(c->done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status,
                              NULL) != CL_SUCCESS) {
        status = -1;
    }
    if (status > CL_COMPLETE) return 0;   /* queued, submitted or running */
    clReleaseEvent(c->done);
    c->done = NULL;
    g->slot[k].busy = 0;
    if (status < 0)
        return fail(g->err, -EIO, "the device failed a batch of %u packets", g->slot[k].n);
    return 1;
}
