/*
 * End-to-end latency of one feed filter call from a C client, the way binary-protocol
 * drivers (Go's pgx, Python's asyncpg, Rust's tokio-postgres) send it: one prepared
 * statement, the candidate ids as a binary int8[] parameter, the result read in binary.
 * pgbench can only send parameters as text, so PostgreSQL parses and prints every id as a
 * decimal string; this client shows the cost without that.
 *
 *   unseen_client CONNINFO SQL USERS SECONDS IDS...
 *
 * SQL takes $1 bigint (a user drawn uniformly from 1..USERS on each call) and $2 bigint[]
 * (IDS, the same on every call). Runs for SECONDS after 200 warm-up calls and prints one
 * line: "calls N p50_us X p99_us Y".
 */
#include <libpq-fe.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>

#define INT8OID 20

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void put32(unsigned char **p, uint32_t v)
{
    v = htonl(v);
    memcpy(*p, &v, 4);
    *p += 4;
}

static void put64(unsigned char **p, uint64_t v)
{
    put32(p, (uint32_t) (v >> 32));
    put32(p, (uint32_t) v);
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: %s CONNINFO SQL USERS SECONDS IDS...\n", argv[0]);
        return 2;
    }
    long users = atol(argv[3]);
    double seconds = atof(argv[4]);
    int nids = argc - 5;
    PGconn *conn = PQconnectdb(argv[1]);
    if (PQstatus(conn) != CONNECTION_OK) {
        fprintf(stderr, "connection failed: %s", PQerrorMessage(conn));
        return 1;
    }
    Oid types[2] = {INT8OID, 1016 /* int8[] */};
    PGresult *res = PQprepare(conn, "unseen", argv[2], 2, types);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        fprintf(stderr, "prepare failed: %s", PQerrorMessage(conn));
        return 1;
    }
    PQclear(res);

    /* The binary array: ndim, has-nulls flag, element type, then (length, lower bound) and
     * each element as (length, value), all in network byte order. */
    size_t array_len = 20 + (size_t) nids * 12;
    unsigned char *array = malloc(array_len), *p = array;
    put32(&p, 1);
    put32(&p, 0);
    put32(&p, INT8OID);
    put32(&p, (uint32_t) nids);
    put32(&p, 1);
    for (int i = 0; i < nids; i++) {
        put32(&p, 8);
        put64(&p, (uint64_t) strtoll(argv[5 + i], NULL, 10));
    }

    size_t cap = 1 << 20, n = 0;
    double *lat = malloc(cap * sizeof(double));
    srand(42);
    double start = now_us(), deadline = 0;
    for (long call = 0;; call++) {
        unsigned char user[8], *u = user;
        put64(&u, (uint64_t) (1 + rand() % users));
        const char *values[2] = {(const char *) user, (const char *) array};
        int lengths[2] = {8, (int) array_len};
        int formats[2] = {1, 1};
        double t0 = now_us();
        res = PQexecPrepared(conn, "unseen", 2, values, lengths, formats, 1);
        double t1 = now_us();
        if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
            fprintf(stderr, "call failed: %s", PQerrorMessage(conn));
            return 1;
        }
        PQclear(res);
        if (call == 200) {
            start = t1;
            deadline = start + seconds * 1e6;
        }
        if (call > 200) {
            if (n < cap)
                lat[n++] = t1 - t0;
            if (t1 > deadline)
                break;
        }
    }
    qsort(lat, n, sizeof(double), compare_doubles);
    printf("calls %zu p50_us %.1f p99_us %.1f\n", n, lat[n / 2], lat[(size_t) (n * 0.99)]);
    PQfinish(conn);
    return 0;
}
