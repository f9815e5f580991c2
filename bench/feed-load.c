/*
 * Feed load generator of bench/changes.ts: N subscribers of the change feed that only count the
 * events they receive, on one thread with epoll, so that 10,000 streams cost the machine less
 * than the platform that serves them (in Node, counting them took more CPU than the web process
 * spent sending them, and the two share the cores).
 *
 *   feed-load sse|ws <host> <port> <path> <token> <since> <n> [<sampled>]
 *
 * sse: GET <path>?since=<since>&feed=sse with X-Auth-Token; an event is a "\nevent: " line.
 * ws:  GET <path> upgraded to a WebSocket; once upgraded, the first message {"token","since"}
 *      (masked, as a client must); an event is a text message; pings are answered.
 * The first <sampled> connections (default 0) also take each event's latency: its "time" (the
 * commit's clock, ISO 8601 in ms) against this machine's clock when the bytes were read. Measured
 * here rather than in the bench's Node process, whose event loop also drives the commits: there a
 * busy loop read the events late and counted its own delay as the feed's.
 * Prints "ready <connected>" once every connection sent its request, then, for each line read on
 * stdin, "<connected> <events> <closed>", or for a line "l", the sampled latencies in ms:
 * "<count> <p50> <p90> <p99> <p999> <max> <mean>"; exits when stdin closes.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { SSE, WS };

struct conn {
  int fd;
  int upgraded;     /* ws: past the HTTP answer */
  int head_len;     /* ws: bytes of the HTTP answer's end seen ("\r\n\r\n") */
  char tail[8];     /* sse: the last bytes of the previous chunk */
  int tail_len;
  uint8_t hdr[14];  /* ws: a frame header being read */
  int hdr_len;
  uint64_t left;    /* ws: payload bytes of the current frame still to skip */
  int opcode;
  uint8_t ping[125];
  int ping_len;
  int sampled;      /* takes latencies */
  char pend[40];    /* sampled: bytes of a "time" cut by the previous chunk's end */
  int pend_len;
};

/* Latencies (ms) of the sampled connections' events. */
static double *lat;
static size_t lat_len, lat_cap;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int digits(const char *p, int n) {
  int v = 0;
  for (int i = 0; i < n; i++) v = v * 10 + (p[i] - '0');
  return v;
}

/* "YYYY-MM-DDTHH:MM:SS.mmmZ" in ms since the epoch; the seconds of the last one are kept. */
static double iso_ms(const char *p) {
  static char last[19];
  static double last_s = -1;
  if (last_s < 0 || memcmp(p, last, 19) != 0) {
    struct tm tm = {0};
    tm.tm_year = digits(p, 4) - 1900;
    tm.tm_mon = digits(p + 5, 2) - 1;
    tm.tm_mday = digits(p + 8, 2);
    tm.tm_hour = digits(p + 11, 2);
    tm.tm_min = digits(p + 14, 2);
    tm.tm_sec = digits(p + 17, 2);
    last_s = (double)timegm(&tm);
    memcpy(last, p, 19);
  }
  return last_s * 1e3 + digits(p + 20, 3);
}

/* Every `"time":"` in what a sampled connection read, joined to what the chunk before left. */
static void sample(struct conn *c, const char *buf, size_t n) {
  static const char needle[] = "\"time\":\"";
  const size_t k = sizeof needle - 1, iso = 24;
  static char work[(1 << 16) + 64];
  memcpy(work, c->pend, (size_t)c->pend_len);
  memcpy(work + c->pend_len, buf, n);
  size_t len = (size_t)c->pend_len + n, end = 0;
  const double now = now_ms();
  for (const char *p = work; (p = memmem(p, work + len - p, needle, k)); p += k) {
    size_t at = (size_t)(p - work);
    if (at + k + iso > len) break;
    if (lat_len == lat_cap) {
      lat_cap = lat_cap ? lat_cap * 2 : 1 << 16;
      lat = realloc(lat, lat_cap * sizeof *lat);
    }
    lat[lat_len++] = now - iso_ms(p + k);
    end = at + k;
  }
  size_t keep_from = len - end > k + iso - 1 ? len - (k + iso - 1) : end;
  /* A needle found but cut before its time's end is kept whole. */
  const char *cut = end < len ? memmem(work + end, len - end, needle, k) : NULL;
  if (cut) keep_from = (size_t)(cut - work);
  c->pend_len = (int)(len - keep_from);
  memcpy(c->pend, work + keep_from, (size_t)c->pend_len);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void print_latencies(void) {
  if (!lat_len) {
    printf("0 0 0 0 0 0 0\n");
    return;
  }
  qsort(lat, lat_len, sizeof *lat, cmp_double);
  double sum = 0;
  for (size_t i = 0; i < lat_len; i++) sum += lat[i];
#define Q(x) lat[(size_t)((x) * lat_len) < lat_len ? (size_t)((x) * lat_len) : lat_len - 1]
  printf("%zu %.2f %.2f %.2f %.2f %.2f %.2f\n", lat_len, Q(0.5), Q(0.9), Q(0.99), Q(0.999), lat[lat_len - 1], sum / lat_len);
#undef Q
}

static int mode;
static char first[4096];
static int first_len;
static long long events, closed_count;
static int connected;

static void send_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len) {
    ssize_t n = write(fd, p, len);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return;
    }
    p += n;
    len -= (size_t)n;
  }
}

/* A client frame (masked): opcode and payload. */
static void ws_send(int fd, int opcode, const uint8_t *data, size_t len) {
  uint8_t frame[14 + 65536];
  size_t at = 0;
  frame[at++] = 0x80 | opcode;
  if (len < 126) frame[at++] = 0x80 | len;
  else {
    frame[at++] = 0x80 | 126;
    frame[at++] = len >> 8;
    frame[at++] = len & 0xff;
  }
  uint8_t mask[4] = {0x12, 0x34, 0x56, 0x78};
  memcpy(frame + at, mask, 4);
  at += 4;
  for (size_t i = 0; i < len && at < sizeof frame; i++) frame[at++] = data[i] ^ mask[i % 4];
  send_all(fd, frame, at);
}

static void on_sse(struct conn *c, const char *buf, size_t n) {
  static const char needle[] = "\nevent: ";
  const size_t k = sizeof needle - 1;
  /* An event line cut by the chunk's end: join the previous chunk's last bytes to this one's first. */
  if (c->tail_len) {
    char joined[16];
    size_t m = n < k - 1 ? n : k - 1;
    memcpy(joined, c->tail, c->tail_len);
    memcpy(joined + c->tail_len, buf, m);
    if (memmem(joined, c->tail_len + m, needle, k)) events++;
  }
  for (const char *p = buf; (p = memmem(p, buf + n - p, needle, k)); p += k) events++;
  size_t t = n < k - 1 ? n : k - 1;
  memcpy(c->tail, buf + n - t, t);
  c->tail_len = (int)t;
}

static void on_ws(struct conn *c, const uint8_t *buf, size_t n) {
  size_t i = 0;
  if (!c->upgraded) {
    static const char end[] = "\r\n\r\n";
    for (; i < n && !c->upgraded; i++) {
      c->head_len = buf[i] == (uint8_t)end[c->head_len] ? c->head_len + 1 : (buf[i] == '\r' ? 1 : 0);
      if (c->head_len == 4) {
        c->upgraded = 1;
        ws_send(c->fd, 1, (const uint8_t *)first, (size_t)first_len);
      }
    }
  }
  while (i < n) {
    if (c->left) {
      size_t take = n - i < c->left ? n - i : (size_t)c->left;
      if (c->opcode == 9 && c->ping_len + take <= sizeof c->ping) {
        memcpy(c->ping + c->ping_len, buf + i, take);
        c->ping_len += (int)take;
      }
      i += take;
      c->left -= take;
      if (!c->left && c->opcode == 9) ws_send(c->fd, 10, c->ping, c->ping_len);
      continue;
    }
    c->hdr[c->hdr_len++] = buf[i++];
    if (c->hdr_len < 2) continue;
    int len7 = c->hdr[1] & 0x7f;
    int need = 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0);
    if (c->hdr_len < need) continue;
    uint64_t len = len7;
    if (len7 == 126) len = ((uint64_t)c->hdr[2] << 8) | c->hdr[3];
    else if (len7 == 127) {
      len = 0;
      for (int b = 2; b < 10; b++) len = (len << 8) | c->hdr[b];
    }
    c->opcode = c->hdr[0] & 0x0f;
    if (c->opcode == 1) events++;
    c->hdr_len = 0;
    c->left = len;
    c->ping_len = 0;
    if (!len && c->opcode == 9) ws_send(c->fd, 10, c->ping, 0);
  }
}

int main(int argc, char **argv) {
  if (argc != 8 && argc != 9) {
    fprintf(stderr, "usage: feed-load sse|ws host port path token since n [sampled]\n");
    return 2;
  }
  mode = strcmp(argv[1], "ws") == 0 ? WS : SSE;
  struct rlimit lim;
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  const char *host = argv[2], *path = argv[4], *token = argv[5], *since = argv[6];
  int port = atoi(argv[3]), n = atoi(argv[7]), sampled = argc == 9 ? atoi(argv[8]) : 0;
  struct conn *conns = calloc((size_t)n, sizeof *conns);
  int ep = epoll_create1(0);
  char req[4096];
  int req_len;
  if (mode == SSE)
    req_len = snprintf(req, sizeof req, "GET %s?since=%s&feed=sse HTTP/1.1\r\nHost: %s\r\nX-Auth-Token: %s\r\n\r\n", path, since, host, token);
  else
    req_len = snprintf(req, sizeof req,
                       "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
                       path, host);
  first_len = snprintf(first, sizeof first, "{\"token\":\"%s\",\"since\":\"%s\"}", token, since);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
  inet_pton(AF_INET, host, &addr.sin_addr);
  for (int i = 0; i < n; i++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
      perror("connect");
      return 1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    send_all(fd, req, (size_t)req_len);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    conns[i].fd = fd;
    conns[i].sampled = i < sampled;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &conns[i]};
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    connected++;
  }
  printf("ready %d\n", connected);
  fflush(stdout);
  fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
  struct epoll_event in = {.events = EPOLLIN, .data.ptr = NULL};
  epoll_ctl(ep, EPOLL_CTL_ADD, 0, &in);
  static char buf[1 << 16];
  struct epoll_event evs[256];
  for (;;) {
    int k = epoll_wait(ep, evs, 256, -1);
    for (int e = 0; e < k; e++) {
      struct conn *c = evs[e].data.ptr;
      if (!c) {
        ssize_t r = read(0, buf, sizeof buf);
        if (r == 0) return 0;
        if (r > 0 && buf[0] == 'l') print_latencies();
        else if (r > 0) printf("%d %lld %lld\n", connected, events, closed_count);
        fflush(stdout);
        continue;
      }
      for (;;) {
        ssize_t r = read(c->fd, buf, sizeof buf);
        if (r > 0) {
          if (c->sampled) sample(c, buf, (size_t)r);
          if (mode == SSE) on_sse(c, buf, (size_t)r);
          else on_ws(c, (const uint8_t *)buf, (size_t)r);
          if (r < (ssize_t)sizeof buf) break;
          continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) break;
        epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        connected--;
        closed_count++;
        break;
      }
    }
  }
}
