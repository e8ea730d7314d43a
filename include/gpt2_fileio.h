/* gpt2_fileio.h — the one place gptscope writes files: a whole file replaced
 * atomically (session saves, checkpoints, exported models, tokenizer files,
 * training.json), or a log opened for appending.
 *
 *     static gpt2_status put(FILE *f, void *user, gpt2_error *err) {
 *         fputs(user, f);  // stdio errors are caught after put returns
 *         return GPT2_OK;
 *     }
 *     gpt2_error err;
 *     if (gpt2_fileio_write_atomic("out/notes.txt", put, "hello\n", &err) != GPT2_OK)
 *         fprintf(stderr, "%s\n", err.msg);  // out/notes.txt is as it was
 *
 * gpt2_fileio_write_atomic(path, ...):
 *   - A symbolic link at path is followed (links to links too, and a link to
 *     a file that does not exist yet): its target is written, the link stays.
 *   - Only a regular file is ever replaced. A directory, device, FIFO or
 *     socket at the target fails with GPT2_ERR_IO naming the path and what is
 *     there; nothing is touched. So is a file the process may not write
 *     (a read-only file says "keep me", though the directory would allow
 *     replacing it).
 *   - The data goes to a temporary file in the target's directory, named
 *     ".NAME.tmp-PID-XXXXXX" (PID: the writer's process id), which is flushed,
 *     fsynced and renamed over the target, then the directory is fsynced. A
 *     crash leaves the old file or the new one, never half of one.
 *   - Temporary files of the same target left by a process that no longer
 *     exists (kill -9, power loss) are removed at the next write of it. (A
 *     writer on another machine or in another PID namespace sharing the
 *     directory can look dead: its own save then fails at the rename with
 *     a clear error; no file is harmed.)
 *   - An existing file keeps its permission bits (0777; set-id bits are
 *     dropped) and, where the process may set them, its owner and group. A new
 *     file gets 0666 less the umask, as a file made by open(2) or a shell
 *     redirection would.
 *   - Renaming replaces the directory entry: other hard links to the old
 *     file keep the old contents.
 *   - A missing or unwritable directory fails naming the directory and the
 *     system's reason. On any failure the target is untouched and the
 *     temporary file removed.
 *   - Two writers of one target (processes or threads) each rename a
 *     complete file over it; the last rename wins.
 *
 * gpt2_fileio_open_append(path, ...): a log. The file is created (0666 less
 * the umask) or appended to; a symbolic link is followed; a character device
 * (/dev/null, a terminal) or a FIFO with a reader is written as is. A
 * directory, block device or socket, and a FIFO nobody reads, are refused.
 */
#ifndef GPT2_FILEIO_H
#define GPT2_FILEIO_H

#include <stddef.h>
#include <stdio.h>

#include "gpt2_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the file's contents to f. Return GPT2_OK, or a status with err
 * filled to abandon the write (the target is then untouched). Failed stdio
 * calls need no checking here: fileio checks the stream afterwards. */
typedef gpt2_status (*gpt2_fileio_write_fn)(FILE *f, void *user, gpt2_error *err);

/* Replaces the file at path with what fill puts (see above). GPT2_ERR_IO
 * naming the path on failure, or fill's own status and message. */
gpt2_status gpt2_fileio_write_atomic(const char *path, gpt2_fileio_write_fn fill, void *user, gpt2_error *err);

/* The same for len bytes of data. */
gpt2_status gpt2_fileio_write_bytes(const char *path, const void *data, size_t len, gpt2_error *err);

/* dir + "/" + name into out (cap bytes, NUL included). A path that would
 * not fit is refused with GPT2_ERR_INVALID_ARG naming it and the limit,
 * never cut short (a cut path names another file). */
gpt2_status gpt2_fileio_join(char *out, size_t cap, const char *dir, const char *name, gpt2_error *err);

/* mkdir -p: dir and every missing parent (0777 less the umask). GPT2_ERR_IO
 * naming the part that could not be made, or dir when it is not a directory. */
gpt2_status gpt2_fileio_mkdirs(const char *dir, gpt2_error *err);

/* Opens path for appending (see above); *out is a stdio stream to fclose. */
gpt2_status gpt2_fileio_open_append(const char *path, FILE **out, gpt2_error *err);

#ifdef __cplusplus
}
#endif
#endif
