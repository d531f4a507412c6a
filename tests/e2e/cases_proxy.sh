# The rtm_proxy matrix: restore order x hint level x persistence x I/O
# interface, each a 12 x 2 MiB history through an 8 MiB host tier (32 MiB
# for persist=never, so that the cache holds everything), and the documented
# behaviour of persist=never when the cache overflows.

PROXY_COUNT=12
PROXY_SIZE=2M
PROXY_SIZE_BYTES=$((2 << 20))

# proxy_ok LOG: the proxy verified every checkpoint.
proxy_ok() {
	grep -q "^RESULT .*verified=$2/$2" "$1" ||
		fail "rtm_proxy did not verify $2/$2 checkpoints: $(grep -a -m1 -E 'MISMATCH|rtm_proxy: .*: ' "$1" | head -c 200)"
}

# proxy_run ORDER HINT PERSIST IO
proxy_run() {
	local order=$1 hint=$2 persist=$3 io=$4 host=8M
	local seed=$REF_SEED n=$PROXY_COUNT
	# 0 to 2 ms of simulated computation, varying over the matrix
	local interval=$(((${#order} + ${#hint} + ${#persist} + ${#io}) % 3))
	local envs=(CKPTCACHE_PATHS="$T/ck/*.bin" CKPTCACHE_PERSIST="$persist")
	local args=(--dir "$T/ck" --count $n --size $PROXY_SIZE --order "$order" --seed $seed --io "$io" --keep
		--interval-ms $interval)
	[ -n "$PROXY" ] || fail "no rtm_proxy program"
	[ -d "$REF" ] || fail "no reference checkpoints"
	[ "$persist" = never ] && host=32M
	envs+=(CKPTCACHE_HOST_CACHE=$host)
	case $hint in
	none) ;;
	derived)
		if [ "$order" = random ]; then
			# the order a random run will use, written beforehand by a
			# run without the library (which removes its tiny files)
			run_ok "writing the hint file" plain "$PROXY" --dir "$T/ck" --count $n --size 1 \
				--interval-ms 0 --order random --seed $seed --hints "$T/order.txt"
			envs+=(CKPTCACHE_HINTS="$T/order.txt")
		else
			envs+=(CKPTCACHE_ORDER="$order")
		fi
		;;
	all)
		args+=(--hints "$T/order.txt")
		envs+=(CKPTCACHE_HINTS="$T/order.txt")
		;;
	esac
	ck "${envs[@]}" -- "$PROXY" "${args[@]}" >"$T/proxy.out" 2>"$T/proxy.err"
	local rc=$?
	cat "$T/proxy.out" "$T/proxy.err"
	[ $rc -eq 0 ] || fail "rtm_proxy exited with status $rc$(grep -a -m1 -E 'MISMATCH|rtm_proxy: |ckptcache: error|Sanitizer' "$T/proxy.out" "$T/proxy.err" | sed 's/^/ (/;s/$/)/')"
	proxy_ok "$T/proxy.out" $n
	# a hint file the program writes after it starts, before it reads,
	# is not a missing one
	if [ "$hint" = all ] && grep -q CKPTCACHE_HINTS "$T/proxy.err"; then
		fail "the hint file the program wrote is reported missing"
	fi

	# the restore was served from the cache, and the queue came from the hints
	local conds=(files==1 objects.written==$n objects.opened_for_read==$n objects.consumed==$n host.hits\>0)
	if [ "$hint" = none ]; then
		conds+=(dist.unhinted==$n)
	else
		conds+=(dist.unhinted==0)
		# hints make the prefetcher act ahead of the reads (when the
		# program leaves it a moment between them, and the cache did
		# not already hold everything): it promotes each checkpoint, or
		# leaves it where the page cache holds its published real file
		[ "$persist" != never ] && [ $interval -gt 0 ] && conds+=(host.prefetch_ops+host.prefetch_cached\>0)
	fi
	stats_ok "${conds[@]}"

	# what the program leaves at the real paths
	local i f
	for ((i = 0; i < n; i++)); do
		f=$(printf '%s/ck/ckpt_%05d.bin' "$T" $i)
		case $persist in
		always) same "$f" "$(ref_ckpt $i)" "persist=always: checkpoint $i at its real path" ;;
		never) absent "$f" "persist=never with a cache that holds every checkpoint" ;;
		unconsumed) [ -e "$f" ] && same "$f" "$(ref_ckpt $i)" "persist=unconsumed: checkpoint $i at its real path" ;;
		esac
	done
	only_names "$T/ck" '^ckpt_[0-9]{5}\.bin$' "after exit"
	if [ "$persist" = always ]; then
		# and a run without the library reads the same history back
		run_ok "re-reading the history without the library" plain "$PROXY" --dir "$T/ck" --count $n \
			--size $PROXY_SIZE --order "$order" --seed $seed --read-only --keep --interval-ms 0 >"$T/ro.out"
		proxy_ok "$T/ro.out" $n
	fi
	return 0
}

# persist=never and a cache too small for the history: the checkpoints
# that fit never reach their real paths, the rest are written through, and
# whatever is at a real path is the checkpoint's exact bytes.
proxy_never_overflow() {
	local io=$1 n=$PROXY_COUNT i f present=0 missing=0
	ck CKPTCACHE_PATHS="$T/ck/*.bin" CKPTCACHE_PERSIST=never CKPTCACHE_HOST_CACHE=8M CKPTCACHE_ORDER=reverse -- \
		"$PROXY" --dir "$T/ck" --count $n --size $PROXY_SIZE --order reverse --seed $REF_SEED --io "$io" \
		--keep --interval-ms 1 >"$T/proxy.out" 2>&1
	local rc=$?
	cat "$T/proxy.out"
	[ $rc -eq 0 ] || fail "rtm_proxy exited with status $rc"
	proxy_ok "$T/proxy.out" $n
	stats_ok files==1 host.hits\>0 objects.written==$n
	for ((i = 0; i < n; i++)); do
		f=$(printf '%s/ck/ckpt_%05d.bin' "$T" $i)
		if [ -e "$f" ]; then
			same "$f" "$(ref_ckpt $i)" "persist=never, written through: checkpoint $i"
			present=$((present + 1))
		else
			missing=$((missing + 1))
		fi
	done
	only_names "$T/ck" '^ckpt_[0-9]{5}\.bin$' "after exit"
	[ $missing -gt 0 ] || fail "persist=never: every checkpoint reached its real path, although the cache had room for some"
	[ $present -gt 0 ] || fail "persist=never: 24 MiB of unread checkpoints fit in an 8 MiB cache without a write-through"
	echo "never-overflow: $present written through, $missing only in the cache"
}

# proxy_config NAME CONDITION... -- [VAR=VALUE]... -- [PROXY OPTION]...: one
# configuration beyond the matrix: a reverse restore of the reference
# history (CKPTCACHE_ORDER=reverse, 8 MiB host tier unless overridden), every
# checkpoint at its real path afterwards, the statistics as given.
proxy_config() {
	local conds=() envs=() opts=() i
	while [ "$1" != -- ]; do conds+=("$1"); shift; done
	shift
	while [ "$1" != -- ]; do envs+=("${1//@T@/$T}"); shift; done
	shift
	opts=("$@")
	[ -n "$PROXY" ] || fail "no rtm_proxy program"
	ck CKPTCACHE_PATHS="$T/ck/*.bin" CKPTCACHE_HOST_CACHE=8M CKPTCACHE_ORDER=reverse "${envs[@]}" -- \
		"$PROXY" --dir "$T/ck" --count $PROXY_COUNT --size $PROXY_SIZE --order reverse --seed $REF_SEED \
		--interval-ms 1 --keep "${opts[@]}" >"$T/proxy.out" 2>&1
	local rc=$?
	cat "$T/proxy.out"
	[ $rc -eq 0 ] || fail "rtm_proxy: $(status_text $rc)$(last_error)"
	proxy_ok "$T/proxy.out" $PROXY_COUNT
	stats_ok files==1 objects.written==$PROXY_COUNT "${conds[@]}"
	for ((i = 0; i < PROXY_COUNT; i++)); do
		same "$(printf '%s/ck/ckpt_%05d.bin' "$T" $i)" "$(ref_ckpt $i)" "checkpoint $i at its real path"
	done
	only_names "$T/ck" '^ckpt_[0-9]{5}\.bin$' "after exit"
}

# host and ssd tiers, with a trace; the ssd file is gone after exit
proxy_ssd() {
	ssd_elsewhere
	proxy_config host.hits\>0 host.flush_ops\>0 ssd.capacity==$((16 << 20)) ssd.flush_ops\>0 -- \
		CKPTCACHE_HOST_CACHE=4M CKPTCACHE_SSD_DIR="$SSD" CKPTCACHE_SSD_CACHE=16M \
		CKPTCACHE_TRACE="$T/trace.%p.txt" -- "$@"
	local left
	left=$(find "$SSD" -type f | head -3)
	[ -z "$left" ] || fail "the ssd tier's file is left after exit: $left"
	local tr=(trace.*.txt)
	[ ${#tr[@]} -eq 1 ] || fail "expected one trace file, found ${#tr[@]}"
	local op
	for op in open-write write close-write open-read read flush; do
		grep -q "^[0-9.]* $op $T/ck/ckpt_" "${tr[0]}" || fail "the trace has no '$op' line"
	done
}

# a copy in the ssd tier of a checkpoint already published (by the ssd
# tier's flush) is read from the page cache, which still holds the real
# file, not from the device. The restores follow the checkpoints closely
# (1 ms apart), and a version whose publication has not ended when the
# program reads it comes from the device, as it must: how many of the 12
# that are depends on the machine's load (2 to 6 seen), so the trace says
# which read came after its version's publication (its "flush ... home"
# event), and only those count. Of those, a few may find a page the
# kernel has let go and read the rest from the device: at most 2 (4 under
# a sanitizer). A read path that never asks the page cache reads each of
# them from the device; a run in which no read came after a publication
# tested nothing and runs again, up to 3 runs.
proxy_ssd_published() {
	local k out most=2
	under_sanitizer && most=4
	for k in 1 2 3; do
		ssd_elsewhere
		proxy_config ssd.flush_ops\>0 -- CKPTCACHE_HOST_CACHE=4M CKPTCACHE_SSD_DIR="$SSD" \
			CKPTCACHE_SSD_CACHE=32M CKPTCACHE_ORDER=none CKPTCACHE_TRACE="$T/trace" --
		out=$("$PY" - "$T/trace" "$most" <<'PY'
import sys
published, after, device = set(), 0, []
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 7:
        continue
    ev, ver, tier = f[1], (f[2], f[3]), f[-2]
    if ev == "flush" and tier == "tier=home":
        published.add(ver)
    elif ev == "read" and ver in published:
        after += 1
        if tier == "tier=ssd":
            device.append(f"{f[2]} {f[3]}")
if not after:
    print("again: no read came after its version's publication")
    sys.exit(1)
if len(device) > int(sys.argv[2]):
    print(f"{len(device)} of the {after} reads of a published version came from the ssd tier "
          f"(at most {sys.argv[2]}): {', '.join(device)}")
    sys.exit(2)
PY
)
		case $? in
		0) return 0 ;;
		2) fail "$out" ;;
		esac
		echo "run $k: $out"
		[ $k -lt 3 ] || fail "$out (3 runs)"
		rm -rf "$T/ck" "$T/trace"
		phase "again$k"
	done
}

# checkpoints fsync'd before their close are at their real paths when they
# close: never published again from the ssd tier they may be copied to
# (names/fsync-replace checks the trace for any other publication)
proxy_ssd_fsynced() {
	ssd_elsewhere
	proxy_config ssd.flush_ops==0 -- CKPTCACHE_HOST_CACHE=4M \
		CKPTCACHE_SSD_DIR="$SSD" CKPTCACHE_SSD_CACHE=32M CKPTCACHE_ORDER=none -- --fsync
}

# An ssd tier on the file system of the checkpoints: the ones that must
# reach their real paths go there from the host tier directly (through the
# ssd tier, the device would write them twice, and reads of it bypass the
# page cache); with persist=never the ssd tier still holds what the host
# tier cannot.
proxy_ssd_same_fs() {
	mkdir -p ssd
	proxy_config host.flush_ops\>0 ssd.flush_ops==0 ssd.put_ops==0 ssd.read_ops==0 -- \
		CKPTCACHE_HOST_CACHE=4M CKPTCACHE_SSD_DIR="$T/ssd" CKPTCACHE_SSD_CACHE=32M --
	phase never
	ck CKPTCACHE_PATHS="$T/ck2/*.bin" CKPTCACHE_HOST_CACHE=4M CKPTCACHE_SSD_DIR="$T/ssd" CKPTCACHE_SSD_CACHE=32M \
		CKPTCACHE_PERSIST=never CKPTCACHE_ORDER=reverse -- "$PROXY" --dir "$T/ck2" --count $PROXY_COUNT \
		--size $PROXY_SIZE --order reverse --seed $REF_SEED --interval-ms 1 --keep >"$T/never.out" 2>&1
	local rc=$?
	cat "$T/never.out"
	[ $rc -eq 0 ] || fail "rtm_proxy, persist=never: $(status_text $rc)$(last_error)"
	proxy_ok "$T/never.out" $PROXY_COUNT
	# nothing goes home: the host tier's flushes went to the ssd tier
	stats_ok files==1 host.flush_ops\>0 home.put_ops==0
	[ -z "$(ls ck2)" ] || fail "persist=never: files at the real paths: $(ls ck2 | head -3)"
}

if [ "${QUICK:-0}" -eq 1 ]; then
	# every order with every hint level once, persistence and I/O rotating
	for spec in "sequential none always write" "sequential derived never fwrite" \
		"sequential all unconsumed write" "reverse none unconsumed fwrite" \
		"reverse derived always write" "reverse all never write" \
		"random none never fwrite" "random derived unconsumed write" "random all always fwrite"; do
		set -- $spec
		case_add "proxy/$1/$2/$3/$4" proxy_run "$1" "$2" "$3" "$4"
	done
	set --
else
	for order in sequential reverse random; do
		for hint in none derived all; do
			for persist in always unconsumed never; do
				for io in write fwrite; do
					case_add "proxy/$order/$hint/$persist/$io" proxy_run $order $hint $persist $io
				done
			done
		done
	done
fi
case_add "proxy/never-overflow/write" proxy_never_overflow write
case_add "proxy/never-overflow/fwrite" proxy_never_overflow fwrite
case_add proxy/ssd-tier proxy_ssd
case_add proxy/ssd-published-page-cache proxy_ssd_published
case_add proxy/ssd-fsynced proxy_ssd_fsynced
case_add proxy/ssd-same-file-system proxy_ssd_same_fs
case_add proxy/ssd-only proxy_config ssd.hits\>0 -- CKPTCACHE_HOST_CACHE=0 CKPTCACHE_SSD_DIR="@T@/ssd" CKPTCACHE_SSD_CACHE=32M --
case_add proxy/no-cache-tier proxy_config home.put_ops==$PROXY_COUNT home.hits\>0 -- CKPTCACHE_HOST_CACHE=0 --
case_add proxy/eviction-fifo proxy_config host.hits\>0 -- CKPTCACHE_EVICTION=fifo --
case_add proxy/eviction-lru proxy_config host.hits\>0 -- CKPTCACHE_EVICTION=lru --
case_add proxy/prefetch-eager proxy_config host.hits\>0 host.prefetch_ops+host.prefetch_cached\>0 -- \
	CKPTCACHE_PREFETCH=eager --
case_add proxy/prefetch-off proxy_config host.hits\>0 host.prefetch_ops==0 host.prefetch_cached==0 -- \
	CKPTCACHE_PREFETCH=off --
case_add proxy/fsync proxy_config host.hits\>0 -- -- --fsync
case_add proxy/fsync-fwrite proxy_config host.hits\>0 -- -- --fsync --io fwrite
case_add proxy/chunked proxy_config host.hits\>0 -- -- --chunk 100000
case_add proxy/chunked-fwrite proxy_config host.hits\>0 -- -- --chunk 12345 --io fwrite

# Checkpoints of an earlier run (written without the library) restored in
# a random order with a hint file. MEMORY: "device", the page cache dropped
# them (as after a reboot or in another job): prefetched from their real
# paths; "page-cache", it holds them: read from there, as fast as from the
# host tier, and not copied into it.
proxy_earlier_run() {
	local memory=$1 files=() i
	run_ok "the earlier run" plain "$PROXY" --dir "$T/ck" --count $PROXY_COUNT --size $PROXY_SIZE --seed $REF_SEED \
		--interval-ms 0 --keep >/dev/null
	for ((i = 0; i < PROXY_COUNT; i++)); do
		files+=("$(printf '%s/ck/ckpt_%05d.bin' "$T" $i)")
	done
	if [ "$memory" = device ]; then
		drop_from_memory "${files[@]}"
	else
		in_memory "${files[@]}"
	fi
	ck CKPTCACHE_PATHS="$T/ck/*.bin" CKPTCACHE_HOST_CACHE=8M CKPTCACHE_HINTS="$T/order.txt" -- "$PROXY" --dir "$T/ck" \
		--count $PROXY_COUNT --size $PROXY_SIZE --seed $REF_SEED --order random --hints "$T/order.txt" \
		--read-only --keep --interval-ms 5 >"$T/proxy.out" 2>&1
	local rc=$?
	cat "$T/proxy.out"
	[ $rc -eq 0 ] || fail "rtm_proxy --read-only: $(status_text $rc)$(last_error)"
	proxy_ok "$T/proxy.out" $PROXY_COUNT
	# the hint file is read by the prefetcher once the cache started, at
	# the first read: the first reads may come before it (and bring their
	# files into the page cache, where they are left)
	local conds=(files==1 objects.written==0 objects.opened_for_read==$PROXY_COUNT dist.unhinted\<=3 home.put_ops==0)
	if [ "$memory" = device ]; then
		conds+=(host.prefetch_ops\>0 host.prefetch_cached\<=3 host.hits\>0)
	else
		conds+=(host.prefetch_ops==0 host.prefetch_cached\>=$((PROXY_COUNT - 3)) host.hits==0 home.hits\>0)
	fi
	stats_ok "${conds[@]}"
	for ((i = 0; i < PROXY_COUNT; i++)); do
		same "${files[$i]}" "$(ref_ckpt $i)" "checkpoint $i after the restore"
	done
}

# Three processes with the library at once, in one folder, each with its
# own host and ssd tiers.
proxy_concurrent() {
	local k pids=() i
	ssd_elsewhere
	for k in 0 1 2; do
		ck CKPTCACHE_PATHS="$T/ck/*.bin" CKPTCACHE_HOST_CACHE=4M CKPTCACHE_SSD_DIR="$SSD" CKPTCACHE_SSD_CACHE=8M \
			CKPTCACHE_ORDER=reverse -- "$PROXY" --dir "$T/ck" --prefix "p${k}_" --count $PROXY_COUNT \
			--size $PROXY_SIZE --seed $REF_SEED --interval-ms 1 --keep >"$T/proxy$k.out" 2>&1 &
		pids+=($!)
	done
	for k in 0 1 2; do
		wait "${pids[$k]}" || fail "rtm_proxy $k: $(status_text $?)$(grep -a -m1 -E 'MISMATCH|error' "$T/proxy$k.out")"
		proxy_ok "$T/proxy$k.out" $PROXY_COUNT
		for ((i = 0; i < PROXY_COUNT; i++)); do
			same "$(printf '%s/ck/p%d_%05d.bin' "$T" $k $i)" "$(ref_ckpt $i)" "process $k, checkpoint $i"
		done
	done
	stats_ok files==3 objects.written==$((3 * PROXY_COUNT)) host.hits\>0
	[ -z "$(find "$SSD" -type f)" ] || fail "ssd tier files left after exit: $(find "$SSD" -type f | head -3)"
}

case_add proxy/earlier-run proxy_earlier_run device
case_add proxy/earlier-run-page-cache proxy_earlier_run page-cache
case_add proxy/concurrent-processes proxy_concurrent

# The matrix's reverse restore on a file system whose unlink and rename
# take 2 ms: flushes take longer than the program's pace.
proxy_slow_metadata() {
	SLOW_US=2000 proxy_config host.hits\>0 -- "$@" --
}

case_add proxy/slow-metadata proxy_slow_metadata
