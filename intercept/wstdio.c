/* Wide-character stdio on tagged streams. A tagged stream is a glibc
 * cookie stream (stdio.c), which has no wide-character state: glibc's wide
 * functions would crash on it or fail. Here they work through the byte
 * functions of the same stream, in the locale's multibyte encoding, as
 * glibc's own conversion does for a file stream: fwide, fputwc, putwc,
 * fputws, fwprintf, vfwprintf, fgetwc, getwc, fgetws, ungetwc (and the
 * _unlocked and _FORTIFY_SOURCE forms); a character the encoding lacks is
 * transliterated as glibc's conversion does it. The wide scanf family cannot be served so: on a tagged
 * stream it fails (EINVAL) and says so once. Any other stream goes to the
 * C library's functions. */
#include "config.h"

#include <errno.h>
#include <iconv.h>
#include <langinfo.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "intercept.h"
#include "log.h"

/* The longest formatted text served, in wide characters. */
#define WPRINTF_MAX (64u << 20)

/* Whether f is a tagged stream, oriented wide now (mode > 0 sets that
 * when it has no orientation yet); *tagged says whether it is tagged. */
static bool wide_tagged(FILE *f, bool *tagged)
{
	int o = ckc_stdio_orient(f, 1);
	*tagged = o != CKC_NOT_TAGGED_STREAM;
	return o == 1;
}

static wint_t w_failed(FILE *f, int err)
{
	if (err)
		errno = err;
	f->_flags |= _IO_ERR_SEEN;
	return WEOF;
}

/* The bytes of a character the locale's encoding lacks, as glibc's own
 * conversion for a file stream writes them: transliterated by the
 * locale's tables ("EUR" for the euro sign in the C locale), else "?".
 * (size_t)-1 where none can be had. */
#define W_TRANSLIT_MAX 32
static size_t w_translit(wchar_t wc, char out[W_TRANSLIT_MAX])
{
	char cs[96];
	snprintf(cs, sizeof(cs), "%s//TRANSLIT", nl_langinfo(CODESET));
	iconv_t cd = iconv_open(cs, "WCHAR_T");
	if (cd == (iconv_t)-1)
		return (size_t)-1;
	char *in = (char *)&wc, *o = out;
	size_t il = sizeof(wc), ol = W_TRANSLIT_MAX;
	size_t r = iconv(cd, &in, &il, &o, &ol);
	if (r != (size_t)-1)
		r = iconv(cd, NULL, NULL, &o, &ol); /* (the shift back, if any) */
	iconv_close(cd);
	return r == (size_t)-1 || il ? (size_t)-1 : (size_t)(o - out);
}

static wint_t w_put(wchar_t wc, FILE *f)
{
	char b[W_TRANSLIT_MAX > MB_LEN_MAX ? W_TRANSLIT_MAX : MB_LEN_MAX];
	mbstate_t st;
	memset(&st, 0, sizeof(st));
	int e = errno;
	size_t n = wcrtomb(b, wc, &st);
	if (n == (size_t)-1) {
		if ((n = w_translit(wc, b)) == (size_t)-1)
			return w_failed(f, EILSEQ);
		errno = e;
	}
	return fwrite(b, 1, n, f) == n ? (wint_t)wc : WEOF;
}

static wint_t w_get(FILE *f)
{
	mbstate_t st;
	memset(&st, 0, sizeof(st));
	for (int i = 0; i < MB_LEN_MAX; i++) {
		int c = getc(f);
		if (c == EOF)
			return i ? w_failed(f, EILSEQ) : WEOF;
		char ch = (char)c;
		wchar_t wc;
		size_t r = mbrtowc(&wc, &ch, 1, &st);
		if (r == (size_t)-1)
			return w_failed(f, EILSEQ);
		if (r != (size_t)-2)
			return (wint_t)wc;
	}
	return w_failed(f, EILSEQ);
}

static int w_puts(const wchar_t *ws, FILE *f)
{
	for (; *ws; ws++)
		if (w_put(*ws, f) == WEOF)
			return -1;
	return 1;
}

static wchar_t *w_gets(wchar_t *ws, int n, FILE *f)
{
	if (n <= 0) {
		errno = EINVAL;
		return NULL;
	}
	int i = 0;
	while (i < n - 1) {
		wint_t c = w_get(f);
		if (c == WEOF) {
			if (i == 0 || ferror(f))
				return NULL;
			break;
		}
		ws[i++] = (wchar_t)c;
		if (c == L'\n')
			break;
	}
	ws[i] = L'\0';
	return ws;
}

#define WIDE_PUT(name)                                                                    \
	CKC_EXPORT wint_t name(wchar_t wc, FILE *f)                                       \
	{                                                                                 \
		bool tagged;                                                              \
		bool wide = wide_tagged(f, &tagged);                                      \
		if (!tagged)                                                              \
			return REAL(name)(wc, f);                                         \
		return wide ? w_put(wc, f) : WEOF;                                        \
	}

#define WIDE_GET(name)                                                                    \
	CKC_EXPORT wint_t name(FILE *f)                                                   \
	{                                                                                 \
		bool tagged;                                                              \
		bool wide = wide_tagged(f, &tagged);                                      \
		if (!tagged)                                                              \
			return REAL(name)(f);                                             \
		return wide ? w_get(f) : WEOF;                                            \
	}

#define WIDE_PUTS(name)                                                                   \
	CKC_EXPORT int name(const wchar_t *ws, FILE *f)                                   \
	{                                                                                 \
		bool tagged;                                                              \
		bool wide = wide_tagged(f, &tagged);                                      \
		if (!tagged)                                                              \
			return REAL(name)(ws, f);                                         \
		return wide ? w_puts(ws, f) : -1;                                         \
	}

#define WIDE_GETS(name)                                                                   \
	CKC_EXPORT wchar_t *name(wchar_t *ws, int n, FILE *f)                             \
	{                                                                                 \
		bool tagged;                                                              \
		bool wide = wide_tagged(f, &tagged);                                      \
		if (!tagged)                                                              \
			return REAL(name)(ws, n, f);                                      \
		return wide ? w_gets(ws, n, f) : NULL;                                    \
	}

WIDE_PUT(fputwc)
WIDE_PUT(putwc)
WIDE_PUT(fputwc_unlocked)
WIDE_PUT(putwc_unlocked)
WIDE_GET(fgetwc)
WIDE_GET(getwc)
WIDE_GET(fgetwc_unlocked)
WIDE_GET(getwc_unlocked)
WIDE_PUTS(fputws)
WIDE_PUTS(fputws_unlocked)
WIDE_GETS(fgetws)
WIDE_GETS(fgetws_unlocked)

CKC_EXPORT int fwide(FILE *f, int mode)
{
	int o = ckc_stdio_orient(f, mode);
	return o != CKC_NOT_TAGGED_STREAM ? o : REAL(fwide)(f, mode);
}

CKC_EXPORT wint_t ungetwc(wint_t wc, FILE *f)
{
	bool tagged;
	bool wide = wide_tagged(f, &tagged);
	if (!tagged)
		return REAL(ungetwc)(wc, f);
	if (!wide || wc == WEOF)
		return WEOF;
	char b[MB_LEN_MAX];
	mbstate_t st;
	memset(&st, 0, sizeof(st));
	size_t n = wcrtomb(b, (wchar_t)wc, &st);
	if (n == (size_t)-1)
		return WEOF;
	while (n > 0)
		if (ungetc((unsigned char)b[--n], f) == EOF)
			return WEOF;
	return wc;
}

/* The formatted text, converted to bytes and written: the count of wide
 * characters, or -1. */
static int w_vprintf(FILE *f, const wchar_t *fmt, va_list ap)
{
	size_t cap = 256;
	wchar_t *w = NULL;
	int n;
	for (;;) {
		wchar_t *nw = realloc(w, cap * sizeof(*w));
		if (!nw) {
			free(w);
			errno = ENOMEM;
			return -1;
		}
		w = nw;
		va_list cp;
		va_copy(cp, ap);
		errno = 0;
		n = vswprintf(w, cap, fmt, cp);
		va_end(cp);
		/* -1 with room to spare is an error of the format or the text */
		if (n >= 0 || errno == EILSEQ || cap >= WPRINTF_MAX)
			break;
		cap *= 4;
	}
	if (n >= 0) {
		const wchar_t *src = w;
		mbstate_t st;
		memset(&st, 0, sizeof(st));
		int e = errno;
		size_t len = wcsrtombs(NULL, &src, 0, &st);
		if (len == (size_t)-1) {
			errno = e;
			/* a character the encoding lacks: each on its own,
			 * transliterated as glibc's file streams do */
			for (int i = 0; i < n; i++)
				if (w_put(w[i], f) == WEOF) {
					n = -1;
					break;
				}
			free(w);
			return n;
		}
		char *b = malloc(len + 1);
		memset(&st, 0, sizeof(st));
		src = w;
		if (!b || wcsrtombs(b, &src, len + 1, &st) != len || fwrite(b, 1, len, f) != len)
			n = -1;
		free(b);
	}
	free(w);
	return n;
}

CKC_EXPORT int vfwprintf(FILE *f, const wchar_t *fmt, va_list ap)
{
	bool tagged;
	bool wide = wide_tagged(f, &tagged);
	if (!tagged)
		return REAL(vfwprintf)(f, fmt, ap);
	return wide ? w_vprintf(f, fmt, ap) : -1;
}

CKC_EXPORT int fwprintf(FILE *f, const wchar_t *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vfwprintf(f, fmt, ap);
	va_end(ap);
	return r;
}

/* The checking entry points of _FORTIFY_SOURCE (a program built with it
 * calls these for fwprintf and fgetws): the same check as glibc's, then
 * the tagged stream is served as for the plain call. */
extern void __chk_fail(void) __attribute__((noreturn));

CKC_EXPORT int __vfwprintf_chk(FILE *f, int flag, const wchar_t *fmt, va_list ap)
{
	if (ckc_stdio_orient(f, 0) == CKC_NOT_TAGGED_STREAM)
		return REAL(__vfwprintf_chk)(f, flag, fmt, ap);
	return vfwprintf(f, fmt, ap);
}

CKC_EXPORT int __fwprintf_chk(FILE *f, int flag, const wchar_t *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = __vfwprintf_chk(f, flag, fmt, ap);
	va_end(ap);
	return r;
}

static wchar_t *w_gets_chk(wchar_t *(*real)(wchar_t *, size_t, int, FILE *), wchar_t *ws, size_t size, int n,
			   FILE *f)
{
	if (ckc_stdio_orient(f, 0) == CKC_NOT_TAGGED_STREAM)
		return real(ws, size, n, f);
	if (n > 0 && (size_t)n > size)
		__chk_fail();
	return fgetws(ws, n, f);
}

CKC_EXPORT wchar_t *__fgetws_chk(wchar_t *ws, size_t size, int n, FILE *f)
{
	return w_gets_chk(REAL(__fgetws_chk), ws, size, n, f);
}

CKC_EXPORT wchar_t *__fgetws_unlocked_chk(wchar_t *ws, size_t size, int n, FILE *f)
{
	return w_gets_chk(REAL(__fgetws_unlocked_chk), ws, size, n, f);
}

/* The wide scanf family on a tagged stream: refused. */
static int w_scanf_refused(FILE *f)
{
	static atomic_bool said;
	if (!atomic_exchange(&said, true))
		ckc_warn("fwscanf on a checkpoint the cache holds is not supported: it fails (EINVAL); "
			 "reading it with fgetws and swscanf works");
	(void)f;
	errno = EINVAL;
	return EOF;
}

/* Named through asm labels: glibc's headers may name fwscanf
 * __isoc99_fwscanf themselves. */
int ckc_w_vfwscanf(FILE *f, const wchar_t *fmt, va_list ap) __asm__("vfwscanf");
int ckc_w_fwscanf(FILE *f, const wchar_t *fmt, ...) __asm__("fwscanf");
int ckc_w_isoc99_vfwscanf(FILE *f, const wchar_t *fmt, va_list ap) __asm__("__isoc99_vfwscanf");
int ckc_w_isoc99_fwscanf(FILE *f, const wchar_t *fmt, ...) __asm__("__isoc99_fwscanf");

static int w_vscanf(int (*real)(FILE *, const wchar_t *, va_list), FILE *f, const wchar_t *fmt, va_list ap)
{
	if (ckc_stdio_orient(f, 0) != CKC_NOT_TAGGED_STREAM)
		return w_scanf_refused(f);
	return real(f, fmt, ap);
}

CKC_EXPORT int ckc_w_vfwscanf(FILE *f, const wchar_t *fmt, va_list ap)
{
	return w_vscanf(REAL(vfwscanf), f, fmt, ap);
}

CKC_EXPORT int ckc_w_isoc99_vfwscanf(FILE *f, const wchar_t *fmt, va_list ap)
{
	return w_vscanf(REAL(__isoc99_vfwscanf), f, fmt, ap);
}

CKC_EXPORT int ckc_w_fwscanf(FILE *f, const wchar_t *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = ckc_w_vfwscanf(f, fmt, ap);
	va_end(ap);
	return r;
}

CKC_EXPORT int ckc_w_isoc99_fwscanf(FILE *f, const wchar_t *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = ckc_w_isoc99_vfwscanf(f, fmt, ap);
	va_end(ap);
	return r;
}
