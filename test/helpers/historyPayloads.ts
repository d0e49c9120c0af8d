/** Reading the payloads of a run history as GET /runs/:run_id/history answers it (Temporal's JSON form). */

/** The text of every payload in a history's JSON form: its metadata values, then its data. */
export function collectPayloadTexts(node: unknown, into: string[] = []): string[] {
  if (Array.isArray(node)) for (const item of node) collectPayloadTexts(item, into);
  else if (node && typeof node === 'object') {
    const record = node as Record<string, unknown>;
    if (typeof record['data'] === 'string' && record['metadata'] && typeof record['metadata'] === 'object') {
      const metadata = Object.values(record['metadata'] as Record<string, string>).map((value) =>
        Buffer.from(value, 'base64').toString('utf8'),
      );
      into.push(`${metadata.join(' ')} ${Buffer.from(record['data'], 'base64').toString('utf8')}`);
    }
    for (const value of Object.values(record)) collectPayloadTexts(value, into);
  }
  return into;
}
