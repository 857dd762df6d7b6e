/*
 * conf.c: parsing of knob strings (see conf.h): policies' confs and the
 * cost model's knobs.
 *
 * Policies take their knobs in the framework's own syntax so a user can
 * paste PYTORCH_CUDA_ALLOC_CONF as it is: "key:value,key:value", where a
 * value may be a bracketed list holding commas and colons of its own
 * ("roundup_power2_divisions:[256:1,512:2,>:4]"). '=' works in place of ':'
 * for TensorFlow-style names. Whitespace around keys and values is ignored.
 * Every error names the knob, or quotes the text where parsing stopped, so
 * a user can find the mistake in a long string.
 */
#include "conf.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *skip_space(const char *p)
{
	while (*p && isspace((unsigned char)*p))
		p++;
	return p;
}

/* Quote at most 24 characters of P for an error message. */
static void quote_at(const char *p, char *buf, size_t len)
{
	if (!*p) {
		snprintf(buf, len, "end of string");
		return;
	}
	snprintf(buf, len, "'%.24s%s'", p, strlen(p) > 24 ? "..." : "");
}

/* Copy [B, E) without surrounding whitespace into DST (DLEN bytes). -1 if too long. */
static int copy_trimmed(const char *b, const char *e, char *dst, size_t dlen)
{
	while (b < e && isspace((unsigned char)*b))
		b++;
	while (e > b && isspace((unsigned char)e[-1]))
		e--;
	if ((size_t)(e - b) >= dlen)
		return -1;
	memcpy(dst, b, (size_t)(e - b));
	dst[e - b] = '\0';
	return 0;
}

/*
 * Pairs are separated by commas at bracket depth 0; empty pairs (",,", a
 * trailing comma) are skipped so strings assembled by scripts still parse.
 */
int conf_next(const char **cursor, struct conf_kv *kv, char *err, size_t errlen)
{
	const char *p = *cursor;
	char where[48];
	if (!p)
		return 0;
	for (;;) {
		p = skip_space(p);
		if (*p != ',')
			break;
		p++;
	}
	if (!*p) {
		*cursor = p;
		return 0;
	}
	/* key: up to ':' or '=' */
	const char *kb = p;
	while (*p && *p != ':' && *p != '=' && *p != ',' && *p != '[' && *p != ']')
		p++;
	if (copy_trimmed(kb, p, kv->key, sizeof kv->key) < 0) {
		snprintf(err, errlen, "conf: knob name too long at '%.24s...'", kb);
		return -1;
	}
	if (!kv->key[0]) {
		quote_at(kb, where, sizeof where);
		snprintf(err, errlen, "conf: expected a knob name at %s", where);
		return -1;
	}
	for (const char *k = kv->key; *k; k++) {
		if (isspace((unsigned char)*k)) {
			snprintf(err, errlen, "conf: knob name '%s' contains a space "
				 "(missing ':' or ','?)", kv->key);
			return -1;
		}
	}
	if (*p != ':' && *p != '=') {
		snprintf(err, errlen, "conf: knob '%s' has no value (expected '%s:VALUE')",
			 kv->key, kv->key);
		return -1;
	}
	p++;
	/* value: up to a ',' outside brackets */
	const char *vb = p;
	int depth = 0;
	for (; *p; p++) {
		if (*p == '[') {
			depth++;
		} else if (*p == ']') {
			if (--depth < 0) {
				snprintf(err, errlen, "conf: knob '%s': unbalanced ']'", kv->key);
				return -1;
			}
		} else if (*p == ',' && depth == 0) {
			break;
		}
	}
	if (depth != 0) {
		snprintf(err, errlen, "conf: knob '%s': unbalanced '[' (missing ']')", kv->key);
		return -1;
	}
	if (copy_trimmed(vb, p, kv->value, sizeof kv->value) < 0) {
		snprintf(err, errlen, "conf: value of knob '%s' is too long (max %zu characters)",
			 kv->key, sizeof kv->value - 1);
		return -1;
	}
	if (!kv->value[0]) {
		snprintf(err, errlen, "conf: knob '%s' has an empty value", kv->key);
		return -1;
	}
	if (*p == ',')
		p++;
	*cursor = p;
	return 1;
}

/* Decimal integer with no sign, no junk, no overflow. */
int conf_u64(const struct conf_kv *kv, uint64_t *out, char *err, size_t errlen)
{
	const char *s = kv->value;
	char *end;
	if (!isdigit((unsigned char)s[0]))
		goto bad;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno == ERANGE) {
		snprintf(err, errlen, "knob '%s': value '%s' is too large", kv->key, s);
		return -1;
	}
	if (*end)
		goto bad;
	*out = (uint64_t)v;
	return 0;
bad:
	snprintf(err, errlen, "knob '%s': expected a non-negative integer, got '%s'", kv->key, s);
	return -1;
}

/* A finite number within [LO, HI]. */
int conf_double(const struct conf_kv *kv, double lo, double hi, double *out,
		char *err, size_t errlen)
{
	const char *s = kv->value;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || *end || errno == ERANGE || !isfinite(v)) {
		snprintf(err, errlen, "knob '%s': expected a number, got '%s'", kv->key, s);
		return -1;
	}
	if (v < lo || v > hi) {
		snprintf(err, errlen, "knob '%s': %s is out of range [%g, %g]", kv->key, s, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

/* The spellings PyTorch and TensorFlow users write: True/true/1, False/false/0. */
int conf_bool(const struct conf_kv *kv, int *out, char *err, size_t errlen)
{
	const char *s = kv->value;
	if (!strcmp(s, "True") || !strcmp(s, "true") || !strcmp(s, "1")) {
		*out = 1;
		return 0;
	}
	if (!strcmp(s, "False") || !strcmp(s, "false") || !strcmp(s, "0")) {
		*out = 0;
		return 0;
	}
	snprintf(err, errlen, "knob '%s': expected True or False, got '%s'", kv->key, s);
	return -1;
}

/* Unit suffixes, case-insensitive. KB/MB/GB/TB are decimal (as disks and
 * nvidia-smi's marketing figures are), KiB... and bare K/M/G/T binary. */
static const struct { const char *name; uint64_t mult; } size_units[] = {
	{"", 1}, {"b", 1},
	{"k", 1ull << 10}, {"kib", 1ull << 10}, {"kb", 1000ull},
	{"m", 1ull << 20}, {"mib", 1ull << 20}, {"mb", 1000000ull},
	{"g", 1ull << 30}, {"gib", 1ull << 30}, {"gb", 1000000000ull},
	{"t", 1ull << 40}, {"tib", 1ull << 40}, {"tb", 1000000000000ull},
};

/*
 * The integer part is kept exact (so "4096" and "80GiB" never go through a
 * double); only a fractional part is scaled in long double and rounded.
 */
int conf_size(const char *s, uint64_t *out)
{
	if (!s)
		return -1;
	s = skip_space(s);
	if (!isdigit((unsigned char)*s))
		return -1;
	uint64_t ip = 0;
	for (; isdigit((unsigned char)*s); s++) {
		if (ip > (UINT64_MAX - 9) / 10)
			return -1;
		ip = ip * 10 + (uint64_t)(*s - '0');
	}
	long double frac = 0;
	int has_frac = 0;
	if (*s == '.') {
		long double scale = 0.1L;
		s++;
		if (!isdigit((unsigned char)*s))
			return -1;
		for (; isdigit((unsigned char)*s); s++, scale /= 10)
			frac += (long double)(*s - '0') * scale;
		has_frac = 1;
	}
	s = skip_space(s);
	char unit[8];
	size_t n = 0;
	while (*s && !isspace((unsigned char)*s)) {
		if (n + 1 >= sizeof unit)
			return -1;
		unit[n++] = (char)tolower((unsigned char)*s++);
	}
	unit[n] = '\0';
	if (*skip_space(s))
		return -1;
	for (size_t i = 0; i < sizeof size_units / sizeof size_units[0]; i++) {
		if (strcmp(unit, size_units[i].name))
			continue;
		uint64_t m = size_units[i].mult;
		if (ip > UINT64_MAX / m)
			return -1;
		uint64_t v = ip * m;
		if (has_frac) {
			long double f = roundl(frac * (long double)m);
			if (f > (long double)(UINT64_MAX - v))
				return -1;
			v += (uint64_t)f;
		}
		*out = v;
		return 0;
	}
	return -1;
}

/* A size a person types for a device: "80GiB", "512MiB", "4096B"; a bare
 * number is refused ("--capacity 80" was taken as 80 bytes). */
int conf_size_with_unit(const char *s, uint64_t *out)
{
	if (!s)
		return -1;
	const char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		e--;
	if (e == s || !isalpha((unsigned char)e[-1]))
		return -1;
	return conf_size(s, out);
}
