/* e2e_helper: the C program behind the end-to-end tests (tests/e2e/run) that
 * need raw syscalls, threads, fork/exec, mmap, dup, stdio or io_uring on
 * tagged files. One mode per sub-test; each verifies its own bytes. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include "e2e_helper.h"

struct modedef {
	const char *name;
	int (*fn)(int, char **);
};

static const struct modedef modes[] = {
	{ "gen", m_gen }, { "rss", m_rss },	    { "check", m_check },	{ "wr", m_wr },
	{ "rawcheck", m_rawcheck }, { "history", m_history },	{ "threads", m_threads },
	{ "readfd", m_readfd },	    { "fork", m_fork }, { "forkcost", m_forkcost },		{ "rawsys", m_rawsys },
	{ "mmap", m_mmap },	    { "procfd", m_procfd },	{ "uring", m_uring },
	{ "aio", m_aio }, { "unlink-open", m_unlink_open }, { "append-positional", m_append_positional }, { "append-positional-check", m_append_positional_check }, { "seek-limits", m_seek_limits }, { "errno-kept", m_errno_kept }, { "fsync-replace", m_fsync_replace }, { "umask-modes", m_umask_modes }, { "copy-checks", m_copy_checks }, { "fsize-child", m_fsize_child }, { "main-exits", m_main_exits }, { "emfile-excl", m_emfile_excl }, { "links", m_links }, { "sparse", m_sparse }, { "mtime-order", m_mtime_order }, { "thread-files", m_thread_files }, { "closerace", m_closerace },	    { "locks", m_locks },	{ "fdops", m_fdops },
	{ "fsync-never", m_fsync_never }, { "stdio", m_stdio }, { "stdio-large", m_stdio_large }, { "stdio-large-writes", m_stdio_large_writes }, { "stdio-exit", m_stdio_exit }, { "stdio-handed", m_stdio_handed }, { "stdio-handed-efbig", m_stdio_handed_efbig }, { "stdio-threads", m_stdio_threads }, { "stdio-seek-cur", m_stdio_seek_cur }, { "stdio-records", m_stdio_records }, { "stdio-threads-check", m_stdio_threads_check }, { "statcached", m_statcached },
	{ "closeby", m_closeby }, { "daemonout", m_daemonout }, { "unseenclose", m_unseenclose }, { "daemonkeeps", m_daemonkeeps }, { "closeall", m_closeall },   { "meta", m_meta },	    { "copycalls", m_copycalls },
	{ "misc", m_misc },	    { "histcheck", m_histcheck }, { "rewrite", m_rewrite },
	{ "growhints", m_growhints }, { "unlinkrace", m_unlinkrace }, { "handover", m_handover }, { "pingpong", m_pingpong }, { "renames", m_renames }, { "churn", m_churn }, { "noclose", m_noclose },	    { "freopen", m_freopen },	    { "stdout", m_stdout },	    { "sharedfd", m_sharedfd },	{ "n1part", m_n1part },	    { "rename", m_rename },	    { "unlink", m_unlink },	{ "plainops", m_plainops },
	{ "exitrace", m_exitrace }, { "prefix", m_prefix }, { "signals", m_signals }, { "handlerwrites", m_handlerwrites }, { "handlerlog", m_handlerlog }, { "handlerexit", m_handlerexit }, { "cancelwrite", m_cancelwrite }, { "handlermalloc", m_handlermalloc }, { "spawnrace", m_spawnrace }, { "answers", m_answers }, { "crash", m_crash }, { "walkers", m_walkers }, { "exitthreads", m_exitthreads }, { "closeread", m_closeread }, { "closemeta", m_closemeta }, { "closeflock", m_closeflock }, { "flockpub", m_flockpub }, { "flockupgrade", m_flockupgrade }, { "vforkflock", m_vforkflock },
};

int main(int argc, char **argv)
{
	self_exe = realpath("/proc/self/exe", NULL);
	if (argc < 2) {
		fprintf(stderr, "usage: " PROG " MODE ARGS...\nmodes:");
		for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
			fprintf(stderr, " %s", modes[i].name);
		fputc('\n', stderr);
		return 2;
	}
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (strcmp(argv[1], modes[i].name) == 0) {
			mode = modes[i].name;
			return modes[i].fn(argc - 1, argv + 1);
		}
	fprintf(stderr, PROG ": unknown mode '%s'\n", argv[1]);
	return 2;
}
