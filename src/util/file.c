/*
 * file.c — opening files that may have been put there by anyone.
 *
 * ragjit reads and writes files named by its caller (.npy data, RAGJIT_DUMP stages), often in
 * directories it did not create. Only regular files are used: a FIFO blocks the open (and a
 * read from it may never end), a device such as /dev/zero streams forever, a directory is no
 * file. What is checked is the descriptor actually opened (fstat), never a separate stat of
 * the path that the file could be swapped under.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* O_NONBLOCK keeps the open itself from waiting for a FIFO's other end; it means nothing to
 * the regular files kept. Writing opens without O_TRUNC and truncates only after the check:
 * truncating a device is not ours to do. */
FILE *file_open_regular(rj_ctx *ctx, const char *path, bool write, int64_t *size) {
    int fd = open(path, (write ? O_WRONLY | O_CREAT : O_RDONLY) | O_NONBLOCK | O_CLOEXEC, 0666);
    if (fd < 0) {
        /* ENXIO: a FIFO nobody reads, refused by O_NONBLOCK */
        if (errno == ENXIO) ctx_fail(ctx, RJ_ERR_IO, "%s: cannot write: not a regular file", path);
        else ctx_fail(ctx, RJ_ERR_IO, "%s: cannot open%s: %s", path, write ? " for writing" : "",
                      strerror(errno));
        return NULL;
    }
    struct stat st;
    FILE *f = NULL;
    if (fstat(fd, &st) != 0)
        ctx_fail(ctx, RJ_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if (S_ISDIR(st.st_mode))
        ctx_fail(ctx, RJ_ERR_IO, "%s: cannot %s: %s", path, write ? "write" : "read",
                 strerror(EISDIR));
    else if (!S_ISREG(st.st_mode))
        ctx_fail(ctx, RJ_ERR_IO, "%s: cannot %s: not a regular file", path,
                 write ? "write" : "read");
    else if (write && ftruncate(fd, 0) != 0)
        ctx_fail(ctx, RJ_ERR_IO, "%s: cannot open for writing: %s", path, strerror(errno));
    else if (!(f = fdopen(fd, write ? "wb" : "rb")))
        ctx_fail(ctx, RJ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (!f) {
        close(fd);
        return NULL;
    }
    if (size) *size = (int64_t)st.st_size;
    return f;
}

