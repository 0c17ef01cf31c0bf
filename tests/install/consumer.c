/*
 * consumer.c - a program outside the project that records a trace through the installed
 * recorder library (found by pkg-config) and reads it back: what test_install.sh builds.
 */
#include <ft_recorder.h>

#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: consumer TRACE\n");
        return 2;
    }
    ft_err err = {0};
    ft_rec *r = NULL;
    int rc = ft_rec_open(argv[1], NULL, &r, &err);
    if (!rc) rc = ft_rec_fuser(r, 1, "mlp", "[{\"type\":\"GELU\"}]");
    for (int64_t seq = 0; seq < 1000 && !rc; seq++) {
        const uint8_t op_rg[1] = {1};
        ft_call c = {.seq = seq,
                     .fuser = 1,
                     .flags = FT_CF_GRAD | FT_CF_INPUT_RG,
                     .n_op_rg = 1,
                     .op_rg = op_rg};
        rc = ft_rec_call(r, &c);
    }
    if (rc) {
        fprintf(stderr, "consumer: recording: %s\n", ft_err_msg(r ? ft_rec_error(r) : &err));
        ft_rec_abort(r);
        return 1;
    }
    if ((rc = ft_rec_close(r))) {
        fprintf(stderr, "consumer: close: %s\n", ft_strerror(rc));
        return 1;
    }
    ft_trace *t = NULL;
    if ((rc = ft_trace_open(argv[1], FT_OPEN_READ, &t, &err)) || (rc = ft_trace_verify(t, &err))) {
        fprintf(stderr, "consumer: reading back: %s\n", ft_err_msg(&err));
        ft_trace_close(t);
        return 1;
    }
    printf("%llu calls\n", (unsigned long long)ft_trace_n_calls(t));
    ft_trace_close(t);
    return 0;
}
