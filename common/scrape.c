#include "common/scrape.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

int scrape_http(int port, const char *method, const char *path, char *resp, size_t size,
                int timeout_ms)
{
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    char req[512];
    size_t used = 0;
    int len, code = -1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (size > 0)
        resp[0] = '\0';
    if (fd < 0 || size == 0)
        goto out;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    /* On Linux the send timeout bounds connect() too. */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    len = snprintf(req, sizeof(req),
                   "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                   "Content-Length: 0\r\n\r\n",
                   method, path);
    if (len < 0 || (size_t)len >= sizeof(req) ||
        connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 ||
        write(fd, req, (size_t)len) != (ssize_t)len)
        goto out;
    while (used + 1 < size) {
        ssize_t n = read(fd, resp + used, size - 1 - used);
        if (n <= 0)
            break;
        used += (size_t)n;
    }
    resp[used] = '\0';
    if (sscanf(resp, "HTTP/1.%*d %d", &code) != 1)
        code = -1;
out:
    if (fd >= 0)
        close(fd);
    return code;
}

const char *scrape_body(const char *resp)
{
    const char *p = strstr(resp, "\r\n\r\n");

    return p != NULL ? p + 4 : NULL;
}

bool scrape_sample(const char *text, const char *sample, double *value)
{
    size_t n = strlen(sample);

    for (const char *s = text; s != NULL && *s; s = strchr(s, '\n'), s = s ? s + 1 : NULL) {
        if (strncmp(s, sample, n) == 0 && s[n] == ' ') {
            *value = strtod(s + n + 1, NULL);
            return true;
        }
    }
    return false;
}
