/* open.c — getting a GGUF file's bytes for the reader: mapped read-only
 * (the default: pages shared with the page cache, loaded on first use) or read
 * whole into anonymous memory (use_mmap = false: a private copy that a later
 * truncation or rewrite of the file cannot touch). Also what the file was when
 * opened (device, inode, size, mtime) so a change on disk can be detected, and
 * the SIGBUS escape hatch for a mapped file that shrank under us. */
#include "gguf/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int64_t mtime_ns(const struct stat *st) {
    return (int64_t)st->st_mtim.tv_sec * 1000000000 + (int64_t)st->st_mtim.tv_nsec;
}

/* Reads size bytes of fd into fresh page-aligned anonymous memory. */
static th_status read_whole(int fd, const char *path, uint64_t size, void **out) {
    void *mem = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return th_set_error(TH_ERR_NOMEM, "gguf: cannot allocate %" PRIu64 " bytes to read '%s' into memory: %s", size,
                            path, strerror(errno));
    uint64_t got = 0;
    while (got < size) {
        size_t want = (size_t)(size - got < (1u << 30) ? size - got : (1u << 30));
        ssize_t r = pread(fd, (char *)mem + got, want, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = errno;
            munmap(mem, (size_t)size);
            if (r == 0)
                return th_set_error(TH_ERR_IO, "gguf: '%s' ended at byte %" PRIu64 " while reading %" PRIu64
                                    " bytes (did it shrink?)", path, got, size);
            return th_set_error(TH_ERR_IO, "gguf: cannot read '%s' at byte %" PRIu64 ": %s", path, got, strerror(e));
        }
        got += (uint64_t)r;
    }
    mprotect(mem, (size_t)size, PROT_READ);
    *out = mem;
    return TH_OK;
}

th_status gguf_open_ex(const char *path, bool use_mmap, gguf_file **out) {
    if (!out || !path) return th_set_error(TH_ERR_ARG, "gguf_open: NULL argument");
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return th_set_error(TH_ERR_IO, "gguf: cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return th_set_error(TH_ERR_IO, "gguf: cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return th_set_error(TH_ERR_IO, "gguf: '%s' is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return th_set_error(TH_ERR_FORMAT, "gguf: '%s' is empty", path);
    }
    if ((uint64_t)st.st_size > SIZE_MAX / 2) {
        close(fd);
        return th_set_error(TH_ERR_FORMAT, "gguf: '%s' is too large for this machine", path);
    }
    uint64_t size = (uint64_t)st.st_size;
    char *path_copy = strdup(path);
    if (!path_copy) { close(fd); return th_set_error(TH_ERR_NOMEM, "gguf: out of memory"); }
    void *map = NULL;
    th_status s = TH_OK;
    if (use_mmap) {
        map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) s = th_set_error(TH_ERR_IO, "gguf: cannot map '%s': %s", path, strerror(errno));
    } else {
        s = read_whole(fd, path, size, &map);
    }
    close(fd);
    if (s) { free(path_copy); return s; }
    s = gguf_parse_owned(map, size, map, true, out);
    if (s) {
        munmap(map, (size_t)size);
        free(path_copy);
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", th_last_error());
        return th_set_error(s, "%s (in '%s')", msg, path);
    }
    gguf_file *f = *out;
    f->file_backed = use_mmap;
    f->path = path_copy;
    f->st_dev = (uint64_t)st.st_dev;
    f->st_ino = (uint64_t)st.st_ino;
    f->st_size = size;
    f->st_mtime_ns = mtime_ns(&st);
    return TH_OK;
}

th_status gguf_open(const char *path, gguf_file **out) { return gguf_open_ex(path, true, out); }

bool gguf_file_changed(const gguf_file *f, char *why, size_t cap) {
    if (!f || !f->path) return false;
    struct stat st;
    if (stat(f->path, &st) != 0) {
        snprintf(why, cap, "the model file '%s' cannot be found any more: %s", f->path, strerror(errno));
        return true;
    }
    if ((uint64_t)st.st_dev != f->st_dev || (uint64_t)st.st_ino != f->st_ino) {
        snprintf(why, cap, "the model file '%s' was replaced by another file (inode %" PRIu64 " -> %" PRIu64 ")",
                 f->path, f->st_ino, (uint64_t)st.st_ino);
        return true;
    }
    if ((uint64_t)st.st_size != f->st_size) {
        snprintf(why, cap, "the model file '%s' changed size (%" PRIu64 " -> %" PRIu64 " bytes)", f->path, f->st_size,
                 (uint64_t)st.st_size);
        return true;
    }
    if (mtime_ns(&st) != f->st_mtime_ns) {
        snprintf(why, cap, "the model file '%s' was modified (its modification time changed)", f->path);
        return true;
    }
    return false;
}

bool gguf_map_fault_replace(gguf_file *f, const void *addr) {
    if (!f || !f->file_backed || !f->map) return false;
    const char *lo = f->map, *hi = lo + f->size, *a = addr;
    if (a < lo || a >= hi) return false;
    /* mmap is a plain system call on Linux (safe here in practice; POSIX does not
     * list it). MAP_FIXED swaps the whole range atomically for every thread.
     * Two threads faulting at once both replace it: harmless, and both return. */
    if (!f->map_zeroed && mmap(f->map, (size_t)f->size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
        return false;
    f->map_zeroed = true;
    return true;
}
