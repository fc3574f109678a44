// Baseline for bench/transport: libsrtp2's srtp_unprotect called directly from C, on the same
// packets as the Swift measurement (1200-byte payload, 12-byte header), so the difference between
// the two is what Conclave's wrapper costs. Prints MB/s of unprotected packets.
//   srtp_unprotect gcm|cm
#include <srtp2/srtp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { payload = 1200, header = 12, batch = 20000, rounds = 5, slot = 1300 };

static double seconds_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 2 || (strcmp(argv[1], "gcm") != 0 && strcmp(argv[1], "cm") != 0)) {
        fprintf(stderr, "usage: %s gcm|cm\n", argv[0]);
        return 2;
    }
    int gcm = strcmp(argv[1], "gcm") == 0;
    if (srtp_init() != srtp_err_status_ok) return 1;
    unsigned char key[64];
    for (int i = 0; i < 64; i++) key[i] = (unsigned char)(i * 7 + 3);
    srtp_policy_t policy;
    memset(&policy, 0, sizeof policy);
    if (gcm) {
        srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtp);
        srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtcp);
    } else {
        srtp_crypto_policy_set_rtp_default(&policy.rtp);
        srtp_crypto_policy_set_rtcp_default(&policy.rtcp);
    }
    policy.key = key;
    policy.window_size = 1024;
    srtp_t sender, receiver;
    policy.ssrc.type = ssrc_any_outbound;
    if (srtp_create(&sender, &policy) != srtp_err_status_ok) return 1;
    policy.ssrc.type = ssrc_any_inbound;
    if (srtp_create(&receiver, &policy) != srtp_err_status_ok) return 1;

    unsigned char *packets = malloc((size_t)batch * slot);
    int *lengths = malloc(sizeof(int) * batch);
    if (!packets || !lengths) return 1;
    unsigned short sequence = 0;
    unsigned int timestamp = 0;
    double bytes = 0, elapsed = 0;
    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < batch; i++) {
            unsigned char *p = packets + (size_t)i * slot;
            sequence++;
            timestamp += 3000;
            const unsigned char head[header] = {
                0x80, 96, (unsigned char)(sequence >> 8), (unsigned char)sequence,
                (unsigned char)(timestamp >> 24), (unsigned char)(timestamp >> 16),
                (unsigned char)(timestamp >> 8), (unsigned char)timestamp, 0x12, 0x34, 0x56, 0x78,
            };
            memcpy(p, head, header);
            memset(p + header, 0xA5, payload);
            lengths[i] = header + payload;
            if (srtp_protect(sender, p, &lengths[i]) != srtp_err_status_ok) return 1;
        }
        double start = seconds_now();
        for (int i = 0; i < batch; i++) {
            if (srtp_unprotect(receiver, packets + (size_t)i * slot, &lengths[i]) != srtp_err_status_ok) return 1;
        }
        elapsed += seconds_now() - start;
        bytes += (double)batch * (header + payload);
    }
    printf("%.1f\n", bytes / elapsed / 1e6);
    return 0;
}
