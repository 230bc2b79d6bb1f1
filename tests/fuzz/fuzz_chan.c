/* libFuzzer target: channels against a hostile or buggy peer.
 *
 * The input is a few header bytes and then frames; each frame overwrites the peer's
 * message line, our line's header word and our claim word (the words the peer may
 * CAS), the peer's side of the control block (identity, receiver and bulk status
 * lines) and the SG area when the peer is side A. Between frames our real end runs try_recv, a post, and steps
 * of a bulk send or receive state machine. Nothing may crash or touch memory
 * outside our buffers; SG entries pointing anywhere must end in an error.
 *
 * The peer's pid is forced to a sacrificial child's (forked once, re-forked if it
 * dies) so process_vm_readv/writev act on a real other process whose memory may
 * be scribbled on; a peer claiming to be this process would share our address
 * space anyway. The child inherits a block of registered memory, which frames can
 * name as the peer's (side B then maps it and copies with hostile offsets). The peer's `copying` words are cleared so a failed transfer does
 * not wait its bounded second for a copy that never ends.
 *
 * The channel sources are compiled into this file (test_fuzz.py builds targets
 * against a fixed source list). */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../runtime/core/src/chan.c"
#include "../../runtime/core/src/chan_bulk.c"
#include "../../runtime/core/src/chan_mem.c"
#include "../../runtime/core/src/crc32c.c"
#include "../../runtime/core/src/simd.c"
#include "../../runtime/core/src/wait.c"

#define FRAME (64 + 8 + 4 + sizeof(struct chan_side) + sizeof(((struct chan_ctl *)0)->sg))
#define MAX_BUF 300000
#define STEPS 12

static pid_t victim = -1;
static struct ofl_chan_mem victim_mem;   /* registered memory the victim holds too */

static void kill_victim(void)
{
    if (victim > 0) {
        kill(victim, SIGKILL);
        waitpid(victim, NULL, 0);
    }
}

/* A live child process to stand in for the peer. */
static pid_t peer_process(void)
{
    if (victim > 0 && waitpid(victim, NULL, WNOHANG) == 0) return victim;
    if (victim < 0) {
        atexit(kill_victim);
        if (ofl_chan_mem_alloc(&victim_mem, 1 << 20) < 0) abort();
    }
    victim = fork();
    if (victim == 0) {
        for (;;) pause();
    }
    return victim;
}

/* Apply frame bytes (a short frame overlays only its prefix). */
static void apply(struct ofl_chan_end *e, const uint8_t *d, size_t n, bool gen_raw)
{
    struct chan_ctl *c = end_ctl(e);
    struct chan_side *p = side_peer(e);
    uint8_t tmp[FRAME];
    size_t off = 0;
    memcpy(tmp, line_peer(e), 64);
    memcpy(tmp + 64, &line_mine(e)->hdr, 8);
    memcpy(tmp + 72, claim_mine(e), 4);
    memcpy(tmp + 76, p, sizeof *p);
    memcpy(tmp + 76 + sizeof *p, c->sg, sizeof c->sg);
    memcpy(tmp, d, n < FRAME ? n : FRAME);
    memcpy(line_peer(e), tmp, 64);
    memcpy(&line_mine(e)->hdr, tmp + 64, 8);
    memcpy(claim_mine(e), tmp + 72, 4);
    off = 76;
    memcpy(p, tmp + off, sizeof *p);
    off += sizeof *p;
    if (e->side == OFL_CHAN_B) memcpy(c->sg, tmp + off, sizeof c->sg);
    pid_t pid = peer_process();
    p->owner = pid;
    p->pid = pid;
    if (!gen_raw) p->gen |= 1u;
    p->rx_waiting = 0;
    for (int i = 0; i < 2; i++) p->st[i].copying = 0;
}

/* Bend the frame toward messages our state machine will accept, as the frame's
 * first byte asks, so the copy and verify paths run with hostile entries. */
static void assist(struct ofl_chan_end *e, const struct chan_bulk *op, bool active, uint8_t how)
{
    struct chan_line *pl = line_peer(e);
    uint32_t ack = *claim_mine(e);
    unsigned kind = h_kind(pl->hdr), len = h_len(pl->hdr);
    if (how & 2) {
        kind = e->side == OFL_CHAN_B ? KIND_CHUNK : KIND_BEGIN;
        len = kind == KIND_CHUNK ? sizeof(struct chan_chunk_msg) : sizeof(struct chan_begin_msg);
    }
    if (how & 1) pl->hdr = h_make(ack + 1, h_ack(pl->hdr), len, kind);
    if (!active) return;
    if ((how & 4) && kind == KIND_CHUNK) {
        struct chan_chunk_msg m;
        memcpy(&m, pl->payload, sizeof m);
        if (op->xfer) m.xfer = op->xfer;
        m.index = op->index;
        m.total = op->len;
        m.offset = op->done;
        uint64_t left = op->len - op->done;
        if (m.bytes > left) m.bytes = (uint32_t)left;
        if (m.bytes > OFL_CHAN_STAGE_SLOT) m.bytes = OFL_CHAN_STAGE_SLOT;
        m.nent = (uint16_t)(1 + m.nent % 8);
        struct chan_sg *sg = end_ctl(e)->sg;
        uint64_t rest = m.bytes;
        for (unsigned i = 0; i < m.nent; i++) {
            uint64_t l = i + 1 == m.nent ? rest : rest / 2;
            sg[i].len = l;
            rest -= l;
            if (how & 8) sg[i].addr = (uint64_t)(uintptr_t)(op->buf + op->done);
        }
        if (how & 64) {   /* as registered memory: the victim's, entries as offsets */
            struct chan_side *p = side_peer(e);
            m.flags = CHUNK_MEM;
            p->mem_fd = victim_mem.fd;
            p->mem_ino = victim_mem.ino;
            if (how & 128) p->mem_len = victim_mem.len;
        }
        memcpy(pl->payload, &m, sizeof m);
    }
    if ((how & 16) && op->xfer) {
        struct chan_bulk_st *st = &side_peer(e)->st[op_dir(e, op)];
        st->prog = prog_make(op->xfer, -(int)(st->prog >> 24 & 0xFF) * !!(how & 32),
                             (uint32_t)st->prog % (op->posted + op->index + 2));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static void *region;
    static size_t region_size;
    if (!region) {
        region_size = ofl_chan_region_size(2);
        region = mmap(NULL, region_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (region == MAP_FAILED) abort();
    }
    if (size < 8) return 0;
    uint8_t flags = data[0];
    int side = flags & 1 ? OFL_CHAN_A : OFL_CHAN_B;
    int copy = (flags >> 1) % 3;
    bool bulk = flags & 8, sending = flags & 16, gen_raw = flags & 32;
    size_t len = ((size_t)data[1] | (size_t)data[2] << 8 | (size_t)data[3] << 16) % (MAX_BUF + 1);
    uint32_t k = 1 + data[4] % OFL_CHAN_SG_MAX;
    size_t cap = data[5] % 64;
    data += 8;
    size -= 8;

    if (ofl_chan_region_format(region, region_size, 2) || ofl_chan_create(region, "f") < 0) abort();
    int id = ofl_chan_lookup(region, "f");
    struct ofl_chan_end e;
    if (ofl_chan_open(&e, region, (uint32_t)id, side, NULL)) abort();
    ofl_chan_set_copy(&e, copy);
    ofl_chan_set_chunk(&e, k);
    uint8_t *buf = malloc(len + 1);
    memset(buf, 0xA5, len + 1);
    struct chan_bulk op;
    bool active = false;
    if (bulk && chan_bulk_start(&e, &op, sending ? BULK_SEND : BULK_RECV, buf, len, NULL) == 0)
        active = true;
    for (int step = 0; step < STEPS; step++) {
        if (size) {
            uint8_t how = data[0];
            size_t n = size < FRAME ? size : FRAME;
            apply(&e, data + 1, n - 1, gen_raw);
            assist(&e, &op, active, how);
            data += n;
            size -= n;
        }
        if (active) {
            int rc = chan_bulk_step(&e, &op);
            if (rc == STEP_DONE || rc < 0) active = false;
            if (rc != STEP_DONE && rc != STEP_IDLE && rc != STEP_PROGRESS && rc >= 0) abort();
        } else {
            uint8_t msg[OFL_CHAN_MSG_MAX] = {0};
            int rc = ofl_chan_try_recv(&e, msg, cap);
            if (rc > (int)cap) abort();
            if (step & 1) ofl_chan_post(&e, msg, cap % (OFL_CHAN_MSG_MAX + 1));
            uint64_t total;
            chan_bulk_incoming(&e, &total);
        }
        /* Our buffer's guard byte is never written. */
        if (buf[len] != 0xA5) abort();
    }
    if (active) chan_bulk_fail(&e, &op, -ETIMEDOUT);
    ofl_chan_close(&e);
    free(buf);
    return 0;
}
