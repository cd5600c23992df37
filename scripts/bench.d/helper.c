/* Small controlled programs for scripts/bench, built by it with the system C compiler.
 *   helper detach CMD ARGS...   the OS floor of "start in the background": setsid + double
 *                               fork + exec CMD; prints the grandchild's pid and returns at once
 *   helper spawn CMD ARGS...    fork + exec + wait (the floor of running a command at all)
 *   helper stamp FILE SECS      sleep SECS, write the realtime clock (ns) to FILE, exit
 *   helper write BYTES          write BYTES of 64-byte text lines to stdout in 1 MiB blocks
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int detach(char **argv) {
    int fds[2];
    if (pipe(fds) < 0) return 70;
    pid_t first = fork();
    if (first < 0) return 70;
    if (first == 0) {
        setsid();
        pid_t second = fork();
        if (second != 0) { dprintf(fds[1], "%d\n", second); _exit(0); }
        close(fds[0]); close(fds[1]);
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0); dup2(null, 1); dup2(null, 2);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    char buf[32] = {0};
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    waitpid(first, NULL, 0);
    if (n > 0) fputs(buf, stdout);
    return 0;
}

static int spawn(char **argv) {
    pid_t pid = fork();
    if (pid == 0) { execvp(argv[0], argv); _exit(127); }
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

static int stamp(const char *file, double secs) {
    struct timespec ts = { (time_t)secs, (long)((secs - (time_t)secs) * 1e9) };
    nanosleep(&ts, NULL);
    clock_gettime(CLOCK_REALTIME, &ts);
    FILE *f = fopen(file, "w");
    if (!f) return 1;
    fprintf(f, "%lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    fclose(f);
    return 0;
}

static int write_lines(long long bytes) {
    static char block[1 << 20];
    for (size_t i = 0; i < sizeof block; i += 64) {
        memset(block + i, 'a' + (i / 64) % 26, 63);
        block[i + 63] = '\n';
    }
    while (bytes > 0) {
        size_t n = bytes < (long long)sizeof block ? (size_t)bytes : sizeof block;
        for (size_t off = 0; off < n;) {
            ssize_t w = write(1, block + off, n - off);
            if (w <= 0) return 1;
            off += (size_t)w;
        }
        bytes -= (long long)n;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "detach")) return detach(argv + 2);
    if (argc >= 3 && !strcmp(argv[1], "spawn")) return spawn(argv + 2);
    if (argc == 4 && !strcmp(argv[1], "stamp")) return stamp(argv[2], atof(argv[3]));
    if (argc == 3 && !strcmp(argv[1], "write")) return write_lines(atoll(argv[2]));
    fprintf(stderr, "usage: helper detach|spawn CMD... | stamp FILE SECS | write BYTES\n");
    return 64;
}
