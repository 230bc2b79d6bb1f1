/* libFuzzer target: the pcap source on arbitrary capture files.
 *
 * The input is written to a private file in $TMPDIR (or /tmp) and opened as a source with
 * options picked from the input's length; opening either fails with a message
 * or succeeds, and then the source must drain to OFL_SRC_DONE delivering exactly
 * its packets once per pass, each within the mtu; a record it could not read is
 * said by ofl_src_error (the records before it are still delivered). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "offlow/err.h"
#include "offlow/pcap_port.h"
#include "offlow/pkt.h"
#include "offlow/src.h"

#define BATCH 8u

static char tmp_path[512];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *dir = getenv("TMPDIR");
    snprintf(tmp_path, sizeof tmp_path, "%s/ofl-fuzz-pcap-%ld.pcap", dir && *dir ? dir : "/tmp",
             (long)getpid());
    return 0;
}

static void write_input(const uint8_t *data, size_t size)
{
    FILE *f = fopen(tmp_path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    write_input(data, size);
    struct ofl_src_opts o;
    memset(&o, 0, sizeof o);
    o.loops = 1 + size % 2;
    o.nparts = 1 + (uint32_t)(size % 3);
    o.part = (uint32_t)(size / 3 % o.nparts);
    o.mtu = size % 5 ? 2048 : 64;
    char err[256] = "";
    struct ofl_src *s = NULL;
    int rc = ofl_pcap_src_open(&s, tmp_path, &o, err);
    if (rc < 0) {
        if (!err[0] || rc == -ENOMEM) abort();
        return 0;
    }
    uint8_t *bufs = malloc((size_t)BATCH * o.mtu);
    struct ofl_pkt pkts[BATCH];
    uint64_t got = 0;
    for (;;) {
        rc = ofl_src_next(s, pkts, bufs, BATCH);
        if (rc == OFL_SRC_DONE) break;
        if (rc <= 0 || rc > (int)BATCH) abort();
        for (int i = 0; i < rc; i++) {
            if (pkts[i].len > o.mtu || pkts[i].data != bufs + (size_t)i * o.mtu) abort();
            uint16_t et;
            uint32_t l3;
            if (ofl_parse_eth(pkts[i].data, pkts[i].len, &et, &l3) == 0 && et == 0x0800) {
                struct ofl_ipv4_info ip;
                if (ofl_parse_ipv4(pkts[i].data, pkts[i].len, l3, &ip) == 0)
                    (void)ofl_ipv4_csum_ok(pkts[i].data + l3, ip.hdr_len);
            }
        }
        got += (uint64_t)rc;
    }
    if (got != o.loops * ofl_pcap_src_own_packets(s) || ofl_src_packets(s) != got) abort();
    const char *e = ofl_src_error(s);
    if (e && !strstr(e, "cut short or damaged")) abort();
    ofl_src_close(s);
    free(bufs);
    return 0;
}
