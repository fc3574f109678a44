#pragma once
// OpenSSL 3 shims, used only by ConclaveOpenSSL.
// Like every shim target: only macros and variadics turned into typed functions or constants,
// named `cshim_<C name>`; no state, no policy.
#include <openssl/ssl.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <stdint.h>

/// BIO_set_mem_eof_return is a macro over BIO_ctrl. Set to -1 on the read BIO so that an empty
/// BIO means "retry later" rather than end of file.
long cshim_BIO_set_mem_eof_return(BIO *bio, int value);
/// DTLSv1_get_timeout is a macro over SSL_ctrl: time left before the next retransmission.
long cshim_DTLSv1_get_timeout(SSL *ssl, struct timeval *timeout);
/// DTLSv1_handle_timeout is a macro over SSL_ctrl: retransmit the last flight if the timer expired.
long cshim_DTLSv1_handle_timeout(SSL *ssl);
/// DTLS_set_link_mtu is a macro over SSL_ctrl.
long cshim_DTLS_set_link_mtu(SSL *ssl, long mtu);
/// SSL_OP_NO_QUERY_MTU is built with the SSL_OP_BIT macro, which Swift does not import.
uint64_t cshim_SSL_OP_NO_QUERY_MTU(void);
/// EVP_EC_gen is a macro over EVP_PKEY_Q_keygen, which is variadic.
EVP_PKEY *cshim_EVP_EC_gen(const char *curve);
