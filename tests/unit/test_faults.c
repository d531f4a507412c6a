/* Faults injected through the engine's I/O table: the ssd tier out of space
 * or failing, the real path failing, the real path slow, the ssd file not
 * creatable. Nothing may be lost: bytes stay readable, the failure is
 * logged and counted, and a failed flush leaves a named rescue file. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>

#include "engine_int.h"
#include "engine_util.h"

/* Which fds point into the ssd directory, the home directory. */
static char ssd_prefix[128], home_prefix[128];
static _Atomic int fd_kind[4096]; /* 1 ssd, 2 home */
static _Atomic int fail_ssd_errno, fail_home_errno, home_delay_us, ssd_fail_after;
static _Atomic int home_writers; /* pwrite(2)s to home in progress */
static _Atomic int ssd_failed;   /* pwrite(2)s to the ssd file failed */
static _Atomic int errors_logged;
static char last_error[1024], all_errors[8192];
static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;

static void sink(int level, const char *msg)
{
	if (level != CKC_LOG_ERROR && level != CKC_LOG_WARN)
		return;
	atomic_fetch_add(&errors_logged, 1);
	pthread_mutex_lock(&err_lock);
	snprintf(last_error, sizeof(last_error), "%s", msg);
	size_t n = strlen(all_errors);
	snprintf(all_errors + n, sizeof(all_errors) - n, "%s\n", msg);
	pthread_mutex_unlock(&err_lock);
}

/* Whether path is below prefix (which ends in '/'), or is its folder: an
 * anonymous temporary file (O_TMPFILE) is opened on the folder. */
static bool below(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);
	return !strncmp(path, prefix, n) || (strlen(path) == n - 1 && !strncmp(path, prefix, n - 1));
}

/* An open below home fails with this errno while it is set (EMFILE: the
 * program's descriptor table full). */
static _Atomic int home_open_errno;

static int f_open(const char *path, int flags, mode_t mode)
{
	if (atomic_load(&home_open_errno) && below(path, home_prefix)) {
		errno = atomic_load(&home_open_errno);
		return -1;
	}
	int fd = open(path, flags | O_CLOEXEC, mode);
	if (fd >= 0 && fd < 4096)
		atomic_store(&fd_kind[fd], below(path, ssd_prefix) ? 1 : below(path, home_prefix) ? 2 : 0);
	return fd;
}

static int kind(int fd)
{
	return fd >= 0 && fd < 4096 ? atomic_load(&fd_kind[fd]) : 0;
}

static ssize_t f_pwrite(int fd, const void *buf, size_t len, off_t off)
{
	if (kind(fd) == 1 && atomic_load(&fail_ssd_errno)) {
		if (atomic_load(&ssd_fail_after) > 0)
			atomic_fetch_sub(&ssd_fail_after, 1);
		else {
			atomic_fetch_add(&ssd_failed, 1);
			errno = atomic_load(&fail_ssd_errno);
			return -1;
		}
	}
	if (kind(fd) == 2) {
		if (atomic_load(&fail_home_errno)) {
			errno = atomic_load(&fail_home_errno);
			return -1;
		}
		atomic_fetch_add(&home_writers, 1);
		if (atomic_load(&home_delay_us))
			usleep((useconds_t)atomic_load(&home_delay_us));
		ssize_t r = pwrite(fd, buf, len, off);
		atomic_fetch_sub(&home_writers, 1);
		return r;
	}
	return pwrite(fd, buf, len, off);
}

static _Atomic int ftruncate_errno;

/* The ssd file cannot be sized: fails with ftruncate_errno. */
static int f_ftruncate_fail(int fd, off_t len)
{
	(void)fd;
	(void)len;
	errno = atomic_load(&ftruncate_errno);
	return -1;
}

static void faults_setup(tenv_t *e)
{
	tenv_make(e);
	snprintf(ssd_prefix, sizeof(ssd_prefix), "%s/", e->ssd);
	snprintf(home_prefix, sizeof(home_prefix), "%s/", e->home);
	ckc_io.open = f_open;
	ckc_io.pwrite = f_pwrite;
	ckc_log_sink = sink;
	atomic_store(&errors_logged, 0);
	atomic_store(&ssd_failed, 0);
}

static void faults_teardown(tenv_t *e)
{
	ckc_shutdown();
	ckc_io_reset();
	ckc_log_sink = NULL;
	atomic_store(&fail_ssd_errno, 0);
	atomic_store(&fail_home_errno, 0);
	atomic_store(&home_delay_us, 0);
	atomic_store(&home_open_errno, 0);
	ckc_spare_fd_hook = NULL;
	tenv_clean(e);
}

/* Starts the engine with a host tier of host bytes and no ssd tier over a
 * real path whose every write takes delay_us. */
static void slow_home_start(tenv_t *e, uint64_t host, int delay_us)
{
	faults_setup(e);
	ckc_config_t c = tcfg(e, host, 0);
	cr_assert_eq(ckc_init_config(&c), 0);
	atomic_store(&home_delay_us, delay_us);
}

/* Starts the engine (host 2 MiB, ssd 16 MiB: the history has to go
 * through the ssd tier) with every write into the ssd file after the
 * first 2 failing with err, and writes a history of 10 checkpoints. The
 * real path's writes take 20 ms each: where its publications kept up with
 * the program, the host tier dropped published checkpoints instead, and no
 * copy went to the ssd tier at all (a clean clone's run, once). */
static void ssd_failing_history(tenv_t *e, int err)
{
	faults_setup(e);
	ckc_config_t c = tcfg(e, 2 * MiB, 16 * MiB);
	c.log_level = CKC_LOG_WARN;
	cr_assert_eq(ckc_init_config(&c), 0);
	atomic_store(&home_delay_us, 20000);
	atomic_store(&ssd_fail_after, 2);
	atomic_store(&fail_ssd_errno, err);
	char path[PATH_MAX];
	for (int i = 0; i < 10; i++) {
		tpath(e, path, i);
		twrite(path, (uint64_t)i, 700 * 1024, 100000);
	}
}

/* The history read back in reverse, then, once the engine has stopped, at
 * the real paths. */
static void ssd_history_check(tenv_t *e)
{
	char path[PATH_MAX];
	for (int i = 9; i >= 0; i--) {
		tpath(e, path, i);
		tverify(path, (uint64_t)i, 700 * 1024, 100000);
	}
	ckc_shutdown();
	for (int i = 0; i < 10; i++) {
		tpath(e, path, i);
		cr_assert(thome_matches(path, (uint64_t)i, 700 * 1024), "%s lost", path);
	}
}

static void ssd_failure(int err)
{
	tenv_t e;
	ssd_failing_history(&e, err);
	ckc_stats_t st;
	ckc_stats_get(&st);
	cr_assert_gt(st.tier[1].flush_errors, 0, "ssd failures must be counted");
	cr_assert_gt(atomic_load(&errors_logged), 0, "ssd failures must be logged");
	ssd_history_check(&e);
	faults_teardown(&e);
}

Test(faults, ssd_enospc) { ssd_failure(ENOSPC); }
Test(faults, ssd_eio) { ssd_failure(EIO); }

/* The ssd tier's file takes space as the tier holds checkpoints, not its
 * whole size at start: the processes of a node each sized theirs from what
 * was free, and a few of them filled the disk the real files needed. */
Test(faults, ssd_file_takes_space_as_it_is_used)
{
	tenv_t e;
	faults_setup(&e);
	ckc_config_t c = tcfg(&e, 2 * MiB, 64 * MiB);
	cr_assert_eq(ckc_init_config(&c), 0);
	struct stat st;
	cr_assert_eq(stat(ckc_eng.tier[1].path, &st), 0, "%s", ckc_eng.tier[1].path);
	cr_assert_eq((uint64_t)st.st_size, 64 * MiB, "the file spans the tier");
	cr_assert_lt((uint64_t)st.st_blocks * 512, 1 * MiB, "%llu bytes taken at start",
		     (unsigned long long)st.st_blocks * 512);
	char path[PATH_MAX];
	for (int i = 0; i < 10; i++) {
		tpath(&e, path, i);
		twrite(path, (uint64_t)i, 700 * 1024, 100000);
	}
	ckc_stats_t s;
	ckc_stats_get(&s);
	cr_assert_geq(s.tier[1].peak_used_bytes, 700 * 1024, "the history went through the ssd tier");
	cr_assert_eq(stat(ckc_eng.tier[1].path, &st), 0);
	cr_assert_geq((uint64_t)st.st_blocks * 512, 700 * 1024, "%llu bytes taken once used",
		      (unsigned long long)st.st_blocks * 512);
	ssd_history_check(&e);
	faults_teardown(&e);
}

/* A write into the ssd tier that finds its file system full closes the
 * tier to new copies: later checkpoints go to the next tier without trying
 * it again (each try wrote bytes only to move them), and the log says so
 * once. Nothing is lost. */
Test(faults, ssd_full_closes_the_tier_to_new_copies)
{
	tenv_t e;
	ssd_failing_history(&e, ENOSPC);
	cr_assert_eq(ckc_wait_flushed(), 0);
	/* (a program's write and the host tier's flush may both be under
	 * way when the first finds the file system full) */
	cr_assert_leq(atomic_load(&ssd_failed), 2, "the full ssd tier was written %d times",
		      atomic_load(&ssd_failed));
	pthread_mutex_lock(&err_lock);
	const char *say = strstr(all_errors, "takes no new ones");
	cr_assert_not_null(say, "%s", all_errors);
	cr_assert_null(strstr(say + 1, "takes no new ones"), "said more than once: %s", all_errors);
	pthread_mutex_unlock(&err_lock);
	ssd_history_check(&e);
	faults_teardown(&e);
}

Test(faults, home_eio_leaves_a_rescue_file)
{
	tenv_t e;
	faults_setup(&e);
	ckc_config_t c = tcfg(&e, 8 * MiB, 0);
	cr_assert_eq(ckc_init_config(&c), 0);
	atomic_store(&fail_home_errno, EIO);
	char path[PATH_MAX];
	tpath(&e, path, 3);
	twrite(path, 3, 1 * MiB + 7, 300000);
	cr_assert_eq(ckc_wait_flushed(), -EIO, "a rescued checkpoint must be reported");
	/* the bytes are still readable, from the cache */
	tverify(path, 3, 1 * MiB + 7, 1 * MiB);
	ckc_stats_t st;
	ckc_stats_get(&st);
	cr_assert_eq(st.rescued, 1);
	cr_assert_gt(st.tier[0].flush_errors, 0);
	pthread_mutex_lock(&err_lock);
	char msg[1024];
	snprintf(msg, sizeof(msg), "%s", last_error);
	pthread_mutex_unlock(&err_lock);
	cr_assert_not_null(strstr(msg, "saved in "), "the log must say where: %s", msg);
	char rescue[PATH_MAX];
	snprintf(rescue, sizeof(rescue), "%s", strstr(msg, "saved in ") + 9);
	cr_assert(thome_matches(rescue, 3, 1 * MiB + 7), "rescue file %s", rescue);
	/* in the private folder there, only the user's, with the real path in
	 * the index */
	char priv[PATH_MAX], idx[PATH_MAX + 16], line[2 * PATH_MAX];
	snprintf(priv, sizeof(priv), "%s/ckptcache-%u/", e.rescue, (unsigned)getuid());
	cr_assert_eq(strncmp(rescue, priv, strlen(priv)), 0, "rescue file %s not in %s", rescue, priv);
	struct stat rs;
	cr_assert_eq(stat(rescue, &rs), 0);
	cr_assert_eq(rs.st_mode & 07777, 0600);
	priv[strlen(priv) - 1] = '\0';
	cr_assert_eq(stat(priv, &rs), 0);
	cr_assert_eq(rs.st_mode & 07777, 0700);
	snprintf(idx, sizeof(idx), "%s/rescue.index", priv);
	snprintf(line, sizeof(line), "%s\t%s\n", strrchr(rescue, '/') + 1, path);
	FILE *f = fopen(idx, "r");
	cr_assert_not_null(f, "%s", idx);
	char got[2 * PATH_MAX] = "";
	cr_assert_not_null(fgets(got, sizeof(got), f));
	fclose(f);
	cr_assert_str_eq(got, line);
	cr_assert_not(texists(path));
	faults_teardown(&e);
}

Test(faults, home_eio_after_eviction_reads_the_rescue_file)
{
	tenv_t e;
	faults_setup(&e);
	ckc_config_t c = tcfg(&e, 2 * MiB, 0);
	cr_assert_eq(ckc_init_config(&c), 0);
	atomic_store(&fail_home_errno, EIO);
	char path[PATH_MAX];
	for (int i = 0; i < 6; i++) {
		tpath(&e, path, i);
		twrite(path, (uint64_t)i, 900 * 1024, 900 * 1024);
		/* rescued before the next one needs its room */
		cr_assert_eq(ckc_wait_flushed(), -EIO);
	}
	/* the early ones were evicted once rescued: read from the rescue files */
	for (int i = 0; i < 6; i++) {
		tpath(&e, path, i);
		tverify(path, (uint64_t)i, 900 * 1024, 100000);
	}
	ckc_stats_t st;
	ckc_stats_get(&st);
	cr_assert_geq(st.rescued, 4);
	cr_assert_gt(st.tier[0].evictions, 0);
	cr_assert_gt(st.tier[1].read_ops, 0, "reads from the rescue files");
	faults_teardown(&e);
}

Test(faults, slow_home_waits_or_bypasses_without_loss)
{
	tenv_t e;
	/* slow enough that the writer outruns the flushes under any build */
	slow_home_start(&e, 3 * MiB, 200000);
	char path[PATH_MAX];
	for (int i = 0; i < 12; i++) {
		tpath(&e, path, i);
		twrite(path, (uint64_t)i, 1 * MiB, 256 * 1024);
	}
	for (int i = 11; i >= 0; i--) {
		tpath(&e, path, i);
		tverify(path, (uint64_t)i, 1 * MiB, 1 * MiB);
	}
	ckc_stats_t st;
	ckc_stats_get(&st);
	cr_assert_gt(st.tier[0].waits + st.tier[0].bypasses, 0,
		     "a full host tier over a slow home must wait or bypass");
	ckc_shutdown();
	for (int i = 0; i < 12; i++) {
		tpath(&e, path, i);
		cr_assert(thome_matches(path, (uint64_t)i, 1 * MiB));
	}
	faults_teardown(&e);
}

Test(faults, the_newer_version_of_a_checkpoint_lands_last)
{
	tenv_t e;
	slow_home_start(&e, 32 * MiB, 100000);
	char path[PATH_MAX];
	tpath(&e, path, 0);
	/* the first version's flush is under way (slow) when the second one
	 * is written */
	twrite(path, 1, 1 * MiB, 1 * MiB);
	for (int i = 0; i < 200 && atomic_load(&home_writers) == 0; i++)
		usleep(1000);
	twrite(path, 2, 1 * MiB, 1 * MiB);
	cr_assert_eq(ckc_wait_flushed(), 0);
	ckc_shutdown();
	cr_assert(thome_matches(path, 2, 1 * MiB), "the real file holds the second version");
	faults_teardown(&e);
}

/* Starts the engine (host 2 MiB, ssd 64 MiB) with the ssd file's
 * sizing failing with err; the log must name CKPTCACHE_SSD_DIR. Returns
 * ckc_init_config's result. */
static int start_with_ssd_failing(tenv_t *e, int err)
{
	faults_setup(e);
	atomic_store(&ftruncate_errno, err);
	ckc_io.ftruncate = f_ftruncate_fail;
	ckc_config_t c = tcfg(e, 2 * MiB, 64 * MiB);
	c.log_level = CKC_LOG_WARN;
	int rc = ckc_init_config(&c);
	pthread_mutex_lock(&err_lock);
	cr_assert_not_null(strstr(all_errors, "CKPTCACHE_SSD_DIR"), "%s", all_errors);
	pthread_mutex_unlock(&err_lock);
	return rc;
}

/* No room for the ssd tier (the tiers of running processes, a parent's
 * say, took it): the process runs without one, and says so. */
Test(faults, ssd_file_without_room_runs_without_the_tier)
{
	tenv_t e;
	cr_assert_eq(start_with_ssd_failing(&e, ENOSPC), 0);
	cr_assert(ckc_active());
	pthread_mutex_lock(&err_lock);
	cr_assert_not_null(strstr(all_errors, "runs without one"), "%s", all_errors);
	pthread_mutex_unlock(&err_lock);
	ckc_stats_t st;
	ckc_stats_get(&st);
	cr_assert_eq(st.ntier, 2, "host and home only");
	char path[PATH_MAX];
	tpath(&e, path, 4);
	twrite(path, 4, 3 * MiB, 1 * MiB);
	tverify(path, 4, 3 * MiB, 1 * MiB);
	ckc_shutdown();
	cr_assert(thome_matches(path, 4, 3 * MiB));
	faults_teardown(&e);
}

Test(faults, ssd_file_failing_disables_the_cache)
{
	tenv_t e;
	cr_assert_eq(start_with_ssd_failing(&e, EIO), -EIO);
	cr_assert_not(ckc_active(), "a tier that cannot be set up disables the cache");
	faults_teardown(&e);
}

Test(faults, rescue_impossible_keeps_bytes_in_cache)
{
	tenv_t e;
	faults_setup(&e);
	ckc_config_t c = tcfg(&e, 6 * MiB, 0);
	c.rescue_dir = "/nonexistent/rescue";
	cr_assert_eq(ckc_init_config(&c), 0);
	atomic_store(&fail_home_errno, EIO);
	char path[PATH_MAX];
	tpath(&e, path, 1);
	twrite(path, 1, 1 * MiB, 1 * MiB);
	ckc_wait_flushed();
	/* neither home nor a rescue file: the copy must stay and be readable */
	for (int i = 0; i < 3; i++) {
		char other[PATH_MAX];
		tpath(&e, other, 10 + i);
		twrite(other, 10 + (uint64_t)i, 1 * MiB, 1 * MiB);
	}
	tverify(path, 1, 1 * MiB, 1 * MiB);
	cr_assert_str_eq(ckc_where(path), "host");
	faults_teardown(&e);
}

/* The flushers' publications into the home directory (a rename, or the
 * link that names a new file) wait while held. */
static _Atomic int hold_bg_renames, held_renames;

static void bg_rename_hold(void)
{
	if (ckc_tl_background && atomic_load(&hold_bg_renames)) {
		atomic_fetch_add(&held_renames, 1);
		while (atomic_load(&hold_bg_renames))
			usleep(1000);
	}
}

static int f_rename_held(const char *from, const char *to)
{
	bg_rename_hold();
	return rename(from, to);
}

static int f_linkat_held(int ofd, const char *from, int nfd, const char *to, int flags)
{
	bg_rename_hold();
	return linkat(ofd, from, nfd, to, flags);
}

/* Before a child can see them, the closed checkpoints are published by the
 * caller itself when the flusher has not reached them; one whose flush is
 * stuck is waited for no longer than asked. */
Test(faults, publish_all_does_what_the_flusher_has_not_reached)
{
	tenv_t e;
	faults_setup(&e);
	ckc_io.rename = f_rename_held;
	ckc_io.linkat = f_linkat_held;
	atomic_store(&hold_bg_renames, 1);
	ckc_config_t c = tcfg(&e, 16 * MiB, 0);
	cr_assert_eq(ckc_init_config(&c), 0);
	char path[PATH_MAX];
	for (int i = 0; i < 4; i++) {
		tpath(&e, path, i);
		twrite(path, 20 + (uint64_t)i, 1 * MiB + (uint64_t)i, 1 * MiB);
	}
	for (int i = 0; i < 500 && !atomic_load(&held_renames); i++)
		usleep(10000);
	cr_assert_eq(atomic_load(&held_renames), 1, "the flusher never reached its rename");
	uint64_t t0 = ckc_now_ns();
	cr_assert_eq(ckc_publish_all(300 * 1000000ull, false), -ETIMEDOUT);
	uint64_t ms = (ckc_now_ns() - t0) / 1000000u;
	cr_assert(ms >= 290 && ms < 3000, "waited %llu ms for a 300 ms bound", (unsigned long long)ms);
	tpath(&e, path, 0);
	cr_assert_not(texists(path), "the stuck flush finished early");
	for (int i = 1; i < 4; i++) {
		tpath(&e, path, i);
		cr_assert(thome_matches(path, 20 + (uint64_t)i, 1 * MiB + (uint64_t)i), "%s", path);
	}
	atomic_store(&hold_bg_renames, 0);
	cr_assert_eq(ckc_publish_all(5000 * 1000000ull, false), 0);
	tpath(&e, path, 0);
	cr_assert(thome_matches(path, 20, 1 * MiB));
	faults_teardown(&e);
}

/* fsync of the real files, held while hold_fsync is set. */
static _Atomic int hold_fsync, held_fsyncs;

static int f_fsync_held(int fd)
{
	atomic_fetch_add(&held_fsyncs, 1);
	while (atomic_load(&hold_fsync))
		usleep(1000);
	return fsync(fd);
}

static void *sync_thread(void *arg)
{
	return (void *)(intptr_t)ckc_sync_path(arg);
}

static _Atomic int other_done;

static void *other_checkpoint(void *arg)
{
	twrite(arg, 77, 1 * MiB, 256 * 1024);
	tverify(arg, 77, 1 * MiB, 256 * 1024);
	atomic_store(&other_done, 1);
	return NULL;
}

/* The fsync of a checkpoint already at its real path (seconds, on a busy
 * parallel file system) holds no lock of the cache: another thread writes
 * and reads back a checkpoint of its own meanwhile. */
Test(faults, an_fsync_of_a_published_checkpoint_leaves_the_cache_to_the_other_threads)
{
	tenv_t e;
	faults_setup(&e);
	ckc_config_t c = tcfg(&e, 16 * MiB, 0);
	cr_assert_eq(ckc_init_config(&c), 0);
	char path[PATH_MAX], other[PATH_MAX];
	tpath(&e, path, 0);
	tpath(&e, other, 1);
	twrite(path, 31, 2 * MiB, 1 * MiB);
	cr_assert_eq(ckc_wait_flushed(), 0, "published, not yet durable");
	atomic_store(&hold_fsync, 1);
	ckc_io.fsync = f_fsync_held;
	pthread_t s, w;
	cr_assert_eq(pthread_create(&s, NULL, sync_thread, path), 0);
	for (int i = 0; i < 500 && !atomic_load(&held_fsyncs); i++)
		usleep(10000);
	cr_assert_gt(atomic_load(&held_fsyncs), 0, "the fsync never began");
	cr_assert_eq(pthread_create(&w, NULL, other_checkpoint, other), 0);
	for (int i = 0; i < 500 && !atomic_load(&other_done); i++)
		usleep(10000);
	bool done = atomic_load(&other_done);
	atomic_store(&hold_fsync, 0);
	void *rc;
	pthread_join(w, NULL);
	pthread_join(s, &rc);
	cr_assert(done, "the other thread waited for the fsync");
	cr_assert_eq((intptr_t)rc, 0, "the fsync failed");
	ckc_stat_t st;
	cr_assert_eq(ckc_stat(path, &st), 0);
	cr_assert(thome_matches(path, 31, 2 * MiB));
	faults_teardown(&e);
}

/* Whether the log holds text. */
static bool logged(const char *text)
{
	pthread_mutex_lock(&err_lock);
	bool yes = strstr(all_errors, text) != NULL;
	pthread_mutex_unlock(&err_lock);
	return yes;
}

/* Starts the engine (host tier 8 MiB, no ssd tier) with every open below
 * home failing with EMFILE, as when the program's descriptor table is
 * full. */
static void full_table_start(tenv_t *e, char *rescue_dir)
{
	faults_setup(e);
	ckc_config_t c = tcfg(e, 8 * MiB, 0);
	c.log_level = CKC_LOG_WARN;
	if (rescue_dir)
		c.rescue_dir = rescue_dir;
	cr_assert_eq(ckc_init_config(&c), 0);
	atomic_store(&home_open_errno, EMFILE);
}

/* A publication that finds the process's descriptor table full (EMFILE)
 * is tried again once there is room: not reported as a failure, no rescue
 * file, every byte at the real path. */
Test(faults, a_full_descriptor_table_delays_publication_and_loses_nothing)
{
	tenv_t e;
	full_table_start(&e, NULL);
	char path[PATH_MAX];
	for (int i = 0; i < 4; i++) {
		tpath(&e, path, i);
		twrite(path, (uint64_t)i, 300 * 1024 + (uint64_t)i, 100000);
	}
	usleep(200 * 1000);
	tpath(&e, path, 0);
	cr_assert_not(texists(path), "published with no descriptor to do it with");
	atomic_store(&home_open_errno, 0);
	cr_assert_eq(ckc_wait_flushed(), 0);
	for (int i = 0; i < 4; i++) {
		tpath(&e, path, i);
		cr_assert(thome_matches(path, (uint64_t)i, 300 * 1024 + (uint64_t)i), "%s", path);
	}
	ckc_stats_t st;
	ckc_stats_get(&st);
	cr_assert_eq(st.rescued, 0);
	cr_assert(logged("no descriptor or memory to publish"), "%s", all_errors);
	cr_assert_not(logged("could not write"), "%s", all_errors);
	faults_teardown(&e);
}

static _Atomic int spares_given;

/* The preloaded library's spare descriptor: giving it back makes room. */
static bool give_spare(void)
{
	atomic_fetch_add(&spares_given, 1);
	atomic_store(&home_open_errno, 0);
	return true;
}

/* A program that ends with its descriptor table full: the library gives
 * back the descriptor it keeps, and the end publishes everything. */
Test(faults, the_end_with_a_full_table_gives_a_descriptor_back)
{
	tenv_t e;
	atomic_store(&spares_given, 0);
	ckc_spare_fd_hook = give_spare;
	full_table_start(&e, NULL);
	char path[PATH_MAX];
	for (int i = 0; i < 3; i++) {
		tpath(&e, path, i);
		twrite(path, (uint64_t)i, 200 * 1024, 100000);
	}
	usleep(100 * 1000);
	cr_assert_eq(atomic_load(&spares_given), 0, "the spare is the end's only");
	ckc_shutdown();
	cr_assert_geq(atomic_load(&spares_given), 1);
	for (int i = 0; i < 3; i++) {
		tpath(&e, path, i);
		cr_assert(thome_matches(path, (uint64_t)i, 200 * 1024), "%s", path);
	}
	cr_assert_not(logged("did not reach"), "%s", all_errors);
	faults_teardown(&e);
}

/* A table that stays full through the end: the end waits a bounded time,
 * then says which checkpoints did not reach their real paths. */
Test(faults, a_table_full_for_good_ends_in_bounded_time_and_says_so)
{
	tenv_t e;
	full_table_start(&e, (char *)"/nonexistent/rescue");
	char path[PATH_MAX];
	tpath(&e, path, 0);
	twrite(path, 0, 100 * 1024, 100000);
	uint64_t t0 = ckc_now_ns();
	ckc_shutdown();
	double s = (double)(ckc_now_ns() - t0) / 1e9;
	cr_assert_lt(s, 6.0, "the end took %.1f s", s);
	cr_assert(logged("did not reach its real path"), "%s", all_errors);
	faults_teardown(&e);
}

/* The exchange that publishes a version over an existing file: refused
 * (a file system without it), or met by another program's file, renamed
 * onto the name just before it (after the publication's look). */
static _Atomic int exchange_errno;
static char exchange_other[PATH_MAX];
static _Atomic int exchanges;
/* from this exchange on (1: the first), each fails with EIO; 0: none */
static _Atomic int exchange_fail_from;

static int f_renameat2(int ofd, const char *from, int nfd, const char *to, unsigned fl)
{
	int n = atomic_fetch_add(&exchanges, 1) + 1;
	int from_n = atomic_load(&exchange_fail_from);
	if (from_n && n >= from_n) {
		errno = EIO;
		return -1;
	}
	if (atomic_load(&exchange_errno)) {
		errno = atomic_load(&exchange_errno);
		return -1;
	}
	/* the other program's rename comes first, once */
	if (exchange_other[0] && rename(exchange_other, to) == 0)
		exchange_other[0] = '\0';
	return renameat2(ofd, from, nfd, to, fl);
}

/* A version of path written over a file of 100 bytes, published. */
static void publish_over_file(tenv_t *e, const char *path)
{
	FILE *f = fopen(path, "wb");
	cr_assert(f);
	for (int i = 0; i < 100; i++)
		fputc('o', f);
	fclose(f);
	ckc_config_t c = tcfg(e, 16 * MiB, 0);
	c.log_level = CKC_LOG_WARN;
	cr_assert_eq(ckc_init_config(&c), 0);
	twrite(path, 7, 1 * MiB + 5, 1 * MiB);
	cr_assert_eq(ckc_publish_all(5000 * 1000000ull, false), 0);
}

/* The temporary files (".ckc.*") in dir: their number, and the path of
 * the last one found in *last (when last is not NULL). */
static int count_temps(const char *dir, char (*last)[PATH_MAX])
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;
	while (d && (de = readdir(d)))
		if (strncmp(de->d_name, ".ckc.", 5) == 0) {
			n++;
			if (last)
				snprintf(*last, sizeof(*last), "%s/%s", dir, de->d_name);
		}
	if (d)
		closedir(d);
	return n;
}

Test(faults, publication_over_a_file_without_exchange_renames)
{
	tenv_t e;
	faults_setup(&e);
	ckc_io.renameat2 = f_renameat2;
	atomic_store(&exchange_errno, EINVAL);
	atomic_store(&exchanges, 0);
	char path[PATH_MAX];
	tpath(&e, path, 1);
	publish_over_file(&e, path);
	cr_assert_gt(atomic_load(&exchanges), 0, "the publication never tried the exchange");
	cr_assert(thome_matches(path, 7, 1 * MiB + 5), "the version is not at its real path");
	cr_assert_eq(count_temps(e.home, NULL), 0, "temporary files are left");
	atomic_store(&exchange_errno, 0);
	faults_teardown(&e);
}

Test(faults, publication_keeps_a_file_renamed_onto_the_name_meanwhile)
{
	tenv_t e;
	faults_setup(&e);
	ckc_io.renameat2 = f_renameat2;
	atomic_store(&exchanges, 0);
	char path[PATH_MAX];
	tpath(&e, path, 2);
	snprintf(exchange_other, sizeof(exchange_other), "%s/other.tmp", e.home);
	FILE *f = fopen(exchange_other, "wb");
	cr_assert(f);
	fputs("the other program\n", f);
	fclose(f);
	publish_over_file(&e, path);
	cr_assert_gt(atomic_load(&exchanges), 0, "the publication never tried the exchange");
	cr_assert_eq(exchange_other[0], '\0', "the other program's rename did not happen");
	char got[64] = { 0 };
	f = fopen(path, "rb");
	cr_assert(f);
	size_t n = fread(got, 1, sizeof(got) - 1, f);
	fclose(f);
	cr_assert_eq(n, strlen("the other program\n"), "the real path holds %zu bytes, not the other file", n);
	cr_assert_str_eq(got, "the other program\n");
	cr_assert_gt(atomic_load(&errors_logged), 0, "the change was not reported");
	/* the version, whole, in the rescue file the message names last */
	const char *at = strstr(all_errors, "is saved in ");
	cr_assert_not_null(at, "no rescue file said: %s", all_errors);
	char rescue[PATH_MAX];
	snprintf(rescue, sizeof(rescue), "%s", at + strlen("is saved in "));
	rescue[strcspn(rescue, "\n")] = '\0';
	cr_assert(thome_matches(rescue, 7, 1 * MiB + 5), "rescue file %s", rescue);
	cr_assert_eq(count_temps(e.home, NULL), 0, "temporary files are left");
	faults_teardown(&e);
}

/* The other program's file cannot be given its name back (the second
 * exchange fails): the version stays published at its name, whole, the
 * other file is kept whole under the temporary name, and a warning says
 * where. */
Test(faults, publication_keeps_the_other_file_aside_when_it_cannot_give_the_name_back)
{
	tenv_t e;
	faults_setup(&e);
	ckc_io.renameat2 = f_renameat2;
	atomic_store(&exchanges, 0);
	atomic_store(&exchange_fail_from, 2);
	char path[PATH_MAX];
	tpath(&e, path, 3);
	snprintf(exchange_other, sizeof(exchange_other), "%s/other.tmp", e.home);
	FILE *f = fopen(exchange_other, "wb");
	cr_assert(f);
	fputs("the other program\n", f);
	fclose(f);
	publish_over_file(&e, path);
	atomic_store(&exchange_fail_from, 0);
	cr_assert_eq(atomic_load(&exchanges), 2, "%d exchanges", atomic_load(&exchanges));
	cr_assert(thome_matches(path, 7, 1 * MiB + 5), "the version is not whole at its real path");
	cr_assert(logged("could not be given its name back"), "%s", all_errors);
	/* the other program's file, under the temporary name the warning gives */
	char kept[PATH_MAX] = "";
	cr_assert_eq(count_temps(e.home, &kept), 1, "the other program's file is not kept once");
	cr_assert(logged(kept), "the warning does not name %s: %s", kept, all_errors);
	char got[64] = { 0 };
	f = fopen(kept, "rb");
	cr_assert(f);
	size_t n = fread(got, 1, sizeof(got) - 1, f);
	fclose(f);
	cr_assert_eq(n, strlen("the other program\n"));
	cr_assert_str_eq(got, "the other program\n");
	faults_teardown(&e);
}
