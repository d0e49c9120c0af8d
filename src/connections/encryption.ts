/**
 * Encryption at rest for credentials and secrets: AES-256-GCM with a key ring. The first key encrypts;
 * every key decrypts, so a key can be rotated without downtime (docs/connections.md "Rotating the
 * encryption key"). Each ciphertext names the key that made it by a short id derived from the key, so
 * decryption never has to guess.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { ServiceError } from '../errors.js';

const VERSION = 'v1';
const BINARY_VERSION = 'v2';
const IV_BYTES = 12;
const TAG_BYTES = 16;
// `v2.` + the 8-character key id + `.`, then the IV and the tag.
const BINARY_HEADER_BYTES = 12 + IV_BYTES + TAG_BYTES;
const KEY_BYTES = 32;

/**
 * What a ciphertext is for, bound into it as additional authenticated data: a credentials blob
 * copied into an environment variable's column (say) fails to decrypt instead of being accepted.
 */
export type EncryptionPurpose =
  | 'connection_credentials'
  | 'integration_client_secret'
  | 'environment_variable'
  | 'oauth_session_secret'
  | 'temporal_payload'
  | 'step_outcome'
  | 'inbound_webhook';

export interface EncryptionKey {
  /** First 8 hex characters of the key's SHA-256: identifies the key without revealing it. */
  id: string;
  key: Buffer;
}

export class Encryptor {
  readonly keys: readonly EncryptionKey[];

  /** `keys[0]` encrypts; all of them decrypt. */
  constructor(keys: readonly Buffer[]) {
    if (keys.length === 0) {
      throw new ServiceError('missing_encryption_key', 'no encryption key given');
    }
    this.keys = keys.map((key, index) => {
      if (key.length !== KEY_BYTES) {
        throw new ServiceError(
          'invalid_encryption_key',
          `encryption key #${index + 1} has ${key.length} bytes; AES-256 needs exactly ${KEY_BYTES} (base64 of 32 random bytes: \`openssl rand -base64 32\`)`,
        );
      }
      return { id: keyId(key), key };
    });
  }

  /** The id of the key that encrypts. */
  get currentKeyId(): string {
    return this.keys[0]!.id;
  }

  encrypt(plaintext: string, purpose: EncryptionPurpose): string {
    const { id, iv, tag, data } = this.seal(Buffer.from(plaintext, 'utf8'), purpose);
    return [VERSION, id, iv.toString('base64url'), tag.toString('base64url'), data.toString('base64url')].join('.');
  }

  decrypt(ciphertext: string, purpose: EncryptionPurpose): string {
    const parts = ciphertext.split('.');
    const [version, id, iv, tag, data] = parts;
    if (parts.length !== 5 || version !== VERSION || !id || !iv || !tag || data === undefined) {
      throw new ServiceError('decryption_failed', `a stored ${purpose} is not in the ${VERSION} ciphertext format`);
    }
    return this.open(
      id,
      purpose,
      Buffer.from(iv, 'base64url'),
      Buffer.from(tag, 'base64url'),
      Buffer.from(data, 'base64url'),
    ).toString('utf8');
  }

  /**
   * Binary encryption, for bytes that need not be text (workflow payloads): `v2.<key id>.` (12 ASCII
   * bytes), then the 12-byte IV, the 16-byte tag and the ciphertext, 40 bytes over the plaintext
   * where the text form adds a third and base64 on top.
   */
  encryptBytes(plaintext: Uint8Array, purpose: EncryptionPurpose): Buffer {
    const { id, iv, tag, data } = this.seal(plaintext, purpose);
    return Buffer.concat([Buffer.from(`${BINARY_VERSION}.${id}.`, 'latin1'), iv, tag, data]);
  }

  /** Encrypts with the current key and a fresh IV. */
  private seal(
    plaintext: Uint8Array,
    purpose: EncryptionPurpose,
  ): { id: string; iv: Buffer; tag: Buffer; data: Buffer } {
    const { id, key } = this.keys[0]!;
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    cipher.setAAD(Buffer.from(purpose));
    const data = Buffer.concat([cipher.update(plaintext), cipher.final()]);
    return { id, iv, tag: cipher.getAuthTag(), data };
  }

  decryptBytes(envelope: Uint8Array, purpose: EncryptionPurpose): Buffer {
    const bytes = Buffer.from(envelope.buffer, envelope.byteOffset, envelope.byteLength);
    const header = bytes.subarray(0, 12).toString('latin1');
    if (bytes.byteLength < BINARY_HEADER_BYTES || !header.startsWith(`${BINARY_VERSION}.`) || header[11] !== '.') {
      throw new ServiceError(
        'decryption_failed',
        `a stored ${purpose} is not in the ${BINARY_VERSION} ciphertext format`,
      );
    }
    const ivAt = 12;
    const tagAt = ivAt + IV_BYTES;
    const dataAt = tagAt + TAG_BYTES;
    return this.open(
      header.slice(3, 11),
      purpose,
      bytes.subarray(ivAt, tagAt),
      bytes.subarray(tagAt, dataAt),
      bytes.subarray(dataAt),
    );
  }

  /** Authenticates and decrypts with the key of this id. */
  private open(id: string, purpose: EncryptionPurpose, iv: Buffer, tag: Buffer, data: Buffer): Buffer {
    const entry = this.keys.find((candidate) => candidate.id === id);
    if (!entry) {
      throw new ServiceError(
        'decryption_failed',
        `a stored ${purpose} was encrypted with key ${id}, which is not among the configured keys (${this.keys
          .map((k) => k.id)
          .join(', ')}); add the old key to SERVICE_ENCRYPTION_KEYS`,
      );
    }
    try {
      const decipher = createDecipheriv('aes-256-gcm', entry.key, iv);
      decipher.setAAD(Buffer.from(purpose));
      decipher.setAuthTag(tag);
      return Buffer.concat([decipher.update(data), decipher.final()]);
    } catch (error) {
      throw new ServiceError(
        'decryption_failed',
        `a stored ${purpose} failed authentication under key ${id}: it was altered or belongs elsewhere`,
        { cause: error },
      );
    }
  }

  encryptJson(value: unknown, purpose: EncryptionPurpose): string {
    return this.encrypt(JSON.stringify(value), purpose);
  }

  decryptJson(ciphertext: string, purpose: EncryptionPurpose): unknown {
    return JSON.parse(this.decrypt(ciphertext, purpose)) as unknown;
  }

  /** True when the ciphertext was made by another key than the current one (rotation is pending). */
  isStale(ciphertext: string): boolean {
    return ciphertext.split('.')[1] !== this.currentKeyId;
  }
}

export function keyId(key: Buffer): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 8);
}

/** Parses one base64 key, saying which variable held it when it is not 32 bytes. */
function parseKey(value: string, where: string): Buffer {
  const trimmed = value.trim();
  const key = Buffer.from(trimmed, 'base64');
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed) || key.length !== KEY_BYTES) {
    throw new ServiceError(
      'invalid_encryption_key',
      `${where} must be the base64 of exactly ${KEY_BYTES} random bytes (make one with \`openssl rand -base64 32\`)`,
    );
  }
  return key;
}

export interface LoadEncryptorOptions {
  /** The settings (src/settings.ts) that name the keys; the environment itself has the same shape. */
  env: { SERVICE_ENCRYPTION_KEY?: string | undefined; SERVICE_ENCRYPTION_KEYS?: string | undefined };
  /**
   * Local mode only (`npm start` without SERVICE_ENCRYPTION_KEY): the key is generated once into
   * `<file>` (mode 0600) and reused. Leave unset in production, where a missing key is an error.
   */
  generatedKeyFile?: string;
}

/**
 * The encryptor from the environment: SERVICE_ENCRYPTION_KEY (base64, 32 bytes) encrypts; the
 * comma-separated SERVICE_ENCRYPTION_KEYS are older keys kept for decrypting during a rotation.
 */
export function loadEncryptor({ env, generatedKeyFile }: LoadEncryptorOptions): Encryptor {
  const current = env['SERVICE_ENCRYPTION_KEY'];
  const older = (env['SERVICE_ENCRYPTION_KEYS'] ?? '')
    .split(',')
    .map((value) => value.trim())
    .filter((value) => value !== '')
    .map((value, index) => parseKey(value, `SERVICE_ENCRYPTION_KEYS entry #${index + 1}`));
  if (current !== undefined && current.trim() !== '') {
    return new Encryptor([parseKey(current, 'SERVICE_ENCRYPTION_KEY'), ...older]);
  }
  if (generatedKeyFile) {
    return new Encryptor([readOrCreateKeyFile(generatedKeyFile), ...older]);
  }
  throw new ServiceError(
    'missing_encryption_key',
    'SERVICE_ENCRYPTION_KEY is not set: set it to the base64 of 32 random bytes (`openssl rand -base64 32`) and keep it safe; without it stored credentials cannot be read',
  );
}

function readOrCreateKeyFile(file: string): Buffer {
  if (existsSync(file)) return parseKey(readFileSync(file, 'utf8'), file);
  mkdirSync(dirname(file), { recursive: true });
  const key = randomBytes(KEY_BYTES);
  // wx: two processes starting at once must not each write a different key.
  try {
    writeFileSync(file, `${key.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return parseKey(readFileSync(file, 'utf8'), file);
    throw error;
  }
  chmodSync(file, 0o600);
  return key;
}
