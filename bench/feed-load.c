/*
 * Feed load generator of bench/changes.ts: N subscribers of the change feed that only count the
 * events they receive, on one thread with epoll, so that 10,000 streams cost the machine less
 * than the platform that serves them (in Node, counting them took more CPU than the web process
 * spent sending them, and the two share the cores).
 *
 *   feed-load sse|ws <host> <port> <path> <token> <since> <n>
 *
 * sse: GET <path>?since=<since>&feed=sse with X-Auth-Token; an event is a "\nevent: " line.
 * ws:  GET <path> upgraded to a WebSocket; once upgraded, the first message {"token","since"}
 *      (masked, as a client must); an event is a text message; pings are answered.
 * Prints "ready <connected>" once every connection sent its request, then, for each line read on
 * stdin, "<connected> <events> <closed>"; exits when stdin closes.
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
};

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
  if (argc != 8) {
    fprintf(stderr, "usage: feed-load sse|ws host port path token since n\n");
    return 2;
  }
  mode = strcmp(argv[1], "ws") == 0 ? WS : SSE;
  struct rlimit lim;
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  const char *host = argv[2], *path = argv[4], *token = argv[5], *since = argv[6];
  int port = atoi(argv[3]), n = atoi(argv[7]);
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
        if (r > 0) {
          printf("%d %lld %lld\n", connected, events, closed_count);
          fflush(stdout);
        }
        continue;
      }
      for (;;) {
        ssize_t r = read(c->fd, buf, sizeof buf);
        if (r > 0) {
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
