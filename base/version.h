/* version.h: the gpumemsim version, written into traces and reports. */
#ifndef BASE_VERSION_H
#define BASE_VERSION_H

#define GPUMEMSIM_VERSION "0.1.0"

#endif /* BASE_VERSION_H */
