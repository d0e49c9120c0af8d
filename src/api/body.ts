import { promisify } from 'node:util';
import { brotliDecompress, gunzip, inflate } from 'node:zlib';
import type { Request } from 'express';
import { ServiceError } from '../errors.js';
import { bodyLimitOf, JSON_TYPES, rawBodyOf } from './server.js';

const decoders = {
  gzip: promisify(gunzip),
  deflate: promisify(inflate),
  br: promisify(brotliDecompress),
} as const;

const tooLarge = () =>
  new ServiceError('payload_too_large', 'The request body is larger than the limit of this server.');

/**
 * The request body as bytes, unparsed: what the JSON parser kept, or the stream read whole, refused
 * past the server's body limit. A JSON body sent compressed (`Content-Encoding: gzip`, `deflate`, `br`)
 * is inflated, as the JSON parser does, the limit applying to what it inflates to.
 */
export async function readBodyBytes(req: Request): Promise<Buffer> {
  const parsed = rawBodyOf(req);
  if (parsed !== undefined) return parsed;
  const limitBytes = bodyLimitOf(req);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limitBytes) throw tooLarge();
    chunks.push(chunk);
  }
  const bytes = Buffer.concat(chunks);
  const encoding = (req.header('content-encoding') ?? 'identity').trim().toLowerCase();
  if (!req.is(JSON_TYPES) || encoding === 'identity') return bytes;
  if (!Object.hasOwn(decoders, encoding)) {
    throw new ServiceError('invalid_request', `Content-Encoding ${encoding.slice(0, 40)} is not gzip, deflate or br.`, {
      status: 415,
    });
  }
  try {
    return await decoders[encoding as keyof typeof decoders](bytes, { maxOutputLength: limitBytes });
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ERR_BUFFER_TOO_LARGE') throw tooLarge();
    throw new ServiceError('invalid_request', `The body is not valid ${encoding} data.`);
  }
}
