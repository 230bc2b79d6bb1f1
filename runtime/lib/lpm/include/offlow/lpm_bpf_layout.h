/* The layout of the LPM tables' BPF array maps (offlow/lpm_bpf.h), for the XDP
 * programs that read them and the host code that fills them (runtime/tools/
 * xdp_tables.c, which checks them against lpm4.h's and lpm6.h's): constants only. */
#ifndef OFL_LPM_BPF_LAYOUT_H
#define OFL_LPM_BPF_LAYOUT_H

/* IPv4: lpm4.h's OFL_LPM4_GROUP and OFL_LPM4_BLOCK; a directory entry's flag: the
 * rest is the /16's hop, not its block. */
#define OFL_LPM4_BPF_GROUP 0x8000u
#define OFL_LPM4_BPF_BLOCK 256u
#define OFL_LPM4_BPF_LEAF 0x80000000u

/* IPv6: lpm6.h's OFL_LPM6_TOP_BITS, OFL_LPM6_STRIDE and OFL_LPM6_TLEAF. */
#define OFL_LPM6_BPF_TOP_BITS 16
#define OFL_LPM6_BPF_STRIDE 6
#define OFL_LPM6_BPF_TLEAF 0x80000000u

#endif
