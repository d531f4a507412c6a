/* Hint files (format v1): the restore order a user declares as paths and
 * printf-style ranges, parsed line by line into canonical absolute paths,
 * and a reader that follows a hint file while it is still being written. */
#ifndef CKC_HINTFILE_H
#define CKC_HINTFILE_H

#include <stddef.h>
#include <sys/types.h>

/* Default cap on the entries one reader emits in all. */
#define HINT_MAX_ENTRIES_DEFAULT ((size_t)1 << 20)
/* Longest accepted line, in bytes, without its newline. */
#define HINT_LINE_MAX 4096

/* Receives one entry. Returns >= 0 to go on, or a negative errno value to
 * stop parsing; that value is handed back to the caller. */
typedef int (*hint_emit_fn)(void *ctx, const char *canon_path);

/* Receives one message about file; line is 1-based, or 0 for a message about
 * the whole file (it shrank and is read again from the top). */
typedef void (*hint_report_fn)(void *ctx, const char *file, unsigned line, const char *msg);

/* Parses one line (len bytes, no newline, need not be NUL-terminated) of a
 * hint file whose folder is base_dir (NULL: the working directory), with %r
 * standing for rank, and emits its entries as canonical absolute paths.
 * budget (NULL: no limit) is the number of entries still allowed; it is
 * decremented for each one emitted, and a line that would go past it is cut
 * short (a range) or dropped, with a message in err.
 * Returns the number of entries emitted (>= 0; err holds a message when the
 * line was cut short or dropped, else ""), -1 for a malformed line (nothing
 * emitted, the reason in err), or the negative value an emit call returned
 * to stop (err then ""). err (errlen bytes) may be NULL. */
long hint_parse_line(const char *line, size_t len, const char *base_dir, long rank, size_t *budget,
		     hint_emit_fn emit, void *ctx, char *err, size_t errlen);

/* Follows one hint file: what was read so far, the line being assembled, and
 * the entries still allowed. Only hintfile.c writes the fields. */
typedef struct hint_reader {
	int fd;			/* -1 when closed */
	char *path;		/* canonical path, named in reports */
	char *dir;		/* its folder, the base of relative entries */
	long rank;
	size_t budget;		/* entries still allowed */
	size_t max_entries;
	off_t off;		/* bytes taken from the file so far */
	unsigned line;		/* lines completed so far */
	char *partial;		/* start of a line with no newline yet */
	size_t partial_len;	/* its length; beyond HINT_LINE_MAX only counted */
	char *chunk;		/* read buffer */
} hint_reader_t;

/* Opens the hint file at path (relative paths are resolved against the
 * working directory) for a process of the given rank; at most max_entries
 * entries (0: HINT_MAX_ENTRIES_DEFAULT) are emitted over the reader's life,
 * re-reads after a truncation included. Only a regular file is opened, so
 * that no read of it can block. Returns 0 on success, or -errno (-ENOENT
 * when the file does not exist yet, so the caller may retry later; -EINVAL
 * for a FIFO, socket or device; -EISDIR, -ENOMEM, ...); on failure r needs
 * no hint_reader_close. */
int hint_reader_open(hint_reader_t *r, const char *path, long rank, size_t max_entries);

/* Parses the complete lines appended since the last call, emitting entries
 * and reporting malformed lines (report may be NULL) with the file's path
 * and the 1-based line number. A trailing line with no newline is kept until
 * its newline arrives. A file that got shorter than what was read is read
 * again from the top, after a report with line 0. Returns the number of
 * entries emitted, -errno on a read error, or the negative value emit
 * returned (the next call goes on after the line it stopped in). */
long hint_reader_poll(hint_reader_t *r, hint_emit_fn emit, hint_report_fn report, void *ctx);

/* As hint_reader_poll, then also parses a trailing line that has no newline;
 * for the end, when the file will not grow any more. Same return. */
long hint_reader_finish(hint_reader_t *r, hint_emit_fn emit, hint_report_fn report, void *ctx);

/* Closes the file and releases r's memory; safe to call twice. */
void hint_reader_close(hint_reader_t *r);

#endif
