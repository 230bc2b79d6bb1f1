/* OpenCL C has its own integer types (offlow/cl/prelude.h): the C headers the kernel
 * includes (pkt.h) find this empty stdint.h instead of the system's. */
