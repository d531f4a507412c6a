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
	local envs=(CKPTCACHE_PATHS="$T/ck/*.bin" CKPTCACHE_PERSIST="$persist")
	local args=(--dir "$T/ck" --count $n --size $PROXY_SIZE --order "$order" --seed $seed --io "$io" --keep)
	[ -n "$PROXY" ] || fail "no rtm_proxy program"
	[ -d "$REF" ] || fail "no reference checkpoints"
	# 0 to 2 ms of simulated computation, varying over the matrix
	args+=(--interval-ms $(((${#order} + ${#hint} + ${#persist} + ${#io}) % 3)))
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

	# the restore was served from the cache, and the queue came from the hints
	local conds=(files==1 objects.written==$n objects.opened_for_read==$n objects.consumed==$n host.hits\>0)
	if [ "$hint" = none ]; then
		conds+=(dist.unhinted==$n)
	else
		conds+=(dist.unhinted==0)
		[ "$persist" != never ] && conds+=(host.prefetch_ops\>0)
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
