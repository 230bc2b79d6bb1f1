/* What an element body needs when its segment runs in XDP (offlow/targets/xdp.py):
 * the packet and the body macros of gen.h with the same meaning, and pkt.h's parsers
 * and checksum, compiled into the program (pkt.c, always inlined: BPF has no
 * library to link, and the verifier follows each access with the caller's bounds).
 *
 * `pkt->data` is a per-CPU copy of the frame in a map value of OFL_XDP_BUF bytes, so
 * that a body may index it with any 16-bit offset the way it indexes a frame on the
 * NIC (the verifier checks every index against the buffer, not against the frame:
 * a body still compares offsets with `pkt->len` itself). Include only from generated
 * XDP programs, compiled with clang -target bpf -ffreestanding. */
#ifndef OFL_BPF_H
#define OFL_BPF_H

#include <stddef.h>
#include <stdint.h>

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* Bytes of the frame copy: any 16-bit offset plus a 16-bit length stays inside (a
 * parser that walks a header from an offset), with room to spare. */
#define OFL_XDP_BUF (3u * 65536u)

struct ofl_ipv6_info;

/* pkt.h's functions, inlined into the program (declared static before pkt.h's own
 * declarations, so pkt.c's definitions are this program's). */
static __always_inline uint64_t ofl_csum_add(uint64_t sum, const void *data, size_t len);
static __always_inline int ofl_parse_eth(const uint8_t *p, uint32_t len, uint16_t *ethertype,
                                         uint32_t *l3_off);
static __always_inline int ofl_parse_ipv6(const uint8_t *p, uint32_t len, uint32_t off,
                                          struct ofl_ipv6_info *ip);
static __always_inline int ofl_parse_udp(const uint8_t *p, uint32_t len, uint32_t off,
                                         uint16_t *sport, uint16_t *dport);
static __always_inline int ofl_parse_tcp(const uint8_t *p, uint32_t len, uint32_t off,
                                         uint16_t *sport, uint16_t *dport);
static __always_inline int ofl_parse_l4(const uint8_t *p, uint32_t end, uint32_t off,
                                        uint8_t proto, uint8_t frag, uint16_t *sport,
                                        uint16_t *dport);

#include "offlow/pkt.h"
#include "../../src/pkt.c"

#include "offlow/body.h"

/* The C library's memory functions, as bodies call them: the compiler's builtins
 * (BPF has no library; clang expands them for constant sizes, as bodies use them). */
#define memcpy __builtin_memcpy
#define memmove __builtin_memmove
#define memset __builtin_memset
#define memcmp __builtin_memcmp

#endif
