/* The control-group memory limit the host tier's default size is taken
 * from: cgroup v2 and v1 hierarchies, ancestors, containers, no limit. */
#include "config.h"

#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memlimit.h"

#define MiB (UINT64_C(1) << 20)

static char root[PATH_MAX];

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/ckc-memlimit.XXXXXX");
	cr_assert_not_null(mkdtemp(root));
}

static void teardown(void)
{
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	cr_assert_eq(system(cmd), 0);
}

/* Writes text to root/rel, creating the folders on the way. */
static void put(const char *rel, const char *text)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (char *s = strchr(path + strlen(root) + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		mkdir(path, 0755);
		*s = '/';
	}
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

static uint64_t limit(void)
{
	char cg[PATH_MAX], mi[PATH_MAX];
	snprintf(cg, sizeof(cg), "%s/proc/cgroup", root);
	snprintf(mi, sizeof(mi), "%s/proc/mountinfo", root);
	return ckc_memlimit_cgroup(cg, mi, root);
}

#define V2_MOUNT "30 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev - cgroup2 cgroup2 rw,nsdelegate\n"
#define V1_MOUNT                                                                          \
	"31 25 0:27 / /sys/fs/cgroup/cpu rw,nosuid - cgroup cgroup rw,cpu\n"               \
	"32 25 0:28 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n"

TestSuite(memlimit, .init = setup, .fini = teardown);

Test(memlimit, v2_group_and_its_ancestors)
{
	put("proc/cgroup", "0::/job/step\n");
	put("proc/mountinfo", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n" V2_MOUNT);
	put("sys/fs/cgroup/job/memory.max", "1073741824\n");
	put("sys/fs/cgroup/job/step/memory.max", "max\n");
	cr_assert_eq(limit(), 1024 * MiB, "the parent's limit holds for the step");
	put("sys/fs/cgroup/job/step/memory.max", "536870912\n");
	cr_assert_eq(limit(), 512 * MiB, "the smallest limit on the way up");
}

Test(memlimit, v1_memory_controller)
{
	put("proc/cgroup", "5:cpu,cpuacct:/other\n4:memory:/slurm/uid_1/job_2\n0::/\n");
	put("proc/mountinfo", V1_MOUNT);
	put("sys/fs/cgroup/memory/slurm/uid_1/job_2/memory.limit_in_bytes", "805306368\n");
	put("sys/fs/cgroup/memory/slurm/memory.limit_in_bytes", "9223372036854771712\n");
	put("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
	cr_assert_eq(limit(), 768 * MiB);
}

Test(memlimit, container_mounts_its_own_group_as_root)
{
	put("proc/cgroup", "0::/kubepods/pod7/c1\n");
	put("proc/mountinfo", "40 30 0:26 /kubepods/pod7 /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n");
	put("sys/fs/cgroup/c1/memory.max", "268435456\n");
	cr_assert_eq(limit(), 256 * MiB);
}

Test(memlimit, no_limit)
{
	put("proc/cgroup", "4:memory:/user\n0::/user.slice\n");
	put("proc/mountinfo", V2_MOUNT V1_MOUNT);
	put("sys/fs/cgroup/user.slice/memory.max", "max\n");
	put("sys/fs/cgroup/memory/user/memory.limit_in_bytes", "9223372036854771712\n");
	cr_assert_eq(limit(), 0, "max and the v1 unlimited value are no limit");
}

Test(memlimit, nothing_to_read)
{
	cr_assert_eq(limit(), 0, "no /proc files");
	put("proc/cgroup", "0::/job\n");
	put("proc/mountinfo", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n");
	cr_assert_eq(limit(), 0, "no cgroup mount");
	put("proc/mountinfo", V2_MOUNT);
	cr_assert_eq(limit(), 0, "no memory.max (the controller is not enabled there)");
	put("sys/fs/cgroup/job/memory.max", "garbage\n");
	cr_assert_eq(limit(), 0, "an unreadable value");
}

Test(memlimit, physical_memory_is_the_bound_without_a_limit)
{
	uint64_t phys = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t m = ckc_memlimit(phys);
	cr_assert(m > 0 && m <= phys, "the limit (%llu) is at most physical memory (%llu)",
		  (unsigned long long)m, (unsigned long long)phys);
}

/* a statm file that says the process maps `pages` pages */
static char *statm_of(unsigned long long pages)
{
	char *path = strdup("/tmp/ckc-statm-XXXXXX");
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	FILE *f = fdopen(fd, "w");
	fprintf(f, "%llu 100 10 1 0 50 0\n", pages);
	fclose(f);
	return path;
}

Test(memlimit, address_space_room_under_ulimit_v)
{
	long page = sysconf(_SC_PAGESIZE);
	char *statm = statm_of(1000);
	struct rlimit rl, before;
	cr_assert_eq(getrlimit(RLIMIT_AS, &rl), 0);
	before = rl;
	rl.rlim_cur = RLIM_INFINITY;
	if (rl.rlim_max == RLIM_INFINITY) {
		cr_assert_eq(setrlimit(RLIMIT_AS, &rl), 0);
		cr_expect_eq(ckc_memlimit_as_room(statm), 0, "no limit: no room to compute");
	}
	rl.rlim_cur = 8ull << 30;
	cr_assert_eq(setrlimit(RLIMIT_AS, &rl), 0);
	cr_expect_eq(ckc_memlimit_as_room(statm), (8ull << 30) - 1000ull * (uint64_t)page);
	unlink(statm);
	free(statm);
	/* mapped beyond the limit already: the least room, not a wrap-around */
	statm = statm_of((16ull << 30) / (uint64_t)page);
	cr_expect_eq(ckc_memlimit_as_room(statm), 1);
	unlink(statm);
	free(statm);
	/* the teardown's shell needs room (a sanitizer's runtime maps more
	 * than 8 GiB before it starts) */
	cr_assert_eq(setrlimit(RLIMIT_AS, &before), 0);
}

/* The mapped and the resident bytes of statm (ckc_memlimit_as_room counts
 * the mapped ones); a file that cannot be read (or one cut short) gives
 * false and zeros. */
Test(memlimit, statm_gives_mapped_and_resident_bytes_or_says_it_cannot)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), mapped = 1, resident = 1;
	char *statm = statm_of(1000);
	cr_assert(ckc_memlimit_statm(statm, &mapped, &resident));
	cr_expect_eq(mapped, 1000 * page);
	cr_expect_eq(resident, 100 * page);
	unlink(statm);
	cr_assert_not(ckc_memlimit_statm(statm, &mapped, &resident), "a file that is gone");
	cr_expect_eq(mapped, 0);
	cr_expect_eq(resident, 0);
	mapped = resident = 1;
	FILE *f = fopen(statm, "w");
	cr_assert_not_null(f);
	fputs("1000\n", f);
	fclose(f);
	cr_assert_not(ckc_memlimit_statm(statm, &mapped, &resident), "one field only");
	cr_expect_eq(mapped, 0);
	cr_expect_eq(resident, 0);
	unlink(statm);
	free(statm);
}
