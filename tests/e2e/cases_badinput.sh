# Bad input: each malformed variable is named on stderr and the program
# still runs with the right bytes (the cache disabled); CKPTCACHE_STRICT=1
# turns that into an abort; malformed hint lines are reported with
# FILE:LINE and the rest of the hint file still works.

# A path no one can use as a folder, even root: below a regular file.
unusable_dir() {
	: >"$T/afile"
	printf '%s' "$T/afile/ssd"
}

# bad_var VAR=VALUE [VAR=VALUE]...: the first variable is the bad one.
bad_var() {
	local bad=$1 var=${1%%=*} val=${1#*=} i
	[ -n "$PROXY" ] || fail "no rtm_proxy program"
	[ "$val" = @UNUSABLE@ ] && { val=$(unusable_dir); bad=$var=$val; }
	shift
	ck CKPTCACHE_PATHS="$T/ck/*.bin" CKPTCACHE_ORDER=reverse "$bad" "$@" -- "$PROXY" --dir "$T/ck" --count 4 \
		--size $REF_SIZE --order reverse --seed $REF_SEED --interval-ms 0 --keep >out.txt 2>err.txt
	local rc=$?
	cat out.txt err.txt
	[ $rc -eq 0 ] || fail "$var=$val: the program exited with status $rc"
	proxy_ok out.txt 4
	grep -q "^ckptcache: error: .*$var" err.txt ||
		fail "$var=$val: no error naming $var on stderr (stderr: $(head -c 200 err.txt | tr '\n' ' '))"
	grep -F "$var" err.txt | grep -qF "$val" || fail "$var=$val: the message does not quote the value"
	for i in 0 1 2 3; do
		same "$(printf 'ck/ckpt_%05d.bin' $i)" "$(ref_ckpt $i)" "$var=$val: checkpoint $i at its real path"
	done
	# the cache is disabled: it never started, so it wrote no statistics
	no_stats
}

# A bad value is reported once per job, not by every process of it: a shell
# and the three programs it runs say it once; a child given another bad
# value says that one.
bad_var_once_per_job() {
	ck CKPTCACHE_ORDER=backwards -- sh -c '/bin/true; /bin/true; cat /dev/null;
		CKPTCACHE_PERSIST=sometimes /bin/true' >out.txt 2>err.txt
	local rc=$?
	cat err.txt
	[ $rc -eq 0 ] || fail "the job exited with status $rc"
	local n
	n=$(grep -c "CKPTCACHE_ORDER='backwards'" err.txt)
	[ "$n" -eq 2 ] ||
		fail "CKPTCACHE_ORDER='backwards' reported $n times by 5 processes (expected once, and once more with the other bad value)"
	n=$(grep -c "CKPTCACHE_PERSIST='sometimes'" err.txt)
	[ "$n" -eq 1 ] || fail "CKPTCACHE_PERSIST='sometimes' of one process reported $n times"
}

# The same directory made unwritable by its mode: only meaningful when not root.
bad_ssd_dir_mode() {
	[ "$(id -u)" -eq 0 ] && note "running as root: permissions do not stop root (the case below a regular file covers it)"
	mkdir -p ro
	chmod 0555 ro
	bad_var CKPTCACHE_SSD_DIR="$T/ro/ssd" CKPTCACHE_SSD_CACHE=16M
}

# strict_abort VAR=VALUE...: with CKPTCACHE_STRICT=1 the program dies by SIGABRT.
strict_abort() {
	local bad=$1 var=${1%%=*}
	[ "${1#*=}" = @UNUSABLE@ ] && bad=$var=$(unusable_dir)
	shift
	ck CKPTCACHE_STRICT=1 "$bad" "$@" -- "$PROXY" --dir "$T/ck" --count 2 --size 1M --interval-ms 0 \
		>out.txt 2>err.txt
	local rc=$?
	cat out.txt err.txt
	[ $rc -eq 134 ] || fail "CKPTCACHE_STRICT=1 with $bad: exit status $rc, expected 134 (SIGABRT)"
	grep -q "^ckptcache: error: .*$var" err.txt || fail "CKPTCACHE_STRICT=1: no message naming $var before the abort"
}

# A hint file with malformed lines among good ones.
hint_lines() {
	local strict=$1 n=12 l
	cat >hints.txt <<-'EOF'
		# restore order of the proxy: reverse, with malformed lines first
		ck/ckpt_%05d.bin 5..x
		ck/ckpt_%s.bin 0..3
		ck/ckpt_00001.bin 0..3
		ck/ckpt_%05d.bin
		ck/ckpt_%d_%d.bin 0..2
		ck/ckpt_%05d.bin 3..1:0
		ck/ckpt_%05d.bin 11..0
	EOF
	ck CKPTCACHE_PATHS="$T/ck/*.bin" CKPTCACHE_HOST_CACHE=8M CKPTCACHE_HINTS="$T/hints.txt" CKPTCACHE_STRICT=$strict -- \
		"$PROXY" --dir "$T/ck" --count $n --size $REF_SIZE --order reverse --seed $REF_SEED --interval-ms 5 \
		--keep >out.txt 2>err.txt
	local rc=$?
	cat out.txt err.txt
	[ $rc -eq 0 ] || fail "malformed hint lines (CKPTCACHE_STRICT=$strict): exit status $rc"
	proxy_ok out.txt $n
	for l in 2 3 4 5 6 7; do
		grep -q "^ckptcache: [a-z]*: $T/hints.txt:$l: " err.txt ||
			fail "no 'FILE:$l:' message for malformed hint line $l ($(sed -n "${l}p" hints.txt))"
	done
	for l in 1 8; do
		grep -q "hints.txt:$l:" err.txt && fail "hint line $l is good but was reported: $(grep -m1 "hints.txt:$l:" err.txt)"
	done
	# the good line still gave the restore order
	stats_ok files==1 dist.unhinted==0 host.prefetch_ops\>0 host.hits\>0
	for ((l = 0; l < n; l++)); do
		same "$(printf 'ck/ckpt_%05d.bin' $l)" "$(ref_ckpt $l)" "checkpoint $l at its real path"
	done
}

hints_missing() {
	# long enough (0.2 s) for the prefetcher to look for the file
	ck CKPTCACHE_PATHS="$T/ck/*.bin" CKPTCACHE_HINTS="$T/nope/order.txt" -- "$PROXY" --dir "$T/ck" --count 3 \
		--size 1M --seed 3 --interval-ms 40 >out.txt 2>err.txt
	local rc=$?
	cat out.txt err.txt
	[ $rc -eq 0 ] || fail "a missing hint file: exit status $rc"
	proxy_ok out.txt 3
	grep -q "CKPTCACHE_HINTS.*nope/order.txt" err.txt || fail "a missing hint file is not reported"
	stats_ok files==1 host.hits\>0
}

case_add badinput/CKPTCACHE_ORDER bad_var CKPTCACHE_ORDER=bogus
case_add badinput/once-per-job bad_var_once_per_job
case_add badinput/CKPTCACHE_HOST_CACHE bad_var CKPTCACHE_HOST_CACHE=12Q
case_add badinput/CKPTCACHE_HOST_CACHE-above-memory bad_var CKPTCACHE_HOST_CACHE=1000T
case_add badinput/CKPTCACHE_PERSIST bad_var CKPTCACHE_PERSIST=x
case_add badinput/CKPTCACHE_EVICTION bad_var CKPTCACHE_EVICTION=x
case_add badinput/CKPTCACHE_PREFETCH bad_var CKPTCACHE_PREFETCH=x
case_add badinput/CKPTCACHE_CAPTURE bad_var CKPTCACHE_CAPTURE=x
case_add badinput/CKPTCACHE_LOG bad_var CKPTCACHE_LOG=x
case_add badinput/CKPTCACHE_STRICT bad_var CKPTCACHE_STRICT=2
case_add badinput/CKPTCACHE_SSD_CACHE bad_var CKPTCACHE_SSD_CACHE=5X
case_add badinput/CKPTCACHE_SSD_DIR-unusable bad_var CKPTCACHE_SSD_DIR=@UNUSABLE@ CKPTCACHE_SSD_CACHE=16M
case_add badinput/CKPTCACHE_SSD_DIR-read-only bad_ssd_dir_mode
case_add badinput/strict-abort-ORDER strict_abort CKPTCACHE_ORDER=bogus
case_add badinput/strict-abort-HOST_CACHE strict_abort CKPTCACHE_HOST_CACHE=12Q
case_add badinput/strict-abort-SSD_DIR strict_abort CKPTCACHE_SSD_DIR=@UNUSABLE@ CKPTCACHE_SSD_CACHE=16M
case_add badinput/hint-lines hint_lines 0
case_add badinput/hint-lines-strict hint_lines 1
case_add badinput/hints-missing hints_missing
