/* libFuzzer target: every header parser on arbitrary bytes.
 *
 * The input is the frame (libFuzzer hands over an exactly sized heap copy, so
 * ASan catches a read past `len`). Parsers run at the offsets the Ethernet parser
 * gives and at offsets chosen by the input itself; when the IPv4 header parses,
 * the TTL is decremented on a copy and its checksum must stay as valid as it was. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/err.h"
#include "offlow/pkt.h"
#include "../c/ref_csum.h"

static int ok_code(int rc)
{
    return rc == 0 || rc == OFL_ETRUNC || rc == OFL_EBADHDR || rc == OFL_EVERSION ||
           rc == OFL_EUNSUPP || rc == OFL_ELENGTH;
}

static void l4(const uint8_t *p, uint32_t len, uint32_t off)
{
    uint16_t sp = 0, dp = 0;
    if (!ok_code(ofl_parse_udp(p, len, off, &sp, &dp))) abort();
    if (!ok_code(ofl_parse_tcp(p, len, off, &sp, &dp))) abort();
}

/* The transport header of an IP packet that ends at `end` (what ParseL4 does), for
 * both protocols and every kind of fragment. */
static void l4_in(const uint8_t *p, uint32_t len, uint32_t end, uint32_t off, uint8_t frag)
{
    if (end > len || frag > OFL_FRAG_LATER) abort();
    for (int k = 0; k < 3; k++) {
        uint16_t sp = 1, dp = 1;
        uint8_t proto = k == 0 ? 17 : k == 1 ? 6 : 1;
        int rc = ofl_parse_l4(p, end, off, proto, frag, &sp, &dp);
        if (!ok_code(rc)) abort();
        if (rc == 0 && (frag == OFL_FRAG_LATER || proto == 1) && (sp || dp)) abort();
    }
}

static void ip_at(const uint8_t *p, uint32_t len, uint32_t off)
{
    struct ofl_ipv4_info v4;
    int rc = ofl_parse_ipv4(p, len, off, &v4);
    if (!ok_code(rc)) abort();
    if (rc == 0) {
        if (v4.hdr_len < 20 || v4.hdr_len > len - off) abort();
        int valid = ofl_ipv4_csum_ok(p + off, v4.hdr_len);
        /* its constant-bounded sum (for the BPF verifier) is the Internet checksum's */
        if (valid != (ofl_csum(p + off, v4.hdr_len) == 0)) abort();
        uint8_t *copy = malloc(v4.hdr_len);
        memcpy(copy, p + off, v4.hdr_len);
        ofl_ipv4_dec_ttl(copy);
        if (copy[8] != (uint8_t)(v4.ttl - 1)) abort();
        if (ofl_ipv4_csum_ok(copy, v4.hdr_len) != valid) abort();
        free(copy);
        l4(p, len, off + v4.hdr_len);
        l4_in(p, len, v4.end, off + v4.hdr_len, v4.frag);
    }
    struct ofl_ipv6_info v6;
    rc = ofl_parse_ipv6(p, len, off, &v6);
    if (!ok_code(rc)) abort();
    if (rc == 0) {
        if (v6.l4_off < off + 40 || v6.l4_off > len) abort();
        l4(p, len, v6.l4_off);
        l4_in(p, len, v6.end, v6.l4_off, v6.frag);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 70000) return 0;
    uint32_t len = (uint32_t)size;
    uint16_t et = 0;
    uint32_t l3 = 0;
    int rc = ofl_parse_eth(data, len, &et, &l3);
    if (!ok_code(rc)) abort();
    if (rc == 0) {
        if (l3 < 14 || l3 > 22 || l3 > len) abort();
        ip_at(data, len, l3);
    }
    ip_at(data, len, 0);
    if (len) {
        ip_at(data, len, data[0]);
        l4(data, len, data[len - 1]);
        l4(data, len, len);
        ip_at(data, len, len - 1);
    }
    if (ofl_csum(data, size) != ref_csum(data, size)) abort();
    return 0;
}
