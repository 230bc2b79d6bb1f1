/* What every generated offlow program includes: the runtime core's modules and the
 * glue for generated code. A program includes the headers of the libraries beside the
 * core (runtime/lib: lpm, kvs, lso) that its elements and tables name, and links only
 * those libraries. */
#ifndef OFL_RUNTIME_H
#define OFL_RUNTIME_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/balance.h"
#include "offlow/chan.h"
#include "offlow/copy.h"
#include "offlow/crc32c.h"
#include "offlow/ctl.h"
#include "offlow/ctl_stage.h"
#include "offlow/err.h"
#include "offlow/gen.h"
#include "offlow/group.h"
#include "offlow/hash.h"
#include "offlow/lifeline.h"
#include "offlow/live.h"
#include "offlow/pcap_port.h"
#include "offlow/pkt.h"
#include "offlow/queue.h"
#include "offlow/reload.h"
#include "offlow/ring.h"
#include "offlow/src.h"
#include "offlow/stats.h"
#include "offlow/synth.h"
#include "offlow/thread.h"
#include "offlow/udp_port.h"
#include "offlow/wait.h"
#include "offlow/window.h"

#endif
