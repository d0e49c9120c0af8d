/**
 * A request's answer between the activity and the script (issue 31, the JSON hole). The activity reads
 * the body as text and records it so (HttpAnswer); the run's workflow thread parses it here, where the
 * run's own CPU is counted (the lanes, the isolate timeout), not on the worker's main thread, which
 * every environment's tasks and activities share: a 32 MiB answer of `[{},{},…]` held that thread
 * 33.9 s (docs/architecture.md "A request's answer is parsed on the run's thread").
 * Workflow-safe: no Node imports.
 */
import type { HttpAnswer, HttpResult, RecordedResponse } from './svcTypes.js';

export function isHttpAnswer(recorded: RecordedResponse): recorded is HttpAnswer {
  return typeof (recorded as Partial<HttpAnswer>).body === 'string' && !('data' in recorded);
}

/**
 * The body as axios gave it for the same text: JSON asked for (the default) and the text parses, the
 * value; an empty body, ''; text that is not JSON, whatever the content type says, the text itself
 * (axios's `silentJSONParsing`). Anything else (text, stream, base64 of binary) is the text.
 */
export function answerData(body: string, json: boolean): unknown {
  if (!json || body === '') return body;
  try {
    return JSON.parse(body) as unknown;
  } catch {
    return body;
  }
}

/** The response as the script sees it (less `config` and `statusText`), from either recorded form. */
export function responseOf(recorded: RecordedResponse): HttpResult {
  if (!isHttpAnswer(recorded)) return recorded;
  const { status, headers, request, body, json } = recorded;
  return { status, headers, data: answerData(body, json), request };
}

/** The body's size in characters, for the history budget: the text when recorded so, else the JSON of the data. */
export function recordedBodyLength(recorded: RecordedResponse): number {
  if (isHttpAnswer(recorded)) return recorded.body.length;
  try {
    return JSON.stringify(recorded.data)?.length ?? 0;
  } catch {
    return 0;
  }
}
