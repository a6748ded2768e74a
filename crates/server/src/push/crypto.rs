//! Web Push message encryption (RFC 8291, `aes128gcm` of RFC 8188) and VAPID (RFC 8292),
//! with `ring`, which the TLS stack already brings.
//!
//! A message: `salt(16) | rs(4, 4096) | idlen(1, 65) | keyid(the server's ephemeral
//! P-256 public key) | AES-128-GCM(payload | 0x02)`, one record, its key and nonce derived
//! by HKDF-SHA-256 from the ECDH of the ephemeral key with the browser's `p256dh` and
//! the browser's `auth` secret.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use hmac::{Hmac, Mac};
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use ring::{aead, agreement};
use sha2::Sha256;

/// The record size written in the header (one record carries the whole message).
const RECORD_SIZE: u32 = 4096;
/// The largest payload: push services take 4096 bytes of body, less the header (86),
/// the tag (16) and the delimiter (1).
pub const MAX_PAYLOAD: usize = RECORD_SIZE as usize - 16 - 1 - 86;
/// How long a VAPID token is good for (RFC 8292 allows up to 24 hours).
const TOKEN_SECS: i64 = 12 * 3600;

/// Why a push could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PushCryptoError {
    /// The stored VAPID key does not load.
    #[error("the stored VAPID key does not load: {0}")]
    Key(String),
    /// The browser's keys are not a P-256 point and a 16-byte secret.
    #[error("the subscription's keys are not usable: {0}")]
    Subscription(&'static str),
    /// The payload is too large for one record.
    #[error("the payload is {0} bytes, more than one push carries")]
    TooLarge(usize),
    /// The endpoint is not a URL.
    #[error("the endpoint is not an http(s) URL")]
    Endpoint,
}

/// A new VAPID key pair: the PKCS#8 private key in base64 and the public key (the
/// uncompressed point) in base64url.
pub fn new_vapid_key() -> (String, String) {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("a P-256 key");
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).expect("the key just made");
    (STANDARD.encode(pkcs8.as_ref()), URL_SAFE_NO_PAD.encode(pair.public_key().as_ref()))
}

/// The server's VAPID identity, loaded from the stored pair.
pub struct Vapid {
    pair: EcdsaKeyPair,
    public: String,
    rng: SystemRandom,
}

impl std::fmt::Debug for Vapid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vapid").field("public", &self.public).finish_non_exhaustive()
    }
}

impl Vapid {
    /// Loads the pair `drover_store::Store::vapid_key` keeps.
    pub fn load(private: &str, public: &str) -> Result<Vapid, PushCryptoError> {
        let rng = SystemRandom::new();
        let der = STANDARD.decode(private).map_err(|e| PushCryptoError::Key(e.to_string()))?;
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der, &rng).map_err(|e| PushCryptoError::Key(e.to_string()))?;
        Ok(Vapid { pair, public: public.to_string(), rng })
    }

    /// The `Authorization` header for a push to `endpoint`: `vapid t=<ES256 JWT>,
    /// k=<public key>`, the token's audience the endpoint's origin, `sub` the contact.
    pub fn authorization(&self, endpoint: &str, subject: &str, now: i64) -> Result<String, PushCryptoError> {
        let url = reqwest::Url::parse(endpoint).map_err(|_| PushCryptoError::Endpoint)?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(PushCryptoError::Endpoint);
        }
        let header = URL_SAFE_NO_PAD.encode(br#"{"typ":"JWT","alg":"ES256"}"#);
        let claims = serde_json::json!({ "aud": url.origin().ascii_serialization(), "exp": now + TOKEN_SECS, "sub": subject });
        let input = format!("{header}.{}", URL_SAFE_NO_PAD.encode(claims.to_string()));
        let sig = self.pair.sign(&self.rng, input.as_bytes()).map_err(|e| PushCryptoError::Key(e.to_string()))?;
        Ok(format!("vapid t={input}.{}, k={}", URL_SAFE_NO_PAD.encode(sig.as_ref()), self.public))
    }
}

/// Decodes base64url with or without padding (browsers and libraries differ).
fn b64url(s: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(s.trim().trim_end_matches('=')).ok()
}

/// HKDF-SHA-256 (RFC 5869) for at most 32 bytes of output.
fn hkdf(salt: &[u8], ikm: &[u8], info: &[u8], len: usize) -> Vec<u8> {
    let mut extract = Hmac::<Sha256>::new_from_slice(salt).expect("HMAC takes any key length");
    extract.update(ikm);
    let prk = extract.finalize().into_bytes();
    let mut expand = Hmac::<Sha256>::new_from_slice(&prk).expect("HMAC takes any key length");
    expand.update(info);
    expand.update(&[1]);
    expand.finalize().into_bytes()[..len].to_vec()
}

/// Checks a subscription's keys as a browser gave them.
pub fn check_keys(p256dh: &str, auth: &str) -> Result<(), PushCryptoError> {
    let point = b64url(p256dh).ok_or(PushCryptoError::Subscription("p256dh is not base64url"))?;
    if point.len() != 65 || point[0] != 4 {
        return Err(PushCryptoError::Subscription("p256dh is not an uncompressed P-256 point"));
    }
    match b64url(auth) {
        Some(a) if a.len() == 16 => Ok(()),
        _ => Err(PushCryptoError::Subscription("auth is not a 16-byte secret in base64url")),
    }
}

/// Encrypts `payload` for the browser whose keys are `p256dh` and `auth` (RFC 8291).
pub fn encrypt(p256dh: &str, auth: &str, payload: &[u8]) -> Result<Vec<u8>, PushCryptoError> {
    check_keys(p256dh, auth)?;
    if payload.len() > MAX_PAYLOAD {
        return Err(PushCryptoError::TooLarge(payload.len()));
    }
    let (ua_public, auth) = (b64url(p256dh).unwrap_or_default(), b64url(auth).unwrap_or_default());
    let rng = SystemRandom::new();
    let bad = |_| PushCryptoError::Subscription("p256dh is not a point on P-256");
    let ephemeral = agreement::EphemeralPrivateKey::generate(&agreement::ECDH_P256, &rng).map_err(bad)?;
    let as_public = ephemeral.compute_public_key().map_err(bad)?.as_ref().to_vec();
    let peer = agreement::UnparsedPublicKey::new(&agreement::ECDH_P256, &ua_public);
    let shared = agreement::agree_ephemeral(ephemeral, &peer, |k| k.to_vec()).map_err(bad)?;
    let key_info = [b"WebPush: info\0".as_slice(), &ua_public, &as_public].concat();
    let ikm = hkdf(&auth, &shared, &key_info, 32);
    let mut salt = [0u8; 16];
    rng.fill(&mut salt).map_err(bad)?;
    let cek = hkdf(&salt, &ikm, b"Content-Encoding: aes128gcm\0", 16);
    let nonce = hkdf(&salt, &ikm, b"Content-Encoding: nonce\0", 12);
    let key = aead::LessSafeKey::new(aead::UnboundKey::new(&aead::AES_128_GCM, &cek).expect("a 16-byte key"));
    let mut record = [payload, &[2]].concat();
    let nonce = aead::Nonce::try_assume_unique_for_key(&nonce).expect("a 12-byte nonce");
    key.seal_in_place_append_tag(nonce, aead::Aad::empty(), &mut record).expect("one record fits");
    Ok([salt.as_slice(), &RECORD_SIZE.to_be_bytes(), &[65], &as_public, &record].concat())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hkdf_matches_rfc_5869_case_1() {
        let ikm = [0x0bu8; 22];
        let salt: Vec<u8> = (0x00..=0x0c).collect();
        let info: Vec<u8> = (0xf0..=0xf9).collect();
        let okm = hkdf(&salt, &ikm, &info, 32);
        let hex: String = okm.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf");
    }

    #[test]
    fn a_message_has_the_aes128gcm_header_and_one_record() {
        let (_, public) = new_vapid_key();
        let body = encrypt(&public, &URL_SAFE_NO_PAD.encode([7u8; 16]), b"{\"title\":\"hi\"}").unwrap();
        assert_eq!(&body[16..20], &RECORD_SIZE.to_be_bytes());
        assert_eq!(body[20], 65);
        assert_eq!(body.len(), 16 + 4 + 1 + 65 + 14 + 1 + 16);
    }

    #[test]
    fn bad_keys_and_large_payloads_are_refused() {
        let auth = URL_SAFE_NO_PAD.encode([7u8; 16]);
        assert!(matches!(encrypt("nope", &auth, b"x"), Err(PushCryptoError::Subscription(_))));
        let (_, public) = new_vapid_key();
        assert!(matches!(encrypt(&public, "c2hvcnQ", b"x"), Err(PushCryptoError::Subscription(_))));
        assert!(matches!(encrypt(&public, &auth, &vec![b'x'; MAX_PAYLOAD + 1]), Err(PushCryptoError::TooLarge(_))));
    }

    #[test]
    fn the_vapid_token_names_the_origin_and_the_key() {
        let (private, public) = new_vapid_key();
        let v = Vapid::load(&private, &public).unwrap();
        let h = v.authorization("https://push.example.com:8443/send/abc", "mailto:a@b.c", 1000).unwrap();
        let (t, k) = h.strip_prefix("vapid t=").unwrap().split_once(", k=").unwrap();
        assert_eq!(k, public);
        let claims: serde_json::Value = serde_json::from_slice(&b64url(t.split('.').nth(1).unwrap()).unwrap()).unwrap();
        assert_eq!(claims["aud"], "https://push.example.com:8443");
        assert_eq!(claims["exp"], 1000 + TOKEN_SECS);
        let sig = b64url(t.split('.').nth(2).unwrap()).unwrap();
        let signed = &t[..t.rfind('.').unwrap()];
        let key = ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, b64url(&public).unwrap());
        key.verify(signed.as_bytes(), &sig).unwrap();
        assert!(v.authorization("ftp://x/y", "mailto:a@b.c", 0).is_err());
    }
}
