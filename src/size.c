/* The size syntax of CKPTCACHE_*_CACHE and CKPTCACHE_CAPTURE_MIN (a number
 * of bytes with an optional binary unit and decimals, or a percentage), and
 * sizes written for people. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "conf.h"
#include "conf_lex.h"
#include "sys.h"

const char *ckc_format_size(uint64_t v, char *buf, size_t len)
{
	static const char *const unit[] = { "bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	int u = 0;
	uint64_t div = 1;
	while (u < 6 && v / div >= 1024) {
		div *= 1024;
		u++;
	}
	if (v % div == 0)
		snprintf(buf, len, "%llu %s", (unsigned long long)(v / div), unit[u]);
	else
		snprintf(buf, len, "%.1f %s", (double)v / (double)div, unit[u]);
	return buf;
}

/* floor(frac * 2^shift) for the decimal fraction 0.<digits>, exactly: the
 * fraction is doubled in decimal and each doubling's carry is one bit.
 * Digits past the 40th cannot change the result because every multiple of
 * 2^-40 has at most 40 decimals. */
static uint64_t config_frac_bytes(const char *digits, size_t n, int shift)
{
	unsigned char d[40];
	if (n > sizeof(d))
		n = sizeof(d);
	for (size_t i = 0; i < n; i++)
		d[i] = (unsigned char)(digits[i] - '0');
	uint64_t r = 0;
	for (int b = 0; b < shift; b++) {
		unsigned carry = 0;
		for (size_t j = n; j-- > 0;) {
			unsigned t = d[j] * 2u + carry;
			d[j] = (unsigned char)(t % 10);
			carry = t / 10;
		}
		r = r * 2 + carry;
	}
	return r;
}

/* The size grammar on s[0..n), without the 0..100 bound on percentages so
 * that the loader can say "above 100" rather than "not a size". On success
 * *pct is the percentage (>= 0), or -1 with *bytes set. */
int ckc_parse_size_span(const char *s, size_t n, uint64_t *bytes, double *pct)
{
	size_t i = 0;
	uint64_t ip = 0;
	bool overflow = false;
	double pv = 0;

	if (n == 0 || !config_digit(s[0]))
		return -EINVAL;
	for (; i < n && config_digit(s[i]); i++) {
		unsigned d = (unsigned)(s[i] - '0');
		if (ip > (UINT64_MAX - d) / 10)
			overflow = true;
		else
			ip = ip * 10 + d;
		pv = pv * 10 + d;
	}
	const char *frac = NULL;
	size_t nfrac = 0;
	if (i < n && s[i] == '.') {
		frac = s + ++i;
		for (; i < n && config_digit(s[i]); i++)
			nfrac++;
		if (nfrac == 0)
			return -EINVAL;
	}

	const char *suf = s + i;
	size_t ns = n - i;
	if (ns == 1 && suf[0] == '%') {
		double f = 0, scale = 1;
		for (size_t k = 0; k < nfrac && k < 17; k++) {
			f = f * 10 + (frac[k] - '0');
			scale *= 10;
		}
		*pct = pv + f / scale;
		*bytes = 0;
		return 0;
	}

	int shift = 0;
	if (ns == 0) {
		if (nfrac)
			return -EINVAL; /* no fraction of a byte */
	} else {
		switch (config_lower(suf[0])) {
		case 'k': shift = 10; break;
		case 'm': shift = 20; break;
		case 'g': shift = 30; break;
		case 't': shift = 40; break;
		default: return -EINVAL;
		}
		const char *r = suf + 1;
		size_t nr = ns - 1;
		bool ok = nr == 0 || (nr == 1 && config_lower(r[0]) == 'b') ||
			  (nr == 2 && config_lower(r[0]) == 'i' && config_lower(r[1]) == 'b');
		if (!ok)
			return -EINVAL;
	}
	if (overflow || (shift && ip > (UINT64_MAX >> shift)))
		return -ERANGE;
	/* The low shift bits of ip << shift are zero and the fraction's bytes
	 * are below 2^shift, so the sum cannot overflow. */
	*bytes = (ip << shift) + (nfrac ? config_frac_bytes(frac, nfrac, shift) : 0);
	*pct = -1;
	return 0;
}

int ckc_parse_size(const char *s, uint64_t *bytes, double *pct)
{
	uint64_t b;
	double p;

	if (!s)
		return -EINVAL;
	int rc = ckc_parse_size_span(s, strlen(s), &b, &p);
	if (rc)
		return rc;
	if (p >= 0) {
		if (p > 100 || !pct)
			return -EINVAL;
		*pct = p;
		if (bytes)
			*bytes = 0;
	} else {
		if (bytes)
			*bytes = b;
		if (pct)
			*pct = -1;
	}
	return 0;
}

