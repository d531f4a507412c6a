/* Tests of the peer segment's life (src/peerseg.c) with real processes in
 * a folder of their own: created private and sized for the board, joined
 * by a second process, removed by the last one out and not before; a
 * segment whose processes were all killed (SIGKILL) is recognised and
 * initialised again; processes starting at the same instant initialise it
 * exactly once and all see each other (from no segment or a stale one); the sweep removes only segments
 * that nobody holds. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "peerseg.h"

static char dir[64], path[PATH_MAX];

static void setup(void)
{
	strcpy(dir, "/tmp/ckc-peerseg.XXXXXX");
	cr_assert(mkdtemp(dir));
	cr_assert_eq(ckc_peerseg_path(path, sizeof(path), dir, "slurm7.0", "n0"), 0);
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_expect_eq(system(cmd), 0);
}

static bool exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}

Test(peerseg, its_name_holds_user_job_and_node)
{
	char p[PATH_MAX], want[128];
	snprintf(want, sizeof(want), "/dev/shm/ckptcache-peer-%u-slurm7.0-n3", (unsigned)geteuid());
	cr_expect_eq(ckc_peerseg_path(p, sizeof(p), CKC_PEERSEG_DIR, "slurm7.0", "n3"), 0);
	cr_expect_str_eq(p, want);
	cr_expect_eq(ckc_peerseg_path(p, sizeof(p), CKC_PEERSEG_DIR, "", "n3"), -EINVAL);
	cr_expect_eq(ckc_peerseg_path(p, 20, CKC_PEERSEG_DIR, "slurm7.0", "n3"), -ENAMETOOLONG);
}

Test(peerseg, made_private_joined_and_removed_by_the_last_out, .init = setup, .fini = teardown)
{
	ckc_peerseg_t a, b;
	struct stat st;
	peer_info_t v = { .device = 3, .bus = 0x19, .spare = 1 << 20, .host_bw = 1e9 }, got;

	cr_assert_eq(ckc_peerseg_open(&a, path, "slurm7.0", 0, 1.0), 0);
	cr_expect(a.initialised && !a.was_stale);
	cr_assert_eq(stat(path, &st), 0);
	cr_expect_eq(st.st_mode & 0777, 0600, "mode %o", st.st_mode & 0777);
	cr_expect_eq((size_t)st.st_size, sizeof(peer_board_t));
	peerboard_publish(a.board, 0, a.pid, &v);

	/* a second descriptor joins as another process would */
	cr_assert_eq(ckc_peerseg_open(&b, path, "slurm7.0", 1, 1.0), 0);
	cr_expect(!b.initialised, "a live segment is not initialised again");
	cr_assert(peerboard_read(b.board, 0, &got, NULL), "the first one's entry is seen");
	cr_expect_eq(got.device, 3);
	cr_expect_eq(got.bus, 0x19);
	cr_expect_eq(ckc_peerseg_open(&(ckc_peerseg_t){ 0 }, path, "slurm8.0", 2, 0.2), -EEXIST,
		     "another job under the same name");

	cr_expect_eq(ckc_peerseg_close(&a), 0, "not the last out");
	cr_expect(exists(path));
	cr_expect(!peerboard_read(b.board, 0, &got, NULL), "its entry was given back");
	cr_expect_eq(ckc_peerseg_close(&b), 1, "the last out removes it");
	cr_expect(!exists(path));
}

Test(peerseg, a_file_others_may_open_is_refused, .init = setup, .fini = teardown)
{
	int fd = open(path, O_CREAT | O_RDWR, 0644);
	cr_assert(fd >= 0);
	cr_assert_eq(fchmod(fd, 0644), 0);
	close(fd);
	ckc_peerseg_t s;
	cr_expect_eq(ckc_peerseg_open(&s, path, "slurm7.0", 0, 0.2), -EPERM);
}

/* Forks a process that joins as slot and dies of SIGKILL without leaving. */
static void join_and_die(int slot)
{
	pid_t k = fork();
	cr_assert(k >= 0);
	if (k == 0) {
		ckc_peerseg_t s;
		peer_info_t v = { .device = slot, .spare = 123, .host_bw = 1e9 };
		if (ckc_peerseg_open(&s, path, "slurm7.0", slot, 1.0) == 0)
			peerboard_publish(s.board, slot, s.pid, &v);
		kill(getpid(), SIGKILL);
		_exit(1);
	}
	int st;
	cr_assert_eq(waitpid(k, &st, 0), k);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

Test(peerseg, a_segment_whose_processes_were_all_killed_is_made_anew, .init = setup,
     .fini = teardown)
{
	join_and_die(0);
	join_and_die(1);
	cr_assert(exists(path), "a killed process cannot remove it");

	ckc_peerseg_t s;
	peer_info_t got;
	cr_assert_eq(ckc_peerseg_open(&s, path, "slurm7.0", 2, 1.0), 0);
	cr_expect(s.initialised && s.was_stale, "recognised as stale");
	cr_expect(!peerboard_read(s.board, 0, &got, NULL) && !peerboard_read(s.board, 1, &got, NULL),
		  "nothing of the dead processes' board is trusted");
	cr_expect_eq(ckc_peerseg_close(&s), 1);
	cr_expect(!exists(path), "no leftover after the run that follows the crash");
}

Test(peerseg, a_killed_process_entry_is_taken_over_while_others_live, .init = setup,
     .fini = teardown)
{
	ckc_peerseg_t live, again;
	cr_assert_eq(ckc_peerseg_open(&live, path, "slurm7.0", 0, 1.0), 0);
	join_and_die(1);
	cr_assert_eq(ckc_peerseg_open(&again, path, "slurm7.0", 1, 1.0), 0);
	cr_expect(!again.initialised, "a live process holds it: kept");
	cr_expect(again.reclaimed, "the dead owner's entry is claimed");
	cr_expect_eq(ckc_peerseg_close(&again), 0);
	cr_expect_eq(ckc_peerseg_close(&live), 1);
}

#define RACERS 8

/* Shared between the racers: who initialised, who removed, what each saw. */
typedef struct race {
	int go;
	int initialised, removed, joined, failed;
	int seen[RACERS];
} race_t;

static void racer(race_t *r, int slot)
{
	while (!__atomic_load_n(&r->go, __ATOMIC_ACQUIRE))
		;
	ckc_peerseg_t s;
	peer_info_t v = { .device = slot, .host_bw = 1e9 }, got;
	if (ckc_peerseg_open(&s, path, "slurm7.0", slot, 5.0) != 0) {
		__atomic_add_fetch(&r->failed, 1, __ATOMIC_SEQ_CST);
		_exit(1);
	}
	peerboard_publish(s.board, slot, s.pid, &v);
	__atomic_add_fetch(&r->initialised, s.initialised, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&r->joined, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&r->joined, __ATOMIC_SEQ_CST) + __atomic_load_n(&r->failed, __ATOMIC_SEQ_CST) < RACERS)
		usleep(100);
	for (int j = 0; j < RACERS; j++)
		r->seen[slot] += peerboard_read(s.board, j, &got, NULL) && got.device == j;
	/* everyone looked before anyone leaves */
	__atomic_add_fetch(&r->joined, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&r->joined, __ATOMIC_SEQ_CST) < 2 * RACERS)
		usleep(100);
	__atomic_add_fetch(&r->removed, ckc_peerseg_close(&s), __ATOMIC_SEQ_CST);
	_exit(0);
}

Test(peerseg, processes_starting_at_once_initialise_it_once_and_see_each_other, .init = setup,
     .fini = teardown)
{
	for (int round = 0; round < 10; round++) {
		/* odd rounds start from a stale segment, even ones from none */
		if (round % 2)
			join_and_die(RACERS);
		race_t *r = mmap(NULL, sizeof(race_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		cr_assert(r != MAP_FAILED);
		memset(r, 0, sizeof(*r));
		pid_t kids[RACERS];
		for (int i = 0; i < RACERS; i++) {
			kids[i] = fork();
			cr_assert(kids[i] >= 0);
			if (kids[i] == 0)
				racer(r, i);
		}
		__atomic_store_n(&r->go, 1, __ATOMIC_RELEASE);
		for (int i = 0; i < RACERS; i++) {
			int st;
			cr_assert_eq(waitpid(kids[i], &st, 0), kids[i]);
			cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "racer %d failed", i);
		}
		cr_expect_eq(r->initialised, 1, "round %d: initialised %d times", round, r->initialised);
		cr_expect_eq(r->removed, 1, "round %d: removed %d times", round, r->removed);
		for (int i = 0; i < RACERS; i++)
			cr_expect_eq(r->seen[i], RACERS, "round %d: racer %d saw %d entries", round, i, r->seen[i]);
		cr_expect(!exists(path), "round %d: left behind", round);
		munmap(r, sizeof(*r));
	}
}

static void count_swept(const char *p, bool removed, void *ctx)
{
	cr_expect(removed, "%s not removed", p);
	(*(int *)ctx)++;
}

Test(peerseg, the_sweep_removes_only_what_nobody_holds, .init = setup, .fini = teardown)
{
	char live[PATH_MAX];
	ckc_peerseg_t s;
	int n = 0;

	join_and_die(0); /* leaves path, stale */
	cr_assert_eq(ckc_peerseg_path(live, sizeof(live), dir, "slurm9.0", "n0"), 0);
	cr_assert_eq(ckc_peerseg_open(&s, live, "slurm9.0", 0, 1.0), 0);
	cr_expect_eq(ckc_peerseg_sweep(dir, true, count_swept, &n), 1);
	cr_expect_eq(n, 1);
	cr_expect(!exists(path), "the stale one is gone");
	cr_expect(exists(live), "the held one stays");
	cr_expect_eq(ckc_peerseg_close(&s), 1);
}

/* A joiner that initialised the segment turns its exclusive lock into a
 * shared one, and flock lets go of the one before it takes the other: in
 * between it holds no lock, with its entry on the board claimed. A sweep in
 * that moment must keep the segment. */
Test(peerseg, the_sweep_keeps_a_segment_whose_joiner_is_between_locks, .init = setup,
     .fini = teardown)
{
	ckc_peerseg_t s;
	int n = 0;

	cr_assert_eq(ckc_peerseg_open(&s, path, "slurm7.0", 0, 1.0), 0);
	cr_assert_eq(flock(s.fd, LOCK_UN), 0);
	cr_expect_eq(ckc_peerseg_sweep(dir, true, count_swept, &n), 0);
	cr_expect_eq(n, 0);
	cr_expect(exists(path), "a segment a live process is joining was removed");
	cr_assert_eq(flock(s.fd, LOCK_SH), 0);
	cr_expect_eq(ckc_peerseg_close(&s), 1);
	cr_expect(!exists(path));
}

/* The last one out meets a lock that nobody on the board holds: a leaver
 * that let its entry go and has not closed its descriptor yet (two
 * processes leaving at once), or a sweep's look. It removes the segment
 * once that lock goes, and leaves it to a process that is on the board. */
static void *close_later(void *arg)
{
	usleep(20000);
	close(*(int *)arg);
	return NULL;
}

Test(peerseg, the_last_out_removes_it_after_a_lock_nobody_on_the_board_holds, .init = setup,
     .fini = teardown)
{
	ckc_peerseg_t s, other;

	cr_assert_eq(ckc_peerseg_open(&s, path, "slurm7.0", 0, 1.0), 0);
	int fd = open(path, O_RDWR);
	cr_assert(fd >= 0);
	cr_assert_eq(flock(fd, LOCK_SH), 0);
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, close_later, &fd), 0);
	cr_expect_eq(ckc_peerseg_close(&s), 1, "the last out did not remove it");
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_expect(!exists(path), "left after the last one out");

	/* a process on the board keeps it, whatever the leaver waits for */
	cr_assert_eq(ckc_peerseg_open(&s, path, "slurm7.0", 0, 1.0), 0);
	cr_assert_eq(ckc_peerseg_open(&other, path, "slurm7.0", 1, 1.0), 0);
	cr_expect_eq(ckc_peerseg_close(&s), 0);
	cr_expect(exists(path), "removed while another process is on its board");
	cr_expect_eq(ckc_peerseg_close(&other), 1);
	cr_expect(!exists(path));
}
