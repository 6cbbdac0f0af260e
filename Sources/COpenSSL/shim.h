#ifndef DELIVERYD_COPENSSL_SHIM_H
#define DELIVERYD_COPENSSL_SHIM_H

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/sha.h>

/// OPENSSL_free is a function-like macro; this is the call it expands to.
static inline void copenssl_free(void *pointer) {
    CRYPTO_free(pointer, __FILE__, __LINE__);
}

#endif
