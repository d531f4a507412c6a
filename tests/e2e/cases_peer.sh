# Peer GPUs without GPUs: several ranks of one "Slurm job" started at once on
# the stand-in driver (tests/apps/fake_libcuda.c), each on its own device of
# a node of several (CUDA_VISIBLE_DEVICES puts it first), under
# tests/apps/stencil_client with device capture. Each rank verifies every
# restored byte on its device, and its files equal those of a run without
# the library. The ranks meet at two barriers (--hold before the restore
# phase, --linger before the end), where the case looks at the node's
# segment and kills or adds ranks.

# peer_seg: the node's segment of this case's job.
peer_seg() {
	printf '/dev/shm/ckptcache-peer-%s-slurm%s.0-n0' "$(id -u)" "$PEER_JOB"
}

# E2E_PEER_REAL=1: the ranks run on the real driver (a machine with a GPU
# per rank), not the stand-in.
peer_libpath() {
	if [ -n "${E2E_PEER_REAL:-}" ]; then printf '%s' "${LD_LIBRARY_PATH:-}"; else printf '%s' "$FAKECUDA"; fi
}

# The stand-in's device size (its variable also tells stencil_client that
# device memory is host memory: never on the real driver).
peer_fake_mib() {
	[ -n "${E2E_PEER_REAL:-}" ] && echo FAKECUDA_UNUSED=1 || echo FAKECUDA_DEVICE_MIB=512
}

# peer_ranks: PEER_N, the ranks of a case: 3, or on the real driver one
# per GPU (at most 3).
peer_ranks() {
	local g
	PEER_N=3
	if [ -n "${E2E_PEER_REAL:-}" ]; then
		g=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
		[ "$g" -lt 2 ] && note "E2E_PEER_REAL: fewer than 2 GPUs"
		[ "$g" -lt 3 ] && PEER_N=$g
	fi
}

# peer_start R N [VAR=VALUE]...: rank R of N in the background (its output
# in $T/r$R.out, its files in $T/r$R, its statistics in $STATS/r$R.json).
peer_start() {
	local r=$1 n=$2 own=$(($1 % $2)) vis k
	shift 2
	vis=$own
	for ((k = 0; k < n; k++)); do
		[ $k -ne $own ] && vis=$vis,$k
	done
	mkdir -p "$T/r$r"
	ck CKPTCACHE_PATHS="$T/r$r/*.bin" CKPTCACHE_STATS="$STATS/r$r.json" CKPTCACHE_CAPTURE=device \
		CKPTCACHE_HOST_CACHE=64M CKPTCACHE_GPU_CACHE=64M CKPTCACHE_LOG=info "$@" -- \
		env LD_LIBRARY_PATH="$(peer_libpath)" "$(peer_fake_mib)" FAKECUDA_DEVICES="$n" \
		CUDA_VISIBLE_DEVICES="$vis" SLURM_JOB_ID="$PEER_JOB" SLURM_STEP_ID=0 SLURM_NODEID=0 \
		SLURM_PROCID="$r" SLURM_LOCALID="$r" SLURM_NTASKS_PER_NODE="$n" \
		"$STENCIL" --dir "$T/r$r" --keep --side 1024 --count 12 --staging pinned --seed $((r + 1)) --hold "$T/go" ${PEER_ARGS:-} \
		--linger "$T/end.$r" >"$T/r$r.out" 2>&1 &
	eval "PEER_PID_$r=\$!"
}

# peer_wait_for R TEXT: waits (at most 30 s) until rank R printed TEXT.
peer_wait_for() {
	local i
	for ((i = 0; i < 3000; i++)); do
		grep -q "$2" "$T/r$1.out" 2>/dev/null && return 0
		sleep 0.01
	done
	cat "$T/r$1.out"
	fail "rank $1 never printed '$2'"
}

# peer_end R: releases rank R from its last barrier; it must end well,
# with every restore verified and the files of a run without the library.
peer_end() {
	local r=$1 pid f
	touch "$T/end.$r"
	eval "pid=\$PEER_PID_$r"
	wait "$pid"
	local rc=$?
	[ $rc -eq 0 ] || { cat "$T/r$r.out"; fail "rank $r: $(status_text $rc)$(grep -a -m1 'rror' "$T/r$r.out" | sed 's/^/ (/;s/$/)/')"; }
	cat "$T/r$r.out"
	grep -q 'verified=\([0-9]*\)/\1' "$T/r$r.out" || fail "rank $r: not every checkpoint verified"
	mkdir -p "$T/none$r"
	plain env LD_LIBRARY_PATH="$(peer_libpath)" "$(peer_fake_mib)" "$STENCIL" --dir "$T/none$r" --keep \
		--side 1024 --count 12 --seed $((r + 1)) >/dev/null 2>&1 || fail "the run without the library failed"
	for f in "$T/none$r"/ckpt_*.bin; do
		same "$f" "$T/r$r/${f##*/}" "rank $r: ${f##*/}"
	done
}

# peer_json R EXPR...: each EXPR (Python, over d, rank R's statistics) holds.
peer_json() {
	local r=$1
	shift
	"$PY" - "$STATS/r$r.json" "$@" <<'PYEOF' || fail "rank $r's statistics: $(cat "$T/.pj")"
import json, sys
d = json.load(open(sys.argv[1]))
bad = [e for e in sys.argv[2:] if not eval(e)]
print(json.dumps(d.get("peer")))
open(sys.argv[1].rsplit("/", 2)[0] + "/.pj", "w").write("; ".join(bad) + " (peer: %s)" % json.dumps(d.get("peer")))
sys.exit(1 if bad else 0)
PYEOF
}

# peer_setup [alone]: the case's job and segment. The first rank of a job
# on a node removes every segment of this user that no process holds (a
# crashed job's): a case that leaves one behind on purpose ("alone") runs
# while no other peer case does, which hold the lock below shared. The lock
# is the node's, as the removal is: not under the case's TMPDIR (its own
# folder), and shared by every run of the suite on this machine.
PEER_LOCK_FILE=/tmp/ckptcache-e2e-peer.lock
peer_setup() {
	[ -n "$FAKECUDA" ] || fail "the stand-in driver (tests/apps/fake_libcuda.c) did not compile"
	[ -n "$STENCIL" ] || fail "no stencil_client program"
	exec {PEER_LOCK}>>"$PEER_LOCK_FILE"
	flock -w 120 "$([ "${1:-}" = alone ] && echo -x || echo -s)" "$PEER_LOCK" ||
		fail "cannot lock $PEER_LOCK_FILE"
	PEER_JOB=$((900000000 + $$ % 100000 * 1000 + RANDOM % 1000))
	rm -f "$(peer_seg)"
	phase peer
	# a failed case releases its ranks from their barriers and waits for
	# them, so that they end (and leave the segment) before it is gone
	trap 'touch "$T/go" "$T"/end.0 "$T"/end.1 "$T"/end.2; wait' EXIT
}

# Three ranks, each on its own device of a node whose devices are all
# linked: the default (CKPTCACHE_PEER unset) resolves to maxflow; they find
# each other through one private segment, and the rank whose gpu tier is
# too small sees its remainder planned onto the others; nothing is left.
case_peer_see() {
	peer_setup
	local r
	peer_start 0 3 CKPTCACHE_GPU_CACHE=2M
	peer_start 1 3
	peer_start 2 3
	for r in 0 1 2; do peer_wait_for $r holding; done
	local seg st
	seg=$(peer_seg)
	st=$(stat -c '%a %U' "$seg" 2>/dev/null) || fail "no segment $seg while the ranks run"
	[ "$st" = "600 $(id -un)" ] || fail "segment $seg: mode and owner '$st', expected '600 $(id -un)'"
	touch "$T/go"
	for r in 0 1 2; do peer_wait_for $r RESULT; done
	# rank 0 ends first: its schedule sees the two others
	peer_end 0
	peer_end 1
	peer_end 2
	[ -e "$seg" ] && fail "segment $seg left after the job"
	grep -q 'peer GPUs: maxflow' "$T/r1.out" || fail "rank 1 did not say it joined"
	for r in 0 1 2; do
		peer_json $r 'd["peer"]["mode"] == "maxflow"' 'd["peer"]["ranks_max"] == 3' \
			'd["peer"]["lending"] is True' 'd["peer"]["entry"] == '$r
	done
	peer_json 0 'd["peer"]["ranks"] == 3' 'd["peer"]["remainder_bytes"] > 0' \
		'd["peer"]["plan"]["to_peers_bytes"] > 0' \
		'd["peer"]["blocking_s"]["maxflow"] <= d["peer"]["blocking_s"]["greedy"] <= d["peer"]["blocking_s"]["local"]' \
		'd["peer"]["blocking_s"]["maxflow"] < d["peer"]["blocking_s"]["local"]'
	# ckptcache stats shows it
	CKPTCACHE_DOCTOR=$(dirname "$LIB")/../doctor "$ROOT/scripts/ckptcache" stats "$STATS/r0.json" >"$T/stats.out" 2>&1
	cat "$T/stats.out"
	grep -q 'peer GPUs (maxflow; lending on)' "$T/stats.out" &&
		grep -q 'board  *entry 0; 3 rank(s) at exit, 3 at most' "$T/stats.out" ||
		fail "ckptcache stats does not show the peer board"
	# exactly one rank removed it
	"$PY" -c 'import json,sys; n=sum(json.load(open(f))["peer"]["segment_removed"] for f in sys.argv[1:]); sys.exit(n != 1)' \
		"$STATS"/r*.json || fail "the segment was not removed by exactly one rank"
}

# A rank killed with SIGKILL while the others run: they go on and verify
# every byte; its entry stays until a new rank 1 claims it; the last rank
# out removes the segment.
case_peer_killed() {
	peer_setup
	local r pid
	for r in 0 1 2; do peer_start $r 3 CKPTCACHE_PEER=maxflow; done
	for r in 0 1 2; do peer_wait_for $r holding; done
	pid=$(sed -n 's/^holding .* (pid \([0-9]*\))$/\1/p' "$T/r1.out" | head -1)
	[ -n "$pid" ] || fail "rank 1 did not say its pid"
	kill -KILL "$pid"
	wait "$PEER_PID_1" 2>/dev/null
	[ -e "$(peer_seg)" ] || fail "the segment went with the killed rank while two others use it"
	# a new rank 1 (a restarted task) takes the dead one's entry
	mv "$T/r1" "$T/r1.killed"
	mv "$T/r1.out" "$T/r1.killed.out"
	peer_start 1 3 CKPTCACHE_PEER=maxflow
	peer_wait_for 1 holding
	touch "$T/go"
	for r in 0 1 2; do peer_wait_for $r RESULT; done
	for r in 0 2 1; do peer_end $r; done
	[ -e "$(peer_seg)" ] && fail "segment $(peer_seg) left after the job"
	peer_json 1 'd["peer"]["entry_reclaimed"] is True' 'd["peer"]["stale_segment"] is False'
	peer_json 0 'd["peer"]["entry_reclaimed"] is False' 'd["peer"]["ranks_max"] == 3'
	peer_json 2 'd["peer"]["ranks_max"] == 3'
}

# CKPTCACHE_PEER=off on a node with linked devices, and the default on a
# node of one device: no segment is ever made, no statistics of it, and
# (the default) the library says nothing of peers.
case_peer_off() {
	peer_setup
	local r
	peer_start 0 2 CKPTCACHE_PEER=off
	peer_start 1 2 CKPTCACHE_PEER=off
	for r in 0 1; do peer_wait_for $r holding; done
	[ -e "$(peer_seg)" ] && fail "CKPTCACHE_PEER=off: segment $(peer_seg) made"
	touch "$T/go"
	for r in 0 1; do peer_wait_for $r RESULT; done
	[ -e "$(peer_seg)" ] && fail "CKPTCACHE_PEER=off: segment $(peer_seg) made"
	for r in 0 1; do peer_end $r; done
	for r in 0 1; do peer_json $r '"peer" not in d' '"gpu" in d and d["capture"]["captured"] > 0'; done
	# the default with one device per node: off, silently (the log is at
	# warn, the default)
	rm -f "$T"/go "$T"/end.* && rm -rf "$T"/r0 "$T"/r1 "$T"/none*
	phase one
	peer_start 0 1 CKPTCACHE_LOG=warn
	peer_start 1 1 CKPTCACHE_LOG=warn
	for r in 0 1; do peer_wait_for $r holding; done
	[ -e "$(peer_seg)" ] && fail "one device per node: segment $(peer_seg) made"
	touch "$T/go"
	for r in 0 1; do peer_end $r; done
	grep -i 'peer' "$T"/r0.out "$T"/r1.out && fail "the library spoke of peers on a node of one device"
	for r in 0 1; do peer_json $r '"peer" not in d'; done
}

case_add peer-see case_peer_see
case_add peer-killed case_peer_killed
case_add peer-off case_peer_off

# Every rank of a job killed with SIGKILL: the segment stays; ckptcache
# doctor reports it and says how to remove it; the next run of the job
# recognises it as stale, makes it anew, and leaves nothing.
case_peer_stale() {
	peer_setup alone
	local r pid
	for r in 0 1; do peer_start $r 2 CKPTCACHE_PEER=greedy; done
	for r in 0 1; do peer_wait_for $r holding; done
	for r in 0 1; do
		pid=$(sed -n 's/^holding .* (pid \([0-9]*\))$/\1/p' "$T/r$r.out" | head -1)
		[ -n "$pid" ] || fail "rank $r did not say its pid"
		kill -KILL "$pid"
		eval "wait \$PEER_PID_$r" 2>/dev/null
	done
	local seg
	seg=$(peer_seg)
	[ -e "$seg" ] || fail "no segment $seg after its ranks were killed"
	CKPTCACHE_PATHS="$T/x/*" CKPTCACHE_LIB=$LIB CKPTCACHE_DOCTOR=$(dirname "$LIB")/../doctor \
		"$ROOT/scripts/ckptcache" doctor >"$T/doctor.out" 2>&1
	cat "$T/doctor.out"
	grep -q "peer segment $seg: no process holds it.*rm $seg" "$T/doctor.out" ||
		fail "ckptcache doctor did not report the stale segment $seg"
	[ -e "$seg" ] || fail "ckptcache doctor removed $seg without being asked"
	rm -rf "$T"/r0 "$T"/r1 "$T"/go "$T"/end.*
	phase again
	for r in 0 1; do peer_start $r 2 CKPTCACHE_PEER=greedy; done
	for r in 0 1; do peer_wait_for $r holding; done
	touch "$T/go"
	for r in 0 1; do peer_end $r; done
	[ -e "$seg" ] && fail "segment $seg left after the run that followed the crash"
	local found
	found=$("$PY" -c 'import json,os,sys; print(" ".join("%s:%s" % (os.path.basename(f), json.load(open(f))["peer"]["stale_segment"]) for f in sys.argv[1:]))' \
		"$STATS"/r*.json 2>&1)
	"$PY" -c 'import json,sys; n=sum(json.load(open(f))["peer"]["stale_segment"] for f in sys.argv[1:]); sys.exit(n != 1)' \
		"$STATS"/r*.json ||
		fail "no rank (or more than one) found the segment stale ($found; ranks said: $(grep -h 'peer segment' "$T"/r*.out "$T"/r*.err 2>/dev/null | head -4 | tr '\n' ' '))"
	for r in 0 1; do peer_json $r 'd["peer"]["mode"] == "greedy"' 'd["peer"]["ranks_max"] == 2'; done
}

case_add peer-stale case_peer_stale

# Lending. Ranks 1.. start first and write their checkpoints (their gpu
# tiers have room to spare once they hold them); rank 0, whose tier is too
# small, then borrows from them: its captures that do not fit its own
# device go to memory they lent, and are restored from there, every byte
# verified. When rank 0 ends, everything lent comes back. (Started while
# the lenders still wrote, or while their tiers were still being mapped in
# the background, rank 0 could find no room spare yet and, its 12
# captures done within about 100 ms, not find any before its end: on a
# loaded machine it sometimes borrowed nothing.)
peer_lenders_first() { # N [VAR=VALUE]...: ranks 1..N-1, then rank 0 with a 2 MiB tier
	local n=$1 r
	shift
	for ((r = 1; r < n; r++)); do peer_start $r $n "$@"; done
	for ((r = 1; r < n; r++)); do peer_wait_for $r 'lending and borrowing'; done
	for ((r = 1; r < n; r++)); do peer_wait_for $r holding; done
	for ((r = 1; r < n; r++)); do peer_wait_for $r 'bytes mapped on device .*, all it may take now'; done
	peer_start 0 $n CKPTCACHE_GPU_CACHE=2M "$@"
}

case_peer_lend() {
	peer_setup
	local r n
	peer_ranks
	n=$PEER_N
	peer_lenders_first $n
	for ((r = 0; r < n; r++)); do peer_wait_for $r holding; done
	touch "$T/go"
	for ((r = 0; r < n; r++)); do peer_wait_for $r RESULT; done
	for ((r = 0; r < n; r++)); do peer_end $r; done
	peer_json 0 'd["peer"]["borrowed"]["bytes"] > 0' 'd["peer"]["borrowed"]["placed_bytes"] > 0' \
		'd["peer"]["lent"]["bytes"] == 0'
	"$PY" - "$STATS"/r[1-9].json <<'PYEOF' || fail "what the other ranks lent did not all come back"
import json, sys
p = [json.load(open(f))["peer"]["lent"] for f in sys.argv[1:]]
print(p)
lent = sum(x["bytes"] for x in p)
sys.exit(0 if lent > 0 and all(x["returned_bytes"] == x["bytes"] for x in p) else 1)
PYEOF
	CKPTCACHE_DOCTOR=$(dirname "$LIB")/../doctor "$ROOT/scripts/ckptcache" stats "$STATS/r0.json" >"$T/stats.out" 2>&1
	grep -q 'borrowed  *[1-9].* in [1-9][0-9]* round(s); [1-9]' "$T/stats.out" ||
		{ cat "$T/stats.out"; fail "ckptcache stats does not show what rank 0 borrowed"; }
}

# peer_lend_kill K S: rank 1 lends, rank 0 borrows; once both hold before
# their restores, rank K is killed with SIGKILL and rank S goes on to its
# end, every byte verified.
peer_lend_kill() {
	local k=$1 s=$2 pid
	peer_setup
	peer_lenders_first 2
	peer_wait_for 0 holding
	peer_wait_for 1 holding
	# (said by the library's thread, maybe after the program's line)
	peer_wait_for 0 borrowed
	pid=$(sed -n 's/^holding .* (pid \([0-9]*\))$/\1/p' "$T/r$k.out" | head -1)
	[ -n "$pid" ] || fail "rank $k did not say its pid"
	kill -KILL "$pid"
	eval "wait \$PEER_PID_$k" 2>/dev/null
	touch "$T/go"
	peer_wait_for $s RESULT
	peer_end $s
}

# The borrower killed with SIGKILL after its checkpoints: the lender gets
# everything it lent back and ends well.
case_peer_lend_borrower_killed() {
	peer_lend_kill 0 1
	peer_json 1 'd["peer"]["lent"]["bytes"] > 0' \
		'd["peer"]["lent"]["returned_bytes"] == d["peer"]["lent"]["bytes"]'
	# it came back when the borrower died, not at the lender's own end
	awk '/entry 0 is gone: the [1-9][0-9]* bytes it borrowed came back/ && !g { g = NR } /^RESULT/ && !r { r = NR }
		END { exit !(g && r && g < r) }' "$T/r1.out" ||
		fail "what rank 0 borrowed did not come back when it died"
}

# The lender killed with SIGKILL while the borrower's checkpoints are in
# memory it lent: the borrower loses nothing (restores every byte, its
# files are those of a run without the library) and gives that memory up
# once its bytes are safe below.
case_peer_lend_lender_killed() {
	peer_lend_kill 1 0
	peer_json 0 'd["peer"]["borrowed"]["bytes"] > 0' 'd["peer"]["borrowed"]["lenders_lost"] == 1'
}

case_add peer-lend case_peer_lend
case_add peer-lend-borrower-killed case_peer_lend_borrower_killed
case_add peer-lend-lender-killed case_peer_lend_lender_killed

# The lender's program needs its device's memory back (an allocation larger
# than what the driver reports free): the borrower gives back what it holds
# of the lender's, once flushed, before the lender's own cache is touched;
# the allocation succeeds and the borrower still restores every byte.
case_peer_lend_taken_back() {
	peer_setup
	PEER_ARGS="--grab-beyond 6" peer_start 1 2 CKPTCACHE_PERSIST=always
	peer_wait_for 1 'lending and borrowing'
	peer_wait_for 1 holding
	peer_wait_for 1 'bytes mapped on device .*, all it may take now'
	peer_start 0 2 CKPTCACHE_GPU_CACHE=2M CKPTCACHE_PERSIST=always
	peer_wait_for 0 holding
	peer_wait_for 1 holding
	# (said by the library's thread, maybe after the program's line)
	peer_wait_for 0 borrowed
	touch "$T/go"
	peer_wait_for 1 grabbed
	grep -q 'grabbed .*: ok' "$T/r1.out" || { cat "$T/r1.out"; fail "rank 1 could not allocate the memory it lent"; }
	for r in 0 1; do peer_wait_for $r RESULT; done
	peer_end 0
	peer_end 1
	peer_json 1 'd["peer"]["lent"]["taken_back_bytes"] > 0'
	# lent memory came back before the lender's own cache gave any
	awk '/lent came back/ && !l { l = NR } /given back to the program/ && !o { o = NR }
		END { exit !(l && (!o || l < o)) }' "$T/r1.out" ||
		fail "rank 1's own gpu tier gave memory back before what it lent came back"
	peer_json 0 'd["peer"]["borrowed"]["given_back_bytes"] > 0'
}

case_add peer-lend-taken-back case_peer_lend_taken_back
