/* The reading side of the metrics endpoint: one HTTP request to a local
 * port and sample lookup in the Prometheus text format. The tests and the
 * benchmarks read what common/metrics.c serves through these. */
#ifndef OG_COMMON_SCRAPE_H
#define OG_COMMON_SCRAPE_H

#include <stdbool.h>
#include <stddef.h>

/* Sends "METHOD path" to 127.0.0.1:port and reads the whole response (head
 * and body) into resp, NUL-terminated and cut to size - 1 bytes. Connecting,
 * sending and each read wait at most timeout_ms. Returns the status code, or
 * -1 when nothing answers HTTP (resp then holds what arrived, maybe ""). */
int scrape_http(int port, const char *method, const char *path, char *resp, size_t size,
                int timeout_ms);
/* The body of a response read by scrape_http; NULL when it has none. */
const char *scrape_body(const char *resp);
/* The value of the sample written exactly as sample ("name" or
 * "name{labels}") at the start of a line of text; false when absent. */
bool scrape_sample(const char *text, const char *sample, double *value);

#endif
