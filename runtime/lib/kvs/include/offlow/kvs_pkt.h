/* memcached over UDP inside offlow packets: what the key-value store's elements call.
 *
 * A packet is an Ethernet/IPv4/UDP frame whose UDP payload is a memcached datagram
 * (8-byte frame header, then requests), as a pcap or the UDP socket source gives
 * it. The store is a Table object (kvs_table.h) in the memory of the device that
 * runs the element using it. */
#ifndef OFL_KVS_PKT_H
#define OFL_KVS_PKT_H

#include <stddef.h>
#include <stdint.h>

#include "offlow/kvexec.h"
#include "offlow/kvs_table.h"
#include "offlow/pkt.h"

/* Hash of the key of the first request in the datagram of `pkt` (UDP header at
 * `l4_off`), the store's own hash (ofl_kv_hash). Returns 0 and sets *hash, or a
 * negative error when the payload holds no complete request with a key. */
int ofl_kvs_key_hash(const struct ofl_pkt *pkt, uint32_t l4_off, uint64_t *hash);

/* Scale-out (a store sharded over devices by the hash of a datagram's first key):
 * does the datagram of `pkt` name a key that another shard holds? `steer` is the
 * upper 32 bits of the hash the datagram was steered by (ofl_kvs_key_hash's, 0 for a
 * datagram without a key), `shard_of` the shard of each of the `instances` instances
 * (a key of hash h is held by shard_of[(h >> 32) % instances]). Every key of every
 * request is looked at (a multi-key get's, a meta command's decoded key; a request
 * that does not parse is stepped over as the store steps over it, the datagram's end
 * inside a request or a fatal error ends the walk). Returns 1 (a key of another shard), 0 (every
 * key on the steered one), or -EINVAL (not a memcached datagram). */
int ofl_kvs_keys_span(const struct ofl_pkt *pkt, uint32_t l4_off, uint32_t steer,
                      const uint8_t *shard_of, uint32_t instances);

/* Turn the datagram of `pkt` into memcached's error replies for requests that would
 * need several shards (ofl_kvs_keys_span), none of them run: one for each request of
 * the datagram, as memcached 1.6 answers each (up to where the store stops: the
 * datagram's end inside a request, a fatal error), text "SERVER_ERROR multi-key request spans shards; use TCP or one key per request",
 * binary status ETMPFAIL with the request's opcode and opaque; framed and addressed
 * as ofl_kvs_reply's replies. When they do not all fit the packet, the first one
 * alone. Returns 0, or a negative error (not a memcached datagram, no room). */
int ofl_kvs_refuse_span(struct ofl_pkt *pkt, uint32_t l3_off, uint32_t l4_off);

/* Run the datagram of `pkt` against the store `t` and turn the packet into the reply,
 * in place, addresses and ports swapped, IPv4 lengths and checksum fixed (UDP
 * checksum 0): memcached's datagrams of at most 1400 bytes, each with the request's
 * id, its sequence number and their count in its frame header. A reply of several
 * datagrams is one frame whose UDP payload holds them back to back, with pkt->seg =
 * 1400 (the sink sends them apart). Every datagram that is run is answered: with no
 * reply to send (quiet requests, noreply) the answer is the frame header alone (seq
 * 0, count 0; memcached sends the same for a quiet binary request); replies that do
 * not fit the packet (its cap: the program's mtu) become memcached's out-of-memory
 * answer (binary status ENOMEM for the request that overflowed, text "SERVER_ERROR
 * out of memory writing get response"). Returns
 * OFL_KVS_SEND, OFL_KVS_SEND_EXPIRING (send it, but a value in it belongs to an item
 * with an expiry time: a cache must not keep it), OFL_KVS_NONE (nothing to send: the
 * datagram holds no request, or ends inside its first one; memcached answers
 * neither) or a negative error (drop it: not a memcached datagram, or the packet
 * buffer cannot hold the reply). `from_cache` nonzero: the datagram is one a cache
 * in front of the store made (ofl_kvc's write-backs, told apart by a per-packet
 * field only the cache sets), run with ofl_kv_exec_trusted: the item keeps the CAS
 * the cache gave it. Never for clients' datagrams. */
enum { OFL_KVS_SEND = 0, OFL_KVS_NONE = 1, OFL_KVS_SEND_EXPIRING = 2 };
/* Does ofl_kvs_reply's result `rc` say to send the packet? */
static inline int ofl_kvs_sends(int rc)
{
    return rc == OFL_KVS_SEND || rc == OFL_KVS_SEND_EXPIRING;
}
int ofl_kvs_reply(struct ofl_kvs *t, struct ofl_pkt *pkt, uint32_t l3_off, uint32_t l4_off,
                  int from_cache);

/* Write `len` bytes of replies (`body`, not inside the packet) as the UDP payload
 * of `pkt` (IPv4 header at l3_off, UDP at l4_off; addresses left as they are):
 * memcached's datagrams of at most 1400 bytes with request id `id`, sequence numbers
 * and count, back to back, pkt->seg set when there are several (nothing: the frame
 * header alone, count 0). Returns 0, or -EMSGSIZE when they do not fit pkt->cap. */
int ofl_kvs_frame(struct ofl_pkt *pkt, uint32_t l3_off, uint32_t l4_off, uint16_t id,
                  const uint8_t *body, size_t len);

/* The replies of a UDP payload framed so (`len` bytes of datagrams back to back),
 * frame headers taken out, into `out` (`cap` bytes). Returns their length. */
size_t ofl_kvs_unframe(const uint8_t *payload, size_t len, uint8_t *out, size_t cap);

/* The memcached datagram of `pkt` (UDP header at `l4_off`): its start, its length in
 * *len; NULL when the UDP header or its length does not fit the packet. */
const uint8_t *ofl_kvs_udp_payload(const struct ofl_pkt *pkt, uint32_t l4_off, size_t *len);

/* Swap the Ethernet, IPv4 and UDP sources and destinations of `frame` (a reply goes
 * back where the request came from) and reset the TTL to 64. */
void ofl_kvs_swap_addrs(uint8_t *frame, uint32_t l3_off, uint32_t l4_off);

/* Set the IPv4 and UDP lengths of `frame` for a UDP payload of `payload` bytes (UDP
 * checksum 0) and recompute the IPv4 header checksum. */
void ofl_kvs_set_lengths(uint8_t *frame, uint32_t l3_off, uint32_t l4_off, size_t payload);

#endif
