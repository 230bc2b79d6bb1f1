/* Descriptor ring in shared memory (single producer, single consumer). */
#include "offlow/ring.h"

#include <sched.h>
#include <string.h>
#include <time.h>

#define HDR_BYTES offsetof(struct ofl_ring_shm, entries)

_Static_assert(offsetof(struct ofl_ring_shm, tail) % OFL_CACHE_LINE == 0, "tail line");
_Static_assert(offsetof(struct ofl_ring_shm, head) % OFL_CACHE_LINE == 0, "head line");
_Static_assert(offsetof(struct ofl_ring_shm, head) != offsetof(struct ofl_ring_shm, tail),
               "indices share a line");
_Static_assert(HDR_BYTES % OFL_CACHE_LINE == 0, "entries not line aligned");
_Static_assert(sizeof(struct ofl_entry_hdr) == 8, "entry header is 8 bytes");

static bool geometry_ok(uint32_t size, uint32_t entry_size, uint32_t batch)
{
    return size >= 2 && (size & (size - 1)) == 0 && size <= (1u << 30) && entry_size >= 8 &&
           entry_size % 8 == 0 && batch >= 1 && batch <= size;
}

static bool data_off_ok(uint32_t entry_size, uint32_t data_off)
{
    return data_off == 0 || (data_off >= 8 && data_off % 8 == 0 && data_off <= entry_size);
}

size_t ofl_ring_mem_size(uint32_t size, uint32_t entry_size)
{
    size_t body = (size_t)size * entry_size;   /* cannot overflow with 64-bit size_t */
    if (body > SIZE_MAX - HDR_BYTES - OFL_CACHE_LINE) return 0;
    return (HDR_BYTES + body + OFL_CACHE_LINE - 1) / OFL_CACHE_LINE * OFL_CACHE_LINE;
}

int ofl_ring_format(void *mem, size_t len, uint32_t size, uint32_t entry_size, uint32_t batch,
                    uint32_t data_off)
{
    if (!mem || (uintptr_t)mem % OFL_CACHE_LINE || !geometry_ok(size, entry_size, batch) ||
        !data_off_ok(entry_size, data_off))
        return -EINVAL;
    size_t need = ofl_ring_mem_size(size, entry_size);
    if (need == 0 || len < need) return -EINVAL;
    memset(mem, 0, need);
    struct ofl_ring_shm *s = mem;
    s->size = size;
    s->entry_size = entry_size;
    s->batch = batch;
    s->data_off = data_off;
    /* Published last, so an attach that sees the magic sees the geometry. */
    __atomic_store_n(&s->magic, OFL_RING_MAGIC, __ATOMIC_RELEASE);
    return 0;
}

int ofl_ring_attach(struct ofl_ring *r, void *mem, size_t len)
{
    memset(r, 0, sizeof *r);
    if (!mem || (uintptr_t)mem % 8 || len < HDR_BYTES) return -EINVAL;
    struct ofl_ring_shm *s = mem;
    if (__atomic_load_n(&s->magic, __ATOMIC_ACQUIRE) != OFL_RING_MAGIC) return -EINVAL;
    if (!geometry_ok(s->size, s->entry_size, s->batch) ||
        !data_off_ok(s->entry_size, s->data_off))
        return -EINVAL;
    if (len < ofl_ring_mem_size(s->size, s->entry_size)) return -EINVAL;
    r->shm = s;
    r->entries = s->entries;
    r->size = s->size;
    r->mask = s->size - 1;
    r->entry_size = s->entry_size;
    r->batch = s->batch;
    r->data_off = s->data_off;
    r->tail = __atomic_load_n(&s->tail, __ATOMIC_ACQUIRE);
    r->head = __atomic_load_n(&s->head, __ATOMIC_ACQUIRE);
    r->delay_ns = 0;
    r->held_first = r->held_n = 0;
    return 0;
}

/* CLOCK_MONOTONIC in ns (the held doorbells' times). */
static uint64_t ring_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void ofl_ring_set_delay(struct ofl_ring *r, uint64_t ns)
{
    r->delay_ns = ns;
}

unsigned ofl_ring_publish_due(struct ofl_ring *r)
{
    if (!r->held_n) return 0;
    uint64_t now = ring_now_ns();
    uint32_t n = 0, tail = 0;
    while (n < r->held_n && r->held_due[(r->held_first + n) % OFL_RING_HELD] <= now) {
        tail = r->held_tail[(r->held_first + n) % OFL_RING_HELD];
        n++;
    }
    if (!n) return r->held_n;
    r->held_first = (r->held_first + n) % OFL_RING_HELD;
    r->held_n -= n;
    __atomic_store_n(&r->shm->tail, tail, __ATOMIC_RELEASE);
    return r->held_n;
}

void ofl_ring_hold(struct ofl_ring *r)
{
    /* As many doorbells in flight as it holds: the oldest's time comes first. */
    while (ofl_ring_publish_due(r) == OFL_RING_HELD) sched_yield();
    uint32_t k = (r->held_first + r->held_n) % OFL_RING_HELD;
    r->held_tail[k] = r->tail;
    r->held_due[k] = ring_now_ns() + r->delay_ns;
    r->held_n++;
}

void ofl_ring_close(struct ofl_ring *r)
{
    while (ofl_ring_publish_due(r)) sched_yield();  /* the held doorbells, in their time */
    __atomic_store_n(&r->shm->closed, 1u, __ATOMIC_RELEASE);
}

uint32_t ofl_ring_close_first(struct ofl_ring *r)
{
    while (ofl_ring_publish_due(r)) sched_yield();  /* the tail final before the mark */
    uint32_t first = ofl_ring_break_by(r, OFL_RING_CLOSED_FIRST);
    if (first == OFL_RING_CLOSED_FIRST) __atomic_store_n(&r->shm->closed, 1u, __ATOMIC_RELEASE);
    return first;
}

bool ofl_ring_finished(struct ofl_ring *r)
{
    if (!__atomic_load_n(&r->shm->closed, __ATOMIC_ACQUIRE)) return false;
    /* Closed after the last commit: the tail read now is final. */
    r->tail = __atomic_load_n(&r->shm->tail, __ATOMIC_ACQUIRE);
    return r->tail == r->head;
}
