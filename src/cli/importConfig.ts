/**
 * nango.yaml → service.yaml for `service import`: the text is kept byte for byte (comments, order,
 * indentation) except for three edits, each reported with its line in the source:
 *
 * - a sync without `sync_type` gets `sync_type: full`, what the de-facto format assumes when it is
 *   left out (SPEC.md requires the field);
 * - `version:` of a sync or an action is removed (every deploy is a version here);
 * - `webhook-subscriptions` is renamed `webhook_subscriptions` (SPEC.md's spelling).
 *
 * Everything else the compiler accepts as the format writes it (docs/configuration.md, "The de-facto
 * format"). Pure: text in, text and the list of edits out.
 */
import { isMap, isPair, isScalar, LineCounter, parseDocument, type Pair } from 'yaml';

export interface ConfigEdit {
  /** 1-based line in the source file. */
  line: number;
  message: string;
}

export interface ConvertedConfig {
  text: string;
  edits: ConfigEdit[];
}

interface TextEdit {
  start: number;
  end: number;
  insert: string;
}

const SYNC_TYPE_COMMENT = "# added by service import: the de-facto format's default";

/** Pairs of a block mapping, with their key as text. */
function pairsOf(node: unknown): [string, Pair][] {
  if (!isMap(node)) return [];
  return node.items.flatMap((pair): [string, Pair][] =>
    isPair(pair) && isScalar(pair.key) ? [[String(pair.key.value), pair]] : [],
  );
}

function lineStart(text: string, offset: number): number {
  return text.lastIndexOf('\n', offset - 1) + 1;
}

function lineEnd(text: string, offset: number): number {
  const end = text.indexOf('\n', offset);
  return end === -1 ? text.length : end;
}

/**
 * The whole lines a `key: value` pair takes, when nothing else shares them (a trailing comment may):
 * what removing the pair removes. Null when the pair shares a line with something else (flow style).
 */
function pairLines(text: string, pair: Pair): { start: number; end: number } | null {
  const keyRange = isScalar(pair.key) ? pair.key.range : undefined;
  const valueRange = isScalar(pair.value) ? pair.value.range : undefined;
  if (keyRange === undefined || valueRange === undefined || valueRange === null || keyRange === null) return null;
  const start = lineStart(text, keyRange[0]);
  const end = lineEnd(text, valueRange[1]);
  if (text.slice(start, keyRange[0]).trim() !== '') return null;
  const rest = text.slice(valueRange[1], end).trim();
  if (rest !== '' && !rest.startsWith('#')) return null;
  return { start, end: end === text.length ? end : end + 1 };
}

export function convertConfigText(source: string): ConvertedConfig {
  const lineCounter = new LineCounter();
  const doc = parseDocument(source, { lineCounter, keepSourceTokens: true });
  const lineOf = (offset: number): number => lineCounter.linePos(offset).line;
  const edits: (TextEdit & ConfigEdit)[] = [];
  if (doc.errors.length > 0) return { text: source, edits: [] };
  const newline = source.includes('\r\n') ? '\r\n' : '\n';

  const integrations = pairsOf(doc.contents).find(([key]) => key === 'integrations')?.[1].value;
  for (const [integrationId, integration] of pairsOf(integrations)) {
    for (const [kindKey, kind] of [
      ['syncs', 'sync'],
      ['actions', 'action'],
    ] as const) {
      const scripts = pairsOf(integration.value).find(([key]) => key === kindKey)?.[1].value;
      for (const [name, script] of pairsOf(scripts)) {
        const body = script.value;
        if (!isMap(body)) continue;
        const fields = pairsOf(body);
        const where = `${integrationId}/${kindKey}/${name}`;
        for (const [key, pair] of fields) {
          if (key === 'version') {
            const lines = pairLines(source, pair);
            if (lines === null) continue;
            edits.push({
              ...lines,
              insert: '',
              line: lineOf(lines.start),
              message: `${where}: removed 'version' (every deploy is a version here: service deploy --redeploy <n>)`,
            });
          } else if (key === 'webhook-subscriptions' && kind === 'sync' && isScalar(pair.key) && pair.key.range) {
            if (fields.some(([other]) => other === 'webhook_subscriptions')) continue;
            const [start, end] = pair.key.range;
            edits.push({
              start,
              end,
              insert: 'webhook_subscriptions',
              line: lineOf(start),
              message: `${where}: renamed 'webhook-subscriptions' to 'webhook_subscriptions'`,
            });
          }
        }
        const first = fields[0]?.[1].key;
        if (kind === 'sync' && !fields.some(([key]) => key === 'sync_type') && !body.flow && isScalar(first)) {
          const keyStart = first.range?.[0];
          if (keyStart === undefined) continue;
          const start = lineStart(source, keyStart);
          const indent = source.slice(start, keyStart);
          if (indent.trim() !== '') continue;
          edits.push({
            start,
            end: start,
            insert: `${indent}sync_type: full ${SYNC_TYPE_COMMENT}${newline}`,
            line: lineOf(keyStart),
            message: `${where}: added 'sync_type: full' (the de-facto format's default when it is left out; SPEC.md requires it)`,
          });
        }
      }
    }
  }

  let text = source;
  for (const edit of [...edits].sort((a, b) => b.start - a.start)) {
    text = text.slice(0, edit.start) + edit.insert + text.slice(edit.end);
  }
  return {
    text,
    edits: edits.sort((a, b) => a.line - b.line).map(({ line, message }) => ({ line, message })),
  };
}
