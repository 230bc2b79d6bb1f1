/* Everything a generated offlow program includes: the runtime modules and the
 * glue for generated code. */
#ifndef OFL_RUNTIME_H
#define OFL_RUNTIME_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/chan.h"
#include "offlow/copy.h"
#include "offlow/crc32c.h"
#include "offlow/err.h"
#include "offlow/gen.h"
#include "offlow/group.h"
#include "offlow/hash.h"
#include "offlow/kvcache.h"
#include "offlow/kvs_pkt.h"
#include "offlow/lifeline.h"
#include "offlow/lpm4.h"
#include "offlow/lpm6.h"
#include "offlow/pcap_port.h"
#include "offlow/pkt.h"
#include "offlow/queue.h"
#include "offlow/ring.h"
#include "offlow/routes.h"
#include "offlow/src.h"
#include "offlow/stats.h"
#include "offlow/synth.h"
#include "offlow/thread.h"
#include "offlow/udp_port.h"
#include "offlow/wait.h"
#include "offlow/window.h"

#endif
