/* size.h: byte counts as people read them (parsing: base/conf.h conf_size). */
#ifndef BASE_SIZE_H
#define BASE_SIZE_H

#include <stddef.h>
#include <stdint.h>

/* "1.50 GiB" style (powers of 1024, two decimals; "512 B" below 1 KiB),
 * into BUF. Returns BUF. */
const char *size_fmt(uint64_t bytes, char *buf, size_t len);

#endif /* BASE_SIZE_H */
