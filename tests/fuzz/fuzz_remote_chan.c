/* libFuzzer target: the channel messages a remote device's link carries
 * (runtime/tools/remote_chan.c, part_chans_on_msg), from an authenticated peer. The
 * input is a sequence of messages [kind: bit 0, bulk][header bytes][data bytes lo, hi]
 * [header][data]. Checked after each: once a message broke the rules (the channels'
 * err is set) nothing more is queued; everything queued is for a carried channel, a
 * direct message of at most 56 bytes, or a bulk transfer of the announced size whose
 * bytes have the CRC32C its header gave. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "remote_chan.h"   /* (runtime/tools: linked with remote_chan.c) */

static struct part_chans *chans(void)
{
    static struct part_chans pc;
    static bool ready;
    if (!ready) {
        size_t size = ofl_chan_region_size(2);
        void *region = aligned_alloc(4096, size);   /* (the process's: kept to its end) */
        if (!region || ofl_chan_region_format(region, size, 2) < 0) abort();
        int first = ofl_chan_create(region, "first"), second = ofl_chan_create(region, "second");
        if (first < 0 || second < 0) abort();
        uint32_t ids[2] = {(uint32_t)second, (uint32_t)first};
        if (part_chans_start(&pc, NULL, region, OFL_CHAN_A, ids, 2, NULL) < 0) abort();
        ready = true;
    }
    return &pc;
}

static size_t queued(struct part_chans *pc)
{
    size_t n = 0;
    for (uint32_t i = 0; i < pc->n; i++)
        for (struct part_item *it = pc->ch[i].head; it; it = it->next, n++)
            if (it->idx != i || (!it->bulk && it->len > OFL_CHAN_MSG_MAX)) abort();
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct part_chans *pc = chans();
    while (size >= 4) {
        uint32_t kind = (data[0] & 1) ? PART_CHAN_BULK : PART_CHAN_MSG;
        size_t hlen = data[1], len = (size_t)data[2] | (size_t)data[3] << 8;
        data += 4;
        size -= 4;
        if (hlen > size) hlen = size;
        if (len > size - hlen) len = size - hlen;
        uint8_t *hdr = malloc(hlen ? hlen : 1), *body = malloc(len ? len : 1);   /* exact */
        memcpy(hdr, data, hlen);
        memcpy(body, data + hlen, len);
        bool failed_before = pc->err[0] != 0;
        size_t before = queued(pc);
        part_chans_on_msg(pc, kind, hdr, hlen, body, len);
        size_t after = queued(pc);
        if ((failed_before || pc->err[0]) && after != before) abort();
        if (after == before + 1) {   /* the one just queued: check it against its header */
            struct part_item *last = NULL;
            for (uint32_t i = 0; i < pc->n; i++)
                if (pc->ch[i].tail && pc->ch[i].tail->len == len &&
                    !memcmp(pc->ch[i].tail->data, body, len))
                    last = pc->ch[i].tail;
            if (!last) abort();
            if (kind == PART_CHAN_BULK) {
                struct part_bulk_hdr h;
                if (hlen != sizeof h) abort();
                memcpy(&h, hdr, sizeof h);
                if (h.len != len || h.crc != ofl_crc32c(0, body, len)) abort();
            }
        }
        free(hdr);
        free(body);
        data += hlen + len;
        size -= hlen + len;
    }
    for (uint32_t i = 0; i < pc->n; i++) {   /* a fresh start for the next input */
        while (pc->ch[i].head) {
            struct part_item *it = pc->ch[i].head;
            pc->ch[i].head = it->next;
            part_item_free(it);
        }
        pc->ch[i].tail = NULL;
    }
    pc->err[0] = 0;
    return 0;
}
