/**
 * The `crypto` and `Buffer` that scripts get (src/runtime/scriptLib/) answer as Node's do, for the
 * hashes, HMACs and encodings scripts of the field's format use (request signing, base64 credentials).
 */
import * as node from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Buffer as ScriptBuffer } from './buffer.js';
import crypto, { createHash, createHmac, randomUUID, timingSafeEqual } from './crypto.js';

describe('the crypto of scripts', () => {
  const inputs = ['', 'abc', 'ünïcödé ✓', 'x'.repeat(1000), JSON.stringify({ a: [1, 2, { b: null }] })];

  it('hashes as Node does: md5, sha1, sha224, sha256, sha384, sha512, in hex, base64, base64url and bytes', () => {
    for (const algorithm of ['md5', 'sha1', 'sha224', 'sha256', 'sha384', 'sha512']) {
      for (const input of inputs) {
        const expected = node.createHash(algorithm).update(input).digest();
        for (const encoding of ['hex', 'base64', 'base64url'] as const) {
          expect(createHash(algorithm).update(input).digest(encoding), `${algorithm} ${encoding}`).toBe(
            expected.toString(encoding),
          );
        }
        expect([...createHash(algorithm).update(input).digest()]).toEqual([...expected]);
      }
    }
    // update() chains, takes bytes and encoded strings.
    expect(
      createHash('sha256')
        .update('a')
        .update(new Uint8Array([98]))
        .update('63', 'hex')
        .digest('hex'),
    ).toBe(node.createHash('sha256').update('abc').digest('hex'));
  });

  it('HMACs as Node does, with a string or a byte key (the AWS signing chain)', () => {
    const kDate = createHmac('sha256', 'AWS4secret').update('20260101').digest();
    const nodeDate = node.createHmac('sha256', 'AWS4secret').update('20260101').digest();
    expect([...kDate]).toEqual([...nodeDate]);
    expect(createHmac('sha256', kDate).update('us-east-1').digest('hex')).toBe(
      node.createHmac('sha256', nodeDate).update('us-east-1').digest('hex'),
    );
    expect(createHmac('sha1', 'k').update('v').digest('base64')).toBe(
      node.createHmac('sha1', 'k').update('v').digest('base64'),
    );
    expect(() => createHash('whirlpool')).toThrow(/Digest method not supported/);
    const used = createHash('sha256');
    used.digest('hex');
    expect(() => used.update('again')).toThrow(/Digest already called/);
  });

  it('random ids have the form of Node’s (they come from the realm’s deterministic Math.random)', () => {
    expect(randomUUID()).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(crypto.randomBytes(12)).toHaveLength(12);
    expect(timingSafeEqual(ScriptBuffer.from('ab'), ScriptBuffer.from('ab'))).toBe(true);
    expect(timingSafeEqual(ScriptBuffer.from('ab'), ScriptBuffer.from('ac'))).toBe(false);
  });

  it('Buffer encodes as Node’s, base64url included', () => {
    for (const input of inputs) {
      for (const encoding of ['base64', 'base64url', 'hex', 'latin1'] as const) {
        const encoded = Buffer.from(input).toString(encoding);
        expect(ScriptBuffer.from(input).toString(encoding), `${encoding} of ${input.slice(0, 10)}`).toBe(encoded);
        expect(ScriptBuffer.from(encoded, encoding).toString('utf8')).toBe(
          Buffer.from(encoded, encoding).toString('utf8'),
        );
      }
    }
    expect(ScriptBuffer.byteLength('aGk', 'base64url')).toBe(2);
    expect(ScriptBuffer.concat([ScriptBuffer.from('a'), ScriptBuffer.from('b')]).toString()).toBe('ab');
  });
});
