/*
 * TEST DOUBLE -- NOT A CUDA DRIVER.
 *
 * A simulated CUDA driver (`libcuda.so.1`) for freight's CI: it implements
 * exactly the driver functions freight calls (`FUNCTIONS` in
 * crates/freight-backend/src/cuda/driver.rs), with the semantics of the real
 * driver where they matter to freight, so that the `cuda` and `cuda-host`
 * backends' logic (descriptors, IPC open and cache, events, stream-order
 * calls, the release thread, copies, host registration) runs across real
 * processes on machines without a GPU. tests/sim_cuda.rs builds it and puts
 * it first on LD_LIBRARY_PATH of the processes it spawns.
 *
 * What it cannot check: real stream ordering (every event completes when
 * recorded, every copy is synchronous), memory placement (device memory is
 * host shared memory, a device pointer is a host address), peer access,
 * real error codes beyond those documented below. The run on a real GPU
 * (the same tests without LD_LIBRARY_PATH) remains the final check.
 *
 * Model:
 *   - FREIGHT_SIM_CUDA_DEVICES devices (default 1, at most 8), UUID from
 *     FREIGHT_SIM_CUDA_UUID (32 hex digits; device i > 0 gets its last byte
 *     plus i) or a fixed one; one primary context per device, destroyed with
 *     everything in it when its retain count drops to 0.
 *   - The current context is per thread (cuCtxSetCurrent); calls that need
 *     one fail with CUDA_ERROR_INVALID_CONTEXT without it.
 *   - "Device memory" (cuMemAlloc) is a POSIX shm object
 *     /freight-sim-cuda-<pid>-<id> mapped in the process; the device pointer
 *     is the mapping's address. Its IPC handle names the object and size;
 *     cuIpcOpenMemHandle maps it in another process (reference counted per
 *     context, as the real driver does) and fails with
 *     CUDA_ERROR_INVALID_CONTEXT in the process that allocated it, as the
 *     real driver does. Objects a process still has at exit are unlinked.
 *   - Events complete when recorded. IPC event handles only for events
 *     created with CU_EVENT_INTERPROCESS (which needs
 *     CU_EVENT_DISABLE_TIMING, as documented).
 *   - Copies are memcpy, bounds-checked against the known ranges
 *     (allocations, IPC openings, registered host memory).
 *   - cuMemHostRegister records the range, refusing overlaps with
 *     CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, and pages this process
 *     cannot write (per /proc/self/maps) without CU_MEMHOSTREGISTER_READ_ONLY
 *     with CUDA_ERROR_INVALID_VALUE, as the real driver does (seen on an
 *     H200, driver 580); the device pointer of registered host memory is its
 *     host address. The real driver keeps registered memory mapped for the
 *     GPU at its address until it is unregistered, and an allocation the
 *     kernel later places at that address, once the process unmapped it,
 *     fails with CUDA_ERROR_ALREADY_MAPPED (seen on an H200): cuMemAlloc
 *     fails so whenever registered memory is no longer mapped, wherever the
 *     kernel would place the new allocation.
 *   - FREIGHT_SIM_CUDA_TRACE=1: every failed call is written to stderr as
 *     "freight-sim-cuda: <function> failed: <CUDA_ERROR_...>", and at exit
 *     (or unload) what is still live ("freight-sim-cuda: at exit: ...");
 *     FREIGHT_SIM_CUDA_TRACE=2: every call too.
 *
 * Build: cc -std=c11 -Wall -Wextra -Werror -fPIC -shared -o libcuda.so.1 libcuda_sim.c -lpthread
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the types of the driver API (cuda.h, CUDA 12), as cudarc declares them ---- */

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct sim_ctx *CUcontext;
typedef struct sim_event_opaque *CUevent;
typedef struct sim_stream_opaque *CUstream;
typedef struct { char bytes[16]; } CUuuid;
typedef struct { char reserved[64]; } CUipcMemHandle;
typedef struct { char reserved[64]; } CUipcEventHandle;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_MAP_FAILED = 205,
    CUDA_ERROR_ALREADY_MAPPED = 208,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
    CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
};

#define CU_EVENT_DISABLE_TIMING 0x2u
#define CU_EVENT_INTERPROCESS 0x4u
#define CU_MEMHOSTREGISTER_PORTABLE 0x1u
#define CU_MEMHOSTREGISTER_DEVICEMAP 0x2u
#define CU_MEMHOSTREGISTER_READ_ONLY 0x8u

#define EXPORT __attribute__((visibility("default")))

/* ---- state ---- */

#define MAX_DEVICES 8

struct sim_ctx {
    int dev;
    int retained; /* primary context retain count; active while > 0 */
};

enum range_kind { RANGE_ALLOC, RANGE_IPC, RANGE_HOST };

struct range {
    enum range_kind kind;
    uintptr_t base;
    size_t size;
    struct sim_ctx *ctx;          /* NULL for portable host registrations */
    int fd;                       /* RANGE_ALLOC: the shm object */
    unsigned long long id;        /* RANGE_ALLOC: our id; RANGE_IPC: the creator's */
    int creator;                  /* RANGE_IPC: the creator's pid */
    int refs;                     /* RANGE_IPC: opens of the same handle */
    unsigned flags;               /* RANGE_HOST */
};

struct event {
    unsigned long long id;
    struct sim_ctx *ctx;
    unsigned flags;
    int ipc_opened;
    int recorded;
    uintptr_t last_stream;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int initialised;
static int device_count = -1;
static unsigned char uuid_base[16] = {0xf5, 0x1e, 0x00, 0x51, 0xc0, 0xda, 0x4e, 0x11,
                                      0x8a, 0x5e, 0x5e, 0xed, 0x00, 0x00, 0x00, 0x01};
static struct sim_ctx contexts[MAX_DEVICES];
static struct range *ranges;
static size_t n_ranges, cap_ranges;
static struct event *events;
static size_t n_events, cap_events;
static unsigned long long next_id = 1;
static int trace = -1;
static __thread struct sim_ctx *current;

/* Event handles are ids offset from this base, never pointers: a stale or
 * foreign handle is found unknown instead of being dereferenced. */
#define EVENT_HANDLE_BASE 0x5e0000000000ull

static const char MEM_MAGIC[8] = "FSIMMEM";
static const char EVT_MAGIC[8] = "FSIMEVT";

struct mem_handle_bytes {
    char magic[8];
    int32_t creator;
    int32_t dev;
    uint64_t id;
    uint64_t size;
};

struct evt_handle_bytes {
    char magic[8];
    int32_t creator;
    int32_t dev;
    uint64_t id;
};

static const struct { CUresult code; const char *name; const char *text; } ERRORS[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_MAP_FAILED, "CUDA_ERROR_MAP_FAILED", "mapping of buffer object failed"},
    {CUDA_ERROR_ALREADY_MAPPED, "CUDA_ERROR_ALREADY_MAPPED", "resource already mapped"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
};

static const char *error_name(CUresult r) {
    for (size_t i = 0; i < sizeof ERRORS / sizeof ERRORS[0]; i++)
        if (ERRORS[i].code == r) return ERRORS[i].name;
    return NULL;
}

static int tracing(void) {
    if (trace < 0) {
        const char *t = getenv("FREIGHT_SIM_CUDA_TRACE");
        trace = t && *t ? atoi(t) : 0;
    }
    return trace;
}

/* Every return goes through here: failures are traced. */
static CUresult ret(const char *function, CUresult r) {
    if (r != CUDA_SUCCESS && tracing())
        fprintf(stderr, "freight-sim-cuda: %s failed: %s (pid %d)\n", function, error_name(r), (int)getpid());
    else if (tracing() >= 2)
        fprintf(stderr, "freight-sim-cuda: %s (pid %d)\n", function, (int)getpid());
    return r;
}

#define RETURN(r) return ret(__func__, (r))
#define UNLOCK_RETURN(r)                 \
    do {                                 \
        CUresult r_ = (r);               \
        pthread_mutex_unlock(&lock);     \
        return ret(__func__, r_);        \
    } while (0)

static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void configure(void) {
    if (device_count >= 0) return;
    const char *n = getenv("FREIGHT_SIM_CUDA_DEVICES");
    device_count = n && *n ? atoi(n) : 1;
    if (device_count < 0) device_count = 0;
    if (device_count > MAX_DEVICES) device_count = MAX_DEVICES;
    const char *u = getenv("FREIGHT_SIM_CUDA_UUID");
    if (u && strlen(u) == 32) {
        unsigned char parsed[16];
        int ok = 1;
        for (int i = 0; i < 16 && ok; i++) {
            int hi = hex(u[2 * i]), lo = hex(u[2 * i + 1]);
            ok = hi >= 0 && lo >= 0;
            parsed[i] = (unsigned char)(hi << 4 | lo);
        }
        if (ok) memcpy(uuid_base, parsed, 16);
    }
    for (int i = 0; i < MAX_DEVICES; i++) contexts[i].dev = i;
}

/* The current context of this thread, if it is active. Call with the lock held. */
static struct sim_ctx *context(void) {
    return current && current->retained > 0 ? current : NULL;
}

static void shm_name(char *out, size_t len, int pid, unsigned long long id) {
    snprintf(out, len, "/freight-sim-cuda-%d-%llu", pid, id);
}

static struct range *range_add(void) {
    if (n_ranges == cap_ranges) {
        size_t cap = cap_ranges ? 2 * cap_ranges : 16;
        struct range *r = realloc(ranges, cap * sizeof *r);
        if (!r) return NULL;
        ranges = r;
        cap_ranges = cap;
    }
    struct range *r = &ranges[n_ranges++];
    memset(r, 0, sizeof *r);
    r->fd = -1;
    return r;
}

static void range_remove(struct range *r) {
    *r = ranges[--n_ranges];
}

/* The range of `kind` (or any kind when kind < 0) that contains [p, p + len). */
static struct range *range_find(int kind, uintptr_t p, size_t len) {
    for (size_t i = 0; i < n_ranges; i++) {
        struct range *r = &ranges[i];
        if (kind >= 0 && r->kind != (enum range_kind)kind) continue;
        if (p >= r->base && p - r->base <= r->size && len <= r->size - (p - r->base) &&
            (len > 0 || p < r->base + r->size))
            return r;
    }
    return NULL;
}

/* Releases what a range holds (the lock is held). */
static void range_release(struct range *r) {
    switch (r->kind) {
    case RANGE_ALLOC: {
        char name[64];
        munmap((void *)r->base, r->size);
        close(r->fd);
        shm_name(name, sizeof name, getpid(), r->id);
        shm_unlink(name);
        break;
    }
    case RANGE_IPC:
        munmap((void *)r->base, r->size);
        break;
    case RANGE_HOST:
        break;
    }
}

static struct event *event_find(CUevent e) {
    uintptr_t v = (uintptr_t)e;
    if (v <= EVENT_HANDLE_BASE) return NULL;
    unsigned long long id = v - EVENT_HANDLE_BASE;
    for (size_t i = 0; i < n_events; i++)
        if (events[i].id == id) return &events[i];
    return NULL;
}

static struct event *event_add(struct sim_ctx *ctx, unsigned flags, int ipc_opened) {
    if (n_events == cap_events) {
        size_t cap = cap_events ? 2 * cap_events : 16;
        struct event *e = realloc(events, cap * sizeof *e);
        if (!e) return NULL;
        events = e;
        cap_events = cap;
    }
    struct event *e = &events[n_events++];
    memset(e, 0, sizeof *e);
    e->id = next_id++;
    e->ctx = ctx;
    e->flags = flags;
    e->ipc_opened = ipc_opened;
    return e;
}

static CUevent event_handle(const struct event *e) {
    return (CUevent)(uintptr_t)(EVENT_HANDLE_BASE + e->id);
}

/* ---- initialisation, errors, devices, contexts ---- */

EXPORT CUresult cuInit(unsigned int flags) {
    if (flags != 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    pthread_mutex_lock(&lock);
    configure();
    initialised = 1;
    UNLOCK_RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuGetErrorName(CUresult error, const char **str) {
    if (!str) return CUDA_ERROR_INVALID_VALUE;
    *str = error_name(error);
    return *str ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorString(CUresult error, const char **str) {
    if (!str) return CUDA_ERROR_INVALID_VALUE;
    *str = NULL;
    for (size_t i = 0; i < sizeof ERRORS / sizeof ERRORS[0]; i++)
        if (ERRORS[i].code == error) *str = ERRORS[i].text;
    return *str ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuDeviceGetCount(int *count) {
    if (!initialised) RETURN(CUDA_ERROR_NOT_INITIALIZED);
    if (!count) RETURN(CUDA_ERROR_INVALID_VALUE);
    *count = device_count;
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    if (!initialised) RETURN(CUDA_ERROR_NOT_INITIALIZED);
    if (!device) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (device_count == 0) RETURN(CUDA_ERROR_NO_DEVICE);
    if (ordinal < 0 || ordinal >= device_count) RETURN(CUDA_ERROR_INVALID_DEVICE);
    *device = ordinal;
    RETURN(CUDA_SUCCESS);
}

static int valid_device(CUdevice dev) {
    return dev >= 0 && dev < device_count;
}

EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) {
    if (!initialised) RETURN(CUDA_ERROR_NOT_INITIALIZED);
    if (!uuid) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!valid_device(dev)) RETURN(CUDA_ERROR_INVALID_DEVICE);
    memcpy(uuid->bytes, uuid_base, 16);
    uuid->bytes[15] = (char)(uuid_base[15] + dev);
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    if (!initialised) RETURN(CUDA_ERROR_NOT_INITIALIZED);
    if (!name || len <= 0) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!valid_device(dev)) RETURN(CUDA_ERROR_INVALID_DEVICE);
    snprintf(name, (size_t)len, "freight simulated CUDA device");
    RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    if (!initialised) RETURN(CUDA_ERROR_NOT_INITIALIZED);
    if (!pctx) RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!valid_device(dev)) RETURN(CUDA_ERROR_INVALID_DEVICE);
    pthread_mutex_lock(&lock);
    contexts[dev].retained++;
    *pctx = &contexts[dev];
    UNLOCK_RETURN(CUDA_SUCCESS);
}

/* Destroys a primary context: everything made in it goes, as in the real driver. */
static void context_destroy(struct sim_ctx *ctx) {
    size_t freed = 0, gone_events = 0;
    for (size_t i = 0; i < n_ranges;) {
        if (ranges[i].ctx == ctx) {
            range_release(&ranges[i]);
            range_remove(&ranges[i]);
            freed++;
        } else {
            i++;
        }
    }
    for (size_t i = 0; i < n_events;) {
        if (events[i].ctx == ctx) {
            events[i] = events[--n_events];
            gone_events++;
        } else {
            i++;
        }
    }
    if (tracing() && (freed || gone_events))
        fprintf(stderr, "freight-sim-cuda: primary context of device %d destroyed with %zu ranges, %zu events (pid %d)\n",
                ctx->dev, freed, gone_events, (int)getpid());
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    if (!initialised) RETURN(CUDA_ERROR_NOT_INITIALIZED);
    if (!valid_device(dev)) RETURN(CUDA_ERROR_INVALID_DEVICE);
    pthread_mutex_lock(&lock);
    struct sim_ctx *ctx = &contexts[dev];
    if (ctx->retained == 0) UNLOCK_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (--ctx->retained == 0) context_destroy(ctx);
    UNLOCK_RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
    if (!initialised) RETURN(CUDA_ERROR_NOT_INITIALIZED);
    if (ctx == NULL) {
        current = NULL;
        RETURN(CUDA_SUCCESS);
    }
    pthread_mutex_lock(&lock);
    int known = ctx >= &contexts[0] && ctx < &contexts[device_count] && ctx->retained > 0;
    if (!known) UNLOCK_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    current = ctx;
    UNLOCK_RETURN(CUDA_SUCCESS);
}

/* Takes the lock and the calling thread's current context, or returns. */
#define ENTER(ctx_var)                                              \
    if (!initialised) RETURN(CUDA_ERROR_NOT_INITIALIZED);           \
    pthread_mutex_lock(&lock);                                      \
    struct sim_ctx *ctx_var = context();                            \
    if (!ctx_var) UNLOCK_RETURN(CUDA_ERROR_INVALID_CONTEXT)

/* ---- device memory ---- */

/* What /proc/self/maps says of [a, a + size): how many of its bytes are
 * mapped, and whether every mapping over it is writable. -1 when the maps
 * cannot be read. */
static int look_at_maps(uintptr_t a, size_t size, size_t *mapped, int *writable) {
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps) return -1;
    char line[512];
    *mapped = 0;
    *writable = 1;
    uintptr_t z = a + size;
    while (fgets(line, sizeof line, maps)) {
        unsigned long start, end;
        char perms[5];
        if (sscanf(line, "%lx-%lx %4s", &start, &end, perms) != 3 || end <= a || start >= z) continue;
        *mapped += (end < z ? end : z) - (start > a ? start : a);
        if (perms[1] != 'w') *writable = 0;
    }
    fclose(maps);
    return 0;
}

/* Whether every byte of every registered host range is still mapped in
 * this process. */
static int registered_host_memory_mapped(void) {
    for (size_t i = 0; i < n_ranges; i++) {
        size_t mapped;
        int writable;
        if (ranges[i].kind != RANGE_HOST) continue;
        if (look_at_maps(ranges[i].base, ranges[i].size, &mapped, &writable) != 0) return 0;
        if (mapped != ranges[i].size) return 0;
    }
    return 1;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size) {
    ENTER(ctx);
    if (!dptr || size == 0) UNLOCK_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!registered_host_memory_mapped()) UNLOCK_RETURN(CUDA_ERROR_ALREADY_MAPPED);
    unsigned long long id = next_id++;
    char name[64];
    shm_name(name, sizeof name, getpid(), id);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) UNLOCK_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    void *p = MAP_FAILED;
    if (ftruncate(fd, (off_t)size) == 0) p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    struct range *r = p == MAP_FAILED ? NULL : range_add();
    if (!r) {
        if (p != MAP_FAILED) munmap(p, size);
        close(fd);
        shm_unlink(name);
        UNLOCK_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    }
    r->kind = RANGE_ALLOC;
    r->base = (uintptr_t)p;
    r->size = size;
    r->ctx = ctx;
    r->fd = fd;
    r->id = id;
    *dptr = (CUdeviceptr)(uintptr_t)p;
    UNLOCK_RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    ENTER(ctx);
    struct range *r = range_find(RANGE_ALLOC, (uintptr_t)dptr, 0);
    if (!r || r->base != (uintptr_t)dptr || r->ctx != ctx) UNLOCK_RETURN(CUDA_ERROR_INVALID_VALUE);
    range_release(r);
    range_remove(r);
    UNLOCK_RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
    ENTER(ctx);
    (void)ctx;
    struct range *r = range_find(RANGE_ALLOC, (uintptr_t)dptr, 0);
    if (!r) r = range_find(RANGE_IPC, (uintptr_t)dptr, 0);
    if (!r) UNLOCK_RETURN(CUDA_ERROR_NOT_FOUND);
    if (pbase) *pbase = (CUdeviceptr)r->base;
    if (psize) *psize = r->size;
    UNLOCK_RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    ENTER(ctx);
    (void)ctx;
    if (n == 0) UNLOCK_RETURN(CUDA_SUCCESS);
    if (!src || !range_find(-1, (uintptr_t)dst, n)) UNLOCK_RETURN(CUDA_ERROR_INVALID_VALUE);
    memcpy((void *)(uintptr_t)dst, src, n);
    UNLOCK_RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    ENTER(ctx);
    (void)ctx;
    if (n == 0) UNLOCK_RETURN(CUDA_SUCCESS);
    if (!dst || !range_find(-1, (uintptr_t)src, n)) UNLOCK_RETURN(CUDA_ERROR_INVALID_VALUE);
    memcpy(dst, (const void *)(uintptr_t)src, n);
    UNLOCK_RETURN(CUDA_SUCCESS);
}

/* ---- IPC of memory ---- */

EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr dptr) {
    ENTER(ctx);
    if (!handle) UNLOCK_RETURN(CUDA_ERROR_INVALID_VALUE);
    struct range *r = range_find(RANGE_ALLOC, (uintptr_t)dptr, 0);
    if (!r || r->base != (uintptr_t)dptr || r->ctx != ctx) UNLOCK_RETURN(CUDA_ERROR_INVALID_VALUE);
    struct mem_handle_bytes h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MEM_MAGIC, sizeof h.magic);
    h.creator = (int32_t)getpid();
    h.dev = ctx->dev;
    h.id = r->id;
    h.size = r->size;
    memset(handle, 0, sizeof *handle);
    memcpy(handle->reserved, &h, sizeof h);
    UNLOCK_RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags) {
    ENTER(ctx);
    struct mem_handle_bytes h;
    memcpy(&h, handle.reserved, sizeof h);
    if (!pdptr || (flags & ~1u) != 0) UNLOCK_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (memcmp(h.magic, MEM_MAGIC, sizeof h.magic) != 0 || h.size == 0 || h.creator <= 0)
        UNLOCK_RETURN(CUDA_ERROR_INVALID_VALUE);
    /* The real driver refuses to open an allocation in the process that made it. */
    if (h.creator == (int32_t)getpid()) UNLOCK_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    /* Opened already in this context: the same pointer, one more reference. */
    for (size_t i = 0; i < n_ranges; i++) {
        struct range *r = &ranges[i];
        if (r->kind == RANGE_IPC && r->ctx == ctx && r->creator == h.creator && r->id == h.id) {
            r->refs++;
            *pdptr = (CUdeviceptr)r->base;
            UNLOCK_RETURN(CUDA_SUCCESS);
        }
    }
    char name[64];
    shm_name(name, sizeof name, h.creator, (unsigned long long)h.id);
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) UNLOCK_RETURN(CUDA_ERROR_INVALID_HANDLE);
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) == 0 && (uint64_t)st.st_size >= h.size)
        p = mmap(NULL, (size_t)h.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    struct range *r = p == MAP_FAILED ? NULL : range_add();
    if (!r) {
        if (p != MAP_FAILED) munmap(p, (size_t)h.size);
        UNLOCK_RETURN(CUDA_ERROR_MAP_FAILED);
    }
    r->kind = RANGE_IPC;
    r->base = (uintptr_t)p;
    r->size = (size_t)h.size;
    r->ctx = ctx;
    r->id = h.id;
    r->creator = h.creator;
    r->refs = 1;
    *pdptr = (CUdeviceptr)(uintptr_t)p;
    UNLOCK_RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
    ENTER(ctx);
    struct range *r = range_find(RANGE_IPC, (uintptr_t)dptr, 0);
    if (!r || r->base != (uintptr_t)dptr || r->ctx != ctx) UNLOCK_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (--r->refs == 0) {
        range_release(r);
        range_remove(r);
    }
    UNLOCK_RETURN(CUDA_SUCCESS);
}

/* ---- events and streams ---- */

EXPORT CUresult cuEventCreate(CUevent *phEvent, unsigned int flags) {
    ENTER(ctx);
    if (!phEvent || (flags & ~0x7u) != 0) UNLOCK_RETURN(CUDA_ERROR_INVALID_VALUE);
    /* Documented: an interprocess event must also disable timing. */
    if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING)) UNLOCK_RETURN(CUDA_ERROR_INVALID_VALUE);
    struct event *e = event_add(ctx, flags, 0);
    if (!e) UNLOCK_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    *phEvent = event_handle(e);
    UNLOCK_RETURN(CUDA_SUCCESS);
}

/* Event destruction and synchronisation name their event's context through
 * the event: they need no current context, but an event whose context was
 * destroyed is gone. */
EXPORT CUresult cuEventDestroy_v2(CUevent hEvent) {
    if (!initialised) RETURN(CUDA_ERROR_NOT_INITIALIZED);
    pthread_mutex_lock(&lock);
    struct event *e = event_find(hEvent);
    if (!e) UNLOCK_RETURN(CUDA_ERROR_INVALID_HANDLE);
    *e = events[--n_events];
    UNLOCK_RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
    ENTER(ctx);
    struct event *e = event_find(hEvent);
    if (!e) UNLOCK_RETURN(CUDA_ERROR_INVALID_HANDLE);
    /* An event is recorded on a stream of its own context. */
    if (e->ctx != ctx) UNLOCK_RETURN(CUDA_ERROR_INVALID_HANDLE);
    e->recorded = 1;
    e->last_stream = (uintptr_t)hStream;
    UNLOCK_RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuEventSynchronize(CUevent hEvent) {
    if (!initialised) RETURN(CUDA_ERROR_NOT_INITIALIZED);
    pthread_mutex_lock(&lock);
    struct event *e = event_find(hEvent);
    /* Every recorded event is complete; an event never recorded too. */
    UNLOCK_RETURN(e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE);
}

EXPORT CUresult cuIpcGetEventHandle(CUipcEventHandle *pHandle, CUevent event) {
    ENTER(ctx);
    (void)ctx;
    struct event *e = event_find(event);
    if (!pHandle || !e) UNLOCK_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!(e->flags & CU_EVENT_INTERPROCESS) || e->ipc_opened) UNLOCK_RETURN(CUDA_ERROR_INVALID_VALUE);
    struct evt_handle_bytes h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, EVT_MAGIC, sizeof h.magic);
    h.creator = (int32_t)getpid();
    h.dev = e->ctx->dev;
    h.id = e->id;
    memset(pHandle, 0, sizeof *pHandle);
    memcpy(pHandle->reserved, &h, sizeof h);
    UNLOCK_RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuIpcOpenEventHandle(CUevent *phEvent, CUipcEventHandle handle) {
    ENTER(ctx);
    struct evt_handle_bytes h;
    memcpy(&h, handle.reserved, sizeof h);
    if (!phEvent || memcmp(h.magic, EVT_MAGIC, sizeof h.magic) != 0 || h.creator <= 0 || h.id == 0)
        UNLOCK_RETURN(CUDA_ERROR_INVALID_VALUE);
    /* The creator must still exist (the real driver's event lives in its process). */
    if (kill(h.creator, 0) != 0 && errno == ESRCH) UNLOCK_RETURN(CUDA_ERROR_INVALID_HANDLE);
    struct event *e = event_add(ctx, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING, 1);
    if (!e) UNLOCK_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    *phEvent = event_handle(e);
    UNLOCK_RETURN(CUDA_SUCCESS);
}

/* Stream handles are not checked: 0 (legacy), 1 (legacy, explicit), 2 (per
 * thread) and any other non-null value (a stream of the user's) are accepted. */
EXPORT CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int flags) {
    ENTER(ctx);
    (void)ctx;
    (void)hStream;
    if (flags != 0 && flags != 1) UNLOCK_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!event_find(hEvent)) UNLOCK_RETURN(CUDA_ERROR_INVALID_HANDLE);
    UNLOCK_RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuStreamSynchronize(CUstream hStream) {
    ENTER(ctx);
    (void)ctx;
    (void)hStream;
    UNLOCK_RETURN(CUDA_SUCCESS);
}

/* ---- registered host memory ---- */

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t size, unsigned int flags) {
    ENTER(ctx);
    if (!p || size == 0 || (flags & ~0xfu) != 0) UNLOCK_RETURN(CUDA_ERROR_INVALID_VALUE);
    uintptr_t a = (uintptr_t)p;
    size_t mapped;
    int writable;
    if (!(flags & CU_MEMHOSTREGISTER_READ_ONLY) && (look_at_maps(a, size, &mapped, &writable) != 0 || !writable))
        UNLOCK_RETURN(CUDA_ERROR_INVALID_VALUE);
    for (size_t i = 0; i < n_ranges; i++) {
        struct range *r = &ranges[i];
        if (r->kind == RANGE_HOST && a < r->base + r->size && r->base < a + size)
            UNLOCK_RETURN(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    }
    struct range *r = range_add();
    if (!r) UNLOCK_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    r->kind = RANGE_HOST;
    r->base = a;
    r->size = size;
    r->ctx = (flags & CU_MEMHOSTREGISTER_PORTABLE) ? NULL : ctx;
    r->flags = flags;
    UNLOCK_RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuMemHostUnregister(void *p) {
    ENTER(ctx);
    (void)ctx;
    struct range *r = range_find(RANGE_HOST, (uintptr_t)p, 0);
    if (!r || r->base != (uintptr_t)p) UNLOCK_RETURN(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    range_remove(r);
    UNLOCK_RETURN(CUDA_SUCCESS);
}

EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int flags) {
    ENTER(ctx);
    (void)ctx;
    if (!pdptr || flags != 0) UNLOCK_RETURN(CUDA_ERROR_INVALID_VALUE);
    struct range *r = range_find(RANGE_HOST, (uintptr_t)p, 0);
    if (!r || !(r->flags & CU_MEMHOSTREGISTER_DEVICEMAP)) UNLOCK_RETURN(CUDA_ERROR_INVALID_VALUE);
    *pdptr = (CUdeviceptr)(uintptr_t)p;
    UNLOCK_RETURN(CUDA_SUCCESS);
}

/* ---- at exit ---- */

/* The real driver's memory goes with the process: unlink the shm objects
 * still allocated (their names would otherwise outlive it in /dev/shm), and
 * with FREIGHT_SIM_CUDA_TRACE say what was still live. */
__attribute__((destructor)) static void sim_exit(void) {
    pthread_mutex_lock(&lock);
    size_t kinds[3] = {0, 0, 0};
    for (size_t i = 0; i < n_ranges; i++) {
        kinds[ranges[i].kind]++;
        if (ranges[i].kind == RANGE_ALLOC) {
            char name[64];
            shm_name(name, sizeof name, getpid(), ranges[i].id);
            shm_unlink(name);
        }
    }
    if (tracing() && (n_ranges || n_events))
        fprintf(stderr,
                "freight-sim-cuda: at exit: %zu allocations, %zu IPC openings, %zu host registrations, %zu events (pid %d)\n",
                kinds[RANGE_ALLOC], kinds[RANGE_IPC], kinds[RANGE_HOST], n_events, (int)getpid());
    pthread_mutex_unlock(&lock);
}
