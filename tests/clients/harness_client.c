/* Reference client of the DeepGreen harness line protocol (docs/protocol.md), in C.
 *
 *   harness_client PORT            send each stdin line as a request, print each reply
 *   harness_client PORT --stack    behave as a minimal external stack: HELLO, then for
 *                                  every epoch the reply announces, BEGIN/END train and
 *                                  eval, then BYE ($DEEPGREEN_HARNESS_PORT if PORT is "env")
 *   harness_client PORT --bench N  time N PING and N BEGIN/END round trips; print
 *                                  median and p99 in microseconds
 *
 * Every read has a 10 s timeout: exit 3 on timeout, 4 when the server closes, 5 on
 * an ERR reply in --stack mode.  It never hangs.
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int fd;
static char inbuf[65536];
static size_t inlen;

static void send_line(const char *line) {
    size_t n = strlen(line);
    char *buf = malloc(n + 1);
    memcpy(buf, line, n);
    buf[n] = '\n';
    size_t off = 0;
    while (off < n + 1) {
        ssize_t w = send(fd, buf + off, n + 1 - off, MSG_NOSIGNAL);
        if (w <= 0) { free(buf); exit(4); }
        off += (size_t)w;
    }
    free(buf);
}

/* One reply line (without LF) into out. */
static void recv_line(char *out, size_t cap) {
    for (;;) {
        char *nl = memchr(inbuf, '\n', inlen);
        if (nl) {
            size_t n = (size_t)(nl - inbuf);
            size_t c = n < cap - 1 ? n : cap - 1;
            memcpy(out, inbuf, c);
            out[c] = 0;
            memmove(inbuf, nl + 1, inlen - n - 1);
            inlen -= n + 1;
            return;
        }
        ssize_t r = recv(fd, inbuf + inlen, sizeof inbuf - inlen, 0);
        if (r == 0) { fprintf(stderr, "server closed the connection\n"); exit(4); }
        if (r < 0 && (errno == ECONNRESET || errno == EPIPE)) {
            /* the server closed with our unread line in its buffer: a reset, not a timeout */
            fprintf(stderr, "server closed the connection\n"); exit(4);
        }
        if (r < 0) { fprintf(stderr, "timed out waiting for a reply\n"); exit(3); }
        inlen += (size_t)r;
    }
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *what, double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    int p99 = (int)(0.99 * (n - 1) + 0.5);
    printf("%s n=%d median_us=%.1f p99_us=%.1f\n", what, n, v[(n - 1) / 2], v[p99]);
}

static void request(const char *line, char *reply, size_t cap) {
    send_line(line);
    recv_line(reply, cap);
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: harness_client PORT [--stack | --bench N]\n"); return 2; }
    const char *port_text = strcmp(argv[1], "env") == 0 ? getenv("DEEPGREEN_HARNESS_PORT") : argv[1];
    if (!port_text) { fprintf(stderr, "DEEPGREEN_HARNESS_PORT is not set\n"); return 2; }
    fd = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)atoi(port_text));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) { perror("connect"); return 4; }
    char reply[8192], line[70000];

    if (argc >= 3 && strcmp(argv[2], "--stack") == 0) {
        request("HELLO 1 c-reference-client", reply, sizeof reply);
        if (strncmp(reply, "OK HELLO 1", 10) != 0) { fprintf(stderr, "%s\n", reply); return 5; }
        char *e = strstr(reply, " epochs=");
        int epochs = e ? atoi(e + 8) : 0;
        request("SET framework=c-reference-client framework_version=1", reply, sizeof reply);
        if (strncmp(reply, "OK", 2) != 0) { fprintf(stderr, "%s\n", reply); return 5; }
        for (int ep = 1; ep <= epochs; ep++) {
            const char *phases[2] = {"train", "eval"};
            for (int p = 0; p < 2; p++) {
                snprintf(line, sizeof line, "BEGIN %d %s", ep, phases[p]);
                request(line, reply, sizeof reply);
                if (strncmp(reply, "OK", 2) != 0) { fprintf(stderr, "%s\n", reply); return 5; }
                if (p == 0) snprintf(line, sizeof line, "END %d train samples=128 loss=2.25", ep);
                else snprintf(line, sizeof line, "END %d eval samples=64 loss=2.5 accuracy=0.125", ep);
                request(line, reply, sizeof reply);
                if (strncmp(reply, "OK", 2) != 0) { fprintf(stderr, "%s\n", reply); return 5; }
            }
        }
        request("BYE", reply, sizeof reply);
        return strcmp(reply, "OK BYE") == 0 ? 0 : 5;
    }

    if (argc >= 4 && strcmp(argv[2], "--bench") == 0) {
        int n = atoi(argv[3]);
        double *t = malloc(sizeof(double) * (size_t)n * 2);
        request("HELLO 1 c-bench", reply, sizeof reply);
        for (int i = 0; i < n; i++) {
            double t0 = now_us();
            request("PING", reply, sizeof reply);
            t[i] = now_us() - t0;
        }
        report("ping", t, n);
        for (int i = 0; i < n; i++) {
            double t0 = now_us();
            snprintf(line, sizeof line, "BEGIN %d train", i + 1);
            request(line, reply, sizeof reply);
            double t1 = now_us();
            snprintf(line, sizeof line, "END %d train samples=1 loss=0.5", i + 1);
            request(line, reply, sizeof reply);
            t[2 * i] = t1 - t0;
            t[2 * i + 1] = now_us() - t1;
            if (strncmp(reply, "OK END", 6) != 0) { fprintf(stderr, "%s\n", reply); return 5; }
        }
        report("boundary", t, 2 * n);
        request("BYE", reply, sizeof reply);
        free(t);
        return 0;
    }

    while (fgets(line, sizeof line, stdin)) {
        size_t n = strlen(line);
        if (n && line[n - 1] == '\n') line[--n] = 0;
        request(line, reply, sizeof reply);
        printf("%s\n", reply);
        fflush(stdout);
    }
    return 0;
}
