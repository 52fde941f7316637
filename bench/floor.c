/*
 * floor.c -- the least work one TLS 1.3 key update can be: the crypto that
 * RFC 8446 section 7.2 requires, done with objects set up once, without the
 * TLS library around it.  bench/instructions.sh runs it under callgrind and
 * sets its count next to what a KeyUpdate really costs through libssl.
 *
 * One update of a TLS_AES_256_GCM_SHA384 traffic secret is
 *   secret' = HKDF-Expand-Label(secret,  "traffic upd", "", 48)
 *   key     = HKDF-Expand-Label(secret', "key", "", 32)
 *   iv      = HKDF-Expand-Label(secret', "iv", "", 12)
 * then the AEAD's key schedule with (key, iv).  With an output shorter than
 * the hash, HKDF-Expand is a single HMAC of (HkdfLabel || 0x01).
 *
 *   floor ROUNDS     prints the OpenSSL version; callgrind counts floor_update()
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/crypto.h>
#include <openssl/opensslv.h>

#if OPENSSL_VERSION_NUMBER >= 0x30000000L
#include <openssl/core_names.h>
#include <openssl/params.h>
#else
#include <openssl/hmac.h>
#endif

#define SECRET_LEN 48

#if OPENSSL_VERSION_NUMBER >= 0x30000000L
static EVP_MAC_CTX *hmac;
#else
static HMAC_CTX *hmac;
#endif
static EVP_CIPHER_CTX *aead;

static void
fail(const char *what)
{
	fprintf(stderr, "floor: %s failed\n", what);
	exit(1);
}

/* HKDF-Expand-Label(secret, label, "", out_len) for out_len <= 48 */
static void
expand_label(const unsigned char *secret, const char *label,
			 unsigned char *out, size_t out_len)
{
	unsigned char info[2 + 1 + 6 + 32 + 1 + 1];
	unsigned char block[EVP_MAX_MD_SIZE];
	size_t		label_len = strlen(label);
	size_t		n = 0;

	info[n++] = (unsigned char) (out_len >> 8);
	info[n++] = (unsigned char) out_len;
	info[n++] = (unsigned char) (6 + label_len);
	memcpy(info + n, "tls13 ", 6);
	n += 6;
	memcpy(info + n, label, label_len);
	n += label_len;
	info[n++] = 0;				/* empty context */
	info[n++] = 1;				/* HKDF-Expand's counter, T(1) */

#if OPENSSL_VERSION_NUMBER >= 0x30000000L
	{
		size_t		block_len;

		if (!EVP_MAC_init(hmac, secret, SECRET_LEN, NULL) ||
			!EVP_MAC_update(hmac, info, n) ||
			!EVP_MAC_final(hmac, block, &block_len, sizeof(block)))
			fail("HMAC");
	}
#else
	{
		unsigned int block_len;

		if (!HMAC_Init_ex(hmac, secret, SECRET_LEN, EVP_sha384(), NULL) ||
			!HMAC_Update(hmac, info, n) ||
			!HMAC_Final(hmac, block, &block_len))
			fail("HMAC");
	}
#endif
	memcpy(out, block, out_len);
}

/* One key update: the next secret, its key and IV, the AEAD set up with them. */
__attribute__((noinline)) static void
floor_update(unsigned char *secret)
{
	unsigned char next[SECRET_LEN];
	unsigned char key[32];
	unsigned char iv[12];

	expand_label(secret, "traffic upd", next, SECRET_LEN);
	expand_label(next, "key", key, sizeof(key));
	expand_label(next, "iv", iv, sizeof(iv));
	if (!EVP_EncryptInit_ex(aead, NULL, NULL, key, iv))
		fail("AEAD key set-up");
	memcpy(secret, next, SECRET_LEN);
}

int
main(int argc, char **argv)
{
	unsigned char secret[SECRET_LEN] = {0};
	long		rounds = argc > 1 ? atol(argv[1]) : 1000;

#if OPENSSL_VERSION_NUMBER >= 0x30000000L
	{
		EVP_MAC    *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
		OSSL_PARAM	params[2];

		if (mac == NULL || (hmac = EVP_MAC_CTX_new(mac)) == NULL)
			fail("HMAC fetch");
		params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *) "SHA384", 0);
		params[1] = OSSL_PARAM_construct_end();
		if (!EVP_MAC_CTX_set_params(hmac, params))
			fail("HMAC digest");
	}
#else
	if ((hmac = HMAC_CTX_new()) == NULL)
		fail("HMAC context");
#endif
	aead = EVP_CIPHER_CTX_new();
	if (aead == NULL || !EVP_EncryptInit_ex(aead, EVP_aes_256_gcm(), NULL, NULL, NULL))
		fail("AEAD context");

	for (long i = 0; i < rounds; i++)
		floor_update(secret);
	/* the version actually loaded; the secret keeps the work observable */
	printf("%s (%02x)\n", OpenSSL_version(OPENSSL_VERSION), secret[0]);
	return 0;
}
