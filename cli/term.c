/*
 * term.c - text written to a terminal shows what a trace holds, never what it would make the
 * terminal do. Trace strings (te_version, host, labels, phases, recipe attributes, SQL values)
 * come from a capture anyone can write, and an escape sequence among them would retitle the
 * terminal (ESC ] 0;), clear it (ESC [2J) or hide a line (CR). When stdout is a terminal,
 * cli_term_stdout puts a filter in front of it, so that every writer of every command is
 * covered, whatever module formats its text: C0 controls other than newline and tab, DEL and
 * the C1 controls (U+0080..U+009F, as UTF-8) are written as \xHH and \uHHHH. Pipes and files
 * get the bytes as they are (JSON and CSV escape by their own rules).
 */
#define _GNU_SOURCE /* fopencookie */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>

typedef struct term_out {
    FILE *to; /* the terminal's own stream */
    int lead; /* a 0xC2 byte waits for the next one (a C1 control starts so) */
} term_out;

static term_out term;

static void put_escaped(term_out *t, unsigned char b)
{
    if (t->lead) {
        t->lead = 0;
        if (b >= 0x80 && b <= 0x9f) {
            fprintf(t->to, "\\u%04x", b);
            return;
        }
        putc(0xc2, t->to);
    }
    if (b == 0xc2)
        t->lead = 1;
    else if ((b < 0x20 && b != '\n' && b != '\t') || b == 0x7f)
        fprintf(t->to, "\\x%02x", b);
    else
        putc(b, t->to);
}

static ssize_t term_write(void *c, const char *buf, size_t n)
{
    term_out *t = c;
    for (size_t i = 0; i < n; i++)
        put_escaped(t, (unsigned char)buf[i]);
    if (fflush(t->to) || ferror(t->to)) {
        errno = errno ? errno : EIO;
        return -1;
    }
    return (ssize_t)n;
}

static int term_close(void *c)
{
    term_out *t = c;
    if (t->lead) putc(0xc2, t->to);
    t->lead = 0;
    return fflush(t->to) ? EOF : 0;
}

void cli_term_stdout(void)
{
    if (term.to || !isatty(STDOUT_FILENO)) return;
    cookie_io_functions_t fn = {NULL, term_write, NULL, term_close};
    term.to = stdout;
    FILE *f = fopencookie(&term, "w", fn);
    if (!f) {
        term.to = NULL;
        return; /* nothing is filtered, rather than nothing written */
    }
    setvbuf(f, NULL, _IOLBF, 0);
    stdout = f;
}
