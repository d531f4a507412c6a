/* The host and ssd tiers' configuration: their sizes (bytes, a percentage,
 * or the default) resolved against the machine's memory and the space of
 * CKPTCACHE_SSD_DIR, that folder made when its parent exists, and the
 * machine's facts the loader reads by default (ckc_sysinfo_default). */
#include "config.h"

#include "conf.h"
#include "conf_int.h"
#include "io.h"
#include "lanes.h"
#include "ktouch.h"
#include "copy.h"
#include "memlimit.h"
#include "log.h"
#include "state.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/magic.h>
#include <sys/vfs.h>
#include "sys.h"
#endif

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif
#ifndef RAMFS_MAGIC
#define RAMFS_MAGIC 0x858458f6
#endif

/* A tier size (resolved from raw): 0 turns the tier off, anything else
 * must be at least CKC_TIER_MIN. Returns the size, or 0 after an error. */
static uint64_t config_min_size(config_loader_t *ld, const char *name, const char *raw,
				uint64_t bytes)
{
	if (bytes == 0 || bytes >= CKC_TIER_MIN)
		return bytes;
	char h[32], m[32];
	ckc_error("%s='%s': %s is below the minimum of %s (use 0 to turn the tier off)", name, raw,
		  ckc_format_size(bytes, h, sizeof(h)), ckc_format_size(CKC_TIER_MIN, m, sizeof(m)));
	ld->errors++;
	return 0;
}

/* min(16 GiB, 10% of memory shared by the node's ranks), raised to 64 MiB
 * where the machine has room for that. */
static uint64_t config_host_default(uint64_t mem, long local_size)
{
	uint64_t d = mem / 10 / (uint64_t)local_size;
	if (d > 16 * CONFIG_GIB)
		d = 16 * CONFIG_GIB;
	if (d < 64 * CONFIG_MIB && 64 * CONFIG_MIB <= mem / 2)
		d = 64 * CONFIG_MIB;
	return d;
}

CKC_START_PATH void config_host(config_loader_t *ld)
{
	ckc_config_t *c = ld->c;
	uint64_t mem = ld->sys->mem_total;
	const char *raw = config_value(ld, "CKPTCACHE_HOST_CACHE");
	uint64_t bytes;
	double pct;

	c->host_cache = 0;
	c->host_cache_from = CKC_SIZE_BYTES;
	if (!raw) {
		c->host_cache = config_host_default(mem, c->local_size);
		c->host_cache_from = CKC_SIZE_DEFAULT;
		return;
	}
	if (!config_size(ld, "CKPTCACHE_HOST_CACHE", raw, &bytes, &pct))
		return;
	if (pct >= 0) {
		c->host_cache = config_min_size(ld, "CKPTCACHE_HOST_CACHE", raw, config_pct_of(mem, pct));
		c->host_cache_from = CKC_SIZE_PERCENT;
		c->host_cache_pct = pct;
		return;
	}
	/* mem_total 0 means the machine's memory is unknown: nothing to compare. */
	if (mem && bytes > mem) {
		char h[32];
		ckc_format_size(mem, h, sizeof(h));
		ckc_error("CKPTCACHE_HOST_CACHE='%s': larger than this machine's memory (%s)", raw, h);
		ld->errors++;
		return;
	}
	c->host_cache = config_min_size(ld, "CKPTCACHE_HOST_CACHE", raw, bytes);
}

uint64_t ckc_config_host_for(ckc_config_t *c, uint64_t mem)
{
	if (!mem)
		return c->host_cache;
	if (c->host_cache_from == CKC_SIZE_DEFAULT)
		c->host_cache = config_host_default(mem, c->local_size > 0 ? c->local_size : 1);
	else if (c->host_cache_from == CKC_SIZE_PERCENT)
		c->host_cache = config_pct_of(mem, c->host_cache_pct);
	return c->host_cache;
}

/* The file-system facts for dir, or for its nearest existing ancestor when
 * dir does not exist yet: that is where it will be created. */
static int config_fs_facts(const ckc_sysinfo_t *sys, const char *dir, uint64_t *avail,
			   bool *in_memory)
{
	char *p = strdup(dir);
	if (!p)
		return -ENOMEM;
	int rc;
	for (;;) {
		rc = sys->fs_info(p, avail, in_memory);
		if (rc != -ENOENT || strcmp(p, "/") == 0 || strcmp(p, ".") == 0)
			break;
		size_t n = strlen(p);
		while (n > 1 && p[n - 1] == '/')
			n--;
		while (n > 0 && p[n - 1] != '/')
			n--;
		while (n > 1 && p[n - 1] == '/')
			n--;
		if (n == 0)
			strcpy(p, ".");
		else
			p[n] = '\0';
	}
	sys_free(p);
	return rc;
}

/* The folder dir is in ("." for a bare name), malloc'ed; NULL if out of
 * memory. */
static char *config_parent_of(const char *dir)
{
	char *parent = strdup(dir);
	if (!parent)
		return NULL;
	size_t n = strlen(parent);
	while (n > 1 && parent[n - 1] == '/')
		n--;
	while (n > 0 && parent[n - 1] != '/')
		n--;
	parent[n > 1 ? n - 1 : n] = '\0';
	if (!*parent)
		strcpy(parent, ".");
	return parent;
}

/* Creates dir (mode 0700) when its parent folder exists, and says so: a
 * mistyped name must not become a tree of new folders. Returns 0 or an
 * errno (ENOENT when the parent is missing too). */
static int config_make_dir(const char *dir)
{
	char *parent = config_parent_of(dir);
	struct stat st;
	if (!parent)
		return ENOMEM;
	int err = 0;
	if (sys_stat(parent, &st) != 0 || !S_ISDIR(st.st_mode))
		err = ENOENT;
	else if (sys_mkdir(dir, 0700) != 0 && errno != EEXIST)
		err = errno;
	else
		ckc_warn("CKPTCACHE_SSD_DIR='%s' did not exist: created it (mode 0700)", dir);
	sys_free(parent);
	return err;
}

/* The errno why the missing dir could not be made (as config_make_dir
 * would: its parent exists, and is a writable folder), or 0. */
static int config_parent_writable(const char *dir)
{
	char *p = config_parent_of(dir);
	struct stat st;
	if (!p)
		return ENOMEM;
	int err = sys_stat(p, &st) != 0 || !S_ISDIR(st.st_mode) ? ENOENT : sys_access(p, W_OK | X_OK) ? errno : 0;
	sys_free(p);
	return err;
}

/* Returns 0 when dir is (or has just been made) a writable directory, else
 * the errno that explains why not. A missing dir is made if create, except
 * that with no_mkdir it is not: 0 when it could be. */
int config_usable_dir(const char *dir, bool create, bool no_mkdir)
{
	struct stat st;
	if (sys_stat(dir, &st) != 0) {
		if (errno != ENOENT || !create)
			return errno;
		if (no_mkdir)
			return config_parent_writable(dir);
		int err = config_make_dir(dir);
		if (err)
			return err;
		if (sys_stat(dir, &st) != 0)
			return errno;
	}
	if (!S_ISDIR(st.st_mode))
		return ENOTDIR;
	if (sys_access(dir, W_OK | X_OK) != 0)
		return errno;
	return 0;
}

static void config_ssd_dir_error(config_loader_t *ld, const char *dir_raw, const char *cache_raw,
				 int err)
{
	if (dir_raw && err == ENOENT)
		ckc_error("CKPTCACHE_SSD_DIR='%s': no such folder, nor its parent (a typing error?): "
			  "create it first", dir_raw);
	else if (dir_raw)
		ckc_error("CKPTCACHE_SSD_DIR='%s': not a writable directory (%s)", dir_raw,
			  strerror(err));
	else
		ckc_error("CKPTCACHE_SSD_CACHE='%s': '%s' (the default, as CKPTCACHE_SSD_DIR is "
			  "unset) is not a writable directory (%s)",
			  cache_raw, ld->c->ssd_dir, strerror(err));
	ld->errors++;
}

CKC_START_PATH void config_ssd(config_loader_t *ld)
{
	ckc_config_t *c = ld->c;
	const char *dir_raw = config_value(ld, "CKPTCACHE_SSD_DIR");
	const char *cache_raw = config_value(ld, "CKPTCACHE_SSD_CACHE");
	const char *dir = dir_raw;

	c->ssd_cache = 0;
	if (!dir) {
		dir = config_value(ld, "TMPDIR");
		if (!dir)
			dir = "/tmp";
	}
	c->ssd_dir = config_strdup(ld, dir);
	if (!c->ssd_dir || (!dir_raw && !cache_raw))
		return;

	uint64_t avail = 0;
	bool in_memory = false;
	int fs_rc = config_fs_facts(ld->sys, dir, &avail, &in_memory);
	uint64_t size;
	/* the space the ssd tiers may have: what is free, and what this
	 * user's running caches took (a child of a program with an ssd tier
	 * must not count its parent's tier against its own) */
	if (fs_rc == 0 && ld->sys->tier_files)
		avail += ld->sys->tier_files(dir);

	if (cache_raw) {
		uint64_t bytes;
		double pct;
		if (!config_size(ld, "CKPTCACHE_SSD_CACHE", cache_raw, &bytes, &pct))
			return;
		if (pct >= 0) {
			if (fs_rc < 0) {
				config_ssd_dir_error(ld, dir_raw, cache_raw, -fs_rc);
				return;
			}
			size = config_pct_of(avail, pct);
		} else {
			/* Without the file system's facts the directory check
			 * below reports the actual problem. */
			if (fs_rc == 0 && bytes > avail) {
				char h[32];
				ckc_format_size(avail, h, sizeof(h));
				ckc_error("CKPTCACHE_SSD_CACHE='%s': larger than the space available "
					  "in '%s' (%s)",
					  cache_raw, dir, h);
				ld->errors++;
				return;
			}
			size = bytes;
		}
	} else {
		if (fs_rc < 0) {
			config_ssd_dir_error(ld, dir_raw, cache_raw, -fs_rc);
			return;
		}
		if (in_memory) {
			/* Staging in RAM-backed storage would double-count the
			 * host tier's memory. */
			ckc_info("CKPTCACHE_SSD_DIR='%s' is on a memory-backed file system (tmpfs "
				 "or ramfs): the ssd tier is off (set CKPTCACHE_SSD_CACHE to use it "
				 "anyway)",
				 dir_raw);
			return;
		}
		size = avail / 4 / (uint64_t)c->local_size;
		if (size > 64 * CONFIG_GIB)
			size = 64 * CONFIG_GIB;
	}

	if (cache_raw)
		size = config_min_size(ld, "CKPTCACHE_SSD_CACHE", cache_raw, size);
	else if (size < CKC_TIER_MIN)
		size = 0; /* the default on a full file system: no tier */
	if (size > 0) {
		int err = config_usable_dir(dir, true, ld->sys->no_mkdir);
		if (err) {
			config_ssd_dir_error(ld, dir_raw, cache_raw, err);
			return;
		}
	}
	c->ssd_cache = size;
}


/* (the system call: statfs and statvfs are wrapped by the interposer,
 * which the engine does not call) */
static int config_fs_info(const char *dir, uint64_t *avail, bool *in_memory)
{
	struct statfs f;
	if (ckc_syscall6(SYS_statfs, (long)dir, (long)&f, 0, 0, 0, 0) != 0)
		return -errno;
	*avail = (uint64_t)f.f_bavail * (uint64_t)(f.f_frsize ? f.f_frsize : f.f_bsize);
	*in_memory = (uint32_t)f.f_type == (uint32_t)TMPFS_MAGIC || (uint32_t)f.f_type == (uint32_t)RAMFS_MAGIC;
	return 0;
}

CKC_START_PATH void ckc_sysinfo_default(ckc_sysinfo_t *sys)
{
	/* the kernel's count, as sysconf(_SC_PHYS_PAGES) reads it: the system
	 * call itself, since sysconf's code is on pages of the C library a
	 * short program never touches otherwise (each a fault at its start) */
	struct sysinfo si;
	sys->mem_total = ckc_syscall6(SYS_sysinfo, (long)&si, 0, 0, 0, 0, 0) == 0
				 ? (uint64_t)si.totalram * (si.mem_unit ? si.mem_unit : 1)
				 : 0;
	sys->fs_info = config_fs_info;
	sys->no_mkdir = false;
	sys->tier_files = ckc_ssd_files_bytes;
}
