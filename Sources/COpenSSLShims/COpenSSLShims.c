#include "COpenSSLShims.h"

long cshim_BIO_set_mem_eof_return(BIO *bio, int value) { return BIO_set_mem_eof_return(bio, value); }
long cshim_DTLSv1_get_timeout(SSL *ssl, struct timeval *timeout) { return DTLSv1_get_timeout(ssl, timeout); }
long cshim_DTLSv1_handle_timeout(SSL *ssl) { return DTLSv1_handle_timeout(ssl); }
long cshim_DTLS_set_link_mtu(SSL *ssl, long mtu) { return DTLS_set_link_mtu(ssl, mtu); }
uint64_t cshim_SSL_OP_NO_QUERY_MTU(void) { return SSL_OP_NO_QUERY_MTU; }
EVP_PKEY *cshim_EVP_EC_gen(const char *curve) { return EVP_EC_gen(curve); }
