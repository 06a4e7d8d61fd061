/*
 * cpus.c — how many processors this process may keep busy.
 *
 * A context left at the default worker count runs CPU programs on one worker per processor
 * this process may use. That is not the machine's count. The affinity mask (taskset, a
 * container's cpuset) says which processors the process may run on: workers for the others
 * would only crowd the allowed ones. A CPU quota (docker --cpus, a Kubernetes CPU limit)
 * instead caps the processor time the process's cgroup gets per period, on any processors:
 * 64 busy workers under a quota of 2 CPUs use the period's time up in a thirty-second of it
 * and are then stopped until the next, where 2 workers would have kept running. So the count
 * is the mask's processors, capped by the quota rounded up.
 *
 * The quota is cgroup v2's cpu.max ("max PERIOD", or "QUOTA PERIOD") or cgroup v1's
 * cpu.cfs_quota_us over cpu.cfs_period_us (-1: none), in the process's cgroup as
 * /proc/self/cgroup names it and in every ancestor up to the hierarchy's mount, as a limit
 * anywhere above applies too; the smallest wins. A path that does not exist under the mount (a
 * container that sees its own cgroup as the root, under a v1 hierarchy) is walked up to the
 * mount, whose files are then the container's; so is one above the cgroup namespace's root (a
 * path through ".."), which is never followed out of the mount. Anything unreadable or
 * malformed is no limit. The mask is the one the process started with (read_mask says why);
 * the quota's few small files are read once per process, the first time a worker count is
 * needed (30 us of file reads); neither is read again, by a run or a new context.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* The first n - 1 bytes of a file, NUL-terminated; false if it cannot be read. */
static bool read_small(const char *path, char *buf, size_t n) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return false;
    size_t got = 0;
    while (got + 1 < n) {
        ssize_t r = read(fd, buf + got, n - 1 - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = 0;
    return got > 0;
}

/* A whole non-negative decimal at *s (advanced past it), or -1. */
static long long number(const char **s) {
    const char *p = *s;
    long long v = 0;
    if (*p < '0' || *p > '9') return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (1LL << 50)) return -1;
        v = v * 10 + (*p - '0');
    }
    *s = p;
    return v;
}

/* Processors a quota of q per period p allows, rounded up; 0: no limit (or nonsense). */
static int quota_cpus(long long q, long long p) {
    if (q <= 0 || p <= 0) return 0;
    long long n = (q + p - 1) / p;
    return n > 4096 ? 4096 : (int)n;
}

/* dir/name's first bytes, as read_small; false also where the path is too long. */
static bool read_in(const char *dir, const char *name, char *buf, size_t n) {
    char path[4300];
    int len = snprintf(path, sizeof path, "%s/%s", dir, name);
    return len > 0 && (size_t)len < sizeof path && read_small(path, buf, n);
}

/* The limit one cgroup directory sets: v2's cpu.max, else v1's pair of files; 0: none. */
static int dir_limit(const char *dir, bool v2) {
    char buf[64];
    const char *s = buf;
    if (v2) {
        if (!read_in(dir, "cpu.max", buf, sizeof buf) || !strncmp(buf, "max", 3)) return 0;
        long long q = number(&s);
        if (q < 0 || *s++ != ' ') return 0;
        return quota_cpus(q, number(&s));
    }
    if (!read_in(dir, "cpu.cfs_quota_us", buf, sizeof buf) || buf[0] == '-') return 0;
    long long q = number(&s);
    if (!read_in(dir, "cpu.cfs_period_us", buf, sizeof buf)) return 0;
    s = buf;
    return quota_cpus(q, number(&s));
}

/* The smallest limit on cgroup path (from /proc/self/cgroup) and its ancestors under mount. */
static int walk_limit(const char *mount, const char *path, bool v2) {
    char dir[4200];
    if (strstr(path, "/..")) path = ""; /* a cgroup outside the namespace's: only the mount's */
    int n = snprintf(dir, sizeof dir, "%s%s", mount, path);
    if (n < 0 || (size_t)n >= sizeof dir) return 0;
    size_t base = strlen(mount), len = (size_t)n;
    int best = 0;
    for (;;) {
        while (len > base && dir[len - 1] == '/') dir[--len] = 0;
        int l = dir_limit(dir, v2);
        if (l > 0 && (best == 0 || l < best)) best = l;
        if (len <= base) return best;
        while (len > base && dir[len - 1] != '/') len--; /* the parent */
        dir[len] = 0;
    }
}

int cpus_quota(const char *root) {
    char file[4200], cg[8192];
    snprintf(file, sizeof file, "%s/proc/self/cgroup", root);
    if (!read_small(file, cg, sizeof cg)) return 0;
    int best = 0;
    for (char *line = cg, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c1 = *c2 = 0;
        const char *ctrl = c1 + 1, *path = c2 + 1;
        int l = 0;
        if (!strcmp(line, "0") && !*ctrl) { /* v2: one hierarchy */
            snprintf(file, sizeof file, "%s/sys/fs/cgroup", root);
            l = walk_limit(file, path, true);
        } else { /* v1: the hierarchy whose controllers include cpu */
            bool cpu = false;
            for (const char *s = ctrl; *s && !cpu;) {
                size_t k = strcspn(s, ",");
                cpu = k == 3 && !strncmp(s, "cpu", 3);
                s += k + (s[k] == ',');
            }
            if (!cpu) continue;
            static const char *const mounts[] = {"cpu,cpuacct", "cpu", "cpuacct,cpu"};
            for (size_t m = 0; m < sizeof mounts / sizeof mounts[0] && !l; m++) {
                snprintf(file, sizeof file, "%s/sys/fs/cgroup/%s", root, mounts[m]);
                if (!access(file, F_OK)) l = walk_limit(file, path, false);
            }
        }
        if (l > 0 && (best == 0 || l < best)) best = l;
    }
    return best;
}

static int process_quota;
static pthread_once_t quota_once = PTHREAD_ONCE_INIT;
static void read_quota(void) { process_quota = cpus_quota(""); }

/* The affinity mask as the process started (or loaded ragjit), as OpenMP's runtime takes its
 * default thread count: a thread that creates a context later may have been pinned to one
 * processor since (OMP_PROC_BIND or KMP_AFFINITY bind the thread that runs a parallel region),
 * and its mask would turn every run of the context into a single worker's. */
static int start_mask;
static cpu_set_t start_set;
__attribute__((constructor)) static void read_mask(void) {
    if (!sched_getaffinity(0, sizeof start_set, &start_set)) start_mask = CPU_COUNT(&start_set);
}

/* The same mask for ragjit's workers (runtime/pool.c): a thread inherits the mask of the
 * thread that creates it, and a caller pinned to one processor would pin them all there. */
bool cpus_start_set(cpu_set_t *set) {
    if (start_mask <= 0) return false;
    *set = start_set;
    return true;
}

int cpus_usable(void) {
    pthread_once(&quota_once, read_quota);
    int n = start_mask;
    if (n <= 0) { /* more than CPU_SETSIZE processors, or no affinity call */
        long on = sysconf(_SC_NPROCESSORS_ONLN);
        n = on > 0 ? (int)(on < 4096 ? on : 4096) : 1;
    }
    return process_quota > 0 && process_quota < n ? process_quota : n;
}
