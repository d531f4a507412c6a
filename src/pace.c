/* Pacing of the cache's background copies (flushes to the real files,
 * prefetches into memory): each moves in pieces sized to take about
 * CKC_BG_SLICE_NS, and gives way to the program's copies between them, so
 * that a read or write of the program that begins while a piece is in
 * flight shares the memory bandwidth with it for a short while only. */
#include "config.h"

#include "engine_int.h"

/* The size of this thread's next piece: what the last pieces taken
 * suggest (a copy into memory the kernel must first find for it runs ten
 * times slower than one into memory it has at hand). */
static __thread size_t pace_piece;

size_t ckc_pace_begin(uint64_t left, uint64_t *t0)
{
	if (!pace_piece)
		pace_piece = CKC_BG_PIECE;
	ckc_bg_yield();
	*t0 = ckc_now_ns();
	return left < pace_piece ? (size_t)left : pace_piece;
}

void ckc_pace_end(size_t n, uint64_t t0)
{
	uint64_t ns = ckc_now_ns() - t0;

	if (n < pace_piece)
		return; /* a short last piece says nothing */
	if (ns > CKC_BG_SLICE_NS && pace_piece > CKC_BG_PIECE_MIN)
		pace_piece /= 2;
	else if (ns < CKC_BG_SLICE_NS / 3 && pace_piece < CKC_BG_PIECE)
		pace_piece *= 2;
}
