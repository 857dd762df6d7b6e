/*
 * conf.h: knob strings, PyTorch's PYTORCH_CUDA_ALLOC_CONF syntax (policies'
 * confs, the cost model's knobs) and sizes with units.
 */
#ifndef BASE_CONF_H
#define BASE_CONF_H

#include <stddef.h>
#include <stdint.h>

/*
 * Conf strings use PyTorch's PYTORCH_CUDA_ALLOC_CONF syntax:
 * "key:value,key:value"; a value may be a bracketed list that itself holds
 * commas and colons ("roundup_power2_divisions:[256:1,512:2,>:4]"). '=' is
 * accepted in place of ':' for TensorFlow-style names (allow_growth=true).
 */
struct conf_kv {
	char key[128];
	char value[256];
};

/* Next pair from *CURSOR. Returns 1 with KV, 0 at the end, -1 on a malformed
 * string (ERR says where). */
int conf_next(const char **cursor, struct conf_kv *kv, char *err, size_t errlen);

/* Value parsers: 0 on success, -1 with ERR naming KEY. */
int conf_u64(const struct conf_kv *kv, uint64_t *out, char *err, size_t errlen);
int conf_double(const struct conf_kv *kv, double lo, double hi, double *out,
		char *err, size_t errlen);
int conf_bool(const struct conf_kv *kv, int *out, char *err, size_t errlen);
/* Sizes such as "80GiB", "512MiB", "1.5GB", "4096" (bytes). */
int conf_size(const char *s, uint64_t *out);
/* The same with a unit required ("80GiB", "4096B"): a bare number is an
 * error, so "--capacity 80" is not taken as 80 bytes. For command lines. */
int conf_size_with_unit(const char *s, uint64_t *out);

#endif /* BASE_CONF_H */
