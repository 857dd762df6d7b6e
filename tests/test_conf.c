/*
 * test_conf.c: conf-string parsing in PyTorch syntax (base/conf.c):
 * pairs, brackets, '=', whitespace, value parsers, sizes and errors.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "../policies/policy.h"

Test(conf, pairs_brackets_and_equals)
{
	const char *cur = " expandable_segments:True , roundup_power2_divisions:[256:1,512:2,>:4],"
			  "allow_growth = true,";
	struct conf_kv kv;
	char err[256];
	cr_assert_eq(conf_next(&cur, &kv, err, sizeof err), 1);
	cr_assert_str_eq(kv.key, "expandable_segments");
	cr_assert_str_eq(kv.value, "True");
	cr_assert_eq(conf_next(&cur, &kv, err, sizeof err), 1);
	cr_assert_str_eq(kv.key, "roundup_power2_divisions");
	cr_assert_str_eq(kv.value, "[256:1,512:2,>:4]");
	cr_assert_eq(conf_next(&cur, &kv, err, sizeof err), 1);
	cr_assert_str_eq(kv.key, "allow_growth");
	cr_assert_str_eq(kv.value, "true");
	cr_assert_eq(conf_next(&cur, &kv, err, sizeof err), 0);
}

Test(conf, empty_and_null)
{
	struct conf_kv kv;
	char err[64];
	const char *cur = "";
	cr_assert_eq(conf_next(&cur, &kv, err, sizeof err), 0);
	cur = NULL;
	cr_assert_eq(conf_next(&cur, &kv, err, sizeof err), 0);
	cur = " , ,";
	cr_assert_eq(conf_next(&cur, &kv, err, sizeof err), 0);
}

Test(conf, malformed)
{
	struct conf_kv kv;
	char err[256];
	const char *bad[] = {"max_split_size_mb", "a:[1,2", "a:1]", "a:", ":5", "two words:1"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		const char *cur = bad[i];
		err[0] = '\0';
		cr_assert_eq(conf_next(&cur, &kv, err, sizeof err), -1, "accepted '%s'", bad[i]);
		cr_assert(err[0], "no message for '%s'", bad[i]);
	}
	const char *cur = "max_split_size_mb";
	conf_next(&cur, &kv, err, sizeof err);
	cr_assert(strstr(err, "max_split_size_mb"), "message does not name the knob: %s", err);
}

Test(conf, values)
{
	struct conf_kv kv = {"k", "123"};
	char err[256];
	uint64_t u;
	double d;
	int b;
	cr_assert_eq(conf_u64(&kv, &u, err, sizeof err), 0);
	cr_assert_eq(u, 123);
	strcpy(kv.value, "-1");
	cr_assert_eq(conf_u64(&kv, &u, err, sizeof err), -1);
	cr_assert(strstr(err, "'k'"));
	strcpy(kv.value, "12x");
	cr_assert_eq(conf_u64(&kv, &u, err, sizeof err), -1);
	strcpy(kv.value, "99999999999999999999999");
	cr_assert_eq(conf_u64(&kv, &u, err, sizeof err), -1);
	strcpy(kv.value, "0.8");
	cr_assert_eq(conf_double(&kv, 0.0, 1.0, &d, err, sizeof err), 0);
	cr_assert_float_eq(d, 0.8, 1e-12);
	strcpy(kv.value, "1.5");
	cr_assert_eq(conf_double(&kv, 0.0, 1.0, &d, err, sizeof err), -1);
	strcpy(kv.value, "nan");
	cr_assert_eq(conf_double(&kv, 0.0, 1.0, &d, err, sizeof err), -1);
	const char *t[] = {"True", "true", "1"}, *f[] = {"False", "false", "0"};
	for (int i = 0; i < 3; i++) {
		strcpy(kv.value, t[i]);
		cr_assert_eq(conf_bool(&kv, &b, err, sizeof err), 0);
		cr_assert_eq(b, 1);
		strcpy(kv.value, f[i]);
		cr_assert_eq(conf_bool(&kv, &b, err, sizeof err), 0);
		cr_assert_eq(b, 0);
	}
	strcpy(kv.value, "yes");
	cr_assert_eq(conf_bool(&kv, &b, err, sizeof err), -1);
}

Test(conf, sizes)
{
	static const struct {
		const char *text;
		uint64_t bytes;
	} good[] = {
		{"4096", 4096},
		{"80GiB", 80ull << 30},
		{"80GB", 80000000000ull},
		{"512MiB", 512ull << 20},
		{"1.5TiB", 3ull << 39},
		{"1.5GB", 1500000000ull},
		{"2 mib", 2ull << 20},
		{"16G", 16ull << 30},
	};
	uint64_t v;
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		cr_assert_eq(conf_size(good[i].text, &v), 0, "rejected '%s'", good[i].text);
		cr_assert_eq(v, good[i].bytes, "'%s' gave %llu", good[i].text, (unsigned long long)v);
	}
	const char *bad[] = {"", "GiB", "-1GiB", "1.GiB", "12 parsecs", "99999999999TiB",
			     "1e3", "5 GiB x"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_assert_eq(conf_size(bad[i], &v), -1, "accepted '%s'", bad[i]);
	cr_assert_eq(conf_size(NULL, &v), -1);
}

Test(conf, unknown_lists_known)
{
	static const struct policy_knob knobs[] = {
		{"max_split_size_mb", "<MiB>", "h"}, {"expandable_segments", "True|False", "h"},
		{NULL, NULL, NULL}};
	char err[256];
	cr_assert_eq(conf_unknown("pytorch", knobs, "max_split", err, sizeof err), -1);
	cr_assert_str_eq(err, "unknown knob 'max_split' for policy pytorch "
			      "(known: max_split_size_mb, expandable_segments)");
	static const struct policy_knob none[] = {{NULL, NULL, NULL}};
	cr_assert_eq(conf_unknown("cuda_malloc", none, "x", err, sizeof err), -1);
	cr_assert_str_eq(err, "unknown knob 'x' for policy cuda_malloc (known: none)");
}

Test(conf, none_accepts_only_empty)
{
	char err[256];
	cr_assert_eq(conf_none("optimal", NULL, err, sizeof err), 0);
	cr_assert_eq(conf_none("optimal", " , ", err, sizeof err), 0);
	cr_assert_eq(conf_none("optimal", "max_split_size_mb:64", err, sizeof err), -1);
	cr_assert_str_eq(err, "unknown knob 'max_split_size_mb' for policy optimal (known: none)");
	err[0] = '\0';
	cr_assert_eq(conf_none("optimal", "a:[1", err, sizeof err), -1);
	cr_assert(err[0], "no message for a malformed conf");
}
