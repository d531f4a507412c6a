/* Pacing of the cache's background copies (flushes to the real files,
 * prefetches into memory): each moves in pieces sized to take about
 * CKC_BG_SLICE_NS, and gives way to the program's copies between them, so
 * that a read or write of the program that begins while a piece is in
 * flight shares the memory bandwidth with it for a short while only. */
#include "config.h"

#include "engine_int.h"

#include <time.h>
#include "sys.h"

/* The size of this thread's next piece, and how long the last one took:
 * what the last pieces suggest (a copy into memory the kernel must first
 * find for it runs ten times slower than one into memory it has at hand). */
static __thread size_t pace_piece;
static __thread uint64_t pace_last_ns;

__thread bool ckc_tl_flushing;
__thread bool ckc_tl_prefetcher;

/* The program's reads waiting for the prefetch in flight now (there is one
 * prefetch thread: the prefetch they wait for is its current one). */
static atomic_int prefetch_awaited;

void ckc_prefetch_awaited(int delta)
{
	atomic_fetch_add_explicit(&prefetch_awaited, delta, memory_order_acq_rel);
}

/* Whether this thread's work is what a read of the program waits for: it
 * then gives way to nothing (the read it would give way to is the one
 * waiting for it). */
static bool awaited_here(void)
{
	return ckc_tl_prefetcher && atomic_load_explicit(&prefetch_awaited, memory_order_acquire) > 0;
}

/* The program's copies and captures in progress (ckc_prog_begin), and
 * when the last one ended. The driver serialises more than the hardware
 * does, and the kernel more than the program sees: a transfer to or from
 * pageable memory, a registration of host memory and the mapping of
 * device memory hold the program's own calls for their whole length; a
 * population of host pages holds the address space's lock, which a
 * capture's page protection needs. The cache's background threads
 * (flushers, prefetcher, mapping thread, host populator, kernel touch)
 * therefore work in short pieces, and start each one only while no copy
 * or capture of the program is in progress. */
static atomic_int prog_busy;
static atomic_uint_fast64_t prog_end;
/* when the program last opened a checkpoint for reading */
static atomic_uint_fast64_t prog_read_open;

CKC_TAGGED_PATH void ckc_prog_begin(void)
{
	atomic_fetch_add_explicit(&prog_busy, 1, memory_order_acq_rel);
}

CKC_TAGGED_PATH void ckc_prog_end(void)
{
	atomic_store_explicit(&prog_end, ckc_now_ns(), memory_order_release);
	atomic_fetch_sub_explicit(&prog_busy, 1, memory_order_acq_rel);
}

CKC_TAGGED_PATH void ckc_prog_read_opened(void)
{
	atomic_store_explicit(&prog_read_open, atomic_load_explicit(&prog_end, memory_order_relaxed),
			      memory_order_release);
}

/* Whether stamp, a time another thread took, is at most window before now.
 * A stamp taken on another CPU an instant ago can read a little later than
 * now (the CPUs' clocks of a virtual machine agree only so closely): it
 * is recent, not 584 years old. */
static bool stamp_recent(uint64_t stamp, uint64_t now, uint64_t window)
{
	return stamp >= now || now - stamp < window;
}

/* Whether the program opened a checkpoint for reading within the last
 * CKC_BG_READ_QUIET_NS. */
static bool prog_reading(void)
{
	uint64_t r = atomic_load_explicit(&prog_read_open, memory_order_acquire);
	return stamp_recent(r, ckc_now_ns(), CKC_BG_READ_QUIET_NS);
}

static bool prog_copying(void)
{
	return atomic_load_explicit(&prog_busy, memory_order_acquire) > 0;
}

/* On a background thread: naps of nap_ns while busy() says so, for
 * CKC_BG_YIELD_MAX_NS at most. */
static void bg_wait(bool (*busy)(void), long nap_ns)
{
	if (!ckc_tl_background || awaited_here() || !busy())
		return;
	uint64_t t0 = ckc_now_ns();
	while (busy() && !awaited_here() && ckc_now_ns() - t0 < CKC_BG_YIELD_MAX_NS) {
		struct timespec ts = { 0, nap_ns };
		nanosleep(&ts, NULL);
	}
}

void ckc_bg_yield_reads(void)
{
	bg_wait(prog_reading, 50000);
}

int ckc_prog_copies(void)
{
	return atomic_load_explicit(&prog_busy, memory_order_acquire);
}

uint64_t ckc_prog_quiet_ns(void)
{
	if (atomic_load_explicit(&prog_busy, memory_order_acquire) > 0)
		return 0;
	uint64_t end = atomic_load_explicit(&prog_end, memory_order_acquire), now = ckc_now_ns();
	return now > end ? now - end : 0;
}

void ckc_bg_yield(void)
{
	bg_wait(prog_copying, 20000);
}

/* Reads of the program in progress (a restore: what the background work
 * must not slow down), and when the last one ended. */
static atomic_int pace_reads;
static atomic_uint_fast64_t pace_read_end;

void ckc_pace_reading(int delta)
{
	if (delta < 0)
		atomic_store_explicit(&pace_read_end, ckc_now_ns(), memory_order_release);
	atomic_fetch_add_explicit(&pace_reads, delta, memory_order_acq_rel);
}

/* Whether the program reads checkpoints now: one read in progress, or one
 * that ended CKC_BG_READ_GAP_NS ago or less (a program that reads one
 * after another leaves gaps that short between them, and a piece begun in
 * one would run into the next read). */
static bool pace_program_reads(uint64_t now)
{
	return atomic_load_explicit(&pace_reads, memory_order_acquire) > 0 ||
	       stamp_recent(atomic_load_explicit(&pace_read_end, memory_order_acquire), now, CKC_BG_READ_GAP_NS);
}

/* Waits while the program copies (lock not held): while it reads, as
 * ckc_bg_yield does, except a flush (below); while it writes, a few
 * pieces' time at most. A flush must end before the program does (the
 * exit drains them): time it gives way to the program's reads is paid at
 * the exit when the program ends soon after them (numpy loading back what
 * it just saved, then exiting), so a flush waits for reads as long as its
 * last piece took at most, keeping half the time. */
static void pace_wait(void)
{
	uint64_t piece_ns = pace_last_ns ? pace_last_ns : CKC_BG_SLICE_NS;
	uint64_t w0 = ckc_now_ns(), write_max = CKC_BG_WRITE_WAITS * piece_ns;
	uint64_t read_max = ckc_tl_flushing ? piece_ns : CKC_BG_YIELD_MAX_NS;

	if (!ckc_tl_background)
		return;
	for (;;) {
		if (awaited_here())
			break;
		uint64_t now = ckc_now_ns();
		bool reading = pace_program_reads(now);
		if (!reading && ckc_prog_copies() <= 0)
			break;
		if (now - w0 >= (reading ? read_max : write_max))
			break;
		struct timespec ts = { 0, 20000 };
		nanosleep(&ts, NULL);
	}
}

size_t ckc_pace_begin(uint64_t left, uint64_t *t0)
{
	if (!pace_piece)
		pace_piece = CKC_BG_PIECE;
	pace_wait();
	*t0 = ckc_now_ns();
	return left < pace_piece ? (size_t)left : pace_piece;
}

void ckc_pace_end(size_t n, uint64_t t0)
{
	uint64_t ns = ckc_now_ns() - t0;

	if (n < pace_piece)
		return; /* a short last piece says nothing */
	pace_last_ns = ns;
	if (ns > CKC_BG_SLICE_NS && pace_piece > CKC_BG_PIECE_MIN)
		pace_piece /= 2;
	else if (ns < CKC_BG_SLICE_NS / 3 && pace_piece < CKC_BG_PIECE)
		pace_piece *= 2;
}
