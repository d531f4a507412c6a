/* The memory this process may use: physical memory, or less where its
 * control group (cgroup v2 memory.max, v1 memory.limit_in_bytes, on the
 * group and every ancestor up to its hierarchy's root) says so. */
#include "config.h"

#include "memlimit.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "sys.h"

/* v1 writes "no limit" as the largest page-aligned signed value. */
#define MEMLIMIT_V1_NONE (UINT64_C(1) << 62)

/* The limit in file path: bytes, or 0 for none ("max", a v1 "unlimited",
 * or no such file). */
static uint64_t memlimit_file(const char *path)
{
	char buf[64];
	FILE *f = sys_fopen(path, "re");
	uint64_t v = 0;

	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f) && strncmp(buf, "max", 3) != 0) {
		char *end;
		errno = 0;
		unsigned long long x = strtoull(buf, &end, 10);
		if (!errno && end != buf && x < MEMLIMIT_V1_NONE)
			v = (uint64_t)x;
	}
	sys_fclose(f);
	return v;
}

/* The smallest limit on group (a path below the hierarchy's root at
 * mountpoint mnt, whose own root is root) and its ancestors; 0 if none. */
static uint64_t memlimit_walk(const char *prefix, const char *mnt, const char *root,
			      const char *group, const char *file)
{
	char rel[PATH_MAX], path[PATH_MAX];
	size_t rl = strlen(root);
	uint64_t best = 0;

	/* the group as seen from the mount (a container mounts its own group
	 * as the root) */
	if (strcmp(root, "/") != 0 && strncmp(group, root, rl) == 0 &&
	    (group[rl] == '/' || group[rl] == '\0'))
		group += rl;
	if (snprintf(rel, sizeof(rel), "%s", group) >= (int)sizeof(rel))
		return 0;
	for (;;) {
		size_t n = strlen(rel);
		while (n > 1 && rel[n - 1] == '/')
			rel[--n] = '\0';
		if (snprintf(path, sizeof(path), "%s%s%s/%s", prefix, mnt, strcmp(rel, "/") ? rel : "",
			     file) < (int)sizeof(path)) {
			uint64_t v = memlimit_file(path);
			if (v && (!best || v < best))
				best = v;
		}
		char *slash = strrchr(rel, '/');
		if (!slash || (slash == rel && rel[1] == '\0'))
			break;
		if (slash == rel)
			rel[1] = '\0';
		else
			*slash = '\0';
	}
	return best;
}

/* Finds the mount of the hierarchy (cgroup2, or the v1 one carrying the
 * memory controller) in mountinfo: its mount point and root. */
static bool memlimit_mount(const char *mountinfo, bool v2, char *mnt, char *root, size_t len)
{
	FILE *f = sys_fopen(mountinfo, "re");
	char line[4096];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		/* id parent major:minor root mountpoint options... - fstype source superoptions */
		char r[PATH_MAX], m[PATH_MAX], fstype[64], super[1024] = "";
		const char *dash = strstr(line, " - ");
		if (!dash || sscanf(line, "%*s %*s %*s %4095s %4095s", r, m) != 2 ||
		    sscanf(dash + 3, "%63s %*s %1023s", fstype, super) < 1)
			continue;
		if (v2 ? strcmp(fstype, "cgroup2") != 0 :
			 strcmp(fstype, "cgroup") != 0 || !strstr(super, "memory"))
			continue;
		if (strlen(m) < len && strlen(r) < len) {
			strcpy(mnt, m);
			strcpy(root, r);
			found = true;
		}
	}
	sys_fclose(f);
	return found;
}

uint64_t ckc_memlimit_cgroup(const char *cgroup, const char *mountinfo, const char *prefix)
{
	FILE *f = sys_fopen(cgroup, "re");
	char line[4096];
	uint64_t best = 0;
	bool v1_memory = false;

	if (!f)
		return 0;
	/* a controller is in one hierarchy only: where a v1 one carries the
	 * memory controller (a hybrid layout), the unified one has no limit
	 * to read, and looking for its mount would read all of mountinfo */
	while (fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		for (const char *p = c1 + 1; p < c2;) {
			size_t k = strcspn(p, ",:");
			v1_memory |= k == 6 && !strncmp(p, "memory", 6);
			p += k + (p[k] == ',');
		}
	}
	rewind(f);
	while (fgets(line, sizeof(line), f)) {
		/* hierarchy-ID:controllers:path */
		line[strcspn(line, "\n")] = '\0';
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2 || c2[1] != '/')
			continue;
		*c2 = '\0';
		const char *ctl = c1 + 1, *group = c2 + 1;
		bool v2 = *ctl == '\0';
		bool mem = false;
		for (const char *p = ctl; !v2 && *p;) {
			size_t k = strcspn(p, ",");
			mem |= k == 6 && !strncmp(p, "memory", 6);
			p += k + (p[k] == ',');
		}
		if ((!v2 && !mem) || (v2 && v1_memory))
			continue;
		const char *file = v2 ? "memory.max" : "memory.limit_in_bytes";
		char mnt[PATH_MAX], root[PATH_MAX], own[PATH_MAX];
		/* where systemd mounts it, when the group's own file is there;
		 * else where mountinfo says (a container's own mount) */
		strcpy(mnt, v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory");
		strcpy(root, "/");
		if (snprintf(own, sizeof(own), "%s%s%s/%s", prefix, mnt, strcmp(group, "/") ? group : "",
			     file) >= (int)sizeof(own) ||
		    sys_access(own, R_OK) != 0) {
			if (!memlimit_mount(mountinfo, v2, mnt, root, sizeof(mnt)))
				continue;
		}
		uint64_t v = memlimit_walk(prefix, mnt, root, group, file);
		if (v && (!best || v < best))
			best = v;
	}
	sys_fclose(f);
	return best;
}

uint64_t ckc_memlimit(uint64_t phys)
{
	uint64_t cg = ckc_memlimit_cgroup("/proc/self/cgroup", "/proc/self/mountinfo", "");
	return cg && (!phys || cg < phys) ? cg : phys;
}

uint64_t ckc_memlimit_job(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	uint64_t phys = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
	uint64_t m = ckc_memlimit(phys);
	return m && m != phys ? m : 0;
}

bool ckc_memlimit_statm(const char *statm, uint64_t *mapped, uint64_t *resident)
{
	unsigned long long m = 0, r = 0;
	*mapped = *resident = 0;
	FILE *f = sys_fopen(statm, "re");
	if (!f)
		return false;
	bool ok = fscanf(f, "%llu %llu", &m, &r) == 2;
	sys_fclose(f);
	long page = sysconf(_SC_PAGESIZE);
	uint64_t p = (uint64_t)(page > 0 ? page : 4096);
	*mapped = ok ? (uint64_t)m * p : 0;
	*resident = ok ? (uint64_t)r * p : 0;
	return ok;
}

uint64_t ckc_memlimit_as_room(const char *statm)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	uint64_t used = 0, resident;
	(void)ckc_memlimit_statm(statm, &used, &resident);
	uint64_t lim = (uint64_t)rl.rlim_cur;
	return lim > used ? lim - used : 1;
}
