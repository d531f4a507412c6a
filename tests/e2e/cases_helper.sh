# Cases driven by tests/apps/e2e_helper (threads, fork and exec, descriptor
# operations, stdio, names, the call paths the library does not serve) and
# by tests/apps/api_user (<ckptcache.h>), and untagged files with the
# library loaded.

need_helper() {
	[ -n "$HELPER" ] || fail "no e2e_helper program (tests/apps/e2e_*.c did not compile)"
}

# helper_ok WHAT [VAR=VALUE]... -- MODE ARGS...: the helper under the library
# must exit 0 (77: the sub-test cannot run here).
helper_ok() {
	local what=$1
	shift
	local envs=()
	while [ "$1" != -- ]; do
		envs+=("$1")
		shift
	done
	shift
	need_helper
	ck "${envs[@]}" -- "$HELPER" "$@"
	local rc=$?
	[ $rc -eq 77 ] && note "$(grep -a -m1 '^NOTE' "$T/.log" | sed 's/^NOTE //')"
	[ $rc -eq 0 ] || fail "$what: $(status_text $rc)$(last_error)"
}

# ---- threads, fork -----------------------------------------------------------------

# The C library's directory walkers (scandir, scandirat, glob, nftw, fts)
# find every checkpoint closed before they ran, though the cache had not
# published them yet.
walkers_case() {
	helper_ok "the C library's walkers" CKPTCACHE_PATHS="$T/ck/**" CKPTCACHE_STEP_ASIDE=off -- walkers "$T/ck" 10 64K 90
}

# Calls on a checkpoint the cache holds answer as on an untagged file: a
# rename onto a folder, O_DIRECTORY, new names onto it, sync_file_range,
# syncfs, F_GETLEASE, utimensat with a null path.
answers_case() {
	mkdir -p plainside
	helper_ok "calls answered as the kernel answers" CKPTCACHE_STEP_ASIDE=off -- answers "$T/ck" "$T/plainside"
	run_ok "b.bin at its real path" plain "$HELPER" check ck/b.bin 8192 1
	run_ok "a.bin at its real path" plain "$HELPER" check ck/a.bin 8192 2
}

# Children started (posix_spawn, vfork+exec, fork) while four threads open,
# write, read and close their checkpoints without pause: each start hands
# the program's tagged descriptors over while the threads close them.
spawnrace_case() {
	helper_ok "children started while threads close checkpoints" -- spawnrace "$T/ck" "$(rounds 150 150 60)" 60K 5
}

# A program that takes its own signals through a signalfd and sigtimedwait,
# blocked in its thread: the library's threads must not take them (SIGUSR1's
# default would end the program, a child's SIGCHLD would be lost).
signals_case() {
	helper_ok "signals taken by signalfd and sigtimedwait" -- signals "$T/ck" 4 1M 71
	local i
	for i in 0 1 2 3; do
		run_ok "checkpoint $i at its real path" plain "$HELPER" check "ck/sig_0$i.bin" 1M $((71 + i))
	done
}

# A SIGALRM handler writes a record into a checkpoint open for the whole
# run, every 100 us, while the program writes checkpoints and forks a child
# after each: the handler interrupts the library's calls, and the fork while
# it holds the library's locks (the handler waited for them for ever, and
# the process hung). Each record, and each checkpoint, is read back in the
# process and at its real path.
handler_writes_case() {
	helper_ok "a signal handler that writes a checkpoint" CKPTCACHE_STEP_ASIDE=off -- handlerwrites "$T/ck" 40 1M 33
	run_ok "the handler's records at their real path" plain "$HELPER" handlerlog ck/log.bin
	local i
	for ((i = 0; i < 40; i += 13)); do
		run_ok "checkpoint $i at its real path" plain "$HELPER" check "ck/hw_$(printf %02d $i).bin" 1M $((33 + i))
	done
}

# A SIGALRM handler ends the program with _exit(7) while it allocates and
# frees without pause (a time limit's handler): the handler interrupts
# malloc, and the library's work at _exit, which allocates, waited for
# malloc's lock for ever. The program must end with status 7, each
# checkpoint at its real path (the last one still open).
handler_exit_case() {
	need_helper
	local i rc
	for ((i = 0; i < 3; i++)); do
		rm -f ck/hx_*
		ck CKPTCACHE_STEP_ASIDE=off -- "$HELPER" handlerexit "$T/ck" 4 1M 61
		rc=$?
		[ $rc -eq 7 ] || fail "run $i: $(status_text $rc), expected exit status 7$(last_error)"
		local k
		for ((k = 0; k < 4; k++)); do
			run_ok "run $i: checkpoint $k at its real path" plain "$HELPER" check "ck/hx_0$k.bin" 1M $((61 + k))
		done
	done
}

# Threads that write checkpoints without pause, cancelled with
# pthread_cancel at their calls (open, write, close are cancellation
# points), round after round: a thread cancelled inside the library took
# its lock with it, and the next round hung.
cancel_write_case() {
	helper_ok "threads cancelled while they write checkpoints" -- cancelwrite "$T/ck" 40 1M 19
	run_ok "the last checkpoint at its real path" plain "$HELPER" check ck/cw_final.bin 1M 19
}

# A SIGALRM handler writes a small checkpoint and reads it back every
# 500 us while the program only allocates and frees: the handler's calls
# go to the real files (the cache holds nothing they could miss), and the
# library's work, which allocates, never waits for the lock of the malloc
# the handler interrupted (it did, for ever).
handler_malloc_case() {
	# three million allocations under a sanitizer's allocator take 30 s
	# alone on 2 CPUs (5 s without it), past the case's limit beside
	# another case and a loaded host: one million there. With the quick
	# set, 16K under a sanitizer, whose allocator the library does not
	# see (the handler interrupts no malloc of the library's): the handler
	# runs every 500 us, each run writes a file, and 256K rounds took 60 s
	local n
	n=$(rounds 3M 1M 16K)
	under_sanitizer && [ "${QUICK:-0}" -eq 0 ] && n=1M
	helper_ok "a signal handler's checkpoints while the program allocates" -- handlermalloc "$T/ck" $n
	local k
	for k in 0 1 2 3; do
		[ "$(tr -d "$(printf "\\$(printf %o $((97 + k)))")" <"ck/alarm$k.bin" | wc -c)" -eq 0 ] &&
			[ "$(stat -c %s "ck/alarm$k.bin")" -eq 512 ] || fail "alarm$k.bin at its real path"
	done
}

# The handler only reads back a checkpoint that the cache holds and its
# real path lacks (persist=never): its calls are the cache's, which
# allocates, while the thread it interrupts is inside malloc.
handler_malloc_held_case() {
	# a sanitizer's allocator is preloaded before the library, which does
	# not see its calls (ckptcache(7))
	under_sanitizer && note "the allocator is the sanitizer's, which the library does not see"
	helper_ok "a signal handler's reads of a held checkpoint while the program allocates" \
		CKPTCACHE_PERSIST=never -- handlermalloc "$T/ck" "$(rounds 3M 1M)" held
	stats_ok files==1 host.hits\>10
	absent ck/held.bin "persist=never: after exit"
}

threads_case() {
	helper_ok "4 writer threads + 2 pwrite threads sharing an fd" -- threads "$T/ck" 3M
	# 4 x 3 MiB, 6 MiB shared, 4 MiB read by four threads through one fd
	stats_ok files==1 objects.written==6 host.hits\>0 host.put_bytes==$((22 << 20))
	local i
	for i in 0 1 2 3; do
		run_ok "thread file $i at its real path" plain "$HELPER" check "ck/thr_$i.bin" 3M $((100 + i))
	done
	run_ok "shared file at its real path" plain "$HELPER" check ck/shared.bin 6M 200
}

# A tagged descriptor inherited by a forked child, by an exec'ed one, by
# cat as its standard input and through /proc/self/fd: each reads the
# checkpoint's bytes at the offset it shares with the parent; a forked
# child writes the second half of another through an inherited writer.
fork_exec_case() {
	helper_ok "fork/exec with tagged descriptors" -- fork "$T/ck/f1.bin" "$T/ck/f2.bin" 1M 5
	run_ok "f1 at its real path" plain "$HELPER" check ck/f1.bin 1M 5
	run_ok "f2 at its real path (half of it written by the child)" plain "$HELPER" check ck/f2.bin 1M 5
}

# ---- call paths the library does not serve ---------------------------------------------

unsupported_raw() {
	helper_ok "raw syscalls on tagged descriptors" -- rawsys "$T/ck/r1.bin" "$T/ck/r2.bin" 1M 6
	run_ok "r1 at its real path" plain "$HELPER" check ck/r1.bin 1M 6
	run_ok "r2 at its real path (holds only the library's write)" plain "$HELPER" check ck/r2.bin 1M 6
}

unsupported_mmap() {
	helper_ok "mmap of tagged descriptors" -- mmap "$T/ck/m1.bin" "$T/ck/m2.bin" 1M 7
	run_ok "m1 at its real path" plain "$HELPER" check ck/m1.bin 1M 7
	[ "$(head -c 4096 ck/m2.bin | tr -d M | wc -c)" -eq 0 ] ||
		fail "m2 at its real path lost the bytes written through the map"
	[ "$(stat -c %s ck/m2.bin)" -eq $((1 << 20)) ] || fail "m2 at its real path has the wrong size"
}

# A tagged descriptor reopened through /proc/self/fd/N and /dev/fd/N (by
# open and fopen; read, and written through): the kernel opens the real
# file, which the checkpoint goes to first.
procfd_case() {
	helper_ok "reopen through /proc/self/fd" -- procfd "$T/ck/p.bin" 100K 8
	run_ok "p at its real path" plain "$HELPER" check ck/p.bin 100K 8
}

# The same where the pattern names the checkpoints by their ending, which
# /proc/self/fd/N and /dev/fd/N do not have (the open of an untagged name
# skips the look at its path; those names are not untagged)
procfd_named_case() {
	helper_ok "reopen through /proc/self/fd" CKPTCACHE_PATHS="$T/ck/*.bin" -- procfd "$T/ck/p.bin" 100K 8
	run_ok "p at its real path" plain "$HELPER" check ck/p.bin 100K 8
}

unsupported_uring() {
	helper_ok "io_uring on tagged descriptors" -- uring "$T/ck/u1.bin" "$T/ck/u2.bin" 256K 9
	run_ok "u2 at its real path" plain "$HELPER" check ck/u2.bin 256K 9
}

# POSIX AIO on tagged descriptors: the checkpoint goes to its real file,
# which the C library's helper threads use.
posix_aio_case() {
	helper_ok "POSIX aio on tagged descriptors" -- aio "$T/ck/a1.bin" "$T/ck/a2.bin" 256K 9
	run_ok "a2 at its real path" plain "$HELPER" check ck/a2.bin 256K 9
}

# stdout dup2'ed onto a tagged descriptor: write() and glibc's stdio (which
# writes with internal calls the library cannot see) both reach the file, in
# order. The shell form: a builtin's output redirected into a new and an
# existing checkpoint.
stdout_case() {
	helper_ok "stdout on a tagged descriptor" -- stdout "$T/ck/o.txt"
	printf 'via write()\nvia stdio\n' >o.ref
	same o.ref ck/o.txt "the checkpoint written through a tagged stdout"
	phase shell
	echo "an older version, longer than the new one" >ck/printf.txt
	ck -- bash -c 'echo "from echo" >ck/echo.txt; printf "%s\n" "from printf" >ck/printf.txt' ||
		fail "bash's echo and printf into checkpoints failed$(last_error)"
	[ "$(cat ck/echo.txt ck/printf.txt)" = "from echo
from printf" ] || fail "bash builtins wrote '$(cat ck/echo.txt ck/printf.txt | head -c 100)' into checkpoints"
}

unsupported_locks() {
	helper_ok "flock/F_SETLK/F_GETLK on tagged descriptors" -- locks "$T/ck/l.bin" 100K 3
	run_ok "l at its real path" plain "$HELPER" check ck/l.bin 100K 3
}

# ---- descriptor operations, stdio, fsync ------------------------------------------------

fdops_case() {
	helper_ok "fstat/lseek/dup/dup2/fcntl/readv/writev/ftruncate/fsync" -- fdops "$T/ck/fd.bin" 11
	stats_ok files==1 objects.written==2 host.hits\>0
	only_names ck '^fd\.bin(\.2)?$' "after exit"
}

fsync_never_case() {
	helper_ok "fsync with persist=never" CKPTCACHE_PERSIST=never -- fsync-never "$T/ck/fn.bin" 1M 3
	absent ck/fn.bin "persist=never: after exit"
}

stdio_case() {
	helper_ok "stdio on tagged files" -- stdio "$T/ck/s.bin" 1M 12
	stats_ok files==1 host.hits\>0
	# what is at the real path: the w+ version plus the appended bytes
	plain "$HELPER" gen s.ref 1M 12
	printf APPENDED >>s.ref
	same s.ref ck/s.bin "stdio: the checkpoint at its real path after exit"
}

# Large freads go straight from the cache into the program's buffer, not in
# pieces of the stream's buffer: a few reads reach the cache, not hundreds.
# pwrite/pwritev to an O_APPEND descriptor and pwritev2(RWF_APPEND) append
# (Linux), and leave the position alone.
append_positional_case() {
	helper_ok "positional writes to O_APPEND descriptors" -- append-positional "$T/ck/ap.bin"
	run_ok "the file at its real path" plain "$HELPER" append-positional-check "$T/ck/ap.bin"
}

# lseek on a tagged descriptor past the largest file the file system
# allows, or by a sum that overflows, fails as on an untagged file there.
seek_limits_case() {
	mkdir -p plainside
	helper_ok "lseek's limits" CKPTCACHE_STEP_ASIDE=off -- seek-limits "$T/ck/sl.bin" "$T/plainside/sl.bin"
}

# Successful calls on tagged files leave the program's errno alone, in the
# cache and stepped aside.
# Calls on a cached checkpoint's descriptor that the kernel refuses, each
# answered as the kernel answers them on the real file (its order of
# checks): vectors and positional calls on a descriptor of the other mode
# (empty ones too), a negative offset there, an unknown preadv2 flag with
# nothing to move, sync_file_range's unknown flags and overflowing range.
wrong_mode_errors_case() {
	cat >wm.c <<'C'
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/uio.h>
#include <unistd.h>
#define E(x) do { errno = 0; long r_ = (long)(x); printf("%-40s %ld %d\n", #x, r_, r_ < 0 ? errno : 0); } while (0)
int main(int c, char **v)
{
	char p[4096], b[16];
	struct iovec one = { b, 10 };
	static struct iovec many[1025];
	snprintf(p, sizeof p, "%s/wm.bin", v[1]);
	int w = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (w < 0 || write(w, "0123456789abcdef", 16) != 16)
		return 2;
	E(readv(w, &one, 0));
	E(readv(w, &one, 1));
	E(readv(w, &one, -1));
	E(preadv(w, &one, 0, 0));
	E(preadv2(w, &one, 0, 0, 0));
	E(pread(w, b, 3, -1));
	E(pread(w, b, 3, 0));
	E(sync_file_range(w, 0, 0, 0xff));
	E(sync_file_range(w, 0x7fffffffffffffffLL, 10, SYNC_FILE_RANGE_WRITE));
	E(sync_file_range(w, 0, -1, SYNC_FILE_RANGE_WRITE));
	E(sync_file_range(w, 0, 0, SYNC_FILE_RANGE_WRITE));
	close(w);
	int r = open(p, O_RDONLY);
	if (r < 0)
		return 3;
	E(writev(r, &one, 0));
	E(writev(r, many, 1025));
	E(pwritev(r, &one, 0, 0));
	E(pwrite(r, b, 3, -1));
	E(pwrite(r, b, 3, 0));
	E(preadv2(r, &one, 0, 0, 0x12345));
	E(preadv2(r, &one, 1, 0, 0x12345));
	E(preadv(r, &one, 1, -2));
	E(pread(r, b, 10, 2));
	close(r);
	return 0;
}
C
	gcc -O2 -Wall -o wm wm.c || fail "the C program did not compile"
	mkdir -p plainrun
	plain ./wm plainrun >want.txt || fail "the C program without the library"
	ck -- ./wm "$T/ck" >got.txt || fail "the C program with the library$(last_error)"
	outputs_match want.txt got.txt
	same plainrun/wm.bin ck/wm.bin "wm.bin at its real path"
}

errno_kept_case() {
	helper_ok "errno after successful calls (cached)" CKPTCACHE_STEP_ASIDE=off -- errno-kept "$T/ck"
	rm -f "$T"/ck/*
	helper_ok "errno after successful calls (default)" -- errno-kept "$T/ck"
}

# The durable-replace idiom (write, fsync, close, rename, fsync the
# folder): the fsync'd real file is what the rename moves, at once, and
# the close publishes nothing more (no flush in the trace).
fsync_replace_case() {
	helper_ok "fsync, close, rename (cached)" CKPTCACHE_STEP_ASIDE=off CKPTCACHE_TRACE="$T/trace" -- \
		fsync-replace "$T/ck" 24M 3
	local n
	n=$(grep -c ' flush ' "$T/trace")
	[ "$n" -eq 0 ] || fail "the cache published fsync'd checkpoints again after their close ($n flushes)"
	run_ok "fsync, close, rename (default)" ck -- "$HELPER" fsync-replace "$T/ck" 3M 3
}

# A program that changes its umask between checkpoints: each file gets the
# mode of its own open's umask, in the process and at its real path.
umask_modes_case() {
	local f m
	helper_ok "modes under changing umasks" CKPTCACHE_STEP_ASIDE=off -- umask-modes "$T/ck"
	local files="m022:644 m077:600 m002:664 m000:666 v022:644 s077:600 keep:666"
	[ -e ck/acl/a.bin ] && files="$files acl/a:666"
	for f in $files; do
		m=$(stat -c %a "ck/${f%%:*}.bin") || fail "ck/${f%%:*}.bin is not at its real path"
		[ "$m" = "${f##*:}" ] || fail "ck/${f%%:*}.bin has mode $m at its real path, expected ${f##*:}"
	done
}

# copy_file_range, sendfile and splice with a cached side refuse what the
# kernel refuses on untagged files (an output in append mode, a splice
# between two files, descriptors open the wrong way).
copy_checks_case() {
	mkdir -p plainside
	helper_ok "copy calls' refusals" CKPTCACHE_STEP_ASIDE=off -- copy-checks "$T/ck" "$T/plainside"
	# nothing published: every copy out of a checkpoint comes from the cache
	rm -f ck/*
	helper_ok "copy calls' refusals (persist=never)" CKPTCACHE_STEP_ASIDE=off CKPTCACHE_PERSIST=never -- \
		copy-checks "$T/ck" "$T/plainside"
}

# An O_EXCL open that fails with EMFILE makes no file; the retry works.
emfile_excl_case() {
	local sa
	for sa in off auto; do
		rm -f ck/ex.bin
		helper_ok "O_EXCL under a full descriptor table (step aside $sa)" CKPTCACHE_STEP_ASIDE=$sa -- \
			emfile-excl "$T/ck/ex.bin"
		run_ok "ex.bin at its real path" plain "$HELPER" check ck/ex.bin 1000 3
	done
}

# Checkpoints reached through symbolic links: a "latest" link, a link to a
# file rewritten, a folder reached through a link and written through both
# spellings. No error message, and the last version at the real path.
links_case() {
	helper_ok "checkpoints through symbolic links" CKPTCACHE_STEP_ASIDE=off -- links "$T/ck"
	grep -q 'ckptcache: error' "$T/.log" && fail "an error message:$(first_error 'ckptcache: error')"
	run_ok "run_real/state.bin at its real path" plain "$HELPER" check ck/run_real/state.bin 1M 16
	run_ok "A/x.bin at its real path" plain "$HELPER" check ck/A/x.bin 1M 20
	run_ok "B/x.bin at its real path" plain "$HELPER" check ck/B/x.bin 1M 21
	run_ok "B/f_0.bin at its real path" plain "$HELPER" check ck/B/f_0.bin 16 21
	absent ck/B/y.bin "removed through its other spelling"
}

# Sparse files (a seek far past the end, an ftruncate far up) stay sparse
# at their real paths: the cache steps aside rather than fill the hole.
sparse_case() {
	local f b
	helper_ok "sparse files" CKPTCACHE_STEP_ASIDE=off CKPTCACHE_HOST_CACHE=512M -- sparse "$T/ck"
	for f in sparse0 sparse1 sparse2; do
		b=$(stat -c %b "ck/$f.bin") || fail "ck/$f.bin is not at its real path"
		[ "$b" -lt 2048 ] || fail "ck/$f.bin takes $b blocks of 512 bytes at its real path: its hole was filled"
		run_ok "$f.bin's first bytes" cmp -n 4 "ck/$f.bin" <(printf HEAD)
	done
}

# A checkpoint is never newer than a file the program wrote after it, while
# cached and at its real path (make, find -newer and rsync compare them).
mtime_order_case() {
	mkdir -p plainside
	run_ok "modification times' order without the library" plain "$HELPER" mtime-order "$T/plainside" 200
	local plain_strict with_strict newer
	plain_strict=$(grep -a '^strict=' "$T/.log" | tail -1 | cut -d= -f2)
	helper_ok "modification times' order" CKPTCACHE_PATHS="$T/ck/*.bin" CKPTCACHE_STEP_ASIDE=off -- \
		mtime-order "$T/ck" 200
	with_strict=$(grep -a '^strict=' "$T/.log" | tail -1 | cut -d= -f2)
	newer=$(for i in $(seq 0 199); do find ck -name "a_$i.bin" -newer "ck/b_$i.dat"; done | head -3)
	[ -z "$newer" ] || fail "at their real paths, newer than the files written after them: $newer"
	# where the kernel stamps a file its stdio looked at with its fine
	# clock, a checkpoint written so after another is newer than it
	[ "${plain_strict:-0}" -lt 100 ] || [ "${with_strict:-0}" -ge 100 ] ||
		fail "$with_strict of 200 stdio checkpoints newer than the one before, $plain_strict without the library"
}

# A program that saves from a new thread each time: what the library keeps
# for a thread goes with it (the heap does not grow with the threads), in
# a folder reached through a link too.
# A thread closes numbers inside the C library (closedir, fclose,
# freopen) or in a range (close_range) while another writes checkpoints
# and reads each back: a number the call frees is the writer's next open's
# at once, and that checkpoint stays the writer's (the table entry went
# with the closed number after the call: another thread's new checkpoint
# lost its descriptor, read EBADF or a folder's fstat, or its freed memory).
closerace_case() {
	local how n
	n=$(rounds 2000 600 400)
	echo "plain" >plain.txt
	for how in closedir fclose freopen close_range; do
		rm -rf ck && mkdir -p ck
		helper_ok "checkpoints beside a thread's $how" CKPTCACHE_STEP_ASIDE=off -- closerace "$T/ck" "$n" $how \
			"$T/plain.txt"
		run_ok "the last checkpoints at their real paths ($how)" plain "$HELPER" check ck/c0.bin 1 $((n - 3))
		run_ok "the last checkpoints at their real paths ($how)" plain "$HELPER" check ck/c1.bin 4097 $((n - 2))
		run_ok "the last checkpoints at their real paths ($how)" plain "$HELPER" check ck/c2.bin 65536 $((n - 1))
		run_ok "the last checkpoints at their real paths ($how)" plain "$HELPER" check ck/c3.bin 1048576 "$n"
	done
}

thread_files_case() {
	local n
	n=$(rounds 2000 2000 600)
	helper_ok "a checkpoint saved from $n threads" CKPTCACHE_STEP_ASIDE=off -- thread-files "$T/ck/t.bin" "$n"
	mkdir -p ck/real && ln -s real ck/via
	helper_ok "the same through a folder link" CKPTCACHE_STEP_ASIDE=off -- thread-files "$T/ck/via/t.bin" "$n"
}

# A file unlinked, or renamed over, while its writer still uses it: the
# descriptor reads back every byte, before and after; nothing comes back at
# the unlinked path, and the file renamed over it stays as it is.
unlink_open_case() {
	helper_ok "files unlinked while open" -- unlink-open "$T/ck"
	only_names ck '^scratch[0-9]+\.bin$|^$' "after exit" 2>/dev/null
	[ -z "$(ls ck)" ] || fail "after exit: ck holds $(ls ck | head -3 | tr '\n' ' ')"
}

# Threads of the program sharing a tagged and an untagged stream, started
# after the library's own: the streams' locks are on (every line whole).
stdio_threads_case() {
	# a sanitizer's runtime looks up pthread_create through dlsym, which
	# leaves the locks on: only the bytes are checked then
	local any=
	under_sanitizer && any=locks-any
	helper_ok "threads sharing streams" -- stdio-threads "$T/ck/t.txt" "$T/u.txt" $any
	run_ok "the lines at the real path" plain "$HELPER" stdio-threads-check "$T/ck/t.txt"
}

# fseek(SEEK_CUR) after writes on a tagged stream: positions, reads and
# the file as on an untagged one.
stdio_seek_cur_case() {
	helper_ok "fseek(SEEK_CUR) after a write" -- stdio-seek-cur "$T/ck/s.bin" "$T/u.bin"
	same u.bin ck/s.bin "the tagged stream's file at its real path"
}

# Small freads of an untagged stream (which the library copies from the
# stream's buffer itself while no lock is needed) and of a tagged one, in
# every size from 1 to 40 bytes among getc, ungetc, seeks and writes:
# what each call returns, where the stream stands and the file afterwards
# are those of the same run without the library.
stdio_records_case() {
	need_helper
	local mode want got
	randfile base.bin 300000
	for mode in plain threads bycaller; do
		cp base.bin "u-$mode.ref"
		cp base.bin "u-$mode.bin"
		cp base.bin "ck/r-$mode.bin"
		want=$(plain "$HELPER" stdio-records "u-$mode.ref" "$mode") || fail "$mode: the run without the library"
		got=$(ck -- "$HELPER" stdio-records "$T/u-$mode.bin" "$mode") ||
			fail "$mode: untagged, with the library$(last_error)"
		[ "$got" = "$want" ] || fail "$mode, untagged: with the library '$got', without '$want'"
		same "u-$mode.ref" "u-$mode.bin" "$mode: the untagged file after the run"
		got=$(ck -- "$HELPER" stdio-records "$T/ck/r-$mode.bin" "$mode") ||
			fail "$mode: tagged, with the library$(last_error)"
		[ "$got" = "$want" ] || fail "$mode, tagged: with the library '$got', without '$want'"
		same "u-$mode.ref" "ck/r-$mode.bin" "$mode: the tagged file at its real path after the run"
	done
}

stdio_large_case() {
	helper_ok "large freads of tagged streams" -- stdio-large "$T/ck/l.bin" 4M 5
	stats_ok files==1 host.read_ops\<64
	plain "$HELPER" gen l.ref 4M 5
	same l.ref ck/l.bin "stdio: the checkpoint at its real path after exit"
}

# Large fwrites of tagged streams, mixed with small ones, seeks and append
# mode: the file holds what was written, and a large fwrite reaches the cache
# in one write (not through the stream's buffer, which under device capture
# would read the program's staging memory).
# A "w" or "w+" checkpoint stream whose descriptor is handed over to the
# real file while it is open (a child started with system, popen or fork
# must see the file; ls -l lists it): the fwrites of a whole
# stream buffer or more that follow take all their bytes, which reach the
# file (they returned 0 and were lost, with no error).
stdio_handed_case() {
	local how
	for how in system popen fork ls; do
		rm -f ck/h.bin ck/h.bin.pre
		helper_ok "stdio stream handed over ($how)" -- stdio-handed "$T/ck/h.bin" 2M 9 $how
		plain "$HELPER" gen h.ref 2M 9
		same h.ref ck/h.bin "the checkpoint at its real path after exit ($how)"
	done
	# the error path: past the file-size limit after the hand-over, fwrite
	# takes and reports what it does without the library (EFBIG)
	local want got
	mkdir -p plainrun
	want=$(plain "$HELPER" stdio-handed-efbig "$T/plainrun/e.bin" 2M 9) || fail "efbig without the library"
	got=$(ck -- "$HELPER" stdio-handed-efbig "$T/ck/e.bin" 2M 9) || fail "efbig with the library$(last_error)"
	echo "without: $want"
	echo "with:    $got"
	[ "$got" = "$want" ] || fail "past the size limit after the hand-over: with the library '$got', without '$want'"
	cmp -s "$T/plainrun/e.bin" "$T/ck/e.bin" || fail "the file past the size limit differs from the run without the library"
}

stdio_large_writes_case() {
	helper_ok "large fwrites of tagged streams" -- stdio-large-writes "$T/ck/w.bin" 4M 6
	stats_ok files==1 host.put_ops\<40
	plain "$HELPER" gen w.ref 4M 6
	same w.ref ck/w.bin "stdio: the checkpoint at its real path after exit"
}

# fwrite then _exit, no fflush: what the file holds at its real path is
# what it holds without the library (the C library writes whole buffers'
# worth straight through and keeps the rest; a write of 256 KiB or more
# reaches the file whole with the library), for writes of a buffer and
# around it, after bytes already held, unbuffered, line-buffered and with
# a buffer of the program's, in w, w+ and a streams.
stdio_exit_case() {
	need_helper
	mkdir -p "$T/plainrun"
	local spec mode how sizes k=0
	for spec in "w default 4096" "w default 262145" "w default 100,4096" "w default 1,1,8191,3" \
		"w default 4095,4097,12288" "w+ default 5000,70000" "a default 9000" "w none 10,5000" \
		"w line 300,5000" "w own:10000 9999,10001,25000" "w own:100 250,7"; do
		read -r mode how sizes <<<"$spec"
		k=$((k + 1))
		rm -f "$T/plainrun/x$k.bin" "$T/ck/x$k.bin"
		[ "$mode" = a ] && printf 'held before' >"$T/plainrun/x$k.bin" && printf 'held before' >"$T/ck/x$k.bin"
		plain "$HELPER" stdio-exit "$T/plainrun/x$k.bin" "$mode" "$how" "$sizes" ||
			fail "$spec: without the library"
		ck -- "$HELPER" stdio-exit "$T/ck/x$k.bin" "$mode" "$how" "$sizes" ||
			fail "$spec: with the library$(last_error)"
		local want got
		want=$(stat -c %s "$T/plainrun/x$k.bin")
		got=$(plain stat -c %s "$T/ck/x$k.bin")
		# (a write of 256 KiB or more reaches the file whole: what glibc
		# keeps of it in the buffer is there too)
		case $sizes in
		*262145*) [ "$got" -ge "$want" ] && plain cmp -n "$want" "$T/plainrun/x$k.bin" "$T/ck/x$k.bin" ;;
		*) plain cmp "$T/plainrun/x$k.bin" "$T/ck/x$k.bin" ;;
		esac || fail "$spec: after _exit the file holds $got bytes with the library, $want without, or other bytes"
	done
}

# The host tier takes memory as it is used, not all at start, and gives the
# room of removed checkpoints back once idle (a 2 GiB tier, four 16 MiB
# checkpoints: their 64 MiB plus 32 MiB ahead, not the tier's size; once
# they are removed, the 32 MiB ahead of the next ones stays).
memory_grows_case() {
	need_helper
	under_sanitizer && note "the sanitizer runtime's own memory would be counted; the plain build checks it"
	ck CKPTCACHE_HOST_CACHE=2G -- "$HELPER" rss "$T/ck/m.bin" 16M 3 4 >rss.out ||
		fail "rss: $(status_text $?)$(last_error)"
	cat rss.out
	local before cached after
	read -r before cached after < <(sed -n 's/^rss_kib before=\([0-9]*\) cached=\([0-9]*\) after=\([0-9]*\)/\1 \2 \3/p' rss.out)
	[ -n "$after" ] || fail "no rss line from the helper"
	[ $((cached - before)) -le $((112 * 1024)) ] ||
		fail "with 64 MiB of checkpoints cached the process grew by $(((cached - before) / 1024)) MiB (expected at most 112)"
	[ $((after - before)) -le $((48 * 1024)) ] ||
		fail "once the checkpoints were removed and the cache idle, $(((after - before) / 1024)) MiB more than at start (expected at most 48)"
	stats_ok host.given_back_bytes\>=33554432
}

# Without CKPTCACHE_HOST_CACHE the host tier takes 10% of the memory the
# process may use: in a control group limited to 1 GiB, about 102 MiB.
memory_cgroup_case() {
	local cg
	cg=$(cgroup_make 1073741824) || note "cannot make a memory-limited control group here (not root, or no writable cgroup file system)"
	randfile a.src 65536
	timeout -k 5 "$CASE_TIMEOUT" sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" \
		env CKPTCACHE_PATHS="$T/ck/**" CKPTCACHE_STATS="$STATS/%p.json" LD_PRELOAD="$PRELOAD" cp a.src ck/a.bin
	local rc=$?
	rmdir "$cg" 2>/dev/null
	[ $rc -eq 0 ] || fail "cp in the control group: $(status_text $rc)$(last_error)"
	same a.src ck/a.bin "cp into a tagged path in the control group"
	stats_ok host.capacity\<=115343360 host.capacity\>=67108864
}

freopen_case() {
	helper_ok "freopen of a tagged stream" -- freopen "$T/ck/f.bin" 1M 12
	run_ok "the checkpoint at its real path" plain "$HELPER" check ck/f.bin 1M 12
}

copycalls_case() {
	mkdir -p plain
	helper_ok "sendfile/copy_file_range/splice with tagged descriptors" -- copycalls "$T/ck" "$T/plain" 3000017 4
	stats_ok files==1 host.hits\>0
}

misc_case() {
	helper_ok "holes, O_EXCL, O_APPEND, O_RDWR, truncate, empty, creat, fallocate" -- misc "$T/ck"
	[ -f ck/empty.bin ] && [ ! -s ck/empty.bin ] || fail "the empty checkpoint is not an empty file at its real path"
	[ "$(stat -c %s ck/falloc.bin)" -eq $((1 << 20)) ] || fail "the preallocated checkpoint has the wrong size at its real path"
	run_ok "truncated checkpoint at its real path" plain "$HELPER" check ck/trunc.bin 3000 2
}

# ---- the descriptor table ----------------------------------------------------------------

# closeby HOW: a tagged descriptor closed without close(2); the untagged file
# that reuses its number must read its own bytes.
closeby_case() {
	mkdir -p plain
	helper_ok "$1 of a tagged descriptor" -- closeby "$1" "$T/ck/t.bin" "$T/plain/u.txt"
}

# Standard output on a checkpoint, then a daemon() child, whose C library
# puts /dev/null on it by calls the library does not see.
daemonout_case() {
	mkdir -p plain
	helper_ok "a daemon's standard output" -- daemonout "$T/ck/out.txt" "$T/plain/word"
	printf 'the program'"'"'s own line\n' >out.ref
	same out.ref ck/out.txt "the checkpoint at its real path after exit"
}

# A checkpoint's copy on numbers the C library closes by its own calls.
unseenclose_case() {
	helper_ok "numbers closed inside the C library" -- unseenclose "$T/ck"
	run_ok "the checkpoint at its real path" plain "$HELPER" check ck/u.bin 1M 21
}

# daemon() with checkpoints closed and one open for writing.
daemonkeeps_case() {
	mkdir -p plain
	helper_ok "daemon() with checkpoints" -- daemonkeeps "$T/ck" "$T/plain/word"
	local i
	for ((i = 0; i < 100; i++)); do
		[ -s plain/word ] && break
		sleep 0.1
	done
	[ "$(cat plain/word 2>/dev/null)" = "4194304 ok 0" ] ||
		fail "the daemon's write and close of its inherited checkpoint: '$(cat plain/word 2>/dev/null)'"
	for i in 0 1 2 3; do
		run_ok "closed checkpoint $i at its real path after the parent's end" \
			plain "$HELPER" check "ck/closed$i.bin" 16M $((30 + i))
	done
	plain "$HELPER" gen open.ref 8M 40
	same open.ref ck/open.bin "the checkpoint the daemon finished"
}

# ---- names ----------------------------------------------------------------------------

# chmod/chown/utimensat and fchmod/fchown/futimens of a checkpoint still in
# the cache, and what reaches the real path.
metadata_case() {
	helper_ok "metadata of cached checkpoints" -- meta "$T/ck"
	[ "$(stat -c %a ck/meta.bin)" = 600 ] || fail "chmod 0600 is lost at the real path (mode $(stat -c %a ck/meta.bin))"
	[ "$(stat -c %a ck/meta2.bin)" = 640 ] || fail "fchmod 0640 is lost at the real path (mode $(stat -c %a ck/meta2.bin))"
	[ "$(stat -c %Y ck/meta2.bin)" = 1500000000 ] || fail "futimens is lost at the real path"
}

stat_before_disk() {
	helper_ok "stat of a cached checkpoint" CKPTCACHE_PERSIST=never -- statcached "$T/ck/sc.bin" 3000017 5
	stats_ok files==1 objects.written==1 host.hits\>0 home.put_ops==0
	absent ck/sc.bin "persist=never: after exit"
}

rename_case() {
	helper_ok "write to a temporary name, rename, read" -- rename "$T/ck" 2M 9
	stats_ok files==1 host.hits\>0 home.read_ops==0
	run_ok "the renamed checkpoint at its real path" plain "$HELPER" check ck/final.bin 2M 9
	run_ok "the checkpoint renamed over another" plain "$HELPER" check ck/b.bin 2M 10
	absent ck/final.bin.tmp "the temporary name after exit"
	absent ck/a.bin "the old name after exit"
	only_names ck '^(final|b)\.bin$' "after exit"
	# out of and into the tagged set, written and renamed in one process
	phase across
	randfile src1.bin 1000003
	randfile src2.bin 1000033
	cp src2.bin plain.bin
	ck -- "$PY" -c '
import os
data = open("src1.bin", "rb").read()
with open("ck/out.bin", "wb") as f:
    f.write(data)
os.rename("ck/out.bin", "moved_out.bin")    # tagged -> untagged: materialised
assert not os.path.exists("ck/out.bin"), "the old tagged name still exists"
os.rename("plain.bin", "ck/moved_in.bin")   # untagged -> tagged
assert open("ck/moved_in.bin", "rb").read() == open("src2.bin", "rb").read(), "moved_in reads wrong bytes"
' || fail "rename across the tagged set$(last_error)"
	same src1.bin moved_out.bin "a checkpoint renamed out of the tagged set"
	same src2.bin ck/moved_in.bin "a file renamed into the tagged set"
	absent ck/out.bin "the tagged name of a checkpoint renamed out of the set"
}

# Write to a temporary name, rename, rename again, 200 times, on a file
# system whose unlink and rename take 2 ms (as a parallel file system's
# do), so that the program's renames overlap the flushes. Each checkpoint
# must be readable under its final name only, in the process and at its
# real path afterwards.
renames_slow_metadata() {
	need_helper
	SLOW_US=${1:-2000} ck CKPTCACHE_HOST_CACHE=8M SLOWFS_OPS="${2:-unlink,rename}" -- "$HELPER" renames "$T/ck" 200 16K
	local rc=$?
	[ $rc -eq 0 ] || fail "$(status_text $rc)$(last_error)"
	plain "$HELPER" renames ck 200 16K verify || fail "after exit: $(grep -a 'FAIL' "$T/.log" | tail -1)"
}

# Write, rename, unlink at once, 100 times, with the library's unlink of
# the temporary names taking 2 ms: no unlinked checkpoint may come back at
# its real path (a flush that was about to publish it must give up).
unlink_after_rename() {
	SLOW_US=2000 SLOW_MATCH=.bin.tmp helper_ok "rename then unlink, 100 times" SLOWFS_OPS=unlink -- \
		unlinkrace "$T/ck" 100
	only_names ck '^$' "after exit"
}

# A checkpoint updated in place right after it was written (O_APPEND, or
# truncate(2)): the real file becomes the checkpoint and must keep the
# update; a background flush of the cached version must not overwrite it.
handover_case() {
	helper_ok "$1 right after writing, 30 times" -- handover "$T/ck/h.bin" 16K 30 "$1"
	only_names ck '^h\.bin$' "after exit"
}

# The idiom of many frameworks: write a checkpoint's files into a
# temporary folder, rename the folder into place, read it back.
rename_directory() {
	randfile src.bin 3000001
	mkdir -p ck
	ck -- "$PY" -c '
import os, sys
data = open("src.bin", "rb").read()
os.makedirs("ck/step.tmp/sub")
for n in ("a", "b", "sub/c"):
    with open(f"ck/step.tmp/{n}.bin", "wb") as f:
        f.write(data)
os.rename("ck/step.tmp", "ck/step_100")
bad = []
for n in ("a", "b", "sub/c"):
    try:
        if open(f"ck/step_100/{n}.bin", "rb").read() != data:
            bad.append(f"{n}.bin reads wrong bytes")
    except OSError as e:
        bad.append(f"{n}.bin: {e.strerror}")
if bad:
    sys.exit("after renaming the folder: " + "; ".join(bad))
' || fail "$(grep -a -m1 'after renaming the folder' "$T/.log" || last_error)"
	local n
	for n in a b sub/c; do
		same src.bin "ck/step_100/$n.bin" "after exit, ck/step_100/$n.bin"
	done
	absent ck/step.tmp "the old folder name"
	only_names ck/step_100 '^(a|b|sub)(\.bin)?$' "after exit, in the renamed folder"
	local rescued=("$T"/ckptcache-rescue.*)
	[ ${#rescued[@]} -eq 0 ] || fail "checkpoints were saved to rescue files: ${rescued[*]##*/}"
	return 0
}

unlink_case() {
	helper_ok "unlink of a cached checkpoint" -- unlink "$T/ck" 1M 3
	absent ck/u.bin "after unlink and exit"
	only_names ck '^$' "after exit"
}

persist_unconsumed_unread() {
	local i f
	helper_ok "history, half of it read back" CKPTCACHE_PERSIST=unconsumed CKPTCACHE_HOST_CACHE=64M -- \
		history "$T/ck" 8 1M 50 1,3,5,6
	stats_ok files==1 objects.written==8 objects.consumed==4 host.hits==4
	for i in 0 2 4 7; do
		run_ok "unread checkpoint $i persisted" plain "$HELPER" check "$(printf 'ck/h_%03d.bin' $i)" 1M $((50 + i))
	done
	for i in 1 3 5 6; do
		f=$(printf 'ck/h_%03d.bin' $i)
		[ -e "$f" ] && run_ok "read checkpoint $i, if at its real path" plain "$HELPER" check "$f" 1M $((50 + i))
	done
	only_names ck '^h_[0-9]{3}\.bin$' "after exit"
}

# ---- sizes and versions ------------------------------------------------------------

# One checkpoint larger than the host tier: it moves down while written.
big_host() {
	helper_ok "a 20 MiB checkpoint through an 8 MiB host tier" CKPTCACHE_HOST_CACHE=8M -- wr "$T/ck/big.bin" 20M 3 1M
	stats_ok files==1 objects.written==1 host.bypasses\>0
	run_ok "the big checkpoint at its real path" plain "$HELPER" check ck/big.bin 20M 3
}

big_all() {
	ssd_elsewhere
	helper_ok "a 20 MiB checkpoint through 4 MiB host and 8 MiB ssd tiers" CKPTCACHE_HOST_CACHE=4M \
		CKPTCACHE_SSD_DIR="$SSD" CKPTCACHE_SSD_CACHE=8M -- wr "$T/ck/big.bin" 20M 3 1M
	stats_ok files==1 objects.written==1 host.bypasses\>0 ssd.bypasses\>0
	run_ok "the big checkpoint at its real path" plain "$HELPER" check ck/big.bin 20M 3
	only_names ck '^big\.bin$' "after exit"
}

many_small() {
	helper_ok "2000 checkpoints of 4 KiB, read back from the last" CKPTCACHE_HOST_CACHE=4M CKPTCACHE_ORDER=reverse -- \
		history "$T/ck" 2000 4K 9 all
	stats_ok files==1 objects.written==2000 objects.consumed==2000 host.hits\>0
	run_ok "every small checkpoint at its real path" plain "$HELPER" histcheck ck 2000 4K 9
	[ "$(ls ck | wc -l)" -eq 2000 ] || fail "$(ls ck | wc -l) files in the folder after exit, expected 2000"
}

# 30 versions of one path: every older version's flush is cancelled or
# discarded, and the real path ends with the last one.
rewrite_case() {
	local envs=(CKPTCACHE_HOST_CACHE=4M)
	if [ "${1:-}" = ssd ]; then
		ssd_elsewhere
		envs=(CKPTCACHE_HOST_CACHE=2M CKPTCACHE_SSD_DIR="$SSD" CKPTCACHE_SSD_CACHE=4M)
	fi
	helper_ok "30 versions of one checkpoint" "${envs[@]}" -- rewrite "$T/ck/rw.bin" 30 1M 5
	stats_ok files==1 objects.written==30 objects.retired\>=29
	# the last version: i = 29, size 1 MiB - (29 % 7) * 40961, seed 5 + 29
	run_ok "the last version at its real path" plain "$HELPER" check ck/rw.bin $((1048576 - 40961)) 34
	only_names ck '^rw\.bin$' "after exit"
}

grow_hints() {
	: >order.txt
	helper_ok "hint lines appended while running" CKPTCACHE_HOST_CACHE=4M CKPTCACHE_HINTS="$T/order.txt" -- \
		growhints "$T/ck" "$T/order.txt" 10 1M
	stats_ok files==1 dist.unhinted==0 host.hits\>0
}

# Rewriting an existing file keeps what a real open(O_TRUNC) keeps: its
# permissions, symbolic links to it, its other hard links.
rewrite_keeps_mode() {
	echo old >ck/priv.bin
	chmod 0600 ck/priv.bin
	ck -- "$PY" -c 'open("ck/priv.bin", "w").write("new\n")' || fail "rewriting failed$(last_error)"
	[ "$(cat ck/priv.bin)" = new ] || fail "the rewritten checkpoint holds '$(cat ck/priv.bin)'"
	[ "$(stat -c %a ck/priv.bin)" = 600 ] ||
		fail "rewriting a 0600 checkpoint with open(..., \"w\") left it mode $(stat -c %a ck/priv.bin) (a real open(O_CREAT|O_TRUNC) keeps 0600)"
}

write_through_symlink() {
	echo old >ck/target.bin
	ln -s target.bin ck/link.bin
	ck -- "$PY" -c '
open("ck/link.bin", "w").write("new\n")
assert open("ck/link.bin").read() == "new\n", "reading the link back"
' || fail "writing through a symbolic link failed$(last_error)"
	[ -L ck/link.bin ] || fail "writing through the symbolic link ck/link.bin replaced it with a regular file"
	[ "$(cat ck/target.bin)" = new ] || fail "the symbolic link's target holds '$(cat ck/target.bin)' after a write through the link"
}

# A symbolic link whose target is not there yet: the program's open makes
# the target, and the link stays, as without the library.
write_through_dangling_symlink() {
	mkdir ck/sub
	ln -s ../made.bin ck/sub/link.bin
	ck -- "$PY" -c '
for i in range(5):
    open(f"ck/w{i}.bin", "wb").write(b"w" * 1000)
open("ck/sub/link.bin", "w").write("new\n")
assert open("ck/sub/link.bin").read() == "new\n", "reading the link back"
' || fail "writing through a dangling symbolic link failed$(last_error)"
	[ -L ck/sub/link.bin ] || fail "writing through the dangling symbolic link ck/sub/link.bin replaced it with a regular file"
	[ "$(cat ck/made.bin 2>&1)" = new ] || fail "the link's target holds '$(cat ck/made.bin 2>&1)' after a write through the link"
}

write_hard_link() {
	echo old >ck/one.bin
	ln ck/one.bin ck/two.bin
	ck -- "$PY" -c 'open("ck/one.bin", "w").write("new\n")' || fail "rewriting failed$(last_error)"
	[ "$(cat ck/one.bin)" = new ] || fail "ck/one.bin holds '$(cat ck/one.bin)'"
	[ "$(cat ck/two.bin)" = new ] || fail "the other hard link ck/two.bin still holds '$(cat ck/two.bin)' after a rewrite through ck/one.bin"
}

# A checkpoint never closed: what was written is the file after exit.
unclosed_case() {
	helper_ok "exit with an unclosed $1" -- noclose "$T/ck/u.bin" 3000017 8 "$1"
	run_ok "the unclosed checkpoint at its real path" plain "$HELPER" check ck/u.bin 3000017 8
	only_names ck '^u\.bin$' "after exit"
}

# Four threads write 20 checkpoints each (50 KB to 2 MB) through small
# tiers and keep reading back random finished ones: writes, flushes,
# evictions, prefetches and reads overlap. Every read must be exact, in
# the process and at the real paths afterwards.
churn_case() {
	local envs=(CKPTCACHE_HOST_CACHE=4M)
	case ${1:-} in
	ssd)
		ssd_elsewhere
		envs=(CKPTCACHE_HOST_CACHE=3M CKPTCACHE_SSD_DIR="$SSD" CKPTCACHE_SSD_CACHE=6M)
		;;
	fifo|lru) envs+=(CKPTCACHE_EVICTION=$1) ;;
	esac
	helper_ok "concurrent writes and reads through small tiers" "${envs[@]}" -- churn "$T/ck" 4 20 11
	stats_ok files==1 objects.written==80 host.hits\>0
	run_ok "every checkpoint at its real path" plain "$HELPER" churn ck 4 20 11 verify
	only_names ck '^c_[0-9]_[0-9]{2}\.bin$' "after exit"
}

# ---- tagged paths -------------------------------------------------------------------

# Several patterns (absolute, "**", relative with %r, a bracket class):
# each path is written and read back by its own process, so a process that
# touched a tagged file leaves statistics and any other leaves none.
paths_case() {
	need_helper
	local pats="$T/ck/*.bin:$T/deep/**:rel/rank%r_*.dat:$T/q/ckpt_?[0-9].bin"
	local tagged=(ck/a.bin ck/./sub/../a2.bin deep/x/y/z.dat deep/top.txt rel/rank5_q.dat q/ckpt_a1.bin)
	local untagged=(ck/a.txt ck/sub/b.bin rel/rank4_q.dat rel/x/rank5_q.dat other/a.bin deepish/a.dat q/ckpt_ab.bin)
	local p i=0
	for p in "${tagged[@]}" "${untagged[@]}"; do
		mkdir -p "$(dirname "$p")"
	done
	for p in "${tagged[@]}"; do
		i=$((i + 1))
		phase "t$i"
		run_ok "write then read $p" ck CKPTCACHE_PATHS="$pats" OMPI_COMM_WORLD_RANK=5 -- "$HELPER" wr "$p" 100000 $i 7777
		[ -n "$(ls "$STATS")" ] || fail "$p should be tagged by '$pats' (rank 5), but the cache was not used"
		stats_ok objects.written==1 host.hits\>0
		run_ok "$p at its real path" plain "$HELPER" check "$p" 100000 $i
	done
	for p in "${untagged[@]}"; do
		i=$((i + 1))
		phase "u$i"
		run_ok "write then read $p" ck CKPTCACHE_PATHS="$pats" OMPI_COMM_WORLD_RANK=5 -- "$HELPER" wr "$p" 100000 $i 7777
		[ -z "$(ls "$STATS")" ] || fail "$p is not tagged by '$pats' (rank 5), but the cache was used"
		run_ok "$p at its real path" plain "$HELPER" check "$p" 100000 $i
	done
}

# ---- the public API ---------------------------------------------------------------------

api_case() {
	[ -n "$APIUSER" ] || fail "api_user did not compile against $LIB"
	local ldp extra=
	ldp=$(dirname "$LIB")
	[ "$PRELOAD" != "$LIB" ] && extra=${PRELOAD% "$LIB"}
	# linked with -lckptcache, not preloaded
	timeout -k 5 "$CASE_TIMEOUT" env CKPTCACHE_PATHS="$T/ck/**" CKPTCACHE_HOST_CACHE=8M \
		CKPTCACHE_STATS="$STATS/%p.json" LD_LIBRARY_PATH="$ldp" ${extra:+LD_PRELOAD="$extra"} \
		"$APIUSER" "$T/ck" 10 1000000 || fail "api_user with the cache active$(last_error)"
	stats_ok files==1 objects.written==10 host.hits\>0 dist.unhinted==0
	# without CKPTCACHE_PATHS the API does nothing and returns 0
	phase inactive
	rm -rf ck/*
	timeout -k 5 "$CASE_TIMEOUT" env LD_LIBRARY_PATH="$ldp" ${extra:+LD_PRELOAD="$extra"} \
		"$APIUSER" "$T/ck" 4 100000 || fail "api_user without CKPTCACHE_PATHS$(last_error)"
	no_stats
}

# ---- untagged files -------------------------------------------------------------------

untagged_helper() {
	need_helper
	mkdir -p with without
	ck -- "$HELPER" plainops "$T/with" >with.txt || fail "plainops with the library$(last_error)"
	plain "$HELPER" plainops "$T/without" >without.txt || fail "plainops without the library"
	diff without.txt with.txt >diff.txt || fail "untagged files behave differently with the library: $(grep -m1 '^>' diff.txt)"
	no_stats
}

untagged_tools() {
	local script='
		set -e
		cd "$1"
		cp ../src.bin a.bin
		cat a.bin a.bin >b.bin
		dd if=b.bin of=c.bin bs=64K status=none
		dd if=b.bin of=d.bin bs=4096 count=50 skip=7 status=none
		tar -cf t.tar a.bin c.bin
		mkdir x
		tar -C x -xf t.tar
		cp -p a.bin p.bin
		mv p.bin q.bin
		sha256sum a.bin b.bin c.bin d.bin q.bin x/a.bin x/c.bin
		printf "%s\n" one two three >e.txt
		while read -r l; do echo "got $l"; done <e.txt
		"$2" -c "open(\"f.bin\", \"wb\").write(open(\"c.bin\", \"rb\").read()[::3])"
	'
	randfile src.bin 2000003
	mkdir with without
	ck -- bash -c "$script" _ "$T/with" "$PY" >with.txt || fail "tools on untagged files with the library$(last_error)"
	plain bash -c "$script" _ "$T/without" "$PY" >without.txt || fail "tools without the library"
	diff without.txt with.txt >/dev/null || fail "the tools printed different results with the library"
	diff -r --exclude=t.tar without with >/dev/null || fail "untagged files differ: $(diff -r --exclude=t.tar without with 2>&1 | head -1)"
	no_stats
}

untagged_proxy() {
	[ -n "$PROXY" ] || fail "no rtm_proxy program"
	ck CKPTCACHE_ORDER=reverse -- "$PROXY" --dir "$T/plain" --count 6 --size 2M --seed $REF_SEED --interval-ms 0 \
		--keep >out.txt || fail "rtm_proxy on untagged paths$(last_error)"
	proxy_ok out.txt 6
	local i
	for i in 0 1 2 3 4 5; do
		same "$(printf '%s/plain/ckpt_%05d.bin' "$T" $i)" "$(ref_ckpt $i)" "untagged checkpoint $i"
	done
	no_stats
}

# A program built with -D_FORTIFY_SOURCE=2 reads through __read_chk,
# __pread_chk and __fread_chk: the cache must serve those reads too.
fortified_case() {
	[ -n "$FORTIFIED" ] || fail "tests/apps/fortified.c did not compile"
	nm -D "$FORTIFIED" 2>/dev/null | grep -q '__read_chk' ||
		note "the compiler did not make fortified reads here (no __read_chk in the program)"
	ck -- "$FORTIFIED" "$T/ck/fort.bin" 3000001 || fail "fortified reads under the library$(last_error)"
	stats_ok files==1 objects.written==2 host.hits\>0
	run_ok "the real file, read without the library" plain "$FORTIFIED" "$T/plain.bin" 3000001
	cmp -s "$T/ck/fort.bin" "$T/plain.bin" || fail "the real file differs from the bytes written"
	cmp -s "$T/ck/fort.bin.txt" "$T/plain.bin.txt" || fail "the text file differs from the one written without the library"
}

case_add threads threads_case
case_add fortified-reads fortified_case
case_add fork-exec fork_exec_case
case_add unsupported/raw-syscalls unsupported_raw
case_add unsupported/mmap unsupported_mmap
case_add fdops/proc-reopen procfd_case
case_add fdops/proc-reopen-named procfd_named_case
case_add unsupported/io_uring unsupported_uring
case_add fdops/posix-aio posix_aio_case
case_add locks unsupported_locks
case_add stdio/tagged-stdout stdout_case
case_add unsupported/raw-close-reuse closeby_case syscall
case_add unsupported/raw-close-reuse-asm closeby_case asm
case_add fdops/daemon-stdout daemonout_case
case_add fdops/closed-inside-libc unseenclose_case
case_add fdops/daemon-keeps-checkpoints daemonkeeps_case
case_add fdops fdops_case
case_add fsync/persist-never fsync_never_case
case_add stdio stdio_case
case_add stdio/large-reads stdio_large_case
case_add stdio/large-writes stdio_large_writes_case
case_add stdio/exit-without-fflush stdio_exit_case
case_add stdio/handed-over stdio_handed_case
case_add stdio/threads-share-streams stdio_threads_case
case_add stdio/seek-cur-after-write stdio_seek_cur_case
case_add stdio/small-records stdio_records_case
case_add fdops/append-positional append_positional_case
case_add fdops/seek-limits seek_limits_case
case_add fdops/errno-kept errno_kept_case
case_add fdops/wrong-mode-errors wrong_mode_errors_case
case_add names/fsync-replace fsync_replace_case
case_add names/umask-modes umask_modes_case
# The main thread ends with pthread_exit while another thread of the
# program still writes a checkpoint: the process ends when that thread does
# (the library's own threads do not keep it alive), with both files.
main_exits_case() {
	local t0 t1
	t0=$(date +%s%N)
	ck -- timeout 30 "$HELPER" main-exits "$T/ck" || fail "main-exits: exit status $? (124: it did not end)"
	t1=$(date +%s%N)
	[ $(((t1 - t0) / 1000000)) -lt 10000 ] || fail "main-exits took $(((t1 - t0) / 1000000)) ms"
	run_ok "main.bin at its real path" plain "$HELPER" check ck/main.bin 100000 11
	run_ok "worker.bin at its real path" plain "$HELPER" check ck/worker.bin 100000 12
	# the first thread gone by the exit system call, a worker ends the process
	rm -f ck/worker.bin
	ck -- timeout 30 "$HELPER" main-exits "$T/ck" raw || fail "main-exits raw: exit status $?"
	grep -q 'ckptcache: error' "$T/.log" && fail "an error message:$(first_error 'ckptcache: error')"
	run_ok "worker.bin at its real path (first thread gone)" plain "$HELPER" check ck/worker.bin 100000 12
	# stepping aside: main.bin goes straight to its real path before the
	# cache starts, the worker's checkpoint starts the library's threads
	# after the main thread has gone
	rm -f ck/main.bin ck/worker.bin
	t0=$(date +%s%N)
	ck CKPTCACHE_STEP_ASIDE=auto -- timeout 30 "$HELPER" main-exits "$T/ck" ||
		fail "main-exits, stepping aside: exit status $? (124: it did not end)"
	t1=$(date +%s%N)
	[ $(((t1 - t0) / 1000000)) -lt 10000 ] || fail "main-exits, stepping aside, took $(((t1 - t0) / 1000000)) ms"
	run_ok "main.bin at its real path (stepping aside)" plain "$HELPER" check ck/main.bin 100000 11
	run_ok "worker.bin at its real path (stepping aside)" plain "$HELPER" check ck/worker.bin 100000 12
}

case_add threads/main-exits main_exits_case
case_add fdops/copy-checks copy_checks_case
case_add fdops/emfile-excl emfile_excl_case
case_add names/links links_case
case_add fdops/sparse sparse_case
case_add names/mtime-order mtime_order_case
case_add threads/thread-files thread_files_case
case_add threads/closes-beside-checkpoints closerace_case
case_add names/unlink-while-open unlink_open_case
case_add memory/grows-with-use memory_grows_case
case_add memory/cgroup-default memory_cgroup_case
case_add stdio/freopen-tagged-stream freopen_case
case_add copy-calls copycalls_case
case_add open-flags-sizes misc_case
case_add fdtab/close_range closeby_case close_range
case_add fdtab/closefrom closeby_case closefrom
case_add names/stat-before-disk stat_before_disk
case_add names/rename rename_case
case_add names/renames-slow-unlink renames_slow_metadata 2000 unlink
case_add names/renames-slow-rename renames_slow_metadata 2000 rename
case_add names/unlink unlink_case
case_add names/unlink-after-rename unlink_after_rename
case_add names/rename-directory rename_directory
case_add names/append-after-write handover_case append
case_add names/truncate-after-write handover_case truncate
case_add names/metadata metadata_case
case_add persist/unconsumed-unread persist_unconsumed_unread
case_add paths/patterns paths_case
case_add exit/unclosed-fd unclosed_case fd
case_add threads/program-signals signals_case
case_add threads/handler-writes handler_writes_case
case_add threads/handler-exit handler_exit_case
case_add threads/cancel-while-writing cancel_write_case
case_add threads/handler-while-allocating handler_malloc_case
case_add threads/handler-reads-held-while-allocating handler_malloc_held_case
case_add names/kernel-answers answers_case
case_add names/c-walkers walkers_case
case_add threads/children-while-closing spawnrace_case
case_add exit/unclosed-stream unclosed_case stream
case_add sizes/larger-than-host big_host
case_add sizes/larger-than-all-tiers big_all
case_add sizes/many-small many_small
case_add stress/churn churn_case
case_add stress/churn-ssd churn_case ssd
case_add stress/churn-fifo churn_case fifo
case_add stress/churn-lru churn_case lru
case_add versions/rewrite rewrite_case
case_add versions/rewrite-ssd rewrite_case ssd
case_add hints/growing-file grow_hints
case_add names/rewrite-keeps-mode rewrite_keeps_mode
case_add names/write-through-symlink write_through_symlink
case_add names/write-through-dangling-symlink write_through_dangling_symlink
case_add names/write-hard-link write_hard_link
case_add api api_case
case_add untagged/helper untagged_helper
case_add untagged/tools untagged_tools
case_add untagged/proxy untagged_proxy
