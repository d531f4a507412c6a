# Functions the end-to-end cases use (sourced by tests/e2e/run). A case runs
# in a subshell inside its own temporary folder $T; it ends with `fail` on
# the first broken expectation, `note` when it cannot run here, or returns.
#
# Set by the driver: LIB, PRELOAD, BIN, HELPER, PROXY, APIUSER, SLOWFS, PY, WORK,
# REF (reference checkpoints written without the library), E2E (this folder).

CASE_TIMEOUT=${CASE_TIMEOUT:-90}

# fail REASON: the case failed; REASON is its line in the summary.
fail() {
	printf '%s\n' "$*" >"$T/.reason"
	echo "FAIL: $*" >&2
	exit 1
}

# note REASON: the case cannot run on this machine (not counted).
note() {
	printf '%s\n' "$*" >"$T/.reason"
	exit 77
}

# phase NAME: later library runs write their statistics to $T/st.NAME/.
phase() {
	STATS=$T/st.$1
	mkdir -p "$STATS"
}

# ck [VAR=VALUE]... -- CMD [ARG]...: runs CMD with the library preloaded,
# the case's defaults (tagged: $T/ck/**, a 32 MiB host tier, no stepping
# aside (cases_aside.sh has it on), statistics in $STATS) and the given variables, under a time limit. With SLOW_US set,
# the library's unlink and rename of paths containing SLOW_MATCH (default
# $T/ck) take that many microseconds more (tests/e2e/slowfs.c, preloaded
# after the library; SLOWFS_OPS=unlink or rename picks one of them); with
# FAIL_ERRNO set, they fail with that errno instead.
ck() {
	local envs=() preload=$PRELOAD
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		envs+=("$1")
		shift
	done
	shift
	if [ -n "${SLOW_US:-}" ] || [ -n "${FAIL_ERRNO:-}" ]; then
		[ -n "$SLOWFS" ] || fail "the slow-metadata shim (tests/e2e/slowfs.c) did not compile"
		preload="$PRELOAD $SLOWFS"
		envs=(SLOWFS_MATCH="${SLOW_MATCH:-$T/ck}" "${envs[@]}")
		[ -n "${SLOW_US:-}" ] && envs=(SLOWFS_US="$SLOW_US" "${envs[@]}")
		[ -n "${FAIL_ERRNO:-}" ] && envs=(SLOWFS_ERRNO="$FAIL_ERRNO" "${envs[@]}")
	fi
	timeout -k 5 "$CASE_TIMEOUT" env CKPTCACHE_PATHS="$T/ck/**" CKPTCACHE_HOST_CACHE=32M \
		CKPTCACHE_STEP_ASIDE=${E2E_STEP_ASIDE:-off} CKPTCACHE_STATS="$STATS/%p.json" "${envs[@]}" LD_PRELOAD="$preload" "$@"
}

# same_output WHAT PROG [VAR=VALUE]...: the Python program PROG, given a
# folder, prints the same in $T/plainrun without the library as in $T/ck
# with it (and the given variables); the caller compares the files.
same_output() {
	local what=$1 prog=$2 want got
	shift 2
	mkdir -p "$T/plainrun"
	want=$(plain "$PY" -c "$prog" "$T/plainrun") || fail "$what: the program without the library"
	got=$(ck "$@" -- "$PY" -c "$prog" "$T/ck") || fail "$what: the program with the library$(last_error)"
	[ "$got" = "$want" ] || fail "$what: with the library:
$got
without:
$want"
}

# outputs_match WANT GOT: the program's output with the library (GOT) is
# the one without it (WANT), both shown on one line each where not.
outputs_match() {
	cmp -s "$1" "$2" || fail "with the library: $(tr '\n' ' ' <"$2"); without: $(tr '\n' ' ' <"$1")"
}

# program_outputs_match PROG ARG_WITHOUT ARG_WITH: PROG prints the same
# without the library, given ARG_WITHOUT (under plainrun/), as with it
# (ck's defaults and SLOW_US and the like from the caller), given ARG_WITH.
program_outputs_match() {
	mkdir -p plainrun
	plain "$1" "$2" >want.txt || fail "the program without the library"
	ck -- "$1" "$3" >got.txt || fail "the program with the library$(last_error)"
	outputs_match want.txt got.txt
}

# plain CMD [ARG]...: runs CMD without the library (the sanitizer runtime,
# if any, is not needed either).
plain() {
	timeout -k 5 "$CASE_TIMEOUT" env -u LD_PRELOAD "$@"
}

# run_ok WHAT CMD...: CMD must exit 0; its output goes to the case log.
run_ok() {
	local what=$1 rc
	shift
	"$@"
	rc=$?
	[ $rc -eq 0 ] || fail "$what: $(status_text $rc)$(last_error)"
}

# status_text RC: "exit status N" or "killed by SIGNAME".
status_text() {
	if [ "$1" -gt 128 ] && [ "$1" -lt 160 ]; then
		echo "killed by SIG$(kill -l $(($1 - 128)) 2>/dev/null)"
	else
		echo "exit status $1"
	fi
}

# first_error PATTERN: the first line of the case log matching PATTERN.
first_error() {
	local l
	l=$(grep -a -m1 -E "$1" "$T/.log" 2>/dev/null)
	[ -n "$l" ] && printf ' (%s)' "${l:0:240}"
}

# The last line of the case log that looks like an error, for reasons.
last_error() {
	local first last
	first=$(grep -a -E 'FAIL|rror|MISMATCH|Bad file|No such|denied|Abort|Sanitizer' "$T/.log" 2>/dev/null | head -1)
	last=$(grep -a -E 'FAIL|rror|MISMATCH|Bad file|No such|denied|Abort|Sanitizer' "$T/.log" 2>/dev/null | tail -1)
	# the first error is usually the cause, the last one its consequence
	[ -n "$first" ] && printf ' (%s)' "${first:0:240}"
	[ -n "$last" ] && [ "$last" != "$first" ] && printf ' (... %s)' "${last:0:240}"
	true
}

# stats_ok CONDITION...: the statistics of the current phase satisfy every
# condition (see stats.py).
stats_ok() {
	local out files=("$STATS"/*.json)
	[ ${#files[@]} -gt 0 ] || fail "no statistics file in $(basename "$STATS") (expected one per process that used a tagged file)"
	out=$("$PY" "$E2E/stats.py" "${files[@]}" -- "$@" 2>&1)
	local rc=$?
	echo "$out"
	[ $rc -eq 0 ] || fail "$(basename "$STATS"): $out"
}

# no_stats: no process of the current phase wrote statistics.
no_stats() {
	local files=("$STATS"/*.json)
	[ ${#files[@]} -gt 0 ] && fail "$(basename "$STATS"): statistics written by ${#files[@]} process(es) that should not have started the cache: ${files[*]##*/}"
	return 0
}

# ssd_elsewhere: sets SSD to a new folder for an ssd tier on a file system
# other than the case's (a tmpfs under /dev/shm): an ssd tier on the file
# system of the checkpoints takes no copy that must reach them (ckptcache(7),
# TIERS), so a case that moves checkpoints through one puts it elsewhere.
# The folder goes with the case's.
ssd_elsewhere() {
	SSD=$(mktemp -d /dev/shm/ckpt-e2e-ssd.XXXXXX) || fail "no folder under /dev/shm for an ssd tier"
	echo "$SSD" >>"$T/.elsewhere"
	[ "$(stat -c %d "$SSD")" != "$(stat -c %d "$T")" ] ||
		note "/dev/shm is on the file system of $T: no other file system for an ssd tier"
}

# page_cache_bytes FILE...: the bytes of FILEs the page cache holds
# (fincore, of util-linux; where a machine lacks it, mincore(2) on a
# private mapping of each file, which touches none of its pages).
page_cache_bytes() {
	if command -v fincore >/dev/null; then
		fincore -nb -o RES "$@" | awk '{ n += $1 } END { print n + 0 }'
		return
	fi
	plain "$PY" -c '
import ctypes, mmap, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
page = os.sysconf("SC_PAGE_SIZE")
total = 0
for name in sys.argv[1:]:
    size = os.path.getsize(name)
    if size == 0:
        continue
    with open(name, "rb") as f:
        m = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)
    pages = (size + page - 1) // page
    vec = (ctypes.c_ubyte * pages)()
    buf = ctypes.c_char.from_buffer(m)
    if libc.mincore(ctypes.addressof(buf), size, vec) != 0:
        sys.exit("mincore: " + os.strerror(ctypes.get_errno()))
    total += sum(v & 1 for v in vec) * page
    del buf
    m.close()
print(total)
' "$@"
}

# drop_from_memory FILE...: the page cache forgets FILEs (written back
# first), as after a reboot or in the next job.
drop_from_memory() {
	plain "$PY" -c '
import os, sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY)
    os.fdatasync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
' "$@" || fail "could not drop files from the page cache"
	local left
	left=$(page_cache_bytes "$@")
	[ "$left" -eq 0 ] || fail "the page cache still holds $left bytes of files just dropped from it"
}

# in_memory FILE...: the page cache holds every byte of FILEs.
in_memory() {
	plain cat "$@" >/dev/null
	local have want
	have=$(page_cache_bytes "$@")
	want=$(stat -c %s "$@" | awk '{ n += int(($1 + 4095) / 4096) * 4096 } END { print n + 0 }')
	[ "$have" -ge "$want" ] || fail "the page cache holds $have of the $want bytes of the files just read"
}

# same FILE1 FILE2 WHAT: byte-for-byte equal.
same() {
	[ -f "$1" ] || fail "$3: $1 does not exist"
	[ -f "$2" ] || fail "$3: $2 does not exist"
	cmp -s "$1" "$2" || fail "$3: $(cmp "$1" "$2" 2>&1 | head -1)"
}

# absent PATH WHAT: nothing at PATH (checked without the library).
absent() {
	[ -e "$1" ] && fail "$2: $1 exists ($(stat -c %s "$1") bytes)"
	return 0
}

# only_names DIR REGEX WHAT: every entry of DIR matches REGEX (no
# temporary or stray files left behind).
only_names() {
	local f
	for f in "$1"/* "$1"/.[!.]*; do
		[ -e "$f" ] || continue
		[[ ${f##*/} =~ $2 ]] || fail "$3: unexpected file ${f##*/} in ${1##*/}"
	done
	return 0
}

# under_sanitizer: the library runs with a sanitizer runtime preloaded
# before it (its memory and system calls are not the library's own then).
# needs_strace: a case that counts system calls under strace runs only
# where strace is installed and no sanitizer runtime is preloaded (a NOTE
# says so otherwise; the plain build checks the system calls).
needs_strace() {
	command -v strace >/dev/null || note "strace is not installed"
	under_sanitizer && note "the sanitizer runtime does not run under strace; the plain build checks the system calls"
}

# step_tree PREFIX DIRS FILES: folders PREFIX1..PREFIXDIRS, each with files
# r1.bin..rFILES.bin holding "D F".
step_tree() {
	local d f
	for d in $(seq 1 "$2"); do
		mkdir -p "$1$d"
		for f in $(seq 1 "$3"); do echo "$d $f" >"$1$d/r$f.bin"; done
	done
}

under_sanitizer() {
	[ "$PRELOAD" != "$LIB" ]
}

# rounds FULL QUICK [SANITIZER]: how many rounds a case that repeats a race
# runs: FULL, or under --quick QUICK (SANITIZER under a sanitizer's
# runtime, whose allocator and checks make each round several times dearer).
rounds() {
	if [ "${QUICK:-0}" -eq 1 ]; then
		if [ -n "${3:-}" ] && under_sanitizer; then echo "$3"; else echo "$2"; fi
	else
		echo "$1"
	fi
}

# cgroup_make LIMIT: makes a child of this process's memory control group
# (cgroup v2, else v1) limited to LIMIT bytes and prints its folder; fails
# where that is not allowed.
cgroup_make() {
	local rel mnt dir
	rel=$(sed -n 's/^0:://p' /proc/self/cgroup)
	mnt=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
	if [ -n "$rel" ] && [ -n "$mnt" ] && grep -qw memory "$mnt$rel/cgroup.controllers" 2>/dev/null; then
		dir=$mnt${rel%/}/ckc-e2e.$$
		mkdir "$dir" 2>/dev/null && echo "$1" >"$dir/memory.max" 2>/dev/null && { echo "$dir"; return 0; }
		rmdir "$dir" 2>/dev/null
	fi
	rel=$(sed -n 's/^[0-9]*:\([^:]*,\)\{0,1\}memory\(,[^:]*\)\{0,1\}://p' /proc/self/cgroup)
	mnt=$(awk '$9 == "cgroup" && $NF ~ /(^|,)memory(,|$)/ { print $5; exit }' /proc/self/mountinfo)
	[ -n "$rel" ] && [ -n "$mnt" ] || return 1
	dir=$mnt${rel%/}/ckc-e2e.$$
	mkdir "$dir" 2>/dev/null || return 1
	echo "$1" >"$dir/memory.limit_in_bytes" 2>/dev/null || { rmdir "$dir"; return 1; }
	echo "$dir"
}

# randfile PATH SIZE: SIZE random bytes.
randfile() {
	head -c "$2" /dev/urandom >"$1"
}

# ref_ckpt I: the reference bytes of checkpoint I (seed $REF_SEED).
ref_ckpt() {
	printf '%s/ckpt_%05d.bin' "$REF" "$1"
}
