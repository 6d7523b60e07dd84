/*
 * live_threads.c — the baseline for live.c: how much memory a blocked
 * thread holds. A one-shot measurement, like live.c.
 *
 *   ./tools/bazelw run -c opt //bench:live_threads              # N = 10,000
 *   ./tools/bazelw run -c opt //bench:live_threads -- 2000
 *
 * N threads, each with a 16 KiB stack like the coroutines of live.c
 * (pthread_attr_setstacksize; glibc adds its guard page and keeps the
 * thread's descriptor and TLS in the same mapping), each blocked in
 * pthread_cond_wait() until all N exist. Then the main thread reads VmRSS
 * from /proc/self/status and releases and joins them. Growth / N is the
 * memory of one blocked thread that the process itself holds (its stack
 * pages, its descriptor and TLS), the same measure as live.c's.
 *
 * The kernel holds more for every thread, outside VmRSS: its task_struct
 * and a kernel stack (16 KiB on x86-64). The table shows the kernel stacks
 * too, from KernelStack in /proc/meminfo; that figure is system-wide, so
 * other processes starting or ending threads meanwhile move it.
 *
 * The default N is 10,000 rather than a million: a million threads would
 * need a million kernel tasks (kernel.threads-max is usually lower) and
 * 16 GB of kernel stacks alone. The figure per thread does not depend on N.
 */
#define _GNU_SOURCE

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef BENCH_COMPILATION_MODE
#define BENCH_COMPILATION_MODE unknown
#endif
#define STRINGIFY(word) #word
#define EXPAND_AND_STRINGIFY(macro) STRINGIFY(macro)
#define COMPILATION_MODE EXPAND_AND_STRINGIFY(BENCH_COMPILATION_MODE)

enum { STACK_SIZE = 16 * 1024 };
#define DEFAULT_N 10000ul

static struct {
    pthread_mutex_t lock;
    pthread_cond_t all_here; /* main waits: every thread is blocked */
    pthread_cond_t go;       /* the threads wait: release */
    unsigned long arrived, n;
    bool release;
} g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
       PTHREAD_COND_INITIALIZER, 0, 0, false};

/* A thread: say it is here, then block until released. */
static void *blocked(void *arg) {
    pthread_mutex_lock(&g.lock);
    if (++g.arrived == g.n)
        pthread_cond_signal(&g.all_here);
    while (!g.release)
        pthread_cond_wait(&g.go, &g.lock);
    pthread_mutex_unlock(&g.lock);
    return arg;
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A "Name:   1234 kB" field of a /proc file, in KiB; -1 if absent. */
static long proc_kib(const char *file, const char *field) {
    FILE *f = fopen(file, "r");
    char line[256];
    size_t len = strlen(field);
    long kib = -1;

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, field, len) == 0 && line[len] == ':') {
            kib = strtol(line + len + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kib;
}

/* One line of the memory table: growth from `base`, per thread. */
static void print_kib(const char *what, long kib, long base, unsigned long n) {
    printf("  %-38s %9.1f MiB  %+9.1f MiB  %6.2f KiB per thread\n", what,
           kib / 1024.0, (kib - base) / 1024.0,
           (double)(kib - base) / (double)n);
}

int main(int argc, char **argv) {
    unsigned long n = DEFAULT_N, created = 0;
    pthread_t *threads;
    pthread_attr_t attr;
    size_t stack_size = STACK_SIZE;
    long rss_before, rss_blocked = -1, kstack_before, kstack_blocked = -1;
    uint64_t t0, t_create, t_release;
    int err = 0;

    if (argc > 2 || (argc == 2 && (n = strtoul(argv[1], NULL, 10)) == 0)) {
        fprintf(stderr, "usage: %s [N]   (default %lu)\n", argv[0], DEFAULT_N);
        return 2;
    }
    threads = malloc(n * sizeof *threads);
    if (threads == NULL) {
        fprintf(stderr, "live_threads: out of memory\n");
        return 1;
    }
    if (stack_size < (size_t)PTHREAD_STACK_MIN)
        stack_size = PTHREAD_STACK_MIN;
    pthread_attr_init(&attr);
    if ((err = pthread_attr_setstacksize(&attr, stack_size)) != 0) {
        fprintf(stderr, "live_threads: pthread_attr_setstacksize: %s\n",
                strerror(err));
        return 1;
    }
    g.n = n;

    rss_before = proc_kib("/proc/self/status", "VmRSS");
    kstack_before = proc_kib("/proc/meminfo", "KernelStack");

    t0 = now_ns();
    for (; created < n; created++) {
        if ((err = pthread_create(&threads[created], &attr, blocked, NULL)) !=
            0)
            break;
    }
    /* On a failed pthread_create, skip the wait: release the threads that
     * exist, then say why it stopped. */
    pthread_mutex_lock(&g.lock);
    while (err == 0 && g.arrived < n)
        pthread_cond_wait(&g.all_here, &g.lock);
    t_create = now_ns() - t0;
    pthread_mutex_unlock(&g.lock);

    if (err == 0) {
        rss_blocked = proc_kib("/proc/self/status", "VmRSS");
        kstack_blocked = proc_kib("/proc/meminfo", "KernelStack");
    }

    pthread_mutex_lock(&g.lock);
    g.release = true;
    pthread_cond_broadcast(&g.go);
    pthread_mutex_unlock(&g.lock);
    t0 = now_ns();
    for (unsigned long i = 0; i < created; i++)
        pthread_join(threads[i], NULL);
    t_release = now_ns() - t0;
    pthread_attr_destroy(&attr);
    free(threads);
    if (err != 0) {
        fprintf(stderr, "live_threads: pthread_create number %lu: %s\n",
                created + 1, strerror(err));
        return 1;
    }

    printf("Live threads (baseline): %lu blocked at once, %zu KiB stacks "
           "(mode=%s)\n", n, stack_size / 1024, COMPILATION_MODE);
    printf("  time\n");
    printf("  %-38s %9.1f ms  %8.1f ns per thread\n",
           "create: pthread_create x N, all blocked", t_create / 1e6,
           (double)t_create / (double)n);
    printf("  %-38s %9.1f ms  %8.1f ns per thread\n",
           "release: broadcast, pthread_join x N", t_release / 1e6,
           (double)t_release / (double)n);
    printf("  memory                                  total        growth\n");
    print_kib("VmRSS before", rss_before, rss_before, n);
    print_kib("VmRSS, all blocked", rss_blocked, rss_before, n);
    if (kstack_before >= 0 && kstack_blocked >= 0)
        print_kib("kernel stacks (KernelStack, system)", kstack_blocked,
                  kstack_before, n);
    printf("  blocked thread: %.2f KiB resident in the process\n",
           (double)(rss_blocked - rss_before) / (double)n);
    return 0;
}
