/**
 * `crypto` for scripts (`import crypto from 'crypto'`, `import { createHmac } from 'node:crypto'`, or the
 * global `crypto`): the hashing and HMAC part of Node's API, bundled by `service compile` into the
 * scripts that use it and run in their realm (src/cli/scriptModules.ts). Pure JavaScript
 * (@noble/hashes); the realm has no Node.
 *
 * `randomUUID`, `randomBytes` and `getRandomValues` draw from the realm's `Math.random`, which is the
 * workflow's deterministic one: a replay of the run sees the same values, which is what a durable run
 * needs, and they are NOT secret (never use them for keys or tokens).
 */
import { md5, sha1 } from '@noble/hashes/legacy.js';
import { hmac } from '@noble/hashes/hmac.js';
import { sha224, sha256, sha384, sha512 } from '@noble/hashes/sha2.js';
import { Buffer } from './buffer.js';

interface Updatable {
  update(data: Uint8Array): unknown;
  digest(): Uint8Array;
}

/** A hash function of @noble/hashes, as this module uses it. */
type Hashing = Parameters<typeof hmac.create>[0] & { create(): Updatable };
type BinaryLike = string | ArrayBufferView | ArrayBuffer;
type Encoding = 'hex' | 'base64' | 'base64url' | 'latin1' | 'binary' | 'utf8' | 'utf-8';

const ALGORITHMS: Record<string, Hashing> = {
  md5: md5,
  sha1: sha1,
  'sha-1': sha1,
  sha224: sha224,
  sha256: sha256,
  'sha-256': sha256,
  sha384: sha384,
  sha512: sha512,
  'sha-512': sha512,
};

function algorithm(name: unknown): Hashing {
  const found = typeof name === 'string' ? ALGORITHMS[name.toLowerCase()] : undefined;
  if (!found) {
    throw new Error(
      `Digest method not supported: ${String(name)} (scripts have ${Object.keys(ALGORITHMS).join(', ')})`,
    );
  }
  return found;
}

function bytes(data: BinaryLike, encoding?: string): Uint8Array {
  if (typeof data === 'string') return Buffer.from(data, (encoding ?? 'utf8') as 'utf8');
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  throw new TypeError('The "data" argument must be a string, a Buffer, a TypedArray or a DataView');
}

function output(digest: Uint8Array, encoding?: Encoding): string | Buffer {
  const buffer = Buffer.from(digest);
  return encoding === undefined ? buffer : buffer.toString(encoding);
}

/** A Hash or Hmac in Node's shape: `update(...)` chains, `digest(encoding?)` once. */
export class Hash {
  #state: Updatable;
  #done = false;
  constructor(state: Updatable) {
    this.#state = state;
  }
  update(data: BinaryLike, inputEncoding?: Encoding): this {
    if (this.#done) throw new Error('Digest already called');
    this.#state.update(bytes(data, inputEncoding));
    return this;
  }
  digest(): Buffer;
  digest(encoding: Encoding): string;
  digest(encoding?: Encoding): string | Buffer {
    if (this.#done) throw new Error('Digest already called');
    this.#done = true;
    return output(this.#state.digest(), encoding);
  }
}

export function createHash(name: string): Hash {
  return new Hash(algorithm(name).create());
}

export function createHmac(name: string, key: BinaryLike): Hash {
  return new Hash(hmac.create(algorithm(name), bytes(key)));
}

/** Random bytes from the realm's deterministic Math.random (see the file's comment): not secret. */
export function randomBytes(size: number): Buffer {
  const out = Buffer.alloc(size);
  for (let i = 0; i < size; i++) out[i] = Math.floor(Math.random() * 256);
  return out;
}

export function getRandomValues<T extends ArrayBufferView>(array: T): T {
  const view = new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
  for (let i = 0; i < view.length; i++) view[i] = Math.floor(Math.random() * 256);
  return array;
}

/** A version 4 UUID from the realm's deterministic Math.random: the same on a replay, not secret. */
export function randomUUID(): string {
  const hex = randomBytes(16).toString('hex').split('');
  hex[12] = '4';
  hex[16] = ((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16);
  const text = hex.join('');
  return `${text.slice(0, 8)}-${text.slice(8, 12)}-${text.slice(12, 16)}-${text.slice(16, 20)}-${text.slice(20)}`;
}

/** Compares in time independent of where the bytes differ. */
export function timingSafeEqual(a: ArrayBufferView, b: ArrayBufferView): boolean {
  const left = bytes(a);
  const right = bytes(b);
  if (left.length !== right.length) throw new RangeError('Input buffers must have the same byte length');
  let difference = 0;
  for (let i = 0; i < left.length; i++) difference |= left[i]! ^ right[i]!;
  return difference === 0;
}

export function getHashes(): string[] {
  return Object.keys(ALGORITHMS);
}

const crypto = { createHash, createHmac, randomBytes, randomUUID, getRandomValues, timingSafeEqual, getHashes };
export { crypto };
export default crypto;
