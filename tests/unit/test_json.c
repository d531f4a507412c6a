/* The JSON reader of the tools (tools/json.c). */
#include <criterion/criterion.h>
#include <string.h>

#include "json.h"

Test(json, objects_keep_their_members_in_order)
{
	json_t v;
	char err[96];
	cr_assert_eq(json_parse(" {\"b\": 1, \"a\": [2, 3.5e1, -4], \"c\": {\"d\": true}} ", &v, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(v.type, JSON_OBJ);
	cr_assert_eq(v.n, 3);
	cr_assert_str_eq(v.keys[0], "b");
	cr_assert_str_eq(v.keys[1], "a");
	const json_t *a = json_get(&v, "a");
	cr_assert(a && a->type == JSON_ARR && a->n == 3);
	cr_assert_float_eq(a->items[1].num, 35.0, 1e-9);
	cr_assert_float_eq(a->items[2].num, -4.0, 1e-9);
	cr_assert_float_eq(json_num(json_get(&v, "c"), "d"), 1.0, 1e-9, "a boolean counts 1");
	cr_assert_float_eq(json_num(&v, "missing"), 0.0, 1e-9);
	cr_assert_null(json_get(a, "b"), "an array has no members by name");
	json_free(&v);
}

Test(json, strings_with_escapes_and_unicode)
{
	json_t v;
	char err[96];
	cr_assert_eq(json_parse("[\"a\\\"b\\\\c\\n\", \"\\u00e9\\ud83d\\ude00\", \"/x\\/y\"]", &v, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_str_eq(v.items[0].str, "a\"b\\c\n");
	cr_assert_str_eq(v.items[1].str, "\xc3\xa9\xf0\x9f\x98\x80");
	cr_assert_str_eq(v.items[2].str, "/x/y");
	json_free(&v);
}

Test(json, malformed_text_is_refused_with_where)
{
	static const char *const bad[] = { "", "{", "{\"a\" 1}", "[1,]", "[1 2]", "{\"a\":1,}", "\"abc",
					   "tru", "{\"a\":1} x", "[\"\\q\"]", "[\"\x01\"]", "-", "{1:2}" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t v;
		char err[96] = "";
		cr_assert_eq(json_parse(bad[i], &v, err, sizeof(err)), -1, "accepted '%s'", bad[i]);
		cr_assert(strstr(err, "at byte"), "no position for '%s': %s", bad[i], err);
	}
}

Test(json, nesting_is_bounded)
{
	char deep[400];
	memset(deep, '[', 200);
	memset(deep + 200, ']', 199);
	deep[399] = '\0';
	json_t v;
	char err[96];
	cr_assert_eq(json_parse(deep, &v, err, sizeof(err)), -1);
	cr_assert(strstr(err, "nested too deep"), "%s", err);
	cr_assert_eq(json_parse("[[[[1]]]]", &v, err, sizeof(err)), 0, "%s", err);
	json_free(&v);
}
